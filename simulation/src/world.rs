//! The simulated cluster: nodes running unchanged engines, the simulated
//! backend, the network between them, the workload, the fault schedule, and
//! the checkers, run after every step.

use crate::backend::SimBackend;
use crate::clock::Clock;
use crate::core_api::BackendProfile;
use crate::params::{FaultKind, RunParams, ScriptCall};
use check::{Checks, Cx, Out};
use cluster::{Cluster, NodeState};
use faults::Faults;
use network::Network;
use observed::Observed;
use queue::{Ev, Queue};
use simba_core::{
    Command, Event, Fraction, Input, LeaseName, Level, Output, RevokeReason, TaskOrder,
    TaskOutcome, Timestamp,
};
use std::collections::BTreeMap;
use std::time::Duration;
use types::{chance, nanos, uniform, Api, ApiCall, TaskState, TermRec};

mod check;
mod cluster;
mod faults;
mod network;
mod observed;
mod queue;
mod report;
mod types;
mod workload;

pub use report::{RunReport, Violation};

/// A simulated cluster, ready to run.
pub struct World {
    p: RunParams,
    rng: fastrand::Rng,
    /// Event scheduling and true time.
    queue: Queue,
    /// The nodes and the backend.
    cluster: Cluster,
    /// The links between them.
    net: Network,
    /// The faults in force.
    faults: Faults,
    /// The checkers.
    checks: Checks,
    healed: bool,
    heal_at: u64,
    /// The next term's place in the order of all elections.
    next_order: u64,
    /// Per (node, election): the local end of the S6.5 back-off its last
    /// failed or panicked task started, for the liveness bound.
    task_backoff: BTreeMap<(usize, LeaseName), Timestamp>,
    report: RunReport,
    hash: u64,
    stop_on_violation: bool,
    /// Whether mutual exclusion and the S6.1 handover order make their
    /// `lease-removed` exceptions (see [`World::without_removal_exceptions`]).
    removal_exceptions: bool,
    trace: bool,
}

const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

impl World {
    /// Builds the world for `params`.
    pub fn new(params: RunParams) -> World {
        let rng = fastrand::Rng::with_seed(params.seed.wrapping_mul(31).wrapping_add(7));
        let mut backend_clock = Clock::new(params.backend_rate_ppb, 1_000_000_000_000);
        let mut clocks: Vec<Clock> = (0..params.nodes)
            .map(|i| Clock::new(params.node_rates_ppb[i], params.node_offsets[i]))
            .collect();
        for f in &params.faults {
            match &f.kind {
                FaultKind::NodeClockStep { node, forward } if *node < clocks.len() => {
                    clocks[*node]
                        .add_step(nanos(f.at), i64::try_from(nanos(*forward)).unwrap_or(0));
                }
                FaultKind::BackendClockStep { delta_ms } => {
                    backend_clock.add_step(nanos(f.at), delta_ms.saturating_mul(1_000_000));
                }
                _ => {}
            }
        }
        let profile = BackendProfile {
            renewal_proves: if params.zk_like {
                Fraction::new(5, 12).unwrap_or(Fraction::ONE)
            } else {
                Fraction::ONE
            },
            call_slots: None,
            batch: params.batch,
        };
        let backend = SimBackend::new(params.backend.clone(), params.seed ^ 0xB4C0);
        let heal_at = nanos(params.safety_phase);
        let report = RunReport {
            seed: params.seed,
            liveness_bound: params.liveness_bound(),
            swarm: params.swarm(),
            swarm_on: params.swarm_on(),
            ..RunReport::default()
        };
        World {
            cluster: Cluster::new(clocks, profile, backend, backend_clock),
            net: Network::new(params.nodes),
            faults: Faults::new(params.nodes),
            checks: Checks::new(&params),
            p: params,
            rng,
            queue: Queue::default(),
            healed: false,
            heal_at,
            next_order: 0,
            task_backoff: BTreeMap::new(),
            report,
            hash: 0xcbf2_9ce4_8422_2325,
            stop_on_violation: true,
            removal_exceptions: true,
            trace: false,
        }
    }

    /// Print every step and engine output to stderr (for debugging a seed).
    pub fn traced(mut self) -> World {
        self.trace = true;
        self
    }

    /// Judge a `lease-removed` run without the exceptions that mode makes
    /// for a stolen-from holder (in mutual exclusion until its first renewal
    /// sent after the removal is answered, and in the S6.1 handover order):
    /// shows that they are needed, since those checkers then fire by
    /// construction (`simulation/tests/lease_removed.rs`).
    pub fn without_removal_exceptions(mut self) -> World {
        self.removal_exceptions = false;
        self
    }

    /// Keep running after the first violation (to count them all).
    pub fn keep_going(mut self) -> World {
        self.stop_on_violation = false;
        self
    }

    fn mix(&mut self, w: u64) {
        self.hash = (self.hash ^ w).wrapping_mul(FNV_PRIME);
    }

    fn push(&mut self, at: u64, ev: Ev) {
        self.queue.push(at, ev);
    }

    fn chance(&mut self, permille: u32) -> bool {
        chance(&mut self.rng, permille)
    }

    fn uniform(&mut self, max: Duration) -> u64 {
        uniform(&mut self.rng, max)
    }

    fn local(&self, node: usize) -> Timestamp {
        self.cluster.local(node, self.queue.now)
    }

    fn is_valid(&self, node: usize, rec: &TermRec) -> bool {
        self.cluster.is_valid(node, rec, self.queue.now)
    }

    /// The checkers, what they may read, and where they report.
    fn checkers(&mut self) -> (&mut Checks, Cx<'_>, Out<'_>) {
        let cx = Cx {
            now: self.queue.now,
            p: &self.p,
            cluster: &self.cluster,
            healed: self.healed,
            heal_at: self.heal_at,
            steps: self.report.steps,
            removed_terms: &self.faults.removed_terms,
            removal_exceptions: self.removal_exceptions,
            unjudged: &[],
        };
        let out = Out {
            report: &mut self.report,
            now: self.queue.now,
        };
        (&mut self.checks, cx, out)
    }

    /// Tells every checker what happened.
    fn observe(&mut self, ev: &Observed<'_>) {
        let (checks, cx, mut out) = self.checkers();
        checks.observe(ev, &cx, &mut out);
    }

    /// Runs to the end of the liveness phase, or to the first violation.
    pub fn run(mut self) -> RunReport {
        for (i, f) in self.p.faults.clone().iter().enumerate() {
            *self.report.faults.entry(f.kind.label()).or_insert(0) += 1;
            self.push(nanos(f.at), Ev::FaultStart(i));
            if !f.duration.is_zero() {
                self.push(nanos(f.at + f.duration), Ev::FaultEnd(i));
            }
        }
        for node in 0..self.p.nodes {
            self.boot(node);
        }
        for sc in self.p.script.clone() {
            if sc.node < self.cluster.nodes.len() {
                let call = match sc.call {
                    ScriptCall::Start(n) => ApiCall::Start(n),
                    ScriptCall::Stop(n) => ApiCall::Stop(n),
                    ScriptCall::StepDown(n, d) => ApiCall::StepDown(n, d),
                    ScriptCall::Close => ApiCall::Close,
                };
                self.push(
                    nanos(sc.at),
                    Ev::Scripted {
                        node: sc.node,
                        call,
                    },
                );
            }
        }
        // The run ends one renewal period past the liveness bound (a leader
        // elected just within it must still be shown to stay valid for that
        // long), pushed at healing, when the bound is known (S6.5 back-offs).
        self.push(self.heal_at, Ev::Heal);
        while let Some((at, ev)) = self.queue.pop() {
            self.report.steps += 1;
            self.mix(at);
            self.mix(ev.code());
            if matches!(ev, Ev::End) {
                self.finish();
                break;
            }
            if let Some(node) = ev.process_node() {
                if self.cluster.nodes[node].state == NodeState::Paused {
                    self.cluster.nodes[node].deferred.push(ev);
                    continue;
                }
            }
            if self.trace {
                eprintln!("{:>16?} {ev:?}", Duration::from_nanos(at));
            }
            self.step(ev);
            if self.stop_on_violation && !self.report.violations.is_empty() {
                break;
            }
        }
        self.report.simulated = Duration::from_nanos(self.queue.now);
        self.report.trace_hash = self.hash;
        self.report.messages_lost = self.net.lost;
        self.report
    }

    fn step(&mut self, ev: Ev) {
        match ev {
            Ev::Timer { node, gen } => {
                let n = &mut self.cluster.nodes[node];
                if gen != n.timer_gen || n.engine.is_none() {
                    return;
                }
                n.timer_at = None;
                self.observe(&Observed::TimerFired { node });
                if self.checks.timer.stalled(node) {
                    self.cluster.nodes[node].engine = None;
                    return;
                }
                let l = self.local(node);
                if let Some(e) = self.cluster.nodes[node].engine.as_mut() {
                    e.handle_timeout(l);
                    self.observe(&Observed::Woken { node, local: l });
                }
                self.drain(node);
            }
            Ev::ToNode { node, inc, input } => {
                let n = &self.cluster.nodes[node];
                if n.inc != inc || n.engine.is_none() {
                    return;
                }
                self.mix(node as u64);
                self.mix(input_code(&input));
                let l = self.local(node);
                if self.trace {
                    eprintln!("{:>16} node {node} local {l} <- {input:?}", "");
                }
                // A batch's replies (S4.7) are seen one by one.
                let each: &[Input] = match &input {
                    Input::Batch { replies } => replies,
                    one => std::slice::from_ref(one),
                };
                for one in each {
                    self.observe(&Observed::Delivered {
                        node,
                        input: one,
                        local: l,
                    });
                }
                let mut fresh = false;
                if let Some(e) = self.cluster.nodes[node].engine.as_mut() {
                    let before = e.stats().stale_replies;
                    e.handle(l, input);
                    fresh = e.stats().stale_replies == before;
                }
                self.observe(&Observed::Taken { node, fresh });
                self.drain(node);
                self.observe(&Observed::Settled { node });
            }
            Ev::ToBackend { node, inc, cmd } => self.on_backend(node, inc, cmd),
            Ev::BackendExpiry { gen } => {
                if gen == self.cluster.expiry_gen {
                    self.cluster.expiry_at = None;
                    let b = self.cluster.backend_clock.local(self.queue.now).as_nanos();
                    self.cluster.backend.expire(b);
                    self.after_backend();
                }
            }
            Ev::Api { node, inc, call } => {
                let n = &self.cluster.nodes[node];
                if n.inc == inc && n.engine.is_some() {
                    self.api(node, call);
                }
            }
            Ev::TaskWrite { node, inc, term } => self.task_write(node, inc, term),
            Ev::WriteSend {
                node,
                inc,
                name,
                order,
                token,
            } => {
                if self.cluster.nodes[node].inc == inc {
                    let d = self.delay();
                    self.push(self.queue.now + d, Ev::WriteArrives { name, order, token });
                }
            }
            Ev::WriteArrives { name, order, token } => {
                self.observe(&Observed::WriteArrives {
                    name: &name,
                    order,
                    token,
                });
            }
            Ev::TaskExit { node, inc, term } => {
                if self.cluster.nodes[node].inc != inc {
                    return;
                }
                if let Some(rec) = self.cluster.nodes[node].terms.get_mut(&term) {
                    rec.task = TaskState::Exited;
                }
                self.prune(node, term);
                let l = self.local(node);
                if let Some(e) = self.cluster.nodes[node].engine.as_mut() {
                    e.handle(
                        l,
                        Input::TaskExited {
                            term,
                            outcome: TaskOutcome::Returned,
                        },
                    );
                }
                self.drain(node);
            }
            Ev::TaskCrash { node, inc, term } => self.task_crash(node, inc, term),
            Ev::FaultStart(i) => self.fault(i, true),
            Ev::FaultEnd(i) => self.fault(i, false),
            Ev::Resume { node, inc } => self.resume(node, inc),
            Ev::Unpartition { node } => {
                if !self.healed {
                    self.net.cut(node, &[network::UP, network::DOWN], false);
                }
            }
            Ev::Restart { node, inc } => {
                let n = &self.cluster.nodes[node];
                if n.inc == inc && n.engine.is_none() {
                    self.boot(node);
                }
            }
            Ev::Scripted { node, call } => {
                if self.cluster.nodes[node].engine.is_some() {
                    self.api(node, call);
                }
            }
            Ev::Heal => self.heal(),
            Ev::End => {}
        }
    }

    /// Acts on one output of `node`'s engine.
    fn on_output(&mut self, node: usize, out: Output) {
        if self.trace {
            eprintln!(
                "{:>16} node {node} local {} -> {out:?}",
                "",
                self.local(node)
            );
        }
        match out {
            Output::Command(cmd) => {
                self.mix(100 + command_code(&cmd));
                self.mix(cmd.op().0);
                let l = self.local(node);
                // A batch (S4.7) is seen call by call: each was sent now.
                for one in calls_of(&cmd) {
                    self.observe(&Observed::Sent {
                        node,
                        cmd: one,
                        local: l,
                    });
                    if let Command::Acquire { name, .. } = one {
                        let n = &mut self.cluster.nodes[node];
                        let mut i = 0;
                        while i < n.armed.len() {
                            if &n.armed[i].0 == name {
                                let (_, call) = n.armed.remove(i);
                                n.fire_now.push(call);
                            } else {
                                i += 1;
                            }
                        }
                    }
                    if matches!(one, Command::Renew { .. } | Command::Acquire { .. }) {
                        let f = &mut self.faults.nodes[node];
                        if let Some(d) = f.pause_armed.take() {
                            f.pause_now = Some(d);
                        }
                    }
                }
                let inc = self.cluster.nodes[node].inc;
                self.send_up(node, inc, cmd);
            }
            Output::Event(Event::Elected { term }) => {
                let id = term.id;
                self.on_event(node, Event::Elected { term });
                let reject = self.p.workload.reject_permille;
                if !self.healed && self.chance(reject) {
                    // S7.7: the callback executor refuses `on_elected`:
                    // nobody learns of the term, its task never starts and
                    // its `on_revoked` must not come.
                    self.report.rejected += 1;
                    if let Some(rec) = self.cluster.nodes[node].terms.get_mut(&id) {
                        rec.revoked = Some(RevokeReason::Stopped);
                    }
                    self.prune(node, id);
                    let l = self.local(node);
                    if let Some(e) = self.cluster.nodes[node].engine.as_mut() {
                        e.handle(l, Input::ElectedRejected { term: id });
                    }
                }
            }
            Output::Event(ev) => self.on_event(node, ev),
            Output::Task(TaskOrder::Start { term }) => self.task_start(node, term),
            Output::Task(TaskOrder::Interrupt { term }) => self.task_interrupt(node, term),
        }
    }

    /// Records one event of `node`'s engine, as its application would see
    /// it, and tells the checkers.
    fn on_event(&mut self, node: usize, ev: Event) {
        let l = self.local(node);
        match ev {
            Event::Elected { term } => {
                self.mix(200);
                self.mix(term.id.0);
                self.mix(term.token.get());
                self.report.terms += 1;
                self.report.elections.push((
                    Duration::from_nanos(self.queue.now),
                    node,
                    term.name.clone(),
                    term.token.get(),
                ));
                let api = self.cluster.nodes[node].api.get(&term.name).cloned();
                self.observe(&Observed::Elected {
                    node,
                    term: &term,
                    api: api.as_ref(),
                    local: l,
                });
                if let Some(Api::Lock { had_term: false }) = api {
                    self.cluster.nodes[node]
                        .api
                        .insert(term.name.clone(), Api::Lock { had_term: true });
                }
                let order = self.next_order;
                self.next_order += 1;
                let name = term.name.clone();
                self.cluster.nodes[node].terms.insert(
                    term.id,
                    TermRec {
                        term,
                        order,
                        elected_step: self.report.steps,
                        revoked: None,
                        revoke_deadline: None,
                        task: TaskState::None,
                    },
                );
                self.observe(&Observed::HoldersMayChange { name: &name });
            }
            Event::Revoked { term, reason } => {
                self.mix(201);
                self.mix(term.id.0);
                self.report.revocations.push((
                    Duration::from_nanos(self.queue.now),
                    node,
                    term.name.clone(),
                    format!("{reason:?}"),
                ));
                self.observe(&Observed::Revoked { node, term: &term });
                let n = &mut self.cluster.nodes[node];
                let mut revoked = false;
                let dl = n.deadlines.get(&term.session).copied();
                if let Some(rec) = n.terms.get_mut(&term.id) {
                    if rec.revoked.is_none() {
                        rec.revoked = Some(reason);
                        rec.revoke_deadline = dl;
                        revoked = true;
                    }
                }
                if revoked {
                    self.prune(node, term.id);
                }
            }
            Event::DeadlineChanged { session, deadline } => {
                self.mix(202);
                self.mix(deadline.as_nanos());
                let old = self.cluster.nodes[node].deadlines.insert(session, deadline);
                self.observe(&Observed::DeadlineChanged {
                    node,
                    old,
                    new: deadline,
                    local: l,
                });
                if old.is_none_or(|o| deadline > o) {
                    let names: Vec<LeaseName> = self.cluster.nodes[node]
                        .terms
                        .values()
                        .filter(|r| r.term.session == session && r.revoked.is_none())
                        .map(|r| r.term.name.clone())
                        .collect();
                    for name in names {
                        self.observe(&Observed::HoldersMayChange { name: &name });
                    }
                }
            }
            Event::Completed { name, .. } => {
                self.mix(203);
                self.observe(&Observed::Completed { node, name: &name });
                match self.cluster.nodes[node].api.get(&name).cloned() {
                    Some(Api::SteppingDown { until }) => {
                        self.cluster.nodes[node].api.insert(
                            name,
                            Api::Election {
                                cooldown_until: Some(until),
                            },
                        );
                    }
                    Some(Api::Election { .. }) | None => {}
                    Some(Api::Stopping) if self.healed => {
                        // After healing every node competes for every election.
                        self.cluster.nodes[node].api.remove(&name);
                        let inc = self.cluster.nodes[node].inc;
                        self.push(
                            self.queue.now,
                            Ev::Api {
                                node,
                                inc,
                                call: ApiCall::Start(name),
                            },
                        );
                    }
                    Some(_) => {
                        self.cluster.nodes[node].api.remove(&name);
                    }
                }
            }
            Event::LockFailed { name, .. } => {
                self.mix(204);
                let api = &mut self.cluster.nodes[node].api;
                if matches!(api.get(&name), Some(Api::Lock { .. })) {
                    api.remove(&name);
                }
            }
            Event::TaskEnded { term, action, .. } => {
                self.mix(204);
                self.mix(term.id.0);
                if let simba_core::TaskExitAction::SteppedDown { cooldown, .. } = action {
                    // S6.5's back-off: the liveness phase allows for it.
                    self.task_backoff.insert((node, term.name), l + cooldown);
                }
            }
            Event::Closed => {
                self.mix(205);
                self.observe(&Observed::Closed { node });
                // The process exits once this drain is over (anything the
                // engine says after `Closed` is checked); it restarts later
                // as a new process.
                self.cluster.nodes[node].closed = true;
            }
            Event::Diagnostic { level, message } => {
                self.observe(&Observed::Diagnostic {
                    node,
                    level,
                    message: &message,
                });
                if level == Level::Warn {
                    self.report.warnings += 1;
                }
            }
            Event::SessionLeaseShortened { session, .. } => {
                self.mix(207);
                self.report.leases_shortened += 1;
                self.observe(&Observed::LeaseShortened { node, session });
            }
            // No workload here claims schedule slots: schedules run through
            // the real client, in the client campaign (`client.rs`).
            Event::SlotClaimed { .. } => self.mix(208),
            Event::SessionStateChanged { .. } | Event::BackendFailed { .. } => self.mix(206),
            Event::GroupChanged {
                group,
                members,
                target,
            } => {
                self.mix(207);
                self.observe(&Observed::GroupChanged {
                    node,
                    group: &group,
                    members: &members,
                    target: &target,
                });
            }
            Event::GroupFailed { .. } => self.mix(207),
            // Said by `Completed`, `LockFailed` or `GroupFailed` just before,
            // or by the lock's involuntary `Revoked` (S5.3).
            Event::Ended { .. } => {}
        }
    }

    /// The end of the run: the checkers judge what must have happened.
    fn finish(&mut self) {
        let (checks, cx, mut out) = self.checkers();
        checks.finish(&cx, &mut out);
    }
}

fn command_code(c: &Command) -> u64 {
    match c {
        Command::OpenSession { .. } => 1,
        Command::Renew { .. } => 2,
        Command::Acquire { .. } => 3,
        Command::Release { .. } => 4,
        Command::CloseSession { .. } => 5,
        Command::JoinGroup { .. } => 6,
        Command::LeaveGroup { .. } => 7,
        Command::ClaimSlot { .. } => 8,
        Command::Withdraw { .. } => 9,
        Command::Batch { calls } => calls
            .iter()
            .fold(10, |code, c| code.wrapping_mul(31) ^ command_code(c)),
    }
}

/// The replies `input` carries: those of a batch (S4.7), else itself.
pub(crate) fn calls_of_reply(input: &Input) -> &[Input] {
    match input {
        Input::Batch { replies } => replies,
        one => std::slice::from_ref(one),
    }
}

/// The calls `cmd` carries: those of a batch (S4.7), else itself.
pub(crate) fn calls_of(cmd: &Command) -> &[Command] {
    match cmd {
        Command::Batch { calls } => calls,
        one => std::slice::from_ref(one),
    }
}

fn input_code(i: &Input) -> u64 {
    match i {
        Input::SessionOpened { op, .. } => 10 + (op.0 << 8),
        Input::RenewReplied { op, .. } => 11 + (op.0 << 8),
        Input::AcquireReplied { op, .. } => 12 + (op.0 << 8),
        Input::ReleaseReplied { op, .. } => 13 + (op.0 << 8),
        Input::SessionClosed { op, .. } => 14 + (op.0 << 8),
        Input::ReleaseBroadcast { .. } => 15,
        Input::TaskExited { term, outcome } => {
            let o = match outcome {
                TaskOutcome::Returned => 0,
                TaskOutcome::Failed => 1,
                TaskOutcome::Panicked => 2,
            };
            16 + (o << 4) + (term.0 << 8)
        }
        Input::ElectedRejected { term } => 17 + (term.0 << 8),
        Input::GroupJoined { op, .. } => 18 + (op.0 << 8),
        Input::GroupLeft { op, .. } => 19 + (op.0 << 8),
        Input::SlotClaimed { op, .. } => 20 + (op.0 << 8),
        Input::WithdrawReplied { op, .. } => 21 + (op.0 << 8),
        Input::Batch { replies } => replies
            .iter()
            .fold(22, |code, r| code.wrapping_mul(31) ^ input_code(r)),
    }
}
