//! The workload: the API calls the nodes make (random ones drawn from the
//! seed, scripted ones, and the ones healing makes), the election tasks
//! (their writes to the registers, their exits and crashes).

use super::observed::Observed;
use super::queue::Ev;
use super::types::{Api, ApiCall, LockSpec, TaskState};
use super::World;
use crate::core_api::LockWait;
use simba_core::{ApiError, Input, TaskOutcome, Term, TermId};
use std::time::Duration;

impl World {
    pub(super) fn api(&mut self, node: usize, call: ApiCall) {
        let l = self.local(node);
        let inc = self.cluster.nodes[node].inc;
        let call = match call {
            ApiCall::Random => {
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
                match self.random_call(node) {
                    Some(c) => c,
                    None => return,
                }
            }
            c => c,
        };
        if self.healed && !matches!(call, ApiCall::Start(_)) {
            return;
        }
        if self.cluster.nodes[node].closing.is_some() {
            return;
        }
        self.observe(&Observed::ApiCalled { node });
        self.mix(400);
        let runs_task = self.rng.u32(..10) != 0;
        let is_lock = match &call {
            ApiCall::Stop(name) => matches!(
                self.cluster.nodes[node].api.get(name),
                Some(Api::Lock { .. })
            ),
            _ => false,
        };
        if self.trace {
            eprintln!("{:>16} node {node} local {l} api {call:?}", "");
        }
        let now = self.queue.now;
        let n = &mut self.cluster.nodes[node];
        let Some(e) = n.engine.as_mut() else { return };
        let result = match &call {
            ApiCall::Start(name) => e.start_election(l, name.clone(), runs_task).map(|_| {
                Some(Api::Election {
                    cooldown_until: None,
                })
            }),
            ApiCall::Stop(name) => e.stop(l, name).map(|()| {
                Some(if is_lock {
                    Api::LockStopping
                } else {
                    Api::Stopping
                })
            }),
            ApiCall::StepDown(name, cooldown) => e.step_down(l, name, *cooldown).map(|()| {
                Some(Api::SteppingDown {
                    until: l + *cooldown,
                })
            }),
            ApiCall::Lock(name, spec, runs_task) => {
                let wait = match spec {
                    LockSpec::Try => LockWait::Try,
                    LockSpec::For(d) => LockWait::Until(l + *d),
                    LockSpec::Forever => LockWait::Forever,
                };
                e.acquire_lock(l, name.clone(), wait, *runs_task)
                    .map(|_| Some(Api::Lock { had_term: false }))
            }
            ApiCall::Close => {
                e.close(l);
                n.closing = Some(now);
                Ok(None)
            }
            ApiCall::Random => Ok(None),
        };
        let name = match &call {
            ApiCall::Start(n)
            | ApiCall::Stop(n)
            | ApiCall::StepDown(n, _)
            | ApiCall::Lock(n, _, _) => Some(n.clone()),
            _ => None,
        };
        match (result, name) {
            (Ok(Some(state)), Some(name)) => {
                if matches!(
                    state,
                    Api::Stopping | Api::LockStopping | Api::SteppingDown { .. }
                ) {
                    let what = if matches!(state, Api::SteppingDown { .. }) {
                        "step_down"
                    } else {
                        "stop"
                    };
                    self.observe(&Observed::MustComplete {
                        node,
                        name: &name,
                        what,
                    });
                }
                self.cluster.nodes[node].api.insert(name, state);
            }
            (Err(ApiError::NotStarted(name)), _) => {
                self.cluster.nodes[node].api.remove(&name);
            }
            _ => {}
        }
        self.drain(node);
    }

    fn random_call(&mut self, node: usize) -> Option<ApiCall> {
        let w = self.p.workload.clone();
        if self.chance(w.close_permille) {
            return Some(ApiCall::Close);
        }
        let total = self.p.elections.len() + self.p.locks.len();
        let i = self.rng.usize(..total);
        if i < self.p.elections.len() {
            let name = self.p.elections[i].clone();
            match self.cluster.nodes[node].api.get(&name) {
                None => Some(ApiCall::Start(name)),
                Some(Api::Election { .. }) => {
                    let call = if self.chance(400) {
                        ApiCall::Stop(name.clone())
                    } else {
                        let cd = self.uniform(w.max_cooldown);
                        ApiCall::StepDown(name.clone(), Duration::from_nanos(cd))
                    };
                    if self.chance(w.armed_permille) {
                        self.cluster.nodes[node].armed.push((name, call));
                        None
                    } else {
                        Some(call)
                    }
                }
                Some(_) => None,
            }
        } else {
            let name = self.p.locks[i - self.p.elections.len()].clone();
            match self.cluster.nodes[node].api.get(&name) {
                None => {
                    let spec = match self.rng.u32(..3) {
                        0 => LockSpec::Try,
                        1 => LockSpec::For(Duration::from_nanos(
                            self.uniform(self.p.lease_duration * 2),
                        )),
                        _ => LockSpec::Forever,
                    };
                    let runs_task = self.rng.bool();
                    Some(ApiCall::Lock(name, spec, runs_task))
                }
                Some(Api::Lock { .. }) => Some(ApiCall::Stop(name)),
                Some(_) => None,
            }
        }
    }

    pub(super) fn task_start(&mut self, node: usize, term: Term) {
        self.mix(300);
        self.mix(term.id.0);
        self.observe(&Observed::TaskStart { node, term: &term });
        if !self.cluster.nodes[node].terms.contains_key(&term.id) {
            return;
        }
        if let Some(rec) = self.cluster.nodes[node].terms.get_mut(&term.id) {
            rec.task = TaskState::Running;
        }
        let inc = self.cluster.nodes[node].inc;
        let is_election = matches!(
            self.cluster.nodes[node].api.get(&term.name),
            Some(Api::Election { .. })
        );
        if is_election && !self.healed && self.chance(self.p.workload.task_crash_permille) {
            let after = self.uniform(self.p.lease_duration);
            self.push(
                self.queue.now + after,
                Ev::TaskCrash {
                    node,
                    inc,
                    term: term.id,
                },
            );
        }
        self.push(
            self.queue.now,
            Ev::TaskWrite {
                node,
                inc,
                term: term.id,
            },
        );
    }

    /// S6.5: an election task ends on its own (returns, fails or panics,
    /// drawn from the workload's outcomes) while its term is held; under
    /// the default policy the engine must give the term up at once, so no
    /// node holds a lease with nothing running. Not after healing: the
    /// liveness phase judges elections, not crash-looping jobs.
    pub(super) fn task_crash(&mut self, node: usize, inc: u64, term: TermId) {
        if self.cluster.nodes[node].inc != inc
            || self.cluster.nodes[node].engine.is_none()
            || self.healed
        {
            return;
        }
        let Some(rec) = self.cluster.nodes[node].terms.get_mut(&term) else {
            return;
        };
        if rec.task != TaskState::Running || rec.revoked.is_some() {
            return;
        }
        rec.task = TaskState::Exited;
        let outcomes = &self.p.workload.task_end_outcomes;
        let outcome = if outcomes.is_empty() {
            TaskOutcome::Panicked
        } else {
            outcomes[self.rng.usize(..outcomes.len())]
        };
        self.mix(302);
        self.mix(term.0);
        let l = self.local(node);
        if let Some(e) = self.cluster.nodes[node].engine.as_mut() {
            e.handle(l, Input::TaskExited { term, outcome });
        }
        self.drain(node);
        self.observe(&Observed::TaskEndedOnItsOwn {
            node,
            term,
            outcome,
        });
        self.prune(node, term);
    }

    pub(super) fn task_interrupt(&mut self, node: usize, term: Term) {
        self.mix(301);
        if let Some(rec) = self.cluster.nodes[node].terms.get_mut(&term.id) {
            if rec.task == TaskState::Running {
                rec.task = TaskState::Interrupted;
            }
        }
        let w = &self.p.workload;
        let (slow, slow_max, exit) = (w.slow_exit_permille, w.slow_exit_max, w.exit_delay);
        let delay = if self.chance(slow) {
            self.uniform(slow_max)
        } else {
            self.uniform(exit)
        };
        let inc = self.cluster.nodes[node].inc;
        self.push(
            self.queue.now + delay,
            Ev::TaskExit {
                node,
                inc,
                term: term.id,
            },
        );
    }

    pub(super) fn task_write(&mut self, node: usize, inc: u64, term: TermId) {
        if self.cluster.nodes[node].inc != inc {
            return;
        }
        let Some(rec) = self.cluster.nodes[node].terms.get(&term).cloned() else {
            return;
        };
        if !matches!(rec.task, TaskState::Running | TaskState::Interrupted) {
            return;
        }
        let next_local = self.local(node) + self.p.workload.write_period;
        if let Some(t) = self.cluster.nodes[node]
            .clock
            .true_at(next_local, self.queue.now)
        {
            self.push(t, Ev::TaskWrite { node, inc, term });
        }
        // A careful task checks its term before each write.
        if !self.is_valid(node, &rec) {
            return;
        }
        if let Some(d) = self.faults.nodes[node].pause_armed.take() {
            // The worst moment for a pause: between the check and the write.
            self.start_pause(node, d);
        }
        self.push(
            self.queue.now,
            Ev::WriteSend {
                node,
                inc,
                name: rec.term.name.clone(),
                order: rec.order,
                token: rec.term.token,
            },
        );
    }
}
