//! `one attempt in flight (S4.1)`: at most one acquire per election in
//! flight. The previous acquire of the same name and session must have been
//! answered, or have reached its call timeout (S2.4: the engine abandons it
//! then), or have been abandoned by an API call, a withdrawal (S4.5), a
//! partition leaving the member's target (S10.2) or a new session.

use super::{Checker, Cx, Observed, Out};
use simba_core::{Command, Input, LeaseName, SessionId, Timestamp};
use std::collections::BTreeMap;
use std::time::Duration;

/// The `one attempt in flight (S4.1)` checker.
#[derive(Default)]
pub(super) struct OneAttempt {
    /// Per (node, name): the node's acquire not yet answered (op, session,
    /// local send time, the call timeout in force at the send).
    in_flight: BTreeMap<(usize, LeaseName), (u64, SessionId, Timestamp, Duration)>,
}

impl Checker for OneAttempt {
    fn observe(&mut self, ev: &Observed<'_>, cx: &Cx<'_>, out: &mut Out<'_>) {
        match *ev {
            Observed::Delivered {
                node,
                input: Input::AcquireReplied { op, .. },
                ..
            } => {
                self.in_flight
                    .retain(|(n, _), (o, _, _, _)| !(*n == node && *o == op.0));
            }
            // The engine withdraws only a wait it gave up (S4.5: a
            // partition left its member's target, as at `stop()`): a later
            // acquire of the name is a new attempt (S4.1).
            Observed::Sent {
                node,
                cmd: Command::Withdraw { name, .. },
                ..
            } => {
                self.in_flight.remove(&(node, name.clone()));
            }
            Observed::Sent {
                node,
                cmd: Command::Acquire {
                    op, session, name, ..
                },
                local: l,
            } => {
                let (op, session) = (op.0, *session);
                let timeout = cx.cluster.call_timeout(node);
                let key = (node, name.clone());
                if let Some((prev, s, sent_l, prev_timeout)) = self.in_flight.get(&key).copied() {
                    if s == session && l < sent_l + prev_timeout {
                        let since = l - sent_l;
                        out.violation(
                            "one attempt in flight (S4.1)",
                            format!(
                                "node {node} sent acquire {op} of {name} while acquire {prev}, sent \
                                 {since:?} earlier, was neither answered nor timed out ({prev_timeout:?})"
                            ),
                        );
                    }
                }
                self.in_flight.insert(key, (op, session, l, timeout));
            }
            // A partition dropped from this member's target abandons its
            // attempt in flight (S10.2, withdrawn, S4.5), as `stop()` does
            // an election's: a later target change may send the next
            // attempt before the old reply comes (then stale, S4.3).
            Observed::GroupChanged {
                node,
                group,
                target,
                ..
            } => {
                for name in dropped_partitions(cx, group, target) {
                    self.in_flight.remove(&(node, name));
                }
            }
            // `stop()` or `step_down()` abandons an attempt in flight; a
            // later `start()` or the cooldown's end may send the next one
            // before the old reply comes (it is then stale, S4.3): not a
            // second attempt of the same election.
            Observed::ApiCalled { node } | Observed::Crashed { node } => {
                self.in_flight.retain(|(n, _), _| *n != node);
            }
            _ => {}
        }
    }
}

/// The partitions of `group` not in `target`, by name.
pub(super) fn dropped_partitions(cx: &Cx<'_>, group: &LeaseName, target: &[u32]) -> Vec<LeaseName> {
    let partitions =
        cx.p.groups
            .iter()
            .find(|(g, _)| g == group)
            .map_or(0, |(_, n)| *n);
    (0..partitions)
        .filter(|i| !target.contains(i))
        .filter_map(|i| simba_core::partition_name(group, i).ok())
        .collect()
}
