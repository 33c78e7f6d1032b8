//! `expiry timing (S4.4)`: a candidate times its next attempt by the
//! holder's expiry.
//!
//! An attempt a node makes sooner after a `Held` reply than any normal
//! retry could (`renew_interval / 2`, S4.1), with the same session and
//! nothing in between that resets the schedule (a release broadcast, an API
//! call, a restart), can only have been timed by that reply's
//! `holder_remaining` (S4.4). Such an attempt must reach the backend after
//! the expiry of the holder it was timed for, unless that holder renewed,
//! released or closed meanwhile: otherwise it is a backend call wasted on a
//! wrong timing. Off where clocks step (S2.5) or the mode breaks the drift
//! bound on purpose.
//!
//! The `Held` reply counted is the one the engine acted on: the *first*
//! reply to the node's *current* attempt, before that attempt timed out
//! (S2.4), with no release broadcast or API call for the node since the
//! attempt was sent. A broadcast while the attempt is out makes the engine
//! retry at once when the reply comes (S4.2); a `step_down(cooldown)` while
//! it is out makes the reply unused and the next attempt wait for the
//! cooldown's end; a duplicate reply is stale. Each of these looked like an
//! early attempt to an earlier, coarser version of this checker.

use super::s4_1_one_attempt::dropped_partitions;
use super::{Checker, Cx, Observed, Out};
use crate::params::{FaultKind, RunParams};
use simba_core::{AcquireOutcome, Command, Input, LeaseName, SessionId, Timestamp, Token};
use std::collections::BTreeMap;
use std::time::Duration;

/// A `Held` reply a node's current attempt got: (session, local arrival,
/// holder, token, holder's expiry in backend ns).
type SeenHeld = (SessionId, Timestamp, SessionId, Token, u64);

/// One `Held` answer of the backend, as the checker remembers it: (name,
/// holder, token, holder's expiry in backend ns, reported remaining).
type HeldAnswer = (LeaseName, SessionId, Token, u64, Duration);

/// The `expiry timing (S4.4)` checker.
#[derive(Default)]
pub(super) struct ExpiryTiming {
    /// Whether it runs: always, unless the run's faults or mode break the
    /// timing assumptions on purpose (clock steps, S2.5; a must-fail mode).
    enabled: bool,
    /// Per (node, name): the node's latest acquire (op, session, local send time).
    sent: BTreeMap<(usize, LeaseName), (u64, SessionId, Timestamp)>,
    /// Per (node, op): each `Held` answer with `holder_remaining`, as the
    /// backend gave it. A command the network duplicated is answered
    /// twice, and the holder may renew in between: a delivered reply is
    /// matched to the answer it carries.
    answers: BTreeMap<(usize, u64), Vec<HeldAnswer>>,
    /// Per (node, name): the `Held` reply the node's current attempt got.
    seen: BTreeMap<(usize, LeaseName), SeenHeld>,
    /// Per (node, op): an attempt timed by a `Held` reply: (holder, token,
    /// holder's expiry, local time of that reply).
    timed: BTreeMap<(usize, u64), (SessionId, Token, u64, Timestamp)>,
}

impl ExpiryTiming {
    /// The checker of a run of `p`.
    pub(super) fn new(p: &RunParams) -> ExpiryTiming {
        // S4.4 timing assumes the drift bound and no clock steps (S2.5).
        let enabled = !p.mode.must_fail()
            && !p.faults.iter().any(|f| {
                matches!(
                    f.kind,
                    FaultKind::NodeClockStep { .. } | FaultKind::BackendClockStep { .. }
                )
            });
        ExpiryTiming {
            enabled,
            ..ExpiryTiming::default()
        }
    }

    fn forget_node(&mut self, node: usize) {
        self.sent.retain(|(n, _), _| *n != node);
        self.answers.retain(|(n, _), _| *n != node);
        self.seen.retain(|(n, _), _| *n != node);
        self.timed.retain(|(n, _), _| *n != node);
    }

    /// At a node's acquire: is it timed by the last `Held` reply?
    fn sent(
        &mut self,
        node: usize,
        op: u64,
        session: SessionId,
        name: &LeaseName,
        l: Timestamp,
        cx: &Cx<'_>,
    ) {
        if !self.enabled {
            return;
        }
        let key = (node, name.clone());
        if let Some((s, got, h, t, exp)) = self.seen.remove(&key) {
            if s == session && l < got + cx.p.renew_interval / 2 {
                self.timed.insert((node, op), (h, t, exp, got));
            }
        }
        self.sent.insert(key, (op, session, l));
    }

    /// When the backend receives acquire `op` of `node` at backend time
    /// `b`: an attempt timed by a `Held` reply must not find the same
    /// holder still live with the expiry it was timed for.
    fn arrived(
        &mut self,
        node: usize,
        op: u64,
        name: &LeaseName,
        b: u64,
        cx: &Cx<'_>,
        out: &mut Out<'_>,
    ) {
        let Some((h, t, exp, got)) = self.timed.remove(&(node, op)) else {
            return;
        };
        let backend = &cx.cluster.backend;
        let same = backend.owner(name) == Some((h, t))
            && backend.expires_at(h) == Some(exp)
            && backend.live_at(h, b);
        if same {
            let early = Duration::from_nanos(exp.saturating_sub(b));
            out.violation(
                "expiry timing (S4.4)",
                format!(
                    "node {node}'s attempt on {name}, timed by the Held reply it got at local {got}, \
                     reached the backend {early:?} before the holder's expiry (the holder did not renew): \
                     a wasted call"
                ),
            );
        }
    }

    /// When `input` reaches `node` at local time `l`.
    fn delivered(&mut self, node: usize, input: &Input, l: Timestamp, cx: &Cx<'_>) {
        if !self.enabled {
            return;
        }
        match input {
            Input::ReleaseBroadcast { name } => {
                // The broadcast resets the schedule (S4.2): at once if no
                // attempt is out, else when the attempt's reply comes back,
                // whatever that reply says about the holder.
                self.seen.remove(&(node, name.clone()));
                self.sent.remove(&(node, name.clone()));
            }
            Input::AcquireReplied { op, result } => {
                // The backend's answer this reply carries (a duplicated
                // command was answered twice, maybe with different expiries).
                let answer = match result {
                    Ok(AcquireOutcome::Held {
                        holder: Some(h),
                        token: Some(t),
                        holder_remaining: Some(r),
                    }) => self.answers.get_mut(&(node, op.0)).and_then(|all| {
                        let i = all
                            .iter()
                            .position(|a| a.1 == *h && a.2 == *t && a.4 == *r)?;
                        Some(all.remove(i))
                    }),
                    _ => None,
                }
                .map(|(name, h, t, exp, _)| (name, h, t, exp));
                if self
                    .answers
                    .get(&(node, op.0))
                    .is_some_and(|all| all.is_empty())
                {
                    self.answers.remove(&(node, op.0));
                }
                // The engine acts on the first reply to its current attempt
                // only: a duplicate (the network may deliver a command or a
                // reply twice) is stale, whatever it says, so the attempt is
                // forgotten at its first reply.
                let Some(key) = self
                    .sent
                    .iter()
                    .find(|((n, _), (sent_op, _, _))| *n == node && *sent_op == op.0)
                    .map(|(k, _)| k.clone())
                else {
                    return;
                };
                let Some((_, session, sent_l)) = self.sent.remove(&key) else {
                    return;
                };
                let Some((name, h, t, exp)) = answer else {
                    return;
                };
                // Only a reply before the attempt times out is one the engine
                // acts on (S2.4, S4.3).
                if key.1 == name && l < sent_l + cx.cluster.call_timeout(node) {
                    self.seen.insert(key, (session, l, h, t, exp));
                }
            }
            _ => {}
        }
    }
}

impl Checker for ExpiryTiming {
    fn observe(&mut self, ev: &Observed<'_>, cx: &Cx<'_>, out: &mut Out<'_>) {
        match *ev {
            Observed::Sent {
                node,
                cmd: Command::Acquire {
                    op, session, name, ..
                },
                local,
            } => self.sent(node, op.0, *session, name, local, cx),
            Observed::AcquireArrived { node, op, name, b } => {
                self.arrived(node, op, name, b, cx, out);
            }
            Observed::HeldAnswered {
                node,
                op,
                name,
                holder,
                token,
                expiry,
                remaining,
            } if self.enabled => {
                if self.answers.len() >= 4096 {
                    self.answers.pop_first();
                }
                self.answers.entry((node, op)).or_default().push((
                    name.clone(),
                    holder,
                    token,
                    expiry,
                    remaining,
                ));
            }
            Observed::Delivered { node, input, local } => self.delivered(node, input, local, cx),
            Observed::GroupChanged {
                node,
                group,
                target,
                ..
            } => {
                for name in dropped_partitions(cx, group, target) {
                    self.seen.remove(&(node, name.clone()));
                    self.sent.remove(&(node, name));
                }
            }
            // An API call may reset a candidate's schedule (S5, S6.4), also
            // through a reply still in flight: a `step_down(cooldown)` sent
            // while an attempt is out leaves its `Held` reply unused, and
            // the attempt at the cooldown's end is timed by the cooldown,
            // not by the reply.
            Observed::ApiCalled { node } => {
                self.seen.retain(|(n, _), _| *n != node);
                self.sent.retain(|(n, _), _| *n != node);
            }
            Observed::Crashed { node } => self.forget_node(node),
            _ => {}
        }
    }
}
