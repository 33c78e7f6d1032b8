//! The simulated cluster: nodes running unchanged engines, the simulated
//! backend, the network between them, the workload, the fault schedule, and
//! the checkers, run after every step.

use crate::backend::{At, SimBackend};
use crate::clock::Clock;
use crate::core_api::{BackendProfile, Engine, LockWait};
use crate::params::{Direction, FaultKind, RunParams, ScriptCall};
use queue::{Ev, Queue};
use simba_core::{
    AcquireOutcome, ApiError, BackendError, BackendErrorKind, Command, Event, Fraction, Input,
    LeaseName, Level, Output, RevokeReason, SessionId, TaskOrder, TaskOutcome, Term, TermId,
    Timestamp, Token,
};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::Duration;

mod queue;
mod schedule;

/// A broken rule, found by a checker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// True time of the step that broke it.
    pub at: Duration,
    /// Which checker fired (cites the SPEC rule).
    pub checker: &'static str,
    /// What happened.
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{:?}] {}: {}", self.at, self.checker, self.message)
    }
}

/// The outcome of one run.
#[derive(Clone, Debug, Default)]
pub struct RunReport {
    /// The run's seed.
    pub seed: u64,
    /// Hash of the trace (every processed event and engine output).
    pub trace_hash: u64,
    /// True time simulated.
    pub simulated: Duration,
    /// Steps processed.
    pub steps: u64,
    /// Checker violations (the run stops at the first one, unless
    /// [`World::keep_going`]).
    pub violations: Vec<Violation>,
    /// Faults injected, by kind.
    pub faults: BTreeMap<&'static str, u64>,
    /// Terms started (Elected events).
    pub terms: u64,
    /// Writes that reached the registers.
    pub writes: u64,
    /// Writes the unfenced register accepted from an older term after a newer one.
    pub unfenced_anomalies: u64,
    /// Writes the fenced register refused (stale tokens).
    pub fenced_rejections: u64,
    /// `SessionLeaseShortened` events (S8.4).
    pub leases_shortened: u64,
    /// `on_elected` calls the callback executor refused (S7.7).
    pub rejected: u64,
    /// Warnings the engines logged.
    pub warnings: u64,
    /// Messages lost to loss or partitions.
    pub messages_lost: u64,
    /// Every election: (true time, node, name, token), in order.
    pub elections: Vec<(Duration, usize, LeaseName, u64)>,
    /// Every revocation: (true time, node, name, reason), in order.
    pub revocations: Vec<(Duration, usize, LeaseName, String)>,
    /// Stale writes the fenced register accepted (each also a violation).
    pub fenced_stale_accepted: u64,
    /// The liveness bound of the run ([`RunParams::liveness_bound`](crate::RunParams::liveness_bound),
    /// plus what is left past `max_cooldown` of an S6.5 back-off at healing).
    pub liveness_bound: Duration,
    /// The longest time from healing to a leader, over the contended names.
    pub max_time_to_leader: Option<Duration>,
    /// Scheduled runs started (S11).
    pub scheduled_runs: u64,
    /// Slot claims answered `Claimed` with `run` (S11.1).
    pub slots_claimed: u64,
    /// Slot claims answered `AlreadyClaimed` (S11.1, S11.2).
    pub slots_already_claimed: u64,
    /// Leases an outside actor removed from a live, elected holder
    /// (`lease removed` faults that found one, S3.4).
    pub leases_removed: u64,
    /// Of those, the terms whose holder reached a renewal that had to tell
    /// it (its first renewal sent after the removal, answered and taken),
    /// judged by the `taken over (S3.4)` checker. The others ended first.
    pub removals_judged: u64,
    /// The run's swarm, one line ([`RunParams::swarm`]).
    pub swarm: String,
    /// The optional workloads and faults it had on ([`RunParams::swarm_on`]).
    pub swarm_on: Vec<&'static str>,
}

#[derive(Clone, Debug)]
pub(super) enum ApiCall {
    Random,
    Start(LeaseName),
    Stop(LeaseName),
    StepDown(LeaseName, Duration),
    Lock(LeaseName, LockSpec, bool),
    Close,
}

#[derive(Clone, Copy, Debug)]
pub(super) enum LockSpec {
    Try,
    For(Duration),
    Forever,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum NodeState {
    Up,
    Paused,
    Down,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TaskState {
    None,
    Running,
    Interrupted,
    Exited,
}

#[derive(Clone, Debug)]
struct TermRec {
    term: Term,
    order: u64,
    /// The world's step at which the node was elected.
    elected_step: u64,
    revoked: Option<RevokeReason>,
    /// The session's local deadline when the term was revoked: a voluntary
    /// handover waits for the task at most until then (S6.1 step 3, S6.2).
    revoke_deadline: Option<Timestamp>,
    task: TaskState,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Api {
    Election {
        cooldown_until: Option<Timestamp>,
    },
    Stopping,
    SteppingDown {
        until: Timestamp,
    },
    Lock {
        had_term: bool,
    },
    LockStopping,
    /// A partition of a group the node joined (S10).
    Partition,
}

struct Node {
    clock: Clock,
    engine: Option<Engine>,
    inc: u64,
    state: NodeState,
    timer_gen: u64,
    timer_at: Option<u64>,
    deferred: Vec<Ev>,
    deadlines: BTreeMap<SessionId, Timestamp>,
    terms: BTreeMap<TermId, TermRec>,
    api: BTreeMap<LeaseName, Api>,
    armed: Vec<(LeaseName, ApiCall)>,
    fire_now: Vec<ApiCall>,
    pause_armed: Option<Duration>,
    delay_grant: Option<Duration>,
    slow_renewal: Option<Duration>,
    pause_now: Option<Duration>,
    stuck: (u64, u32),
    closing: Option<u64>,
    closed: bool,
    shortened: std::collections::BTreeSet<SessionId>,
}

/// A `Held` reply a node's current attempt got: (session, local arrival,
/// holder, token, holder's expiry in backend ns).
type SeenHeld = (SessionId, Timestamp, SessionId, Token, u64);

/// What the S4.4 expiry-timing checker remembers. An attempt a node makes
/// sooner after a `Held` reply than any normal retry could (`renew_interval
/// / 2`, S4.1), with the same session and nothing in between that resets the
/// schedule (a release broadcast, an API call, a restart), can only have
/// been timed by that reply's `holder_remaining` (S4.4). Such an attempt
/// must reach the backend after the expiry of the holder it was timed for,
/// unless that holder renewed, released or closed meanwhile: otherwise it is
/// a backend call wasted on a wrong timing. Off where clocks step (S2.5) or
/// the mode breaks the drift bound on purpose.
///
/// The `Held` reply counted is the one the engine acted on: the *first*
/// reply to the node's *current* attempt, before that attempt timed out
/// (S2.4), with no release broadcast or API call for the node since the
/// attempt was sent. A broadcast while the attempt is out makes the engine
/// retry at once when the reply comes (S4.2); a `step_down(cooldown)` while
/// it is out makes the reply unused and the next attempt wait for the
/// cooldown's end; a duplicate reply is stale. Each of these looked like an
/// early attempt to an earlier, coarser version of this checker.
#[derive(Default)]
struct ExpiryTiming {
    /// Whether it runs: always, unless the run's faults or mode break the
    /// timing assumptions on purpose (clock steps, S2.5; a must-fail mode).
    enabled: bool,
    /// Per (node, name): the node's latest acquire (op, session, local send time).
    sent: BTreeMap<(usize, LeaseName), (u64, SessionId, Timestamp)>,
    /// Per (node, op): each `Held` answer with `holder_remaining`, as the
    /// backend gave it: (name, holder, token, holder's expiry in backend ns,
    /// the `holder_remaining` it reported). A command the network
    /// duplicated is answered twice, and the holder may renew in between:
    /// a delivered reply is matched to the answer it carries.
    answers: BTreeMap<(usize, u64), Vec<HeldAnswer>>,
    /// Per (node, name): the `Held` reply the node's current attempt got:
    /// (session, local arrival, holder, token, holder's expiry).
    seen: BTreeMap<(usize, LeaseName), SeenHeld>,
    /// Per (node, op): an attempt timed by a `Held` reply: (holder, token,
    /// holder's expiry, local time of that reply).
    timed: BTreeMap<(usize, u64), (SessionId, Token, u64, Timestamp)>,
}

impl ExpiryTiming {
    fn forget_node(&mut self, node: usize) {
        self.sent.retain(|(n, _), _| *n != node);
        self.answers.retain(|(n, _), _| *n != node);
        self.seen.retain(|(n, _), _| *n != node);
        self.timed.retain(|(n, _), _| *n != node);
    }
}

/// One `Held` answer of the backend, as the S4.4 checker remembers it:
/// (name, holder, token, holder's expiry in backend ns, reported remaining).
type HeldAnswer = (LeaseName, SessionId, Token, u64, Duration);

/// A lease an outside actor removed from a live holder (a `lease removed`
/// fault), as the S3.4 checker remembers it until the holder's first
/// renewal sent after the removal is answered and taken.
#[derive(Clone, Debug)]
struct Removal {
    /// The world's step of the removal.
    step: u64,
    /// The holder's node.
    node: usize,
    /// The holder's term: its session, name and token are those the
    /// backend dropped.
    term: TermId,
    session: SessionId,
}

#[derive(Clone, Debug, Default)]
struct Registers {
    fenced_max: Option<Token>,
    fenced_last_order: Option<u64>,
    unfenced_last_order: Option<u64>,
}

/// A simulated cluster, ready to run.
pub struct World {
    p: RunParams,
    profile: BackendProfile,
    rng: fastrand::Rng,
    /// Event scheduling and true time.
    queue: Queue,
    nodes: Vec<Node>,
    backend: SimBackend,
    backend_clock: Clock,
    backend_down: u32,
    expiry_gen: u64,
    expiry_at: Option<u64>,
    slow: BTreeMap<usize, Duration>,
    partitions: Vec<[u32; 2]>,
    healed: bool,
    heal_at: u64,
    registers: BTreeMap<LeaseName, Registers>,
    last_token: BTreeMap<LeaseName, Token>,
    next_order: u64,
    liveness: BTreeMap<LeaseName, Option<u64>>,
    /// A holder seen after healing, not yet valid for a renewal period:
    /// (first seen, last seen valid, node, term).
    candidates: BTreeMap<LeaseName, (u64, u64, usize, TermId)>,
    pending: BTreeMap<(usize, LeaseName), (&'static str, u64)>,
    /// The S4.4 expiry-timing checker's records (see [`ExpiryTiming`]).
    s44: ExpiryTiming,
    /// The S4.1 one-attempt-in-flight checker: per (node, name), the
    /// node's acquire not yet answered (op, session, local send time, the
    /// call timeout in force at the send).
    in_flight: BTreeMap<(usize, LeaseName), (u64, SessionId, Timestamp, Duration)>,
    /// The S2.4 renewal-timeout checker: per (node, op), a renewal's local
    /// send time and the call timeout in force then; and for the S3.4
    /// checker, its session and the world's step of the send.
    renews: BTreeMap<(usize, u64), (Timestamp, Duration, SessionId, u64)>,
    /// The S3.4 checker: leases removed from live holders, not yet judged.
    removals: Vec<Removal>,
    /// Every (node, term) whose lease an outside actor removed, while the
    /// node's process lives: the S6.1 handover order cannot hold for them.
    removed_terms: std::collections::BTreeSet<(usize, TermId)>,
    /// Per node: the local time of its engine's latest `handle_timeout`.
    woken_at: BTreeMap<usize, Timestamp>,
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
    sched: schedule::Schedules,
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
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
            acquire_slots: None,
        };
        let nodes = clocks
            .into_iter()
            .map(|clock| Node {
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
                pause_armed: None,
                delay_grant: None,
                slow_renewal: None,
                pause_now: None,
                stuck: (0, 0),
                closing: None,
                closed: false,
                shortened: std::collections::BTreeSet::new(),
            })
            .collect();
        let heal_at = nanos(params.safety_phase);
        // S4.4 timing assumes the drift bound and no clock steps (S2.5).
        let s44_enabled = !params.mode.must_fail()
            && !params.faults.iter().any(|f| {
                matches!(
                    f.kind,
                    FaultKind::NodeClockStep { .. } | FaultKind::BackendClockStep { .. }
                )
            });
        let report = RunReport {
            seed: params.seed,
            liveness_bound: params.liveness_bound(),
            swarm: params.swarm(),
            swarm_on: params.swarm_on(),
            ..RunReport::default()
        };
        World {
            backend: SimBackend::new(params.backend.clone(), params.seed ^ 0xB4C0),
            partitions: vec![[0, 0]; params.nodes],
            p: params,
            profile,
            rng,
            queue: Queue::default(),
            nodes,
            backend_clock,
            backend_down: 0,
            expiry_gen: 0,
            expiry_at: None,
            slow: BTreeMap::new(),
            healed: false,
            heal_at,
            registers: BTreeMap::new(),
            last_token: BTreeMap::new(),
            next_order: 0,
            liveness: BTreeMap::new(),
            candidates: BTreeMap::new(),
            pending: BTreeMap::new(),
            in_flight: BTreeMap::new(),
            renews: BTreeMap::new(),
            removals: Vec::new(),
            removed_terms: std::collections::BTreeSet::new(),
            woken_at: BTreeMap::new(),
            task_backoff: BTreeMap::new(),
            s44: ExpiryTiming {
                enabled: s44_enabled,
                ..ExpiryTiming::default()
            },
            report,
            hash: 0xcbf2_9ce4_8422_2325,
            stop_on_violation: true,
            removal_exceptions: true,
            trace: false,
            sched: schedule::Schedules::default(),
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
        permille > 0 && self.rng.u32(..1000) < permille
    }

    fn uniform(&mut self, max: Duration) -> u64 {
        let m = nanos(max);
        if m == 0 {
            0
        } else {
            self.rng.u64(..m)
        }
    }

    fn local(&self, node: usize) -> Timestamp {
        self.nodes[node].clock.local(self.queue.now)
    }

    fn violation(&mut self, checker: &'static str, message: String) {
        self.report.violations.push(Violation {
            at: Duration::from_nanos(self.queue.now),
            checker,
            message,
        });
    }

    fn api_state(&self, node: usize, name: &LeaseName) -> Option<&Api> {
        self.nodes[node].api.get(name)
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
            if sc.node < self.nodes.len() {
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
                if self.nodes[node].state == NodeState::Paused {
                    self.nodes[node].deferred.push(ev);
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
        self.report
    }

    fn step(&mut self, ev: Ev) {
        match ev {
            Ev::Timer { node, gen } => {
                let n = &mut self.nodes[node];
                if gen != n.timer_gen || n.engine.is_none() {
                    return;
                }
                n.timer_at = None;
                if n.stuck.0 == self.queue.now {
                    n.stuck.1 += 1;
                } else {
                    n.stuck = (self.queue.now, 0);
                }
                if n.stuck.1 > 1_000 {
                    self.violation(
                        "timer (STYLE)",
                        format!("node {node}: poll_timeout() did not move after 1000 timeouts at one instant"),
                    );
                    self.nodes[node].engine = None;
                    return;
                }
                let l = self.local(node);
                if let Some(e) = self.nodes[node].engine.as_mut() {
                    e.handle_timeout(l);
                    self.woken_at.insert(node, l);
                }
                self.drain(node);
            }
            Ev::ToNode { node, inc, input } => {
                if self.nodes[node].inc != inc || self.nodes[node].engine.is_none() {
                    return;
                }
                self.mix(node as u64);
                self.mix(input_code(&input));
                let l = self.local(node);
                if self.trace {
                    eprintln!("{:>16} node {node} local {l} <- {input:?}", "");
                }
                if let Input::AcquireReplied { op, .. } = &input {
                    self.in_flight
                        .retain(|(n, _), (o, _, _, _)| !(*n == node && *o == op.0));
                }
                self.s44_delivered(node, &input, l);
                // A reply that arrives after the call timed out, once the
                // engine has been woken after that instant (it then had to
                // fail the call, S2.4). A reply that comes before that wake
                // (e.g. a paused node resumes and reads its socket first)
                // may still be taken: the deadline counts from the send.
                let woken = self.woken_at.get(&node).copied();
                let renewal = match &input {
                    Input::RenewReplied { op, result } => self
                        .renews
                        .remove(&(node, op.0))
                        .map(|r| (op.0, r, result.is_ok())),
                    _ => None,
                };
                let late_renewal = renewal
                    .filter(|(_, (sent, timeout, _, _), _)| {
                        woken.is_some_and(|w| w >= *sent + *timeout)
                    })
                    .map(|(op, (sent, timeout, _, _), _)| (op, l - sent, timeout));
                let mut stale = None;
                if let Some(e) = self.nodes[node].engine.as_mut() {
                    let before = e.stats().stale_replies;
                    e.handle(l, input);
                    stale = Some(e.stats().stale_replies > before);
                }
                if let (Some((op, age, timeout)), Some(false)) = (late_renewal, stale) {
                    self.violation(
                        "renewal timeout (S2.4)",
                        format!(
                            "node {node} acted on the reply to renewal {op}, {age:?} after \
                             its send, though woken after its call timeout ({timeout:?})"
                        ),
                    );
                }
                self.drain(node);
                if let (Some((op, (_, _, session, sent_step), true)), Some(false)) =
                    (renewal, stale)
                {
                    self.check_taken_over(node, op, session, sent_step);
                }
            }
            Ev::ToBackend { node, inc, cmd } => self.on_backend(node, inc, cmd),
            Ev::BackendExpiry { gen } => {
                if gen == self.expiry_gen {
                    self.expiry_at = None;
                    let b = self.backend_clock.local(self.queue.now).as_nanos();
                    self.backend.expire(b);
                    self.after_backend();
                }
            }
            Ev::Api { node, inc, call } => {
                if self.nodes[node].inc == inc && self.nodes[node].engine.is_some() {
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
                if self.nodes[node].inc == inc {
                    let d = self.delay();
                    self.push(self.queue.now + d, Ev::WriteArrives { name, order, token });
                }
            }
            Ev::WriteArrives { name, order, token } => self.write_arrives(name, order, token),
            Ev::TaskExit { node, inc, term } => {
                if self.nodes[node].inc != inc {
                    return;
                }
                if let Some(rec) = self.nodes[node].terms.get_mut(&term) {
                    rec.task = TaskState::Exited;
                }
                self.prune(node, term);
                let l = self.local(node);
                if let Some(e) = self.nodes[node].engine.as_mut() {
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
                    let p = &mut self.partitions[node];
                    p[0] = p[0].saturating_sub(1);
                    p[1] = p[1].saturating_sub(1);
                }
            }
            Ev::Restart { node, inc } => {
                if self.nodes[node].inc == inc && self.nodes[node].engine.is_none() {
                    self.boot(node);
                }
            }
            Ev::Scripted { node, call } => {
                if self.nodes[node].engine.is_some() {
                    self.api(node, call);
                }
            }
            Ev::SlotTick {
                node,
                inc,
                term,
                slot,
            } => self.sched_tick(node, inc, term, slot),
            Ev::RunEnd {
                node,
                inc,
                term,
                slot,
            } => self.sched_run_end(node, inc, term, slot),
            Ev::Heal => self.heal(),
            Ev::End => {}
        }
    }

    // ---------------------------------------------------------------- nodes

    fn boot(&mut self, node: usize) {
        let inc = self.nodes[node].inc;
        let config = match self.p.config(node, inc) {
            Ok(c) => c,
            Err(e) => {
                self.violation("config (S8.1)", format!("drawn config refused: {e}"));
                return;
            }
        };
        let l = self.local(node);
        let mut engine = Engine::new(config, self.profile, l);
        // Every (re)started process joins every group (S10).
        for (group, partitions) in self.p.groups.clone() {
            if let Err(e) = engine.join_group(
                l,
                group.clone(),
                partitions,
                true,
                simba_core::TaskExitPolicy::default(),
            ) {
                self.violation("groups (S10)", format!("node {node}: join refused: {e}"));
            }
            for i in 0..partitions {
                if let Ok(n) = simba_core::partition_name(&group, i) {
                    self.nodes[node].api.insert(n, Api::Partition);
                }
            }
        }
        let n = &mut self.nodes[node];
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

    fn crash(&mut self, node: usize) {
        let n = &mut self.nodes[node];
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
        n.pause_armed = None;
        n.pause_now = None;
        n.closing = None;
        n.closed = false;
        self.pending.retain(|(n, _), _| *n != node);
        self.s44.forget_node(node);
        self.in_flight.retain(|(n, _), _| *n != node);
        self.renews.retain(|(n, _), _| *n != node);
        // The process and its terms are gone: nothing left to judge.
        self.removals.retain(|r| r.node != node);
        self.removed_terms.retain(|(n, _)| *n != node);
        self.woken_at.remove(&node);
        self.task_backoff.retain(|(n, _), _| *n != node);
    }

    fn start_pause(&mut self, node: usize, d: Duration) {
        if self.nodes[node].state != NodeState::Up || self.healed {
            return;
        }
        self.nodes[node].state = NodeState::Paused;
        let inc = self.nodes[node].inc;
        self.push(self.queue.now + nanos(d), Ev::Resume { node, inc });
    }

    fn resume(&mut self, node: usize, inc: u64) {
        let n = &mut self.nodes[node];
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
    fn drain(&mut self, node: usize) {
        loop {
            let out = match self.nodes[node].engine.as_mut() {
                Some(e) => e.poll_output(),
                None => None,
            };
            let Some(out) = out else { break };
            self.on_output(node, out);
        }
        if self.nodes[node].closed {
            let restart = self.uniform(self.p.lease_duration);
            self.crash(node);
            let inc = self.nodes[node].inc;
            self.push(self.queue.now + restart, Ev::Restart { node, inc });
            return;
        }
        while let Some(call) = self.nodes[node].fire_now.pop() {
            self.api(node, call);
        }
        if let Some(d) = self.nodes[node].pause_now.take() {
            self.start_pause(node, d);
        }
        self.rearm_timer(node);
    }

    fn rearm_timer(&mut self, node: usize) {
        let now = self.queue.now;
        let n = &mut self.nodes[node];
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
                match &cmd {
                    Command::Release {
                        session,
                        name,
                        token,
                        ..
                    } => self.check_release(node, *session, name, *token),
                    // The engine withdraws only a wait it gave up (S4.5: a
                    // partition left its member's target, as at `stop()`):
                    // a later acquire of the name is a new attempt (S4.1).
                    Command::Withdraw { name, .. } => {
                        self.in_flight.remove(&(node, name.clone()));
                    }
                    Command::Acquire {
                        op, session, name, ..
                    } => {
                        let l = self.local(node);
                        self.s41_sent(node, op.0, *session, name, l);
                        self.s44_sent(node, op.0, *session, name, l);
                        let n = &mut self.nodes[node];
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
                    _ => {}
                }
                if let Command::Renew { op, session } = &cmd {
                    let at = (
                        self.local(node),
                        self.call_timeout(node),
                        *session,
                        self.report.steps,
                    );
                    if self.renews.len() >= 4096 {
                        self.renews.pop_first();
                    }
                    self.renews.insert((node, op.0), at);
                }
                if matches!(cmd, Command::Renew { .. } | Command::Acquire { .. }) {
                    if let Some(d) = self.nodes[node].pause_armed.take() {
                        self.nodes[node].pause_now = Some(d);
                    }
                }
                let inc = self.nodes[node].inc;
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
                    if let Some(rec) = self.nodes[node].terms.get_mut(&id) {
                        rec.revoked = Some(RevokeReason::Stopped);
                    }
                    self.prune(node, id);
                    let l = self.local(node);
                    if let Some(e) = self.nodes[node].engine.as_mut() {
                        e.handle(l, Input::ElectedRejected { term: id });
                    }
                }
            }
            Output::Event(ev) => self.on_event(node, ev),
            Output::Task(TaskOrder::Start { term }) => self.task_start(node, term),
            Output::Task(TaskOrder::Interrupt { term }) => self.task_interrupt(node, term),
        }
    }

    // ------------------------------------------------------------- checkers

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
                let state = self.api_state(node, &term.name).cloned();
                match state {
                    Some(Api::Election { cooldown_until }) => {
                        if let Some(until) = cooldown_until {
                            if l < until {
                                self.violation(
                                    "step_down cooldown (S6.4)",
                                    format!(
                                        "node {node} elected for {} during its cooldown",
                                        term.name
                                    ),
                                );
                            }
                        }
                    }
                    Some(Api::Lock { had_term: false }) => {
                        self.nodes[node]
                            .api
                            .insert(term.name.clone(), Api::Lock { had_term: true });
                    }
                    Some(Api::Partition) => {}
                    Some(Api::Lock { had_term: true }) => self.violation(
                        "lock takes one term (S5.3)",
                        format!("node {node}: second term for lock {}", term.name),
                    ),
                    other => self.violation(
                        "callbacks (S7.3, S6.4)",
                        format!(
                            "node {node} elected for {} ({}) while its election is {other:?}",
                            term.name, term.id
                        ),
                    ),
                }
                if self.nodes[node].closed {
                    self.violation(
                        "close (S1.4, S7.3)",
                        format!("node {node} elected for {} after Closed", term.name),
                    );
                }
                if self.nodes[node]
                    .terms
                    .values()
                    .any(|r| r.term.name == term.name && r.revoked.is_none())
                {
                    self.violation(
                        "callbacks (S7.1)",
                        format!(
                            "node {node}: {} elected for {} before the previous term was revoked",
                            term.id, term.name
                        ),
                    );
                }
                if self.nodes[node].terms.contains_key(&term.id) {
                    self.violation(
                        "callbacks (S7.1)",
                        format!("node {node}: {} elected twice", term.id),
                    );
                }
                let deadline = self.nodes[node].deadlines.get(&term.session).copied();
                if deadline.is_none_or(|d| l >= d) {
                    self.violation(
                        "late acquire (S4.3)",
                        format!(
                            "node {node} elected for {} with token {} at local {l} after its session's deadline {deadline:?}",
                            term.name, term.token
                        ),
                    );
                }
                if let Some(last) = self.last_token.get(&term.name) {
                    if term.token <= *last {
                        self.violation(
                            "fencing tokens (S3.2)",
                            format!(
                                "node {node} elected for {} with token {} after a term with token {last}",
                                term.name, term.token
                            ),
                        );
                    }
                }
                let last = self
                    .last_token
                    .entry(term.name.clone())
                    .or_insert(term.token);
                *last = (*last).max(term.token);
                let order = self.next_order;
                self.next_order += 1;
                let name = term.name.clone();
                self.nodes[node].terms.insert(
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
                self.check_mutex(&name);
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
                let dl = self.nodes[node].deadlines.get(&term.session).copied();
                let r = self.nodes[node].terms.get_mut(&term.id);
                match r {
                    None => self.violation(
                        "callbacks (S7.1)",
                        format!(
                            "node {node}: {} revoked but never elected (or after exit)",
                            term.id
                        ),
                    ),
                    Some(rec) if rec.revoked.is_some() => self.violation(
                        "callbacks (S7.1)",
                        format!("node {node}: {} revoked twice", term.id),
                    ),
                    Some(rec) => {
                        rec.revoked = Some(reason);
                        rec.revoke_deadline = dl;
                        self.prune(node, term.id);
                    }
                }
            }
            Event::DeadlineChanged { session, deadline } => {
                self.mix(202);
                self.mix(deadline.as_nanos());
                let old = self.nodes[node].deadlines.insert(session, deadline);
                if let Some(old) = old {
                    if old <= l && deadline > old {
                        self.violation(
                            "deadline (S2.3, S3.3)",
                            format!(
                                "node {node}: session deadline {old} had passed at {l} but moved to {deadline}"
                            ),
                        );
                    }
                }
                if old.is_none_or(|o| deadline > o) {
                    let names: Vec<LeaseName> = self.nodes[node]
                        .terms
                        .values()
                        .filter(|r| r.term.session == session && r.revoked.is_none())
                        .map(|r| r.term.name.clone())
                        .collect();
                    for name in names {
                        self.check_mutex(&name);
                    }
                }
            }
            Event::Completed { name } => {
                self.mix(203);
                self.pending.remove(&(node, name.clone()));
                match self.nodes[node].api.get(&name).cloned() {
                    Some(Api::SteppingDown { until }) => {
                        self.nodes[node].api.insert(
                            name,
                            Api::Election {
                                cooldown_until: Some(until),
                            },
                        );
                    }
                    Some(Api::Election { .. }) | None => {}
                    Some(Api::Stopping) if self.healed => {
                        // After healing every node competes for every election.
                        self.nodes[node].api.remove(&name);
                        let inc = self.nodes[node].inc;
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
                        self.nodes[node].api.remove(&name);
                    }
                }
            }
            Event::LockFailed { name } => {
                self.mix(204);
                if matches!(self.nodes[node].api.get(&name), Some(Api::Lock { .. })) {
                    self.nodes[node].api.remove(&name);
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
                let unrevoked = self.nodes[node]
                    .terms
                    .values()
                    .filter(|r| r.revoked.is_none())
                    .count();
                if unrevoked > 0 {
                    self.violation(
                        "close (S1.4)",
                        format!("node {node} closed with {unrevoked} terms not revoked"),
                    );
                }
                if self.nodes[node].closing.is_none() {
                    self.violation(
                        "close (S1.4)",
                        format!("node {node}: Closed without close()"),
                    );
                }
                // The process exits once this drain is over (anything the
                // engine says after `Closed` is checked); it restarts later
                // as a new process.
                self.nodes[node].closed = true;
            }
            Event::Diagnostic { level, message } => match level {
                Level::Error => self.violation("error log", format!("node {node}: {message}")),
                Level::Warn => self.report.warnings += 1,
            },
            Event::SessionLeaseShortened { session, .. } => {
                self.mix(207);
                self.report.leases_shortened += 1;
                if !self.nodes[node].shortened.insert(session) {
                    self.violation(
                        "lease shortened (S8.4)",
                        format!("node {node}: SessionLeaseShortened twice for one session"),
                    );
                }
            }
            Event::SlotClaimed {
                name,
                token,
                slot,
                result,
                run,
            } => self.sched_claimed(node, &name, token, slot, &result, run),
            Event::SessionStateChanged { .. } | Event::BackendFailed { .. } => self.mix(206),
            Event::GroupChanged {
                group,
                members,
                target,
            } => {
                self.mix(207);
                self.check_sticky(node, &group, &members, &target);
                // A partition dropped from this member's target abandons its
                // attempt in flight (S10.2, withdrawn, S4.5), as `stop()`
                // does an election's: a later target change may send the
                // next attempt before the old reply comes (then stale, S4.3).
                let partitions = self
                    .p
                    .groups
                    .iter()
                    .find(|(g, _)| *g == group)
                    .map_or(0, |(_, n)| *n);
                for i in (0..partitions).filter(|i| !target.contains(i)) {
                    if let Ok(name) = simba_core::partition_name(&group, i) {
                        self.in_flight.remove(&(node, name.clone()));
                        self.s44.seen.remove(&(node, name.clone()));
                        self.s44.sent.remove(&(node, name));
                    }
                }
            }
            Event::GroupFailed { .. } => self.mix(207),
        }
    }

    /// Drops a term's record once nothing can refer to it any more.
    fn prune(&mut self, node: usize, term: TermId) {
        let n = &mut self.nodes[node];
        if let Some(rec) = n.terms.get(&term) {
            if rec.revoked.is_some() && matches!(rec.task, TaskState::None | TaskState::Exited) {
                n.terms.remove(&term);
            }
        }
    }

    fn is_valid(&self, node: usize, rec: &TermRec) -> bool {
        let n = &self.nodes[node];
        rec.revoked.is_none()
            && n.deadlines
                .get(&rec.term.session)
                .is_some_and(|d| n.clock.local(self.queue.now) < *d)
    }

    /// The call timeout (S2.4) in force at `node` now.
    fn call_timeout(&self, node: usize) -> Duration {
        self.nodes[node]
            .engine
            .as_ref()
            .map(|e| e.call_timeout())
            .unwrap_or_default()
    }

    /// S4.1 checker, at a node's acquire: at most one attempt per election
    /// in flight. The previous acquire of the same name and session must
    /// have been answered, or have reached its call timeout (S2.4: the
    /// engine abandons it then), or have been abandoned by an API call or a
    /// new session.
    fn s41_sent(
        &mut self,
        node: usize,
        op: u64,
        session: SessionId,
        name: &LeaseName,
        l: Timestamp,
    ) {
        let timeout = self.call_timeout(node);
        let key = (node, name.clone());
        if let Some((prev, s, sent_l, prev_timeout)) = self.in_flight.get(&key).copied() {
            if s == session && l < sent_l + prev_timeout {
                let since = l - sent_l;
                self.violation(
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

    /// S4.4 checker, at a node's acquire: is it timed by the last `Held` reply?
    fn s44_sent(
        &mut self,
        node: usize,
        op: u64,
        session: SessionId,
        name: &LeaseName,
        l: Timestamp,
    ) {
        if !self.s44.enabled {
            return;
        }
        let key = (node, name.clone());
        if let Some((s, got, h, t, exp)) = self.s44.seen.remove(&key) {
            if s == session && l < got + self.p.renew_interval / 2 {
                self.s44.timed.insert((node, op), (h, t, exp, got));
            }
        }
        self.s44.sent.insert(key, (op, session, l));
    }

    /// S4.4 checker, when the backend receives acquire `op` of `node` at
    /// backend time `b`: an attempt timed by a `Held` reply must not find the
    /// same holder still live with the expiry it was timed for.
    fn s44_arrived(&mut self, node: usize, op: u64, name: &LeaseName, b: u64) {
        let Some((h, t, exp, got)) = self.s44.timed.remove(&(node, op)) else {
            return;
        };
        let same = self.backend.owner(name) == Some((h, t))
            && self.backend.expires_at(h) == Some(exp)
            && self.backend.live_at(h, b);
        if same {
            let early = Duration::from_nanos(exp.saturating_sub(b));
            self.violation(
                "expiry timing (S4.4)",
                format!(
                    "node {node}'s attempt on {name}, timed by the Held reply it got at local {got}, \
                     reached the backend {early:?} before the holder's expiry (the holder did not renew): \
                     a wasted call"
                ),
            );
        }
    }

    /// S4.4 checker, when `input` reaches `node` at local time `l`.
    fn s44_delivered(&mut self, node: usize, input: &Input, l: Timestamp) {
        if !self.s44.enabled {
            return;
        }
        match input {
            Input::ReleaseBroadcast { name } => {
                // The broadcast resets the schedule (S4.2): at once if no
                // attempt is out, else when the attempt's reply comes back,
                // whatever that reply says about the holder.
                self.s44.seen.remove(&(node, name.clone()));
                self.s44.sent.remove(&(node, name.clone()));
            }
            Input::AcquireReplied { op, result } => {
                // The backend's answer this reply carries (a duplicated
                // command was answered twice, maybe with different expiries).
                let answer = match result {
                    Ok(AcquireOutcome::Held {
                        holder: Some(h),
                        token: Some(t),
                        holder_remaining: Some(r),
                    }) => self.s44.answers.get_mut(&(node, op.0)).and_then(|all| {
                        let i = all
                            .iter()
                            .position(|a| a.1 == *h && a.2 == *t && a.4 == *r)?;
                        Some(all.remove(i))
                    }),
                    _ => None,
                }
                .map(|(name, h, t, exp, _)| (name, h, t, exp));
                if self
                    .s44
                    .answers
                    .get(&(node, op.0))
                    .is_some_and(|all| all.is_empty())
                {
                    self.s44.answers.remove(&(node, op.0));
                }
                // The engine acts on the first reply to its current attempt
                // only: a duplicate (the network may deliver a command or a
                // reply twice) is stale, whatever it says, so the attempt is
                // forgotten at its first reply.
                let Some(key) = self
                    .s44
                    .sent
                    .iter()
                    .find(|((n, _), (sent_op, _, _))| *n == node && *sent_op == op.0)
                    .map(|(k, _)| k.clone())
                else {
                    return;
                };
                let Some((_, session, sent_l)) = self.s44.sent.remove(&key) else {
                    return;
                };
                let Some((name, h, t, exp)) = answer else {
                    return;
                };
                // Only a reply before the attempt times out is one the engine
                // acts on (S2.4, S4.3).
                if key.1 == name && l < sent_l + self.call_timeout(node) {
                    self.s44.seen.insert(key, (session, l, h, t, exp));
                }
            }
            _ => {}
        }
    }

    /// Mutual exclusion: at this true instant, at most one node holds a
    /// valid term of `name`, each judged on its own clock.
    fn check_mutex(&mut self, name: &LeaseName) {
        let mut holders: Vec<(usize, Token, TermId)> = Vec::new();
        for (i, n) in self.nodes.iter().enumerate() {
            if n.engine.is_none() {
                continue;
            }
            for rec in n.terms.values() {
                if &rec.term.name == name && self.is_valid(i, rec) {
                    holders.push((i, rec.term.token, rec.term.id));
                }
            }
        }
        // S3.4 (runs with `lease removed` faults): a holder whose lease an
        // outside actor removed stays valid until its first renewal sent
        // after the removal is answered (Simba cannot learn it sooner; the
        // fencing token protects the resource meanwhile). Such a term is
        // left out, while its removal is not yet judged by `taken over
        // (S3.4)`, and only beside a holder with a greater token; everything
        // else counts.
        if holders.len() >= 2 && self.removal_exceptions {
            let newest = holders.iter().map(|h| h.1).max();
            let removals = &self.removals;
            holders.retain(|(i, token, term)| {
                let stolen = removals.iter().any(|r| r.node == *i && r.term == *term);
                !(stolen && Some(*token) < newest)
            });
        }
        if holders.len() >= 2 {
            self.violation(
                "mutual exclusion",
                format!("two valid holders of {name}: (node, token, term) {holders:?}"),
            );
        }
        if self.healed {
            self.observe_leader(name, holders.first().map(|h| (h.0, h.2)));
        }
    }

    /// Liveness: a leader counts once it has stayed valid for one renewal
    /// period (not any holder at one instant); its time to leader is when it
    /// was first seen. `holder` is the valid holder now, if any.
    fn observe_leader(&mut self, name: &LeaseName, holder: Option<(usize, TermId)>) {
        if !matches!(self.liveness.get(name), Some(None)) {
            return; // not contended, or already confirmed
        }
        let period = nanos(self.p.renew_interval);
        match (self.candidates.get(name).copied(), holder) {
            (Some((since, _, n, t)), Some(h)) if (n, t) == h => {
                if self.queue.now.saturating_sub(since) >= period {
                    self.liveness.insert(name.clone(), Some(since));
                    self.candidates.remove(name);
                } else {
                    self.candidates
                        .insert(name.clone(), (since, self.queue.now, n, t));
                }
            }
            (_, Some((n, t))) => {
                self.candidates
                    .insert(name.clone(), (self.queue.now, self.queue.now, n, t));
            }
            (_, None) => {
                self.candidates.remove(name);
            }
        }
    }

    /// S3.5 and S6.1 at the moment a release is sent.
    fn check_release(&mut self, node: usize, session: SessionId, name: &LeaseName, token: Token) {
        let l = self.local(node);
        let n = &self.nodes[node];
        let mut found = None;
        for rec in n.terms.values() {
            if rec.term.session == session && &rec.term.name == name && rec.term.token == token {
                found = Some(rec.clone());
            }
        }
        let Some(rec) = found else { return };
        if rec.revoked.is_none() {
            self.violation(
                "revoke before release (S3.5)",
                format!(
                    "node {node} released {name} token {token} before revoking {}",
                    rec.term.id
                ),
            );
            return;
        }
        let deadline_open = rec.revoke_deadline.is_some_and(|d| l < d);
        if rec.revoked.is_some_and(RevokeReason::is_voluntary)
            && matches!(rec.task, TaskState::Running | TaskState::Interrupted)
            && deadline_open
        {
            self.violation(
                "handover order (S6.1)",
                format!(
                    "node {node} released {name} token {token} while the task of {} still runs",
                    rec.term.id
                ),
            );
        }
    }

    fn task_start(&mut self, node: usize, term: Term) {
        self.mix(300);
        self.mix(term.id.0);
        if !self.nodes[node].terms.contains_key(&term.id) {
            self.violation(
                "task orders (S6)",
                format!("node {node}: task start for unknown or ended {}", term.id),
            );
            return;
        }
        // S6.1: after a voluntary move, the new task starts only once the old
        // one has exited (or its term's deadline has passed). The old holder
        // keeps the lease until then; a term whose lease an outside actor
        // removed (a `lease removed` fault, S3.4) no longer can, so the next
        // holder may start at once: such terms are left out.
        let relax = self.removal_exceptions;
        let mut bad = Vec::new();
        for (i, n) in self.nodes.iter().enumerate() {
            if n.engine.is_none() {
                continue;
            }
            let li = n.clock.local(self.queue.now);
            for rec in n.terms.values() {
                if rec.term.name == term.name
                    && rec.term.id != term.id
                    && !(relax && self.removed_terms.contains(&(i, rec.term.id)))
                    && rec.revoked.is_some_and(RevokeReason::is_voluntary)
                    && matches!(rec.task, TaskState::Running | TaskState::Interrupted)
                    && rec.revoke_deadline.is_some_and(|d| li < d)
                {
                    bad.push((i, rec.term.id));
                }
            }
        }
        if !bad.is_empty() {
            self.violation(
                "handover order (S6.1)",
                format!(
                    "node {node}'s task for {} started while the tasks of {bad:?} still run",
                    term.name
                ),
            );
        }
        if let Some(rec) = self.nodes[node].terms.get_mut(&term.id) {
            rec.task = TaskState::Running;
        }
        let inc = self.nodes[node].inc;
        let is_election = matches!(
            self.nodes[node].api.get(&term.name),
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
        self.sched_term_started(node, &term);
    }

    /// S6.5: an election task ends on its own (returns, fails or panics,
    /// drawn from the workload's outcomes) while its term is held; under
    /// the default policy the engine must give the term up at once, so no
    /// node holds a lease with nothing running. Not after healing: the
    /// liveness phase judges elections, not crash-looping jobs.
    fn task_crash(&mut self, node: usize, inc: u64, term: TermId) {
        if self.nodes[node].inc != inc || self.nodes[node].engine.is_none() || self.healed {
            return;
        }
        let Some(rec) = self.nodes[node].terms.get_mut(&term) else {
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
        if let Some(e) = self.nodes[node].engine.as_mut() {
            e.handle(l, Input::TaskExited { term, outcome });
        }
        self.drain(node);
        let held = self.nodes[node]
            .terms
            .get(&term)
            .is_some_and(|r| r.revoked.is_none());
        if held {
            self.violation(
                "task-exit policy (S6.5)",
                format!("node {node}: the task of {term} {outcome} but its term is still held"),
            );
        }
        self.prune(node, term);
    }

    fn task_interrupt(&mut self, node: usize, term: Term) {
        self.mix(301);
        if let Some(rec) = self.nodes[node].terms.get_mut(&term.id) {
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
        let inc = self.nodes[node].inc;
        self.push(
            self.queue.now + delay,
            Ev::TaskExit {
                node,
                inc,
                term: term.id,
            },
        );
    }

    fn task_write(&mut self, node: usize, inc: u64, term: TermId) {
        if self.nodes[node].inc != inc {
            return;
        }
        let Some(rec) = self.nodes[node].terms.get(&term).cloned() else {
            return;
        };
        if !matches!(rec.task, TaskState::Running | TaskState::Interrupted) {
            return;
        }
        let next_local = self.local(node) + self.p.workload.write_period;
        if let Some(t) = self.nodes[node].clock.true_at(next_local, self.queue.now) {
            self.push(t, Ev::TaskWrite { node, inc, term });
        }
        // A careful task checks its term before each write.
        if !self.is_valid(node, &rec) {
            return;
        }
        if let Some(d) = self.nodes[node].pause_armed.take() {
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

    fn write_arrives(&mut self, name: LeaseName, order: u64, token: Token) {
        self.report.writes += 1;
        let r = self.registers.entry(name.clone()).or_default();
        // The unfenced register takes every write.
        match r.unfenced_last_order {
            Some(last) if order < last => self.report.unfenced_anomalies += 1,
            _ => r.unfenced_last_order = Some(order),
        }
        // The fenced register refuses tokens below the highest it has seen.
        if r.fenced_max.is_some_and(|m| token < m) {
            self.report.fenced_rejections += 1;
            return;
        }
        r.fenced_max = Some(token);
        let stale = r.fenced_last_order.is_some_and(|last| order < last);
        r.fenced_last_order = Some(r.fenced_last_order.map_or(order, |l| l.max(order)));
        if stale {
            self.report.fenced_stale_accepted += 1;
            self.violation(
                "fenced register",
                format!("{name}: accepted a write of an older term (token {token}) after a newer term's"),
            );
        }
    }

    // -------------------------------------------------------------- network

    fn delay(&mut self) -> u64 {
        let net = &self.p.net;
        let (tail, tail_max, min, jitter) =
            (net.tail_permille, net.tail_max, net.min_delay, net.jitter);
        if !self.healed && self.chance(tail) {
            self.uniform(tail_max)
        } else {
            nanos(min) + self.uniform(jitter)
        }
    }

    fn copies(&mut self, partitioned: bool) -> u32 {
        if self.healed {
            return 1;
        }
        let (loss, dup) = (self.p.net.loss_permille, self.p.net.dup_permille);
        if partitioned || self.chance(loss) {
            self.report.messages_lost += 1;
            return 0;
        }
        if self.chance(dup) {
            2
        } else {
            1
        }
    }

    fn send_up(&mut self, node: usize, inc: u64, cmd: Command) {
        let blocked = self.partitions[node][0] > 0;
        let copies = self.copies(blocked);
        for _ in 0..copies {
            let d = self.delay();
            self.push(
                self.queue.now + d,
                Ev::ToBackend {
                    node,
                    inc,
                    cmd: cmd.clone(),
                },
            );
        }
    }

    fn send_down(&mut self, node: usize, inc: u64, input: Input) {
        let blocked = self.partitions[node][1] > 0;
        let copies = self.copies(blocked);
        let slow = self.slow.values().copied().max().unwrap_or_default();
        for _ in 0..copies {
            let d = self.delay() + self.uniform(slow);
            self.push(
                self.queue.now + d,
                Ev::ToNode {
                    node,
                    inc,
                    input: input.clone(),
                },
            );
        }
    }

    fn on_backend(&mut self, node: usize, inc: u64, cmd: Command) {
        let b = self.backend_clock.local(self.queue.now).as_nanos();
        let down = || BackendError::new(BackendErrorKind::Unavailable, "backend restarting");
        let up = self.backend_down == 0;
        let acquired = match &cmd {
            Command::Acquire { op, name, .. } => Some((op.0, name.clone())),
            _ => None,
        };
        if let (true, Some((op, name))) = (up, &acquired) {
            self.s44_arrived(node, *op, name, b);
        }
        let reply = if up {
            cmd.call(&mut At {
                backend: &mut self.backend,
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
            if let Some(exp) = self.backend.expires_at(*h) {
                if self.s44.enabled {
                    if self.s44.answers.len() >= 4096 {
                        self.s44.answers.pop_first();
                    }
                    self.s44
                        .answers
                        .entry((node, op))
                        .or_default()
                        .push((name, *h, *t, exp, *r));
                }
            }
        }
        if let Input::AcquireReplied {
            result: Ok(AcquireOutcome::Won { token, .. }),
            ..
        } = &reply
        {
            self.mix(token.get());
        }
        let won = matches!(
            reply,
            Input::AcquireReplied {
                result: Ok(AcquireOutcome::Won { .. }),
                ..
            }
        );
        let renewed = matches!(reply, Input::RenewReplied { result: Ok(_), .. });
        if renewed && self.nodes[node].inc == inc {
            if let Some(d) = self.nodes[node].slow_renewal.take() {
                // The renewal succeeded at the backend, but its reply is slow
                // and the node is then cut off for two leases: its deadline
                // must count from the send, not from this late arrival.
                self.partitions[node][0] += 1;
                self.partitions[node][1] += 1;
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
        match self.nodes[node].delay_grant {
            Some(d)
                if won
                    && self.nodes[node].inc == inc
                    && self.nodes[node].state == NodeState::Up =>
            {
                // The grant is stuck in a slow path while its node pauses past
                // its deadline and opens a new session: the reply arrives late.
                self.nodes[node].delay_grant = None;
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

    fn after_backend(&mut self) {
        for name in self.backend.take_broadcasts() {
            for node in 0..self.nodes.len() {
                if self.nodes[node].engine.is_some() {
                    let inc = self.nodes[node].inc;
                    self.send_down(node, inc, Input::ReleaseBroadcast { name: name.clone() });
                }
            }
        }
        let want = self.backend.next_expiry().and_then(|x| {
            self.backend_clock
                .true_at(Timestamp::from_nanos(x), self.queue.now)
        });
        if want != self.expiry_at {
            self.expiry_gen += 1;
            self.expiry_at = want;
            if let Some(t) = want {
                let gen = self.expiry_gen;
                self.push(t, Ev::BackendExpiry { gen });
            }
        }
    }

    // ------------------------------------------------------------- workload

    fn api(&mut self, node: usize, call: ApiCall) {
        let l = self.local(node);
        let inc = self.nodes[node].inc;
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
        if self.nodes[node].closing.is_some() {
            return;
        }
        // An API call may reset a candidate's schedule (S5, S6.4), also
        // through a reply still in flight: a `step_down(cooldown)` sent while
        // an attempt is out leaves its `Held` reply unused, and the attempt
        // at the cooldown's end is timed by the cooldown, not by the reply.
        self.s44.seen.retain(|(n, _), _| *n != node);
        self.s44.sent.retain(|(n, _), _| *n != node);
        // `stop()` or `step_down()` abandons an attempt in flight; a later
        // `start()` or the cooldown's end may send the next one before the
        // old reply comes (it is then stale, S4.3): not a second attempt
        // of the same election.
        self.in_flight.retain(|(n, _), _| *n != node);
        self.mix(400);
        let runs_task = self.rng.u32(..10) != 0;
        let is_lock = match &call {
            ApiCall::Stop(name) => matches!(self.nodes[node].api.get(name), Some(Api::Lock { .. })),
            _ => false,
        };
        if self.trace {
            eprintln!("{:>16} node {node} local {l} api {call:?}", "");
        }
        let now = self.queue.now;
        let n = &mut self.nodes[node];
        let Some(e) = n.engine.as_mut() else { return };
        let result = match &call {
            ApiCall::Start(name) => e.start_election(l, name.clone(), runs_task).map(|()| {
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
                    .map(|()| Some(Api::Lock { had_term: false }))
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
                    self.pending
                        .insert((node, name.clone()), (what, self.queue.now));
                }
                self.nodes[node].api.insert(name, state);
            }
            (Err(ApiError::NotStarted(name)), _) => {
                self.nodes[node].api.remove(&name);
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
            match self.nodes[node].api.get(&name) {
                None => Some(ApiCall::Start(name)),
                Some(Api::Election { .. }) => {
                    let call = if self.chance(400) {
                        ApiCall::Stop(name.clone())
                    } else {
                        let cd = self.uniform(w.max_cooldown);
                        ApiCall::StepDown(name.clone(), Duration::from_nanos(cd))
                    };
                    if self.chance(w.armed_permille) {
                        self.nodes[node].armed.push((name, call));
                        None
                    } else {
                        Some(call)
                    }
                }
                Some(_) => None,
            }
        } else {
            let name = self.p.locks[i - self.p.elections.len()].clone();
            match self.nodes[node].api.get(&name) {
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

    // --------------------------------------------------------------- faults

    fn fault(&mut self, i: usize, start: bool) {
        if self.healed {
            return;
        }
        let f = self.p.faults[i].clone();
        match f.kind {
            FaultKind::Partition { node, direction } if node < self.nodes.len() => {
                let dirs: &[usize] = match direction {
                    Direction::ToBackend => &[0],
                    Direction::FromBackend => &[1],
                    Direction::Both => &[0, 1],
                };
                for &d in dirs {
                    let c = &mut self.partitions[node][d];
                    *c = if start { *c + 1 } else { c.saturating_sub(1) };
                }
            }
            FaultKind::Pause { node, after_send } if node < self.nodes.len() => {
                if start {
                    if after_send {
                        self.nodes[node].pause_armed = Some(f.duration);
                    } else {
                        self.start_pause(node, f.duration);
                    }
                } else if after_send {
                    // Not triggered within its window: drop it.
                    self.nodes[node].pause_armed = None;
                }
            }
            FaultKind::SlowRenewalThenPartition { node, delay } if node < self.nodes.len() => {
                self.nodes[node].slow_renewal = start.then_some(delay);
            }
            FaultKind::DelayedGrant { node } if node < self.nodes.len() => {
                self.nodes[node].delay_grant = start.then_some(f.duration);
            }
            FaultKind::Crash { node } if node < self.nodes.len() => {
                if start {
                    self.crash(node);
                } else if self.nodes[node].engine.is_none() {
                    self.boot(node);
                }
            }
            FaultKind::BackendRestart { keep_state } => {
                if start {
                    self.backend_down += 1;
                    self.backend.restart(keep_state);
                    if !keep_state {
                        self.sched_state_lost();
                    }
                } else {
                    self.backend_down = self.backend_down.saturating_sub(1);
                }
                self.after_backend();
            }
            FaultKind::BackendClockStep { .. } => {
                // The step itself is part of the backend clock; expiry times move.
                self.expiry_at = None;
                self.after_backend();
            }
            FaultKind::SlowBackend { extra } => {
                if start {
                    self.slow.insert(i, extra);
                } else {
                    self.slow.remove(&i);
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
    /// construction). Recorded for the S3.4 checker.
    fn remove_lease(&mut self, name: &LeaseName) {
        if self.backend_down > 0 {
            return;
        }
        let b = self.backend_clock.local(self.queue.now).as_nanos();
        let Some((session, token)) = self.backend.owner(name) else {
            return;
        };
        if !self.backend.live_at(session, b) {
            return;
        }
        let holder = self.nodes.iter().enumerate().find_map(|(i, n)| {
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
        if self.backend.remove_lease(b, name) != Some((session, token)) {
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
        self.removed_terms.insert((node, term));
        self.removals.push(Removal {
            step: self.report.steps,
            node,
            term,
            session,
        });
        self.after_backend();
    }

    /// S3.4 checker, after `node` took a successful reply to renewal `op`
    /// of `session`, sent at world step `sent_step`: for every lease
    /// removed from this session before that send, the term must have
    /// ended by now (`TakenOver`, or an earlier legitimate end). The reply
    /// cannot list the lease (the backend dropped it before the renewal
    /// arrived, and never grants the same token again), so the engine has
    /// no excuse; a term elected after the renewal's send would have one
    /// (S3.4), but only elected terms are removed.
    fn check_taken_over(&mut self, node: usize, op: u64, session: SessionId, sent_step: u64) {
        // Judged removals are forgotten: mutual exclusion makes no more
        // exception for their terms.
        let (due, rest): (Vec<Removal>, Vec<Removal>) = std::mem::take(&mut self.removals)
            .into_iter()
            .partition(|r| r.node == node && r.session == session && r.step < sent_step);
        self.removals = rest;
        let mut late = Vec::new();
        for r in due {
            self.report.removals_judged += 1;
            if let Some(rec) = self.nodes[node].terms.get(&r.term) {
                if rec.revoked.is_none() && rec.elected_step < sent_step {
                    late.push((rec.term.name.clone(), rec.term.token, r.term));
                }
            }
        }
        for (name, token, term) in late {
            self.violation(
                "taken over (S3.4)",
                format!(
                    "node {node} still holds {term} ({name}, token {token}) after the reply to \
                     renewal {op}, sent after the backend dropped the lease: the term must end \
                     (TakenOver) at that reply"
                ),
            );
        }
    }

    fn heal(&mut self) {
        self.healed = true;
        for p in &mut self.partitions {
            *p = [0, 0];
        }
        self.backend_down = 0;
        self.slow.clear();
        for node in 0..self.nodes.len() {
            self.nodes[node].pause_armed = None;
            self.nodes[node].delay_grant = None;
            self.nodes[node].slow_renewal = None;
            if self.nodes[node].state == NodeState::Paused {
                let inc = self.nodes[node].inc;
                self.resume(node, inc);
            }
            if self.nodes[node].engine.is_none() {
                self.boot(node);
            } else if self.nodes[node].closing.is_none() {
                // Every live node competes for every election name.
                let inc = self.nodes[node].inc;
                for name in self.p.elections.clone() {
                    if !self.nodes[node].api.contains_key(&name) {
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
            let n = &self.nodes[node];
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
        for name in self.p.elections.clone() {
            self.liveness.insert(name.clone(), None);
            self.check_mutex(&name);
        }
        self.after_backend();
    }

    /// S10.2, judged on each target a member computes, from the membership
    /// it was told of (sound whatever views the other members have): the
    /// member gives up a partition it holds only when it holds more than its
    /// share, and then keeps exactly its share. A leave or a crash shrinks
    /// no share, so only the partitions of the member who went move; a join
    /// shrinks shares, so only the surplus moves, to the joiner. (Asking
    /// for more than the share is `group balance (S10.4)`'s to catch.)
    /// `held` is what the node holds as the events so far tell (a term
    /// neither revoked nor ended), on the session that computed the target.
    fn check_sticky(
        &mut self,
        node: usize,
        group: &LeaseName,
        members: &[SessionId],
        target: &[u32],
    ) {
        let Some(partitions) = self
            .p
            .groups
            .iter()
            .find(|(g, _)| g == group)
            .map(|(_, n)| *n)
        else {
            return;
        };
        let Some((me, _)) = self.nodes[node]
            .engine
            .as_ref()
            .and_then(Engine::session_deadline)
        else {
            return;
        };
        let mut sorted = members.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        // A session that changed since the target was computed: not judged.
        let Ok(rank) = sorted.binary_search(&me) else {
            return;
        };
        let share = simba_core::fair_share(partitions, sorted.len(), rank) as usize;
        let held: BTreeSet<u32> = self.nodes[node]
            .terms
            .values()
            .filter(|rec| rec.term.session == me && rec.revoked.is_none())
            .filter_map(|rec| {
                let (g, p) = simba_core::parse_partition_name(rec.term.name.as_str())?;
                (g == group.as_str() && p < partitions).then_some(p)
            })
            .collect();
        let kept = target.iter().filter(|p| held.contains(p)).count();
        if kept < held.len().min(share) {
            self.violation(
                "group stickiness (S10.2)",
                format!(
                    "node {node}, {group}: among {} members (share {share}) it holds {held:?} \
                     and targets {target:?}: it gives up partitions it holds without holding \
                     more than its share",
                    sorted.len(),
                ),
            );
        }
    }

    /// S10.4, after the faults healed and the liveness bound passed: every
    /// partition of every group has exactly one valid owner among the live
    /// members, and max − min partitions per member ≤ 1.
    fn check_groups(&mut self) {
        for (group, partitions) in self.p.groups.clone() {
            let members: Vec<usize> = (0..self.nodes.len())
                .filter(|&i| {
                    let n = &self.nodes[i];
                    n.engine.is_some() && n.closing.is_none() && !n.closed
                })
                .collect();
            if members.is_empty() {
                continue;
            }
            let mut counts: BTreeMap<usize, u32> = members.iter().map(|&i| (i, 0)).collect();
            let mut unowned = Vec::new();
            for p in 0..partitions {
                let Ok(name) = simba_core::partition_name(&group, p) else {
                    continue;
                };
                let owners: Vec<usize> = members
                    .iter()
                    .copied()
                    .filter(|&i| {
                        self.nodes[i]
                            .terms
                            .values()
                            .any(|rec| rec.term.name == name && self.is_valid(i, rec))
                    })
                    .collect();
                match owners.as_slice() {
                    [one] => *counts.entry(*one).or_default() += 1,
                    _ => unowned.push((p, owners)),
                }
            }
            let max = counts.values().max().copied().unwrap_or(0);
            let min = counts.values().min().copied().unwrap_or(0);
            if !unowned.is_empty() || max - min > 1 {
                self.violation(
                    "group balance (S10.4)",
                    format!(
                        "{group}: {:?} after healing and the liveness bound: partitions per member {counts:?}; \
                         partitions without exactly one owner (partition, owners) {unowned:?}",
                        self.report.liveness_bound
                    ),
                );
            }
        }
    }

    fn finish(&mut self) {
        // A candidate still valid at the end counts if it has been valid for
        // a renewal period by now (the run ends one period after the bound).
        for name in self.p.elections.clone() {
            let Some((_, _, node, term)) = self.candidates.get(&name).copied() else {
                continue;
            };
            let valid = self.nodes[node]
                .terms
                .get(&term)
                .is_some_and(|rec| self.is_valid(node, rec));
            let h = valid.then_some((node, term));
            self.observe_leader(&name, h);
        }
        let mut worst = None;
        for (name, got) in self.liveness.clone() {
            match got {
                Some(t) if t <= self.heal_at + nanos(self.report.liveness_bound) => {
                    let d = Duration::from_nanos(t - self.heal_at);
                    worst = worst.max(Some(d));
                }
                _ => self.violation(
                    "liveness",
                    format!(
                        "no leader for {name} within {:?} after the faults healed \
                         (one that then stays valid for a renewal period, {:?})",
                        self.report.liveness_bound, self.p.renew_interval
                    ),
                ),
            }
        }
        self.report.max_time_to_leader = worst;
        self.check_groups();
        for ((node, name), (what, since)) in self.pending.clone() {
            self.violation(
                "completions (S7.3)",
                format!(
                    "node {node}: {what}({name}) issued at {:?} never completed",
                    Duration::from_nanos(since)
                ),
            );
        }
        for node in 0..self.nodes.len() {
            if let Some(since) = self.nodes[node].closing {
                self.violation(
                    "completions (S1.4)",
                    format!(
                        "node {node}: close() at {:?} never completed",
                        Duration::from_nanos(since)
                    ),
                );
            }
        }
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
    }
}
