//! The faults: the run's fault schedule ([`RunParams::faults`](crate::RunParams))
//! applied to the cluster and the network as each fault starts and ends,
//! the faults armed on a node for its next act, and healing.

use super::cluster::NodeState;
use super::network::{DOWN, UP};
use super::observed::Observed;
use super::queue::Ev;
use super::types::{nanos, ApiCall, Removal};
use super::World;
use crate::params::{Direction, FaultKind};
use simba_core::{LeaseName, TermId};
use std::collections::BTreeSet;
use std::time::Duration;

/// Faults armed on one node, waiting for its next act.
#[derive(Clone, Debug, Default)]
pub(super) struct NodeFaults {
    /// A pause to start right after the node's next renewal or acquire is
    /// sent (or between a task's check and its write).
    pub(super) pause_armed: Option<Duration>,
    /// A pause the node's last send triggered, started once its drain ends.
    pub(super) pause_now: Option<Duration>,
    /// The node's next won acquire is stuck in a slow path this long.
    pub(super) delay_grant: Option<Duration>,
    /// The node's next successful renewal is answered this late, then the
    /// node is cut off for two leases.
    pub(super) slow_renewal: Option<Duration>,
}

/// The faults in force.
pub(super) struct Faults {
    /// `backend restart` faults in force (the backend is down while > 0).
    pub(super) backend_down: u32,
    /// Per node: its armed faults.
    pub(super) nodes: Vec<NodeFaults>,
    /// Every (node, term) whose lease an outside actor removed, while the
    /// node's process lives: the S6.1 handover order cannot hold for them.
    pub(super) removed_terms: BTreeSet<(usize, TermId)>,
}

impl Faults {
    /// No fault in force on `nodes` nodes.
    pub(super) fn new(nodes: usize) -> Faults {
        Faults {
            backend_down: 0,
            nodes: vec![NodeFaults::default(); nodes],
            removed_terms: BTreeSet::new(),
        }
    }
}

impl World {
    /// Fault `i` of the schedule starts (`start`) or ends.
    pub(super) fn fault(&mut self, i: usize, start: bool) {
        if self.healed {
            return;
        }
        let f = self.p.faults[i].clone();
        let nodes = self.cluster.nodes.len();
        match f.kind {
            FaultKind::Partition { node, direction } if node < nodes => {
                let dirs: &[usize] = match direction {
                    Direction::ToBackend => &[UP],
                    Direction::FromBackend => &[DOWN],
                    Direction::Both => &[UP, DOWN],
                };
                self.net.cut(node, dirs, start);
            }
            FaultKind::Pause { node, after_send } if node < nodes => {
                if start {
                    if after_send {
                        self.faults.nodes[node].pause_armed = Some(f.duration);
                    } else {
                        self.start_pause(node, f.duration);
                    }
                } else if after_send {
                    // Not triggered within its window: drop it.
                    self.faults.nodes[node].pause_armed = None;
                }
            }
            FaultKind::SlowRenewalThenPartition { node, delay } if node < nodes => {
                self.faults.nodes[node].slow_renewal = start.then_some(delay);
            }
            FaultKind::DelayedGrant { node } if node < nodes => {
                self.faults.nodes[node].delay_grant = start.then_some(f.duration);
            }
            FaultKind::Crash { node } if node < nodes => {
                if start {
                    self.crash(node);
                } else if self.cluster.nodes[node].engine.is_none() {
                    self.boot(node);
                }
            }
            FaultKind::BackendRestart { keep_state } => {
                if start {
                    self.faults.backend_down += 1;
                    self.cluster.backend.restart(keep_state);
                } else {
                    self.faults.backend_down = self.faults.backend_down.saturating_sub(1);
                }
                self.after_backend();
            }
            FaultKind::BackendClockStep { .. } => {
                // The step itself is part of the backend clock; expiry times move.
                self.cluster.expiry_at = None;
                self.after_backend();
            }
            FaultKind::SlowBackend { extra } => {
                if start {
                    self.net.slow.insert(i, extra);
                } else {
                    self.net.slow.remove(&i);
                }
            }
            FaultKind::LeaseRemoved { name } if start => self.remove_lease(&name),
            _ => {}
        }
    }

    /// A `lease removed` fault: an outside actor deletes the lease of `name`
    /// from its live holder, if that holder's engine has been elected for
    /// it and still holds the term (a grant still on its way to the holder
    /// is left alone: its term would start after the next holder's, with a
    /// smaller token, which the start-order checkers of S3.2 reject by
    /// construction). Told to the checkers (S3.4).
    fn remove_lease(&mut self, name: &LeaseName) {
        if self.faults.backend_down > 0 {
            return;
        }
        let b = self.cluster.backend_clock.local(self.queue.now).as_nanos();
        let Some((session, token)) = self.cluster.backend.owner(name) else {
            return;
        };
        if !self.cluster.backend.live_at(session, b) {
            return;
        }
        let holder = self.cluster.nodes.iter().enumerate().find_map(|(i, n)| {
            n.engine.as_ref()?;
            n.terms
                .values()
                .find(|r| {
                    r.revoked.is_none()
                        && r.term.session == session
                        && &r.term.name == name
                        && r.term.token == token
                })
                .map(|r| (i, r.term.id))
        });
        let Some((node, term)) = holder else { return };
        if self.cluster.backend.remove_lease(b, name) != Some((session, token)) {
            return;
        }
        self.mix(500);
        self.mix(token.get());
        if self.trace {
            eprintln!(
                "{:>16} lease {name} token {token} removed from node {node} ({term})",
                ""
            );
        }
        self.report.leases_removed += 1;
        self.faults.removed_terms.insert((node, term));
        self.observe(&Observed::LeaseRemoved(&Removal {
            step: self.report.steps,
            node,
            term,
            session,
        }));
        self.after_backend();
    }

    /// The faults heal: every link up, the backend up, nothing armed, every
    /// paused node resumed and every crashed one restarted; the liveness
    /// phase starts, and the run's end is scheduled.
    pub(super) fn heal(&mut self) {
        self.healed = true;
        self.net.heal();
        self.faults.backend_down = 0;
        for node in 0..self.cluster.nodes.len() {
            let f = &mut self.faults.nodes[node];
            f.pause_armed = None;
            f.delay_grant = None;
            f.slow_renewal = None;
            if self.cluster.nodes[node].state == NodeState::Paused {
                let inc = self.cluster.nodes[node].inc;
                self.resume(node, inc);
            }
            if self.cluster.nodes[node].engine.is_none() {
                self.boot(node);
            } else if self.cluster.nodes[node].closing.is_none() {
                // Every live node competes for every election name.
                let inc = self.cluster.nodes[node].inc;
                for name in self.p.elections.clone() {
                    if !self.cluster.nodes[node].api.contains_key(&name) {
                        self.push(
                            self.queue.now,
                            Ev::Api {
                                node,
                                inc,
                                call: ApiCall::Start(name),
                            },
                        );
                    }
                }
            }
        }
        // A task that failed or panicked just before healing steps its
        // election down for a back-off of up to 32 renewal intervals (S6.5):
        // when that back-off outlasts the cooldown the bound allows for,
        // the bound grows by what is left of it (on any node, so the
        // checker stays valid if every candidate is in one).
        let mut extra = 0u64;
        for ((node, _), until) in std::mem::take(&mut self.task_backoff) {
            let n = &self.cluster.nodes[node];
            if n.engine.is_none() {
                continue;
            }
            if let Some(t) = n.clock.true_at(until, self.queue.now) {
                extra = extra.max(t.saturating_sub(self.queue.now));
            }
        }
        let extra = Duration::from_nanos(extra).saturating_sub(self.p.workload.max_cooldown);
        self.report.liveness_bound = self.p.liveness_bound() + extra;
        let end = self.queue.now + nanos(self.report.liveness_bound) + nanos(self.p.renew_interval);
        self.push(end, Ev::End);
        self.observe(&Observed::Healed);
        for name in self.p.elections.clone() {
            self.observe(&Observed::HoldersMayChange { name: &name });
        }
        self.after_backend();
    }
}
