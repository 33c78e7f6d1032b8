//! The cluster: the nodes (each a process running an unchanged engine,
//! with its own clock, and what the workload knows of its terms and API
//! calls) and the simulated backend (with its own clock and expiry timer).
//! The world's handling of a node's life (boot, crash, pause, the drain of
//! its engine's outputs, its timer) and of the backend's side of a call is
//! here too.

use super::network::{DOWN, UP};
use super::observed::Observed;
use super::queue::Ev;
use super::types::{nanos, Api, ApiCall, TaskState, TermRec};
use super::World;
use crate::backend::{At, SimBackend};
use crate::clock::Clock;
use crate::core_api::{BackendProfile, Engine};
use simba_core::{
    AcquireOutcome, BackendError, BackendErrorKind, Command, Input, LeaseName, SessionId, TermId,
    Timestamp,
};
use std::collections::BTreeMap;
use std::time::Duration;

/// Whether a node's process runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum NodeState {
    Up,
    Paused,
    Down,
}

/// One node: a process (restarted as a new incarnation after a crash).
pub(super) struct Node {
    pub(super) clock: Clock,
    pub(super) engine: Option<Engine>,
    /// The process's incarnation: events for an older one are dropped.
    pub(super) inc: u64,
    pub(super) state: NodeState,
    pub(super) timer_gen: u64,
    pub(super) timer_at: Option<u64>,
    /// Events that came while the process was paused.
    pub(super) deferred: Vec<Ev>,
    pub(super) deadlines: BTreeMap<SessionId, Timestamp>,
    pub(super) terms: BTreeMap<TermId, TermRec>,
    pub(super) api: BTreeMap<LeaseName, Api>,
    /// API calls to make when the node next sends an acquire of the name.
    pub(super) armed: Vec<(LeaseName, ApiCall)>,
    pub(super) fire_now: Vec<ApiCall>,
    /// True time of a `close()` not yet completed.
    pub(super) closing: Option<u64>,
    pub(super) closed: bool,
}

impl Node {
    fn new(clock: Clock) -> Node {
        Node {
            clock,
            engine: None,
            inc: 0,
            state: NodeState::Down,
            timer_gen: 0,
            timer_at: None,
            deferred: Vec::new(),
            deadlines: BTreeMap::new(),
            terms: BTreeMap::new(),
            api: BTreeMap::new(),
            armed: Vec::new(),
            fire_now: Vec::new(),
            closing: None,
            closed: false,
        }
    }
}

/// The nodes and the backend.
pub(super) struct Cluster {
    pub(super) nodes: Vec<Node>,
    pub(super) profile: BackendProfile,
    pub(super) backend: SimBackend,
    pub(super) backend_clock: Clock,
    pub(super) expiry_gen: u64,
    pub(super) expiry_at: Option<u64>,
}

impl Cluster {
    /// A cluster of nodes with `clocks`, all down, and `backend`.
    pub(super) fn new(
        clocks: Vec<Clock>,
        profile: BackendProfile,
        backend: SimBackend,
        backend_clock: Clock,
    ) -> Cluster {
        Cluster {
            nodes: clocks.into_iter().map(Node::new).collect(),
            profile,
            backend,
            backend_clock,
            expiry_gen: 0,
            expiry_at: None,
        }
    }

    /// `node`'s local time at true time `now`.
    pub(super) fn local(&self, node: usize, now: u64) -> Timestamp {
        self.nodes[node].clock.local(now)
    }

    /// Whether `rec` of `node` is valid at true time `now`, on the node's
    /// clock: not revoked, and its session's deadline not passed.
    pub(super) fn is_valid(&self, node: usize, rec: &TermRec, now: u64) -> bool {
        let n = &self.nodes[node];
        rec.revoked.is_none()
            && n.deadlines
                .get(&rec.term.session)
                .is_some_and(|d| n.clock.local(now) < *d)
    }

    /// The call timeout (S2.4) in force at `node` now.
    pub(super) fn call_timeout(&self, node: usize) -> Duration {
        self.nodes[node]
            .engine
            .as_ref()
            .map(|e| e.call_timeout())
            .unwrap_or_default()
    }
}

impl World {
    pub(super) fn boot(&mut self, node: usize) {
        let inc = self.cluster.nodes[node].inc;
        let config = match self.p.config(node, inc) {
            Ok(c) => c,
            Err(e) => {
                self.observe(&Observed::ConfigRefused {
                    error: e.to_string(),
                });
                return;
            }
        };
        let l = self.local(node);
        let mut engine = Engine::new(config, self.cluster.profile, l);
        // Every (re)started process joins every group (S10).
        for (group, partitions) in self.p.groups.clone() {
            if let Err(e) = engine.join_group(
                l,
                group.clone(),
                partitions,
                true,
                simba_core::TaskExitPolicy::default(),
            ) {
                self.observe(&Observed::JoinRefused {
                    node,
                    error: e.to_string(),
                });
            }
            for i in 0..partitions {
                if let Ok(n) = simba_core::partition_name(&group, i) {
                    self.cluster.nodes[node].api.insert(n, Api::Partition);
                }
            }
        }
        let n = &mut self.cluster.nodes[node];
        n.engine = Some(engine);
        n.state = NodeState::Up;
        n.closing = None;
        self.drain(node);
        // A (re)started process starts some of its elections, then makes
        // random API calls.
        if !self.p.script.is_empty() && !self.healed {
            // A scripted scenario makes only its own calls until it heals.
            return;
        }
        let half_lease = self.p.lease_duration / 2;
        for name in self.p.elections.clone() {
            if self.healed || self.chance(700) {
                let at = self.queue.now + self.uniform(half_lease);
                self.push(
                    at,
                    Ev::Api {
                        node,
                        inc,
                        call: ApiCall::Start(name),
                    },
                );
            }
        }
        if !self.healed {
            let gap = self.uniform(self.p.workload.api_gap * 2);
            self.push(
                self.queue.now + gap,
                Ev::Api {
                    node,
                    inc,
                    call: ApiCall::Random,
                },
            );
        }
    }

    pub(super) fn crash(&mut self, node: usize) {
        let n = &mut self.cluster.nodes[node];
        if n.engine.is_none() {
            return;
        }
        n.engine = None;
        n.inc += 1;
        n.state = NodeState::Down;
        n.timer_gen += 1;
        n.timer_at = None;
        n.deferred.clear();
        n.deadlines.clear();
        n.terms.clear();
        n.api.clear();
        n.armed.clear();
        n.fire_now.clear();
        n.closing = None;
        n.closed = false;
        let f = &mut self.faults.nodes[node];
        f.pause_armed = None;
        f.pause_now = None;
        // The process and its terms are gone.
        self.faults.removed_terms.retain(|(n, _)| *n != node);
        self.task_backoff.retain(|(n, _), _| *n != node);
        self.observe(&Observed::Crashed { node });
    }

    pub(super) fn start_pause(&mut self, node: usize, d: Duration) {
        if self.cluster.nodes[node].state != NodeState::Up || self.healed {
            return;
        }
        self.cluster.nodes[node].state = NodeState::Paused;
        let inc = self.cluster.nodes[node].inc;
        self.push(self.queue.now + nanos(d), Ev::Resume { node, inc });
    }

    pub(super) fn resume(&mut self, node: usize, inc: u64) {
        let n = &mut self.cluster.nodes[node];
        if n.inc != inc || n.state != NodeState::Paused {
            return;
        }
        n.state = NodeState::Up;
        // Buffered replies first (the harshest order for late-reply bugs),
        // then timers, API calls and task steps in their original order.
        let deferred = std::mem::take(&mut n.deferred);
        let (msgs, rest): (Vec<Ev>, Vec<Ev>) = deferred
            .into_iter()
            .partition(|e| matches!(e, Ev::ToNode { .. }));
        for ev in msgs.into_iter().chain(rest) {
            self.push(self.queue.now, ev);
        }
    }

    /// Acts on every output the engine has, then re-arms its timer.
    pub(super) fn drain(&mut self, node: usize) {
        loop {
            let out = match self.cluster.nodes[node].engine.as_mut() {
                Some(e) => e.poll_output(),
                None => None,
            };
            let Some(out) = out else { break };
            self.on_output(node, out);
        }
        if self.cluster.nodes[node].closed {
            let restart = self.uniform(self.p.lease_duration);
            self.crash(node);
            let inc = self.cluster.nodes[node].inc;
            self.push(self.queue.now + restart, Ev::Restart { node, inc });
            return;
        }
        while let Some(call) = self.cluster.nodes[node].fire_now.pop() {
            self.api(node, call);
        }
        if let Some(d) = self.faults.nodes[node].pause_now.take() {
            self.start_pause(node, d);
        }
        self.rearm_timer(node);
    }

    fn rearm_timer(&mut self, node: usize) {
        let now = self.queue.now;
        let n = &mut self.cluster.nodes[node];
        let want = n
            .engine
            .as_ref()
            .and_then(|e| e.poll_timeout())
            .and_then(|l| n.clock.true_at(l, now));
        if want != n.timer_at {
            n.timer_gen += 1;
            n.timer_at = want;
            let gen = n.timer_gen;
            if let Some(t) = want {
                self.push(t, Ev::Timer { node, gen });
            }
        }
    }

    /// Drops a term's record once nothing can refer to it any more.
    pub(super) fn prune(&mut self, node: usize, term: TermId) {
        let n = &mut self.cluster.nodes[node];
        if let Some(rec) = n.terms.get(&term) {
            if rec.revoked.is_some() && matches!(rec.task, TaskState::None | TaskState::Exited) {
                n.terms.remove(&term);
            }
        }
    }

    /// The backend handles `cmd` of `node` (incarnation `inc`) and sends
    /// the reply back.
    pub(super) fn on_backend(&mut self, node: usize, inc: u64, cmd: Command) {
        // A batch (S4.7) is answered call by call, at one instant, in one reply.
        let reply = match cmd {
            Command::Batch { calls } => Input::Batch {
                replies: calls.into_iter().map(|c| self.answer(node, c)).collect(),
            },
            one => self.answer(node, one),
        };
        let won = super::calls_of_reply(&reply).iter().any(|r| {
            matches!(
                r,
                Input::AcquireReplied {
                    result: Ok(AcquireOutcome::Won { .. }),
                    ..
                }
            )
        });
        let renewed = matches!(reply, Input::RenewReplied { result: Ok(_), .. });
        if renewed && self.cluster.nodes[node].inc == inc {
            if let Some(d) = self.faults.nodes[node].slow_renewal.take() {
                // The renewal succeeded at the backend, but its reply is slow
                // and the node is then cut off for two leases: its deadline
                // must count from the send, not from this late arrival.
                self.net.partitions[node][UP] += 1;
                self.net.partitions[node][DOWN] += 1;
                let cut = nanos(self.p.lease_duration * 2);
                self.push(self.queue.now + cut, Ev::Unpartition { node });
                self.push(
                    self.queue.now + nanos(d),
                    Ev::ToNode {
                        node,
                        inc,
                        input: reply,
                    },
                );
                self.after_backend();
                return;
            }
        }
        match self.faults.nodes[node].delay_grant {
            Some(d)
                if won
                    && self.cluster.nodes[node].inc == inc
                    && self.cluster.nodes[node].state == NodeState::Up =>
            {
                // The grant is stuck in a slow path while its node pauses past
                // its deadline and opens a new session: the reply arrives late.
                self.faults.nodes[node].delay_grant = None;
                self.start_pause(node, d);
                let late = nanos(d + self.p.renew_interval);
                self.push(
                    self.queue.now + late,
                    Ev::ToNode {
                        node,
                        inc,
                        input: reply,
                    },
                );
            }
            _ => self.send_down(node, inc, reply),
        }
        self.after_backend();
    }

    /// The backend's reply to one call of `node`, with what the checkers
    /// observe of it.
    fn answer(&mut self, node: usize, cmd: Command) -> Input {
        let b = self.cluster.backend_clock.local(self.queue.now).as_nanos();
        let down = || BackendError::new(BackendErrorKind::Unavailable, "backend restarting");
        let up = self.faults.backend_down == 0;
        let acquired = match &cmd {
            Command::Acquire { op, name, .. } => Some((op.0, name.clone())),
            _ => None,
        };
        if let (true, Some((op, name))) = (up, &acquired) {
            self.observe(&Observed::AcquireArrived {
                node,
                op: *op,
                name,
                b,
            });
        }
        let reply = if up {
            cmd.call(&mut At {
                backend: &mut self.cluster.backend,
                now: b,
            })
        } else {
            Input::failed(&cmd, down())
        };
        if let (
            Some((op, name)),
            Input::AcquireReplied {
                result:
                    Ok(AcquireOutcome::Held {
                        holder: Some(h),
                        token: Some(t),
                        holder_remaining: Some(r),
                    }),
                ..
            },
        ) = (acquired, &reply)
        {
            if let Some(exp) = self.cluster.backend.expires_at(*h) {
                self.observe(&Observed::HeldAnswered {
                    node,
                    op,
                    name: &name,
                    holder: *h,
                    token: *t,
                    expiry: exp,
                    remaining: *r,
                });
            }
        }
        if let Input::AcquireReplied {
            result: Ok(AcquireOutcome::Won { token, .. }),
            ..
        } = &reply
        {
            self.mix(token.get());
        }
        reply
    }

    /// Sends the backend's release broadcasts and re-arms its expiry timer.
    pub(super) fn after_backend(&mut self) {
        for name in self.cluster.backend.take_broadcasts() {
            for node in 0..self.cluster.nodes.len() {
                if self.cluster.nodes[node].engine.is_some() {
                    let inc = self.cluster.nodes[node].inc;
                    self.send_down(node, inc, Input::ReleaseBroadcast { name: name.clone() });
                }
            }
        }
        let now = self.queue.now;
        let c = &mut self.cluster;
        let want = c
            .backend
            .next_expiry()
            .and_then(|x| c.backend_clock.true_at(Timestamp::from_nanos(x), now));
        if want != c.expiry_at {
            c.expiry_gen += 1;
            c.expiry_at = want;
            if let Some(t) = want {
                let gen = c.expiry_gen;
                self.push(t, Ev::BackendExpiry { gen });
            }
        }
    }
}
