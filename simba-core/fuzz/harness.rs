//! The input-stream harness shared by `tests/props.rs` (proptest) and the
//! `engine_stream` fuzz target: abstract actions, a small model backend that
//! answers truthfully unless told to lie, and the invariant checker that runs
//! after every step. It depends on `simba-core` only, so both the test and
//! the fuzz crate include it with `#[path]`.
//!
//! A violation is returned as `Err(message)`; a panic inside the engine is a
//! failure too (proptest and libFuzzer both catch it).
#![allow(clippy::expect_used, dead_code)]

use simba_core::{
    AcquireOutcome, BackendError, BackendErrorKind, BackendProfile, Command, Engine, Event,
    Fraction, Input, LeaseName, Level, LockWait, OpId, Output, RenewError, Renewal, RevokeReason,
    SessionGrant, SessionId, SessionState, SimbaConfig, TaskOrder, TaskOutcome, Term, TermId,
    Timestamp, Token,
};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::time::Duration;

/// The number of distinct lease names a stream plays with.
pub const NAMES: u8 = 3;

/// The engine's configuration and backend profile for one stream.
#[derive(Clone, Debug)]
pub struct Setup {
    /// 0: defaults (15 s lease); 1: 3 s lease; 2: 2 s lease, 10 % drift, 200 ms margin.
    pub config: u8,
    /// Use ZooKeeper's 5/12 renewal proof (S8.5), so the period shortens (S8.4).
    pub zookeeper: bool,
    /// The engine's seed (retry jitter).
    pub seed: u64,
    /// With the `mutants` feature, `n > 0` runs the engine with
    /// `Mutant::ALL[n - 1]`, to show that the checks catch it.
    pub mutant: u8,
    /// The backend serves this many acquires at once (S4.6); `None`: any.
    pub call_slots: Option<usize>,
}

/// How a lock waits (`LockWait`), with `Until` relative to the current time.
#[derive(Clone, Copy, Debug)]
pub enum Wait {
    /// `LockWait::Try`.
    Try,
    /// `LockWait::Until(now + ms)`.
    UntilMs(u32),
    /// `LockWait::Forever`.
    Forever,
}

/// Which token a lying `Won` (or a renewal listing) carries.
#[derive(Clone, Copy, Debug)]
pub enum TokenPick {
    /// One above every token the backend handed out for the name (honest counter).
    Fresh,
    /// The backend's latest token for the name (a repeat).
    Current,
    /// That many below the latest (at least 1): a stale token.
    Stale(u8),
    /// Any value below 2^40 (0 becomes 1).
    Raw(u64),
}

/// The `remaining` duration a lying reply carries.
#[derive(Clone, Copy, Debug)]
pub enum Remaining {
    /// The configured lease duration.
    Lease,
    /// Zero.
    Zero,
    /// Some milliseconds.
    Millis(u32),
    /// `Duration::MAX`.
    Huge,
}

/// How a pending command is answered.
#[derive(Clone, Copy, Debug)]
pub enum Answer {
    /// As the model backend would, applying the call to it.
    Truthful,
    /// A backend error.
    Fail,
    /// `Expired` (a failed call for commands without that outcome).
    Expired,
    /// Acquire: `Held`; renew: success listing nothing; others: success.
    Held,
    /// Acquire: `Won`; renew: success listing the model's leases plus this
    /// token on the command's (or first) name; open: a grant; others: success.
    Won(TokenPick, Remaining),
}

/// Which term a `TaskExited` / `ElectedRejected` names.
#[derive(Clone, Copy, Debug)]
pub enum TermPick {
    /// The n-th term seen (modulo their number).
    Seen(u16),
    /// Any id.
    Raw(u64),
}

/// How the driver's clock moves.
#[derive(Clone, Copy, Debug)]
pub enum TimeMove {
    /// Forward by milliseconds.
    Forward(u32),
    /// Stand still.
    Still,
    /// Backwards by milliseconds (saturating at zero).
    Back(u32),
    /// Jump to `poll_timeout()` (if any).
    ToTimeout,
    /// Forward by milliseconds without telling the engine: the next input
    /// arrives late, before the driver's timer fired.
    Silent(u32),
}

/// One step of a stream.
#[derive(Clone, Debug)]
pub enum Action {
    /// `start_election` or (`Some(wait)`) `acquire_lock` on name `name % NAMES`.
    Start {
        /// Name index.
        name: u8,
        /// `None`: election; `Some`: lock.
        lock: Option<Wait>,
        /// Whether a task runs per term.
        runs_task: bool,
    },
    /// `stop(name)`.
    Stop(u8),
    /// `step_down(name, cooldown)`.
    StepDown(u8, u32),
    /// `close()`.
    Close,
    /// Answer the pending command `pick % len`; `keep` leaves it pending, so
    /// it may be answered again (a duplicate).
    Reply {
        /// Which pending command.
        pick: u16,
        /// How.
        answer: Answer,
        /// Keep it pending.
        keep: bool,
    },
    /// Lose the pending command `pick % len` (no reply, ever).
    Drop(u16),
    /// Deliver an already delivered input again.
    Replay(u16),
    /// A reply with an op id that no command carries: 0, or `u64::MAX - op`.
    Unknown {
        /// 0..5: which reply type.
        kind: u8,
        /// The op id.
        op: u64,
        /// Its content.
        answer: Answer,
    },
    /// Another node takes the free lease `name`, or (`leave`) releases it and
    /// the backend broadcasts the release.
    Rival {
        /// Name index.
        name: u8,
        /// Release instead of take.
        leave: bool,
    },
    /// A release broadcast for `name` with no change on the backend.
    Broadcast(u8),
    /// `Input::TaskExited`: the term, and the outcome (`n % 3`: returned,
    /// failed, panicked).
    TaskExited(TermPick, u8),
    /// `Input::ElectedRejected`, out of band.
    ElectedRejected(TermPick),
    /// Refuse the next `Elected` the moment it is drained (S7.7, as a driver would).
    RejectNextElected,
    /// Move the clock, then `handle_timeout`.
    Time(TimeMove),
}

/// The backend as a truthful model: sessions with expiry, leases, counters.
#[derive(Debug, Default)]
struct Model {
    sessions: BTreeMap<SessionId, Timestamp>,
    next_session: u128,
    leases: BTreeMap<LeaseName, (SessionId, Token)>,
    counters: BTreeMap<LeaseName, u64>,
}

const RIVAL: SessionId = SessionId::from_u128(u128::MAX);

impl Model {
    fn gc(&mut self, now: Timestamp) {
        let dead: Vec<SessionId> = self
            .sessions
            .iter()
            .filter(|(_, e)| now >= **e)
            .map(|(s, _)| *s)
            .collect();
        for s in dead {
            self.sessions.remove(&s);
            self.leases.retain(|_, (o, _)| *o != s);
        }
    }

    fn fresh_session(&mut self, now: Timestamp, lease: Duration) -> SessionId {
        self.next_session += 1;
        let id = SessionId::from_u128(0x5e55_0000 + self.next_session);
        self.sessions.insert(id, now + lease);
        id
    }

    fn bump(&mut self, name: &LeaseName) -> Token {
        let c = self.counters.entry(name.clone()).or_insert(0);
        *c += 1;
        Token::new(*c).unwrap_or_else(token_one)
    }

    fn pick(&mut self, name: &LeaseName, pick: TokenPick) -> (Token, bool) {
        let current = self.counters.get(name).copied().unwrap_or(0);
        let value = match pick {
            TokenPick::Fresh => return (self.bump(name), false),
            TokenPick::Current => current,
            TokenPick::Stale(k) => current.saturating_sub(u64::from(k)),
            // Kept far below u64::MAX, so an honest counter never wraps.
            TokenPick::Raw(v) => v % (1 << 40),
        };
        let value = value.max(1);
        if value > current {
            self.counters.insert(name.clone(), value);
            (Token::new(value).unwrap_or_else(token_one), false)
        } else {
            (Token::new(value).unwrap_or_else(token_one), true)
        }
    }

    fn owned(&self, session: SessionId) -> Vec<(LeaseName, Token)> {
        self.leases
            .iter()
            .filter(|(_, (s, _))| *s == session)
            .map(|(n, (_, t))| (n.clone(), *t))
            .collect()
    }
}

/// The smallest token.
fn token_one() -> Token {
    Token::new(1).expect("1 is not zero")
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TermState {
    Open,
    Revoked(RevokeReason),
    Rejected,
}

#[derive(Clone, Debug)]
struct TermInfo {
    term: Term,
    state: TermState,
    task_started: bool,
    task_exited: bool,
    /// Voluntarily revoked while its task ran: the lease is held until the
    /// task exits or the deadline passes (S6.1 step 3), at most until the
    /// deadline in force at the revoke (S6.2).
    handover_wait: bool,
    /// The session deadline when the term was revoked.
    revoked_deadline: Option<Timestamp>,
    /// The driver step in which it was elected.
    elected_step: usize,
}

/// What the step being checked is.
#[derive(Clone, Debug, Default)]
struct StepCtx {
    /// An `AcquireReplied` for the acquire in flight of this name.
    current_acquire: Option<LeaseName>,
    /// The latest deadline S2.1 allows from the renewal or grant being
    /// handled: its send time + remaining × proven fraction × (1 − drift) − margin.
    deadline_bound: Option<Timestamp>,
    /// A term whose task failed or panicked while the term was open (S6.5).
    failed_task: Option<TermId>,
    /// Open terms that the successful renewal reply taken in this step does
    /// not list with their token, though they were elected in an earlier
    /// step than the renewal's send: they must end in this step (S3.4
    /// `TakenOver`).
    not_listed: Vec<TermId>,
}

/// The engine, the model backend, the driver's state and the checker.
pub struct Harness {
    engine: Engine,
    lease: Duration,
    names: Vec<LeaseName>,
    clock: u64,
    now: Timestamp,
    model: Model,
    pending: Vec<Command>,
    history: Vec<Input>,
    reject_next: bool,
    seen_terms: Vec<TermId>,
    step_no: usize,
    // checker
    terms: BTreeMap<TermId, TermInfo>,
    last_token: BTreeMap<LeaseName, Token>,
    lied: BTreeSet<LeaseName>,
    released: BTreeMap<(SessionId, LeaseName), Token>,
    deadlines: BTreeMap<SessionId, Timestamp>,
    ended: BTreeSet<SessionId>,
    session: Option<SessionId>,
    inflight: BTreeMap<LeaseName, (OpId, Timestamp)>,
    /// The backend's call slots (S4.6), and the acquires that take one:
    /// sent, unanswered, and not past their call timeout.
    slots: Option<usize>,
    slot_ops: BTreeMap<OpId, Timestamp>,
    acquire_names: BTreeMap<OpId, LeaseName>,
    /// When each OpenSession / Renew was sent (engine time).
    session_ops: BTreeMap<OpId, Timestamp>,
    /// The driver step in which each Renew was sent.
    renew_steps: BTreeMap<OpId, usize>,
    zookeeper: bool,
    /// Every op id sent: none is sent twice. (A command that waited for a
    /// slot, S4.6, goes out after newer ones: ids are unique, not ordered.)
    sent_ops: BTreeSet<OpId>,
    closed: bool,
    ctx: StepCtx,
    /// Counters for the curious (how interesting the streams are).
    pub stats: HarnessStats,
    /// Every action, input and output, when tracing.
    pub trace: Option<Vec<String>>,
}

/// How much a run exercised.
#[derive(Clone, Copy, Debug, Default)]
pub struct HarnessStats {
    /// Terms created.
    pub elected: u64,
    /// Terms revoked.
    pub revoked: u64,
    /// Terms refused via `ElectedRejected`.
    pub rejected: u64,
    /// Steps run.
    pub steps: u64,
}

fn fail<T>(msg: String) -> Result<T, String> {
    Err(msg)
}

impl Harness {
    /// A fresh engine at time zero.
    pub fn new(setup: &Setup) -> Harness {
        let ms = Duration::from_millis;
        let builder = SimbaConfig::builder().seed(setup.seed);
        #[cfg(feature = "mutants")]
        let builder = builder.mutant(
            usize::from(setup.mutant)
                .checked_sub(1)
                .and_then(|i| simba_core::Mutant::ALL.get(i).copied()),
        );
        let config = match setup.config % 3 {
            0 => builder.build(),
            1 => builder.lease_duration(ms(3000)).build(),
            _ => builder
                .lease_duration(ms(2000))
                .renew_interval(ms(1000))
                .drift(0.1)
                .margin(ms(200))
                .build(),
        }
        .unwrap_or_default();
        let profile = BackendProfile {
            renewal_proves: if setup.zookeeper {
                Fraction::new(5, 12).unwrap_or_default()
            } else {
                Fraction::ONE
            },
            call_slots: setup.call_slots,
            // Batches (S4.7) are the simulator's; each call here is its own.
            batch: 1,
        };
        let lease = config.lease_duration();
        let engine = Engine::new(config, profile, Timestamp::ZERO);
        let names = (0..NAMES)
            .filter_map(|i| LeaseName::new(format!("name-{i}")).ok())
            .collect();
        Harness {
            engine,
            lease,
            names,
            clock: 0,
            now: Timestamp::ZERO,
            model: Model::default(),
            pending: Vec::new(),
            history: Vec::new(),
            reject_next: false,
            seen_terms: Vec::new(),
            step_no: 0,
            terms: BTreeMap::new(),
            last_token: BTreeMap::new(),
            lied: BTreeSet::new(),
            released: BTreeMap::new(),
            deadlines: BTreeMap::new(),
            ended: BTreeSet::new(),
            session: None,
            inflight: BTreeMap::new(),
            slots: setup.call_slots,
            slot_ops: BTreeMap::new(),
            acquire_names: BTreeMap::new(),
            session_ops: BTreeMap::new(),
            renew_steps: BTreeMap::new(),
            zookeeper: setup.zookeeper,
            sent_ops: BTreeSet::new(),
            closed: false,
            ctx: StepCtx::default(),
            stats: HarnessStats::default(),
            trace: None,
        }
    }

    fn name(&self, i: u8) -> LeaseName {
        self.names[usize::from(i % NAMES)].clone()
    }

    fn ts(&self) -> Timestamp {
        Timestamp::from_nanos(self.clock)
    }

    /// Runs one action and checks every invariant.
    ///
    /// # Errors
    /// A description of the first violated invariant.
    pub fn step(&mut self, action: &Action) -> Result<(), String> {
        self.step_no += 1;
        self.stats.steps += 1;
        self.ctx = StepCtx::default();
        if let Some(trace) = &mut self.trace {
            let at = Timestamp::from_nanos(self.clock).as_duration();
            trace.push(format!("--- step {} at {at:?}: {action:?}", self.step_no));
        }
        let t = self.ts();
        match action {
            Action::Start {
                name,
                lock,
                runs_task,
            } => {
                let name = self.name(*name);
                self.now = self.now.max(t);
                let _ = match lock {
                    None => self.engine.start_election(t, name, *runs_task),
                    Some(w) => {
                        let wait = match w {
                            Wait::Try => LockWait::Try,
                            Wait::Forever => LockWait::Forever,
                            Wait::UntilMs(ms) => {
                                LockWait::Until(self.now + Duration::from_millis(u64::from(*ms)))
                            }
                        };
                        self.engine.acquire_lock(t, name, wait, *runs_task)
                    }
                };
            }
            Action::Stop(i) => {
                let name = self.name(*i);
                self.now = self.now.max(t);
                if self.engine.stop(t, &name).is_ok() {
                    self.inflight.remove(&name);
                }
            }
            Action::StepDown(i, ms) => {
                let name = self.name(*i);
                self.now = self.now.max(t);
                let cooldown = Duration::from_millis(u64::from(*ms));
                if self.engine.step_down(t, &name, cooldown).is_ok() {
                    self.inflight.remove(&name);
                }
            }
            Action::Close => {
                self.now = self.now.max(t);
                self.engine.close(t);
                self.inflight.clear();
            }
            Action::Reply { pick, answer, keep } => {
                if self.pending.is_empty() {
                    return self.after_step();
                }
                let i = usize::from(*pick) % self.pending.len();
                let cmd = if *keep {
                    self.pending[i].clone()
                } else {
                    self.pending.remove(i)
                };
                let input = self.answer(&cmd, *answer);
                self.deliver(input)?;
            }
            Action::Drop(pick) => {
                if !self.pending.is_empty() {
                    let i = usize::from(*pick) % self.pending.len();
                    self.pending.remove(i);
                }
                return Ok(());
            }
            Action::Replay(pick) => {
                if self.history.is_empty() {
                    return Ok(());
                }
                let input = self.history[usize::from(*pick) % self.history.len()].clone();
                self.deliver(input)?;
            }
            Action::Unknown { kind, op, answer } => {
                // 0 or an id far beyond any issued: stale and duplicated
                // ids of real commands come from `Replay` and `Reply { keep }`.
                let op = OpId(if *op == 0 { 0 } else { u64::MAX - op });
                let session = self.session.unwrap_or(RIVAL);
                let name = self.name(*kind);
                let cmd = match kind % 5 {
                    0 => Command::OpenSession {
                        op,
                        lease_duration: self.lease,
                    },
                    1 => Command::Renew { op, session },
                    2 => Command::Acquire { op, session, name },
                    3 => Command::Release {
                        op,
                        session,
                        name,
                        token: token_one(),
                    },
                    _ => Command::CloseSession { op, session },
                };
                let input = self.answer(&cmd, *answer);
                self.deliver(input)?;
            }
            Action::Rival { name, leave } => {
                let name = self.name(*name);
                self.model.gc(self.now);
                if *leave {
                    if self
                        .model
                        .leases
                        .get(&name)
                        .is_some_and(|(s, _)| *s == RIVAL)
                    {
                        self.model.leases.remove(&name);
                        self.deliver(Input::ReleaseBroadcast { name })?;
                    }
                } else if !self.model.leases.contains_key(&name) {
                    let token = self.model.bump(&name);
                    self.model.leases.insert(name, (RIVAL, token));
                }
            }
            Action::Broadcast(i) => {
                let name = self.name(*i);
                self.deliver(Input::ReleaseBroadcast { name })?;
            }
            Action::TaskExited(pick, outcome) => {
                let term = self.term_pick(*pick);
                let outcome = match outcome % 3 {
                    0 => TaskOutcome::Returned,
                    1 => TaskOutcome::Failed,
                    _ => TaskOutcome::Panicked,
                };
                self.deliver(Input::TaskExited { term, outcome })?;
            }
            Action::ElectedRejected(pick) => {
                let term = self.term_pick(*pick);
                self.deliver(Input::ElectedRejected { term })?;
            }
            Action::RejectNextElected => {
                self.reject_next = true;
                return Ok(());
            }
            Action::Time(m) => {
                match m {
                    TimeMove::Forward(ms) => {
                        self.clock = self.clock.saturating_add(u64::from(*ms) * 1_000_000);
                    }
                    TimeMove::Still => {}
                    TimeMove::Back(ms) => {
                        self.clock = self.clock.saturating_sub(u64::from(*ms) * 1_000_000);
                    }
                    TimeMove::ToTimeout => {
                        if let Some(at) = self.engine.poll_timeout() {
                            self.clock = self.clock.max(at.as_nanos());
                        }
                    }
                    TimeMove::Silent(ms) => {
                        self.clock = self.clock.saturating_add(u64::from(*ms) * 1_000_000);
                        return Ok(());
                    }
                }
                let t = self.ts();
                self.now = self.now.max(t);
                self.engine.handle_timeout(t);
            }
        }
        self.after_step()
    }

    /// `remaining × proven × (1 − drift) − margin`, plus 1 µs for rounding.
    fn validity_bound(&self, remaining: Duration) -> Duration {
        let config = self.engine.config();
        let proven = if self.zookeeper {
            remaining.as_secs_f64() * 5.0 / 12.0
        } else {
            remaining.as_secs_f64()
        };
        let scaled = proven * (1.0 - config.drift()) - config.margin().as_secs_f64();
        Duration::try_from_secs_f64(scaled.max(0.0) + 1e-6).unwrap_or(Duration::MAX)
    }

    fn term_pick(&self, pick: TermPick) -> TermId {
        match pick {
            TermPick::Seen(i) if !self.seen_terms.is_empty() => {
                self.seen_terms[usize::from(i) % self.seen_terms.len()]
            }
            TermPick::Seen(i) => TermId(u64::from(i)),
            TermPick::Raw(v) => TermId(v),
        }
    }

    /// An open term refused by the callback executor counts as closed (S7.7).
    fn reject(&mut self, term: TermId) {
        if let Some(info) = self.terms.get_mut(&term) {
            if info.state == TermState::Open {
                info.state = TermState::Rejected;
                self.stats.rejected += 1;
            }
        }
    }

    /// Feeds one input at the driver's clock (no checks after it).
    fn deliver(&mut self, input: Input) -> Result<(), String> {
        let t = self.ts();
        self.now = self.now.max(t);
        if let Some(op) = input.op() {
            self.slot_ops.remove(&op);
        }
        match &input {
            Input::AcquireReplied { op, .. } => {
                if let Some(name) = self.acquire_names.get(op) {
                    if self.inflight.get(name).is_some_and(|(o, _)| o == op) {
                        let name = name.clone();
                        self.inflight.remove(&name);
                        self.ctx.current_acquire = Some(name);
                    }
                }
            }
            Input::SessionOpened {
                op,
                result: Ok(SessionGrant { remaining, .. }),
            }
            | Input::RenewReplied {
                op,
                result: Ok(Renewal { remaining, .. }),
            } => {
                if let Some(sent) = self.session_ops.get(op) {
                    self.ctx.deadline_bound = Some(*sent + self.validity_bound(*remaining));
                }
            }
            Input::TaskExited { term, outcome } => {
                if let Some(info) = self.terms.get_mut(term) {
                    // S6.5: a task that fails while its term is open gives
                    // the term up in the same step.
                    if info.state == TermState::Open
                        && info.task_started
                        && !info.task_exited
                        && outcome.is_failure()
                    {
                        self.ctx.failed_task = Some(*term);
                    }
                    info.task_exited = true;
                }
            }
            Input::ElectedRejected { term } => self.reject(*term),
            _ => {}
        }
        if let Some(trace) = &mut self.trace {
            trace.push(format!("  input {input:?}"));
        }
        // S3.4: the open terms of the current session, elected before this
        // renewal was sent, that its reply does not list with their token.
        let not_listed: Vec<TermId> = match &input {
            Input::RenewReplied {
                op,
                result: Ok(Renewal { owned, .. }),
            } => match self.renew_steps.get(op) {
                Some(&sent) => self
                    .terms
                    .values()
                    .filter(|i| {
                        i.state == TermState::Open
                            && Some(i.term.session) == self.session
                            && i.elected_step < sent
                            && !owned.contains(&(i.term.name.clone(), i.term.token))
                    })
                    .map(|i| i.term.id)
                    .collect(),
                None => Vec::new(),
            },
            _ => Vec::new(),
        };
        self.history.push(input.clone());
        if self.history.len() > 256 {
            self.history.remove(0);
        }
        let stale = self.engine.stats().stale_replies;
        self.engine.handle(t, input);
        // Only a reply the engine took (not stale: the current renewal of
        // the current session, before the deadline passed) must end them.
        if self.engine.stats().stale_replies == stale {
            self.ctx.not_listed.extend(not_listed);
        }
        Ok(())
    }

    /// The reply to `cmd`, truthful or not; a truthful one changes the model.
    fn answer(&mut self, cmd: &Command, answer: Answer) -> Input {
        let now = self.now.max(self.ts());
        self.model.gc(now);
        let fail = |what: &str| BackendError::new(BackendErrorKind::Unavailable, what);
        let remaining = |r: Remaining, lease: Duration| match r {
            Remaining::Lease => lease,
            Remaining::Zero => Duration::ZERO,
            Remaining::Millis(ms) => Duration::from_millis(u64::from(ms)),
            Remaining::Huge => Duration::MAX,
        };
        let lease = self.lease;
        match cmd.clone() {
            Command::OpenSession { op, lease_duration } => {
                let result = match answer {
                    Answer::Truthful | Answer::Held => {
                        let session = self.model.fresh_session(now, lease_duration);
                        Ok(SessionGrant {
                            session,
                            remaining: lease_duration,
                        })
                    }
                    Answer::Won(_, r) => {
                        let session = self.model.fresh_session(now, lease_duration);
                        Ok(SessionGrant {
                            session,
                            remaining: remaining(r, lease),
                        })
                    }
                    Answer::Fail | Answer::Expired => Err(fail("open")),
                };
                Input::SessionOpened { op, result }
            }
            Command::Renew { op, session } => {
                let result = match answer {
                    Answer::Truthful => match self.model.sessions.get_mut(&session) {
                        Some(expiry) => {
                            *expiry = now + lease;
                            Ok(Renewal {
                                groups: Vec::new(),
                                remaining: lease,
                                owned: self.model.owned(session),
                            })
                        }
                        None => Err(RenewError::Expired),
                    },
                    Answer::Fail => Err(RenewError::Backend(fail("renew"))),
                    Answer::Expired => Err(RenewError::Expired),
                    Answer::Held => Ok(Renewal {
                        groups: Vec::new(),
                        remaining: lease,
                        owned: Vec::new(),
                    }),
                    Answer::Won(pick, r) => {
                        let name = self.name(0);
                        let (token, _) = self.model.pick(&name, pick);
                        let mut owned = self.model.owned(session);
                        owned.push((name, token));
                        Ok(Renewal {
                            groups: Vec::new(),
                            remaining: remaining(r, lease),
                            owned,
                        })
                    }
                };
                Input::RenewReplied { op, result }
            }
            Command::Acquire { op, session, name } => {
                let result = match answer {
                    Answer::Truthful => match self.model.sessions.get(&session).copied() {
                        None => Ok(AcquireOutcome::Expired),
                        Some(expiry) => {
                            let left = expiry - now;
                            match self.model.leases.get(&name).copied() {
                                None => {
                                    let token = self.model.bump(&name);
                                    self.model.leases.insert(name, (session, token));
                                    Ok(AcquireOutcome::Won {
                                        token,
                                        remaining: left,
                                    })
                                }
                                Some((s, token)) if s == session => Ok(AcquireOutcome::Won {
                                    token,
                                    remaining: left,
                                }),
                                Some((s, token)) => Ok(AcquireOutcome::Held {
                                    holder: Some(s),
                                    token: Some(token),
                                    holder_remaining: None,
                                }),
                            }
                        }
                    },
                    Answer::Fail => Err(fail("acquire")),
                    Answer::Expired => Ok(AcquireOutcome::Expired),
                    Answer::Held => Ok(AcquireOutcome::Held {
                        holder: None,
                        token: None,
                        holder_remaining: None,
                    }),
                    Answer::Won(pick, r) => {
                        let (token, lie) = self.model.pick(&name, pick);
                        if lie {
                            // A token that is not above every earlier grant:
                            // the backend broke S3.2, so monotonicity is off for this name.
                            self.lied.insert(name.clone());
                        }
                        Ok(AcquireOutcome::Won {
                            token,
                            remaining: remaining(r, lease),
                        })
                    }
                };
                Input::AcquireReplied { op, result }
            }
            Command::Release {
                op,
                session,
                name,
                token,
            } => {
                let result = match answer {
                    Answer::Truthful => {
                        if self.model.leases.get(&name) == Some(&(session, token)) {
                            self.model.leases.remove(&name);
                        }
                        Ok(())
                    }
                    Answer::Fail | Answer::Expired => Err(fail("release")),
                    Answer::Held | Answer::Won(..) => Ok(()),
                };
                Input::ReleaseReplied { op, result }
            }
            Command::CloseSession { op, session } => {
                let result = match answer {
                    Answer::Truthful => {
                        self.model.sessions.remove(&session);
                        self.model.leases.retain(|_, (s, _)| *s != session);
                        Ok(())
                    }
                    Answer::Fail | Answer::Expired => Err(fail("close")),
                    Answer::Held | Answer::Won(..) => Ok(()),
                };
                Input::SessionClosed { op, result }
            }
            // The model keeps nothing for a `Held` acquire: nothing to remove (S4.5).
            Command::Withdraw { op, .. } => {
                let result = match answer {
                    Answer::Fail | Answer::Expired => Err(fail("withdraw")),
                    Answer::Truthful | Answer::Held | Answer::Won(..) => Ok(()),
                };
                Input::WithdrawReplied { op, result }
            }
            // The engine sends no group or slot commands here yet (S10,
            // S11): they fail, through the core's one failure constructor.
            // Nor batches (S4.7): its profile takes none.
            Command::JoinGroup { .. }
            | Command::LeaveGroup { .. }
            | Command::ClaimSlot { .. }
            | Command::Batch { .. } => Input::failed(cmd, fail(cmd.label())),
        }
    }

    /// Drains every output, checking each, then the state invariants.
    fn after_step(&mut self) -> Result<(), String> {
        while let Some(output) = self.engine.poll_output() {
            if let Some(term) = self.observe(output)? {
                // S7.7 as a driver does it: refused before the next output.
                self.reject(term);
                self.ctx.current_acquire = None;
                let t = self.ts();
                self.engine.handle(t, Input::ElectedRejected { term });
            }
        }
        for term in std::mem::take(&mut self.ctx.not_listed) {
            if self
                .terms
                .get(&term)
                .is_some_and(|i| i.state == TermState::Open)
            {
                return self.violation(&format!(
                    "{term} is still held after a renewal reply that no longer lists it (S3.4 TakenOver)"
                ));
            }
        }
        if let Some(term) = self.ctx.failed_task.take() {
            if self
                .terms
                .get(&term)
                .is_some_and(|i| i.state == TermState::Open)
            {
                return self.violation(&format!(
                    "{term}'s task failed but the term is still held (S6.5)"
                ));
            }
        }
        self.check_state()
    }

    fn violation<T>(&self, what: &str) -> Result<T, String> {
        let mut msg = String::new();
        let _ = write!(
            msg,
            "step {}: {what} (engine now {:?})",
            self.step_no,
            self.now.as_duration()
        );
        fail(msg)
    }

    /// Checks one output; returns a term to refuse at once (RejectNextElected).
    fn observe(&mut self, output: Output) -> Result<Option<TermId>, String> {
        let now = self.now;
        if let Some(trace) = &mut self.trace {
            trace.push(format!("    {output:?}"));
        }
        match output {
            Output::Command(cmd) => {
                let op = cmd.op();
                if !self.sent_ops.insert(op) {
                    return self.violation(&format!("op id {op} sent twice"));
                }
                match &cmd {
                    Command::Acquire { op, session, name } => {
                        // S4.1: at most one attempt in flight per election.
                        if let Some((old, _)) = self.inflight.get(name) {
                            return self.violation(&format!(
                                "acquire {op} for {name} while {old} is still in flight (S4.1)"
                            ));
                        }
                        if Some(*session) != self.session {
                            return self.violation(&format!(
                                "acquire for {session:?}, not the current session {:?}",
                                self.session
                            ));
                        }
                        if let Some(max) = self.slots {
                            // S4.6: never more acquires out than the backend
                            // serves (other calls take slots too, so fewer).
                            let timeout = self.engine.call_timeout();
                            self.slot_ops.retain(|_, sent| now < *sent + timeout);
                            if self.slot_ops.len() >= max.max(1) {
                                return self.violation(&format!(
                                    "acquire {op} for {name} while {} acquires are out, the backend's {max} slots (S4.6)",
                                    self.slot_ops.len()
                                ));
                            }
                            self.slot_ops.insert(*op, now);
                        }
                        self.inflight.insert(name.clone(), (*op, now));
                        self.acquire_names.insert(*op, name.clone());
                    }
                    Command::OpenSession { op, .. } => {
                        self.session_ops.insert(*op, now);
                    }
                    Command::Renew { op, .. } => {
                        self.session_ops.insert(*op, now);
                        self.renew_steps.insert(*op, self.step_no);
                    }
                    Command::Release {
                        session,
                        name,
                        token,
                        ..
                    } => {
                        let deadline = self.deadlines.get(session).copied();
                        for info in self.terms.values() {
                            let t = &info.term;
                            if t.session != *session || t.name != *name || t.token != *token {
                                continue;
                            }
                            if info.state == TermState::Open {
                                return self.violation(&format!(
                                    "release of {} ({name}, token {token}) before its revoke (S3.5)",
                                    t.id
                                ));
                            }
                            let until = match (deadline, info.revoked_deadline) {
                                (Some(d), Some(r)) => Some(d.min(r)),
                                (d, r) => d.or(r),
                            };
                            if info.handover_wait
                                && !info.task_exited
                                && until.is_some_and(|d| now < d)
                            {
                                return self.violation(&format!(
                                    "release of {} before its task exited or the deadline passed (S6.1)",
                                    t.id
                                ));
                            }
                        }
                        let r = self
                            .released
                            .entry((*session, name.clone()))
                            .or_insert(*token);
                        *r = (*r).max(*token);
                    }
                    Command::Withdraw { session, name, .. } => {
                        // S4.5: a withdraw gives up a wait, never a term.
                        if Some(*session) != self.session {
                            return self.violation(&format!(
                                "withdraw for {session:?}, not the current session {:?}",
                                self.session
                            ));
                        }
                        if let Some(info) = self.terms.values().find(|i| {
                            i.state == TermState::Open
                                && i.term.session == *session
                                && i.term.name == *name
                        }) {
                            return self.violation(&format!(
                                "withdraw of {name} while {} is held (S4.5)",
                                info.term.id
                            ));
                        }
                    }
                    _ => {}
                }
                self.pending.push(cmd);
            }
            Output::Event(event) => match event {
                Event::Elected { term } => return self.on_elected(term),
                Event::Revoked { term, reason } => {
                    self.stats.revoked += 1;
                    let Some(info) = self.terms.get_mut(&term.id) else {
                        return self.violation(&format!("Revoked of unknown {}", term.id));
                    };
                    if info.term != term {
                        return self.violation(&format!("Revoked {} with other content", term.id));
                    }
                    if info.state != TermState::Open {
                        let state = info.state;
                        return self.violation(&format!(
                            "second Revoked ({reason}) of {} in state {state:?} (S7.1, S7.7)",
                            term.id
                        ));
                    }
                    info.state = TermState::Revoked(reason);
                    info.revoked_deadline = self.deadlines.get(&term.session).copied();
                    info.handover_wait =
                        reason.is_voluntary() && info.task_started && !info.task_exited;
                }
                Event::DeadlineChanged { session, deadline } => {
                    // S2.1: counted from the send, shortened by drift and margin.
                    match self.ctx.deadline_bound {
                        Some(bound) if deadline <= bound => {}
                        bound => {
                            return self.violation(&format!(
                                "deadline {deadline:?} later than S2.1 allows ({bound:?})"
                            ))
                        }
                    }
                    if self.ended.contains(&session) {
                        return self.violation(&format!(
                            "deadline of ended session {session:?} moved (S2.3)"
                        ));
                    }
                    if let Some(old) = self.deadlines.get(&session) {
                        if now >= *old {
                            return self.violation(&format!(
                                "deadline {old:?} had passed, yet moved to {deadline:?} (S2.3)"
                            ));
                        }
                    }
                    if Some(session) != self.session {
                        self.session = Some(session);
                    }
                    self.deadlines.insert(session, deadline);
                }
                Event::SessionStateChanged { state, session } => {
                    if state == SessionState::Opening || state == SessionState::Closed {
                        if let Some(old) = self.session.take() {
                            self.ended.insert(old);
                        }
                        self.inflight.clear();
                    } else if session.is_some() {
                        self.session = session;
                    }
                }
                Event::LockFailed { name, .. } => {
                    self.inflight.remove(&name);
                }
                Event::Closed => self.closed = true,
                Event::Diagnostic {
                    level: Level::Error,
                    message,
                } => return self.violation(&format!("ERROR diagnostic: {message}")),
                _ => {}
            },
            Output::Task(TaskOrder::Start { term }) => match self.terms.get_mut(&term.id) {
                Some(info) if info.state == TermState::Open => info.task_started = true,
                _ => return self.violation(&format!("task Start for {} not open", term.id)),
            },
            Output::Task(TaskOrder::Interrupt { term }) => match self.terms.get(&term.id) {
                Some(info) if matches!(info.state, TermState::Revoked(_)) => {}
                _ => {
                    return self.violation(&format!(
                        "Interrupt for {} before its Revoked (S6.1)",
                        term.id
                    ))
                }
            },
        }
        Ok(None)
    }

    fn on_elected(&mut self, term: Term) -> Result<Option<TermId>, String> {
        self.stats.elected += 1;
        let now = self.now;
        // S4.3: only from the reply to the election's current attempt.
        if self.ctx.current_acquire.as_ref() != Some(&term.name) {
            return self.violation(&format!(
                "{} ({}) created by something other than the reply to its current attempt (S4.3)",
                term.id, term.name
            ));
        }
        self.ctx.current_acquire = None;
        if self.terms.contains_key(&term.id) {
            return self.violation(&format!("{} elected twice", term.id));
        }
        if Some(term.session) != self.session {
            return self.violation(&format!("{} of a session that is not current", term.id));
        }
        // S4.3: before the session's local deadline.
        match self.deadlines.get(&term.session) {
            Some(d) if now < *d => {}
            d => {
                return self.violation(&format!(
                    "{} created at or after the deadline {d:?} (S4.3)",
                    term.id
                ))
            }
        }
        // S4.3: above every token this session released for the name.
        if let Some(r) = self.released.get(&(term.session, term.name.clone())) {
            if term.token <= *r {
                return self.violation(&format!(
                    "{} has token {} <= {} released by its session (S4.3)",
                    term.id, term.token, r
                ));
            }
        }
        // S3.2: strictly increasing tokens, unless the backend broke that itself.
        if let Some(last) = self.last_token.get(&term.name) {
            if term.token <= *last && !self.lied.contains(&term.name) {
                return self.violation(&format!(
                    "{} of {} has token {} <= the previous term's {} (S3.2)",
                    term.id, term.name, term.token, last
                ));
            }
        }
        self.last_token.insert(term.name.clone(), term.token);
        self.seen_terms.push(term.id);
        self.terms.insert(
            term.id,
            TermInfo {
                term: term.clone(),
                state: TermState::Open,
                task_started: false,
                task_exited: false,
                handover_wait: false,
                revoked_deadline: None,
                elected_step: self.step_no,
            },
        );
        if self.reject_next {
            self.reject_next = false;
            return Ok(Some(term.id));
        }
        Ok(None)
    }

    fn check_state(&mut self) -> Result<(), String> {
        let now = self.now;
        // Attempts the engine has timed out by now (S2.4): no longer in flight.
        let timeout = self.engine.call_timeout();
        self.inflight.retain(|_, (_, sent)| now < *sent + timeout);
        for (s, d) in &self.deadlines {
            if now >= *d {
                self.ended.insert(*s);
            }
        }
        // A stuck deadline makes a driver spin.
        if let Some(at) = self.engine.poll_timeout() {
            if at <= now {
                return self.violation(&format!("poll_timeout {at:?} is not after now"));
            }
        }
        // No term is valid after its session's deadline (S2.3, S3.3), and
        // the engine's held terms are exactly the open ones.
        let open: BTreeSet<TermId> = self
            .terms
            .iter()
            .filter(|(_, i)| i.state == TermState::Open)
            .map(|(id, _)| *id)
            .collect();
        for id in &open {
            let session = self.terms[id].term.session;
            match self.deadlines.get(&session) {
                Some(d) if now < *d => {}
                _ => return self.violation(&format!("{id} still open after its deadline (S2.3)")),
            }
            if Some(session) != self.session {
                return self.violation(&format!("{id} open but its session is not current"));
            }
        }
        let snapshot = self.engine.snapshot(now);
        let held: BTreeSet<TermId> = snapshot
            .entries
            .iter()
            .filter_map(|e| e.term.map(|(id, _)| id))
            .collect();
        if held != open {
            return self.violation(&format!(
                "engine holds {held:?} but the events leave {open:?} open (S7.1)"
            ));
        }
        for e in &snapshot.entries {
            if let Some((id, _)) = e.handover_pending {
                if !matches!(self.terms.get(&id).map(|i| i.state), Some(TermState::Revoked(r)) if r.is_voluntary())
                {
                    return self.violation(&format!("handover of {id} not voluntarily revoked"));
                }
            }
        }
        Ok(())
    }

    /// Closes the client, drives it to `Closed` with truthful replies and
    /// exiting tasks, and checks that every term was revoked exactly once.
    ///
    /// # Errors
    /// A description of the first violated invariant.
    pub fn finish(&mut self) -> Result<(), String> {
        self.step(&Action::Close)?;
        let open: Vec<TermId> = self
            .terms
            .iter()
            .filter(|(_, i)| i.state == TermState::Open)
            .map(|(id, _)| *id)
            .collect();
        if !open.is_empty() {
            return self.violation(&format!("{open:?} still open after close (S1.4, S7.1)"));
        }
        for _ in 0..64 {
            if self.closed {
                return Ok(());
            }
            let exits: Vec<TermId> = self
                .terms
                .iter()
                .filter(|(_, i)| i.task_started && !i.task_exited)
                .map(|(id, _)| *id)
                .collect();
            for term in exits {
                self.step_input(Input::TaskExited {
                    term,
                    outcome: TaskOutcome::Returned,
                })?;
            }
            while !self.pending.is_empty() {
                self.step(&Action::Reply {
                    pick: 0,
                    answer: Answer::Truthful,
                    keep: false,
                })?;
            }
            self.step(&Action::Time(TimeMove::ToTimeout))?;
        }
        if self.closed {
            Ok(())
        } else {
            self.violation("close never completed")
        }
    }

    fn step_input(&mut self, input: Input) -> Result<(), String> {
        self.step_no += 1;
        self.ctx = StepCtx::default();
        self.deliver(input)?;
        self.after_step()
    }
}

/// Runs a whole stream, then closes; `Err` names the first violation.
///
/// # Errors
/// A description of the first violated invariant.
pub fn run(setup: &Setup, actions: &[Action]) -> Result<HarnessStats, String> {
    run_with(Harness::new(setup), actions)
}

/// Runs a stream as [`run`] does, and returns the violation with a trace of
/// every action, input and output.
pub fn run_traced(setup: &Setup, actions: &[Action]) -> Result<HarnessStats, String> {
    let mut h = Harness::new(setup);
    h.trace = Some(Vec::new());
    let result = run_inner(&mut h, actions);
    result.map_err(|e| {
        let trace = h.trace.take().unwrap_or_default();
        format!("{e}\ntrace:\n{}", trace.join("\n"))
    })
}

fn run_with(mut h: Harness, actions: &[Action]) -> Result<HarnessStats, String> {
    run_inner(&mut h, actions)
}

fn run_inner(h: &mut Harness, actions: &[Action]) -> Result<HarnessStats, String> {
    // The outputs of `Engine::new` (the first OpenSession).
    h.after_step()?;
    for a in actions {
        h.step(a)
            .map_err(|e| format!("{e}\n  after action {a:?}"))?;
    }
    h.finish()?;
    Ok(h.stats)
}
