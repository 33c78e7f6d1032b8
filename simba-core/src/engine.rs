//! The engine: one session and any number of elections and locks on it.

use crate::config::{Fraction, SimbaConfig};
use crate::election::{
    Attempt, Entry, EntrySnapshot, Handover, Held, Kind, LockWait, SessionSnapshot, Snapshot,
    Status,
};
use crate::error::{ApiError, BackendError, BackendErrorKind};
use crate::ids::{OpId, SessionId, TermId, Token};
use crate::lease::{local_validity, renew_period, renewal_backoff, task_failure_backoff};
use crate::name::LeaseName;
use crate::protocol::{
    AcquireOutcome, Command, Event, Input, Level, Output, RenewError, Renewal, RevokeReason,
    SessionGrant, SessionState, TaskExitAction, TaskExitPolicy, TaskOrder, TaskOutcome, Term,
};
use crate::time::Timestamp;
use crate::timers::Timers;
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

/// What a backend supplies about itself to the engine.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BackendProfile {
    /// The fraction of the granted session timeout that one renewal proves
    /// (S8.5): [`Fraction::ONE`] for SQL, Redis and etcd; 5/12 for ZooKeeper.
    pub renewal_proves: Fraction,
}

/// Counters for observability; they never influence behaviour.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Replies dropped because their command was stale, duplicated or unknown.
    pub stale_replies: u64,
    /// Renew commands emitted.
    pub renewals: u64,
    /// Renewals that failed or timed out.
    pub renewal_failures: u64,
    /// Acquire commands emitted.
    pub acquires: u64,
    /// Release commands emitted.
    pub releases: u64,
    /// Sessions opened.
    pub sessions: u64,
    /// Terms created.
    pub terms: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CallKind {
    Open,
    Renew,
    Close,
}

impl CallKind {
    fn label(self) -> &'static str {
        match self {
            CallKind::Open => "open",
            CallKind::Renew => "renew",
            CallKind::Close => "close",
        }
    }
}

/// The one session call in flight (open, renew or close).
#[derive(Clone, Copy, Debug)]
struct Call {
    op: OpId,
    kind: CallKind,
    sent_at: Timestamp,
    sent_seq: u64,
}

#[derive(Debug)]
struct Session {
    state: SessionState,
    id: Option<SessionId>,
    deadline: Option<Timestamp>,
    period: Duration,
    shortened_reported: bool,
    call: Option<Call>,
    next_call: Option<Timestamp>,
    open_failures: u32,
}

/// An acquire command whose reply has not arrived (current or abandoned).
#[derive(Clone, Debug)]
struct AcquireOp {
    name: LeaseName,
    session: SessionId,
    sent_at: Timestamp,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum TimerKey {
    Session,
    Entry(LeaseName),
}

/// Simba's sans-IO engine: one session on the backend, and any number of
/// elections and locks on it. See the [crate documentation](crate) for the
/// drive loop, the time contract and the error policy.
#[derive(Debug)]
pub struct Engine {
    config: SimbaConfig,
    profile: BackendProfile,
    rng: fastrand::Rng,
    now: Timestamp,
    seq: u64,
    next_op: u64,
    next_term: u64,
    session: Session,
    entries: BTreeMap<LeaseName, Entry>,
    /// Acquire commands awaiting a reply, current or abandoned.
    acquires: BTreeMap<OpId, AcquireOp>,
    /// Live and handed-over terms, to find an entry from a term id.
    term_names: BTreeMap<TermId, LeaseName>,
    /// The highest token this session released, per name (S4.3).
    released: BTreeMap<LeaseName, Token>,
    timers: Timers<TimerKey>,
    /// Entries whose timer must be recomputed (duplicates are harmless).
    dirty: Vec<LeaseName>,
    out: VecDeque<Output>,
    closing: bool,
    stats: Stats,
}

impl Engine {
    /// A new engine that starts opening its session at once.
    ///
    /// ```
    /// use simba_core::{BackendProfile, Command, Engine, Output, SimbaConfig, Timestamp};
    /// let mut engine = Engine::new(SimbaConfig::default(), BackendProfile::default(), Timestamp::ZERO);
    /// let opens = std::iter::from_fn(|| engine.poll_output())
    ///     .filter(|o| matches!(o, Output::Command(Command::OpenSession { .. })))
    ///     .count();
    /// assert_eq!(opens, 1);
    /// ```
    pub fn new(config: SimbaConfig, profile: BackendProfile, now: Timestamp) -> Engine {
        let mut engine = Engine {
            rng: fastrand::Rng::with_seed(config.seed()),
            session: Session {
                state: SessionState::Opening,
                id: None,
                deadline: None,
                period: config.renew_interval(),
                shortened_reported: false,
                call: None,
                next_call: Some(now),
                open_failures: 0,
            },
            config,
            profile,
            now,
            seq: 0,
            next_op: 0,
            next_term: 0,
            entries: BTreeMap::new(),
            acquires: BTreeMap::new(),
            term_names: BTreeMap::new(),
            released: BTreeMap::new(),
            timers: Timers::new(),
            dirty: Vec::new(),
            out: VecDeque::new(),
            closing: false,
            stats: Stats::default(),
        };
        engine.emit(Event::SessionStateChanged {
            state: SessionState::Opening,
            session: None,
        });
        engine.finish();
        engine
    }

    // ----- getters -------------------------------------------------------

    /// The configuration.
    pub fn config(&self) -> &SimbaConfig {
        &self.config
    }

    /// How long a backend call may take before it counts as failed: the
    /// renewal period in force (S2.4, S8.3). Drivers cancel calls after it.
    pub fn call_timeout(&self) -> Duration {
        self.session.period
    }

    /// The current session and its local deadline, once a session is open.
    pub fn session_deadline(&self) -> Option<(SessionId, Timestamp)> {
        Some((self.session.id?, self.session.deadline?))
    }

    /// The session state (S1.5).
    pub fn session_state(&self) -> SessionState {
        self.session.state
    }

    /// Counters for observability.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// A picture of the session and every election and lock (S1.5).
    pub fn snapshot(&self, now: Timestamp) -> Snapshot {
        let now = now.max(self.now);
        let time_to_deadline = match (self.session.id, self.session.deadline) {
            (Some(_), Some(d)) => Some(d - now),
            _ => None,
        };
        Snapshot {
            session: SessionSnapshot {
                state: self.session.state,
                id: self.session.id,
                time_to_deadline,
                renew_period: self.session.period,
            },
            entries: self
                .entries
                .iter()
                .map(|(name, e)| EntrySnapshot {
                    name: name.clone(),
                    kind: e.kind,
                    status: e.status,
                    term: e.held.as_ref().map(|h| (h.term.id, h.term.token)),
                    handover_pending: e.handover.as_ref().map(|h| (h.term.id, h.term.token)),
                })
                .collect(),
        }
    }

    // ----- outputs -------------------------------------------------------

    /// The next output to act on, in order. Drain it after every call.
    pub fn poll_output(&mut self) -> Option<Output> {
        self.out.pop_front()
    }

    /// The one next instant at which [`Engine::handle_timeout`] must be
    /// called. Always later than the `now` of the last call.
    pub fn poll_timeout(&self) -> Option<Timestamp> {
        self.timers.next()
    }

    // ----- API calls -----------------------------------------------------

    /// Starts competing for `name` as an election (S4.1). With `runs_task`,
    /// every term starts a task and voluntary handovers wait for it (S6.1).
    ///
    /// # Errors
    /// [`ApiError::AlreadyStarted`] if the name is in use on this engine
    /// (S7.4); [`ApiError::Closed`] once `close` was called.
    pub fn start_election(
        &mut self,
        now: Timestamp,
        name: LeaseName,
        runs_task: bool,
    ) -> Result<(), ApiError> {
        self.insert(
            now,
            name,
            Kind::Election,
            runs_task,
            LockWait::Forever,
            TaskExitPolicy::default(),
        )
    }

    /// As [`Engine::start_election`] with a task, and `policy` deciding what
    /// a task that ends on its own does to its term (S6.5).
    ///
    /// # Errors
    /// As [`Engine::start_election`].
    pub fn start_task_election(
        &mut self,
        now: Timestamp,
        name: LeaseName,
        policy: TaskExitPolicy,
    ) -> Result<(), ApiError> {
        self.insert(now, name, Kind::Election, true, LockWait::Forever, policy)
    }

    /// Starts acquiring `name` as a lock: one term only (S5.3).
    ///
    /// # Errors
    /// As [`Engine::start_election`].
    pub fn acquire_lock(
        &mut self,
        now: Timestamp,
        name: LeaseName,
        wait: LockWait,
        runs_task: bool,
    ) -> Result<(), ApiError> {
        self.insert(
            now,
            name,
            Kind::Lock,
            runs_task,
            wait,
            TaskExitPolicy::StopElection,
        )
    }

    fn insert(
        &mut self,
        now: Timestamp,
        name: LeaseName,
        kind: Kind,
        runs_task: bool,
        wait: LockWait,
        policy: TaskExitPolicy,
    ) -> Result<(), ApiError> {
        self.advance(now);
        // Every path runs `finish`, errors too: the deadlines due at `now`
        // fire, so `poll_timeout` stays later than `now`.
        if self.closing {
            self.finish();
            return Err(ApiError::Closed);
        }
        if self.entries.contains_key(&name) {
            self.finish();
            return Err(ApiError::AlreadyStarted(name));
        }
        let mut entry = Entry::new(kind, runs_task, wait, self.now);
        entry.exit_policy = policy;
        self.entries.insert(name.clone(), entry);
        self.dirty.push(name);
        self.finish();
        Ok(())
    }

    /// Stops an election or releases a lock (S6.1): revokes the term,
    /// interrupts its task, releases the lease once the task has exited or
    /// the deadline has passed, then emits [`Event::Completed`].
    ///
    /// # Errors
    /// [`ApiError::NotStarted`] if no election or lock has that name.
    pub fn stop(&mut self, now: Timestamp, name: &LeaseName) -> Result<(), ApiError> {
        self.advance(now);
        let Some(entry) = self.entries.get_mut(name) else {
            self.finish();
            return Err(ApiError::NotStarted(name.clone()));
        };
        if entry.stopping {
            self.finish();
            return Ok(());
        }
        entry.stopping = true;
        entry.status = Status::Stopped;
        entry.attempt = None;
        entry.cooldown_until = None;
        let _ = self.revoke(name, RevokeReason::Stopped);
        self.after_handover_step(name);
        self.finish();
        Ok(())
    }

    /// Steps an election down (S6.4): hands the lease over as `stop` does,
    /// then stays out of the competition for `cooldown`, counted from now.
    ///
    /// # Errors
    /// [`ApiError::NotStarted`], or [`ApiError::WrongKind`] for a lock.
    pub fn step_down(
        &mut self,
        now: Timestamp,
        name: &LeaseName,
        cooldown: Duration,
    ) -> Result<(), ApiError> {
        self.advance(now);
        let until = self.now + cooldown;
        let Some(entry) = self.entries.get_mut(name) else {
            self.finish();
            return Err(ApiError::NotStarted(name.clone()));
        };
        if entry.kind != Kind::Election {
            let error = ApiError::WrongKind {
                name: name.clone(),
                expected: Kind::Election.as_str(),
                actual: entry.kind.as_str(),
            };
            self.finish();
            return Err(error);
        }
        if entry.stopping {
            self.finish();
            return Ok(());
        }
        entry.status = Status::CoolingDown;
        entry.cooldown_until = Some(until);
        entry.attempt = None;
        entry.pending_completion = true;
        let _ = self.revoke(name, RevokeReason::SteppedDown);
        self.after_handover_step(name);
        self.finish();
        Ok(())
    }

    /// Closes the client (S1.4): stops every election and lock, waits for
    /// their handovers, closes the session (releasing all its leases at
    /// once), then emits [`Event::Closed`]. Calling it again does nothing.
    pub fn close(&mut self, now: Timestamp) {
        self.advance(now);
        if self.closing {
            self.finish();
            return;
        }
        self.closing = true;
        let names: Vec<LeaseName> = self.entries.keys().cloned().collect();
        for name in &names {
            if let Some(entry) = self.entries.get_mut(name) {
                if !entry.stopping {
                    entry.stopping = true;
                    entry.status = Status::Stopped;
                    entry.attempt = None;
                    entry.cooldown_until = None;
                    let _ = self.revoke(name, RevokeReason::Stopped);
                }
            }
            self.after_handover_step(name);
        }
        self.maybe_finish_close();
        self.finish();
    }

    // ----- inputs --------------------------------------------------------

    /// Feeds one fact: a backend reply, a release broadcast, a task exit or
    /// a refused callback. Backend failures are data here, never an error,
    /// and no input (stale, duplicated, malformed) can make the engine panic.
    pub fn handle(&mut self, now: Timestamp, input: Input) {
        self.advance(now);
        match input {
            Input::SessionOpened { op, result } => self.on_session_opened(op, result),
            Input::RenewReplied { op, result } => self.on_renew_replied(op, result),
            Input::AcquireReplied { op, result } => self.on_acquire_replied(op, result),
            Input::ReleaseReplied { op: _, result } => {
                if let Err(error) = result {
                    self.emit(Event::BackendFailed {
                        command: "release",
                        error,
                    });
                }
            }
            Input::SessionClosed { op, result } => self.on_session_closed(op, result),
            // Groups (S10) and schedule slots (S11) are not driven by the
            // engine yet: a reply to a command it never sent is stale.
            Input::GroupJoined { .. } | Input::GroupLeft { .. } | Input::SlotClaimed { .. } => {}
            Input::ReleaseBroadcast { name } => self.on_release_broadcast(&name),
            Input::TaskExited { term, outcome } => self.on_task_exited(term, outcome),
            Input::ElectedRejected { term } => self.on_elected_rejected(term),
        }
        self.finish();
    }

    /// Lets time pass: handles every deadline due at `now`.
    pub fn handle_timeout(&mut self, now: Timestamp) {
        self.advance(now);
        self.finish();
    }

    // ----- plumbing ------------------------------------------------------

    /// Clamps `now` so time never runs backwards inside the engine.
    fn advance(&mut self, now: Timestamp) {
        self.now = self.now.max(now);
        self.seq += 1;
    }

    fn emit(&mut self, event: Event) {
        self.out.push_back(Output::Event(event));
    }

    fn command(&mut self, command: Command) {
        self.out.push_back(Output::Command(command));
    }

    fn op(&mut self) -> OpId {
        self.next_op += 1;
        OpId(self.next_op)
    }

    fn deadline_passed(&self) -> bool {
        self.session.deadline.is_some_and(|d| self.now >= d)
    }

    fn can_acquire(&self) -> bool {
        !self.closing
            && self.session.id.is_some()
            && matches!(
                self.session.state,
                SessionState::Live | SessionState::Suspended
            )
            && !self.deadline_passed()
    }

    /// Runs every due deadline, then re-arms the timers of what changed.
    /// Each handler moves its own timer past `now`, so this terminates; the
    /// bound only turns an engine bug into an ERROR diagnostic, not a hang.
    fn finish(&mut self) {
        let limit = 64 + 8 * self.entries.len();
        for _ in 0..limit {
            self.rearm();
            // The session first: a passed deadline must end terms before
            // any entry acts on them. Then the earliest due entry, one at a
            // time (no allocation on the common path).
            if self.timers.is_due(&TimerKey::Session, self.now) {
                self.on_session_wake();
                continue;
            }
            match self.timers.first_due(self.now) {
                Some(TimerKey::Entry(name)) => self.on_entry_wake(&name),
                Some(TimerKey::Session) => self.on_session_wake(),
                None => return,
            }
        }
        self.emit(Event::Diagnostic {
            level: Level::Error,
            message: "engine bug: a deadline did not move past now".into(),
        });
        let stuck = self.timers.due(self.now);
        for key in stuck {
            self.timers.set(&key, None);
        }
    }

    fn rearm(&mut self) {
        let session_wake = self.session_wake();
        self.timers.set(&TimerKey::Session, session_wake);
        let can_acquire = self.can_acquire();
        let mut timeout = self.call_timeout();
        if can_acquire && self.mutant_is(MutantKind::AcquireWhileInFlight) {
            // The mutant re-sends halfway through an attempt's time.
            timeout /= 2;
        }
        // Draining keeps the buffer's capacity: no allocation per input.
        for name in self.dirty.drain(..) {
            let wake = self
                .entries
                .get(&name)
                .and_then(|e| e.wake(can_acquire, timeout));
            self.timers.set(&TimerKey::Entry(name), wake);
        }
    }

    fn mark_all_dirty(&mut self) {
        self.dirty.extend(self.entries.keys().cloned());
    }

    fn session_wake(&self) -> Option<Timestamp> {
        let s = &self.session;
        let mut wake = s.next_call;
        let renew_never_times_out = self.mutant_is(MutantKind::RenewNeverTimesOut);
        if let Some(call) = s
            .call
            .filter(|c| !(renew_never_times_out && c.kind == CallKind::Renew))
        {
            let t = call.sent_at + s.period;
            wake = Some(wake.map_or(t, |w| w.min(t)));
        }
        if s.id.is_some() {
            if let Some(d) = s.deadline {
                let late_reply_may_extend = self.mutant_late_reply_extends()
                    && matches!(
                        s.call,
                        Some(Call {
                            kind: CallKind::Renew,
                            ..
                        })
                    );
                if !late_reply_may_extend {
                    wake = Some(wake.map_or(d, |w| w.min(d)));
                }
            }
        }
        wake
    }

    #[cfg(feature = "mutants")]
    fn mutant_late_reply_extends(&self) -> bool {
        self.mutant_is(MutantKind::LateReplyExtends)
    }

    #[cfg(not(feature = "mutants"))]
    fn mutant_late_reply_extends(&self) -> bool {
        false
    }

    // ----- the session (S1, S2, S8.3, S8.4) ------------------------------

    fn set_state(&mut self, state: SessionState) {
        if self.session.state != state {
            self.session.state = state;
            let session = self.session.id;
            self.emit(Event::SessionStateChanged { state, session });
        }
    }

    fn on_session_wake(&mut self) {
        let now = self.now;
        // S2.3: the local deadline has passed; the session is over.
        if self.session.id.is_some()
            && self.deadline_passed()
            && !(self.mutant_late_reply_extends()
                && matches!(
                    self.session.call,
                    Some(Call {
                        kind: CallKind::Renew,
                        ..
                    })
                ))
        {
            self.end_session(RevokeReason::DeadlinePassed);
            return;
        }
        // S2.4: a call that outlives the renewal period in force has failed.
        let renew_never_times_out = self.mutant_is(MutantKind::RenewNeverTimesOut);
        if let Some(call) = self
            .session
            .call
            .filter(|c| !(renew_never_times_out && c.kind == CallKind::Renew))
        {
            if now >= call.sent_at + self.session.period {
                self.session.call = None;
                let error = BackendError::new(
                    BackendErrorKind::Timeout,
                    format!("{} call timed out", call.kind.label()),
                );
                match call.kind {
                    CallKind::Open => self.open_failed(error),
                    CallKind::Renew => self.renew_failed(error),
                    CallKind::Close => self.finalize_close(),
                }
                return;
            }
        }
        if self.session.call.is_none() && self.session.next_call.is_some_and(|t| t <= now) {
            self.session.next_call = None;
            // While closing, keep renewing: handovers may still be waiting.
            match (self.session.id, self.closing) {
                (None, false) => self.send_open(),
                (Some(session), _) => self.send_renew(session),
                (None, true) => {}
            }
        }
    }

    fn send_open(&mut self) {
        let op = self.op();
        self.session.call = Some(Call {
            op,
            kind: CallKind::Open,
            sent_at: self.now,
            sent_seq: self.seq,
        });
        self.command(Command::OpenSession {
            op,
            lease_duration: self.config.lease_duration(),
        });
    }

    fn send_renew(&mut self, session: SessionId) {
        let op = self.op();
        self.session.call = Some(Call {
            op,
            kind: CallKind::Renew,
            sent_at: self.now,
            sent_seq: self.seq,
        });
        self.stats.renewals += 1;
        self.command(Command::Renew { op, session });
    }

    fn open_failed(&mut self, error: BackendError) {
        self.emit(Event::BackendFailed {
            command: "open",
            error,
        });
        self.session.open_failures = self.session.open_failures.saturating_add(1);
        let exp = self.session.open_failures.min(16);
        let backoff = self
            .config
            .min_backoff()
            .saturating_mul(1 << (exp - 1))
            .min(self.config.renew_interval());
        self.session.next_call = Some(self.now + backoff);
    }

    fn renew_failed(&mut self, error: BackendError) {
        self.stats.renewal_failures += 1;
        self.emit(Event::BackendFailed {
            command: "renew",
            error,
        });
        self.set_state(SessionState::Suspended);
        let left = self
            .session
            .deadline
            .map_or(Duration::ZERO, |d| d - self.now);
        let backoff = renewal_backoff(left, self.session.period, self.config.min_backoff());
        self.session.next_call = Some(self.now + backoff);
    }

    /// The local validity one reply proves, as S2.1 computes it.
    fn validity(&self, remaining: Duration) -> Duration {
        let drift = if self.mutant_is(MutantKind::IgnoreDrift) {
            0.0
        } else {
            self.config.drift()
        };
        let margin = if self.mutant_is(MutantKind::IgnoreMargin) {
            Duration::ZERO
        } else {
            self.config.margin()
        };
        local_validity(remaining, self.profile.renewal_proves, drift, margin)
    }

    /// `sent_at + validity` (S2.1): counted from the send, never the arrival.
    fn deadline_from(&self, sent_at: Timestamp, remaining: Duration) -> Timestamp {
        let base = if self.mutant_is(MutantKind::DeadlineFromArrival) {
            self.now
        } else {
            sent_at
        };
        base + self.validity(remaining)
    }

    /// Applies S8.4 to the validity one reply proved.
    fn apply_period(&mut self, validity: Duration) {
        let (period, shortened) = renew_period(self.config.renew_interval(), validity);
        let period = period.max(Duration::from_millis(1));
        if period != self.session.period {
            self.session.period = period;
            self.mark_all_dirty();
        }
        if shortened && !self.session.shortened_reported {
            if let Some(session) = self.session.id {
                self.session.shortened_reported = true;
                self.emit(Event::SessionLeaseShortened {
                    session,
                    validity,
                    renew_period: self.session.period,
                });
                self.emit(Event::Diagnostic {
                    level: Level::Warn,
                    message: format!(
                        "the backend grants a local validity of {validity:?}, too short for two renewals \
                         every {:?}; renewing every {:?} instead (S8.4)",
                        self.config.renew_interval(),
                        self.session.period
                    ),
                });
            }
        }
    }

    fn set_deadline(&mut self, deadline: Timestamp) {
        if self.session.deadline != Some(deadline) {
            self.session.deadline = Some(deadline);
            if let Some(session) = self.session.id {
                self.emit(Event::DeadlineChanged { session, deadline });
            }
        }
    }

    fn on_session_opened(&mut self, op: OpId, result: Result<SessionGrant, BackendError>) {
        let current =
            matches!(self.session.call, Some(c) if c.op == op && c.kind == CallKind::Open);
        if !current {
            self.stats.stale_replies += 1;
            // A late grant for an abandoned open: close that session so it
            // holds nothing until it expires (never our current session).
            if let Ok(grant) = result {
                if Some(grant.session) != self.session.id {
                    self.send_close_of(grant.session);
                }
            }
            return;
        }
        let Some(call) = self.session.call.take() else {
            return;
        };
        match result {
            Err(error) => self.open_failed(error),
            Ok(grant) => {
                if self.closing {
                    self.send_close_of(grant.session);
                    self.maybe_finish_close();
                    return;
                }
                let deadline = self.deadline_from(call.sent_at, grant.remaining);
                if deadline <= self.now {
                    // The grant was used up in transit: useless, and unsafe to use.
                    self.send_close_of(grant.session);
                    self.open_failed(BackendError::new(
                        BackendErrorKind::Timeout,
                        "the session grant expired before its reply arrived",
                    ));
                    return;
                }
                self.stats.sessions += 1;
                self.session.open_failures = 0;
                self.session.id = Some(grant.session);
                self.session.shortened_reported = false;
                self.released.clear();
                self.set_state(SessionState::Live);
                let validity = self.validity(grant.remaining);
                self.apply_period(validity);
                self.set_deadline(deadline);
                self.session.next_call = Some((call.sent_at + self.session.period).max(self.now));
                self.mark_all_dirty();
            }
        }
    }

    fn on_renew_replied(&mut self, op: OpId, result: Result<Renewal, RenewError>) {
        let current =
            matches!(self.session.call, Some(c) if c.op == op && c.kind == CallKind::Renew);
        if !current || self.session.id.is_none() {
            self.stats.stale_replies += 1;
            return;
        }
        let Some(call) = self.session.call.take() else {
            return;
        };
        // S2.3: once the deadline has passed, a late reply changes nothing.
        if self.deadline_passed() && !self.mutant_late_reply_extends() {
            self.stats.stale_replies += 1;
            return;
        }
        match result {
            Ok(renewal) => {
                let deadline = self.deadline_from(call.sent_at, renewal.remaining);
                let validity = self.validity(renewal.remaining);
                self.apply_period(validity);
                self.set_state(SessionState::Live);
                self.set_deadline(deadline);
                self.session.next_call = Some((call.sent_at + self.session.period).max(self.now));
                self.check_owned(renewal.owned, call.sent_seq);
            }
            Err(RenewError::Expired) => self.end_session(RevokeReason::SessionExpired),
            Err(RenewError::Backend(error)) => self.renew_failed(error),
        }
    }

    /// S3.4 `TakenOver`, and orphans: compares the leases the backend says
    /// this session owns with the terms it holds. Both sides are walked in
    /// name order, so this is linear after sorting the reply.
    fn check_owned(&mut self, mut owned: Vec<(LeaseName, Token)>, renew_seq: u64) {
        if !owned.is_sorted() {
            owned.sort_unstable();
        }
        let mut lost: Vec<LeaseName> = Vec::new();
        let mut orphans: Vec<(LeaseName, Token)> = Vec::new();
        let mut i = 0;
        let ignore_taken_over = self.mutant_is(MutantKind::IgnoreTakenOver);
        for (name, entry) in &self.entries {
            while i < owned.len() && owned[i].0 < *name {
                orphans.push(owned[i].clone());
                i += 1;
            }
            let start = i;
            while i < owned.len() && owned[i].0 == *name {
                i += 1;
            }
            let listed = &owned[start..i];
            if let Some(held) = &entry.held {
                // Only a term won before this renewal was sent is surely
                // visible to it (the backend may run calls in any order).
                if held.created_seq < renew_seq
                    && !ignore_taken_over
                    && !listed.iter().any(|(_, t)| *t == held.term.token)
                {
                    lost.push(name.clone());
                }
            }
            for (n, token) in listed {
                let known = entry.held.as_ref().is_some_and(|h| h.term.token == *token)
                    || entry
                        .handover
                        .as_ref()
                        .is_some_and(|h| h.term.token == *token);
                if !known && entry.attempt.is_none() {
                    orphans.push((n.clone(), *token));
                }
            }
        }
        orphans.extend_from_slice(&owned[i..]);
        for name in lost {
            // S3.2, S4.3: the backend says this session no longer owns the
            // term's token, so no later grant of it may become a new term.
            let token = self
                .entries
                .get(&name)
                .and_then(|e| e.held.as_ref())
                .map(|h| h.term.token);
            if let Some(token) = token {
                let max = self.released.entry(name.clone()).or_insert(token);
                *max = (*max).max(token);
            }
            if self.revoke(&name, RevokeReason::TakenOver) {
                self.after_involuntary_loss(&name);
            }
        }
        if let Some(session) = self.session.id {
            for (name, token) in orphans {
                // Owned but unknown: a lost acquire reply or a failed release.
                self.release(session, name, token);
            }
        }
    }

    /// The session is over (S1.2, S2.3): every term ends with `reason`, and
    /// a new session is opened (unless the client is closing).
    fn end_session(&mut self, reason: RevokeReason) {
        let old = self.session.id;
        let names: Vec<LeaseName> = self.entries.keys().cloned().collect();
        let now = self.now;
        for name in &names {
            let lost = self.revoke(name, reason);
            if let Some(entry) = self.entries.get_mut(name) {
                // Attempts on the old session are abandoned; candidates try
                // again as soon as the new session is open.
                entry.attempt = None;
                if entry.status == Status::Candidate {
                    entry.next_attempt = Some(now);
                }
                // A handover waits no longer: the deadline passed or the
                // session is gone, so the lease is not ours to hold.
                if let Some(h) = entry.handover.take() {
                    self.term_names.remove(&h.term.id);
                }
            }
            if lost {
                self.after_involuntary_loss(name);
            }
            self.after_handover_step(name);
        }
        if self.session.state == SessionState::Closed {
            // A close finished while the terms ended: nothing to reopen.
            return;
        }
        if reason == RevokeReason::DeadlinePassed {
            if let Some(old) = old {
                // The backend may still count the session alive: close it so
                // its leases free up without waiting for its expiry.
                self.send_close_of(old);
            }
        }
        self.session.id = None;
        self.session.deadline = None;
        self.session.call = None;
        self.session.period = self.config.renew_interval();
        self.released.clear();
        self.set_state(SessionState::Opening);
        self.mark_all_dirty();
        if self.closing {
            self.maybe_finish_close();
        } else {
            self.session.next_call = Some(self.now);
        }
    }

    fn send_close_of(&mut self, session: SessionId) {
        let op = self.op();
        self.command(Command::CloseSession { op, session });
    }

    fn on_session_closed(&mut self, op: OpId, result: Result<(), BackendError>) {
        let current =
            matches!(self.session.call, Some(c) if c.op == op && c.kind == CallKind::Close);
        if let Err(error) = result {
            self.emit(Event::BackendFailed {
                command: "close",
                error,
            });
        }
        if current {
            self.finalize_close();
        }
    }

    /// Once closing and every handover is done: close the session, then `Closed`.
    fn maybe_finish_close(&mut self) {
        if !self.closing || self.session.state == SessionState::Closed || !self.entries.is_empty() {
            return;
        }
        if matches!(self.session.call, Some(c) if c.kind == CallKind::Close) {
            return;
        }
        match self.session.id {
            Some(session) if !self.deadline_passed() => {
                let op = self.op();
                self.session.call = Some(Call {
                    op,
                    kind: CallKind::Close,
                    sent_at: self.now,
                    sent_seq: self.seq,
                });
                self.session.next_call = None;
                self.command(Command::CloseSession { op, session });
            }
            Some(session) => {
                self.send_close_of(session);
                self.finalize_close();
            }
            None => self.finalize_close(),
        }
    }

    fn finalize_close(&mut self) {
        if self.session.state == SessionState::Closed {
            return;
        }
        self.session.call = None;
        self.session.next_call = None;
        self.set_state(SessionState::Closed);
        self.session.id = None;
        self.session.deadline = None;
        self.emit(Event::Closed);
    }

    // ----- elections and locks (S4, S5, S6, S7.7) ------------------------

    fn on_entry_wake(&mut self, name: &LeaseName) {
        let now = self.now;
        let can_acquire = self.can_acquire();
        let timeout = self.call_timeout();
        let resend_early = self.mutant_is(MutantKind::AcquireWhileInFlight);
        if self
            .entries
            .get(name)
            .and_then(|e| e.handover.as_ref())
            .is_some_and(|h| h.until <= now)
        {
            // S6.2: the task ignored its interruption for the term's whole
            // remaining time; release without it.
            self.complete_handover(name);
        }
        let Some(entry) = self.entries.get_mut(name) else {
            // A removed entry's timer: disarm it.
            self.timers.set(&TimerKey::Entry(name.clone()), None);
            return;
        };
        self.dirty.push(name.clone());
        match entry.status {
            Status::CoolingDown => {
                if entry.cooldown_until.is_some_and(|t| t <= now) && entry.handover.is_none() {
                    entry.cooldown_until = None;
                    entry.status = Status::Candidate;
                    entry.next_attempt = Some(now);
                }
            }
            Status::Candidate => {
                let lock_expired = entry.kind == Kind::Lock
                    && matches!(entry.wait, LockWait::Until(t) if now >= t);
                if lock_expired {
                    self.lock_failed(name);
                } else if let Some(a) = &entry.attempt {
                    if now >= a.sent_at + timeout {
                        // S2.4: abandoned; a late reply releases what it won.
                        entry.attempt = None;
                        self.attempt_lost(name);
                    } else if resend_early && can_acquire && now >= a.sent_at + timeout / 2 {
                        // The mutant: a second acquire while this one is in flight.
                        self.send_acquire(name);
                    }
                } else if can_acquire && entry.next_attempt.is_some_and(|t| t <= now) {
                    self.send_acquire(name);
                }
            }
            Status::Leader | Status::Stopped => {}
        }
    }

    /// S4.1: `renew_interval / 2` plus a seeded jitter in `[0, retry_jitter)`.
    fn retry_delay(&mut self) -> Duration {
        let jitter = u64::try_from(self.config.retry_jitter().as_nanos()).unwrap_or(u64::MAX);
        let extra = if jitter == 0 {
            0
        } else {
            self.rng.u64(0..jitter)
        };
        self.config.renew_interval() / 2 + Duration::from_nanos(extra)
    }

    fn send_acquire(&mut self, name: &LeaseName) {
        let Some(session) = self.session.id else {
            return;
        };
        let op = self.op();
        let now = self.now;
        let Some(entry) = self.entries.get_mut(name) else {
            return;
        };
        entry.attempt = Some(Attempt { op, sent_at: now });
        entry.next_attempt = None;
        self.acquires.insert(
            op,
            AcquireOp {
                name: name.clone(),
                session,
                sent_at: now,
            },
        );
        self.prune_acquires();
        self.stats.acquires += 1;
        self.dirty.push(name.clone());
        self.command(Command::Acquire {
            op,
            session,
            name: name.clone(),
        });
    }

    /// Forgets abandoned acquires whose replies can no longer matter.
    fn prune_acquires(&mut self) {
        let horizon = self.config.lease_duration().saturating_mul(4);
        while let Some(entry) = self.acquires.first_entry() {
            if entry.get().sent_at + horizon < self.now {
                entry.remove();
            } else {
                break;
            }
        }
    }

    fn on_acquire_replied(&mut self, op: OpId, result: Result<AcquireOutcome, BackendError>) {
        let Some(sent) = self.acquires.remove(&op) else {
            self.stats.stale_replies += 1;
            return;
        };
        let name = sent.name;
        let mut current = self
            .entries
            .get(&name)
            .and_then(|e| e.attempt.as_ref())
            .is_some_and(|a| a.op == op);
        if !current
            && self.mutant_is(MutantKind::AcceptAbandonedAttempts)
            && self
                .entries
                .get(&name)
                .is_some_and(|e| e.status == Status::Candidate)
        {
            current = true;
        }
        if !current {
            self.stats.stale_replies += 1;
            // S4.3: a late reply to an abandoned attempt releases what it won.
            if let Ok(AcquireOutcome::Won { token, .. }) = result {
                let ours = self.entries.get(&name).is_some_and(|e| {
                    e.held.as_ref().is_some_and(|h| h.term.token == token)
                        || e.handover.as_ref().is_some_and(|h| h.term.token == token)
                });
                if !ours {
                    self.release(sent.session, name, token);
                }
            }
            return;
        }
        if let Some(entry) = self.entries.get_mut(&name) {
            entry.attempt = None;
        }
        self.dirty.push(name.clone());
        match result {
            Ok(AcquireOutcome::Won {
                token,
                remaining: _,
            }) => self.on_won(&name, token, sent.session),
            Ok(AcquireOutcome::Held { .. }) => self.attempt_lost(&name),
            Ok(AcquireOutcome::Expired) => {
                if Some(sent.session) == self.session.id {
                    self.end_session(RevokeReason::SessionExpired);
                } else {
                    self.attempt_lost(&name);
                }
            }
            Err(error) => {
                self.emit(Event::BackendFailed {
                    command: "acquire",
                    error,
                });
                self.attempt_lost(&name);
            }
        }
    }

    /// S4.3: a won lease becomes a term only from the current attempt,
    /// before the deadline, with a token above every one this session released.
    fn on_won(&mut self, name: &LeaseName, token: Token, session: SessionId) {
        let Some(current_session) = self.session.id else {
            return;
        };
        let session = if self.mutant_is(MutantKind::AcceptAbandonedAttempts) {
            current_session
        } else {
            session
        };
        if session != current_session {
            self.release(session, name.clone(), token);
            self.attempt_lost(name);
            return;
        }
        if self.deadline_passed() && !self.mutant_is(MutantKind::AcceptLateAcquire) {
            // The session is over; `finish` ends it right after this input.
            return;
        }
        if !self.mutant_is(MutantKind::SkipReleasedTokenCheck)
            && self.released.get(name).is_some_and(|r| token <= *r)
        {
            // A stale grant (its release may still be on the way): not a term.
            self.attempt_lost(name);
            return;
        }
        let Some(entry) = self.entries.get_mut(name) else {
            return;
        };
        if entry.held.is_some() || entry.status != Status::Candidate {
            return;
        }
        self.next_term += 1;
        let term = Term {
            id: TermId(self.next_term),
            name: name.clone(),
            token,
            session,
        };
        entry.status = Status::Leader;
        entry.next_attempt = None;
        entry.held = Some(Held {
            term: term.clone(),
            created_seq: self.seq,
            task_running: entry.runs_task,
            started_at: self.now,
        });
        let runs_task = entry.runs_task;
        self.stats.terms += 1;
        self.term_names.insert(term.id, name.clone());
        self.emit(Event::Elected { term: term.clone() });
        if runs_task {
            self.out.push_back(Output::Task(TaskOrder::Start { term }));
        }
    }

    /// The attempt did not win: retry later, or give up a `Try` lock.
    fn attempt_lost(&mut self, name: &LeaseName) {
        let delay = self.retry_delay();
        let now = self.now;
        let Some(entry) = self.entries.get_mut(name) else {
            return;
        };
        if entry.status != Status::Candidate {
            return;
        }
        if entry.kind == Kind::Lock && entry.wait == LockWait::Try {
            self.lock_failed(name);
            return;
        }
        entry.next_attempt = Some(now + delay);
        self.dirty.push(name.clone());
    }

    fn lock_failed(&mut self, name: &LeaseName) {
        if self.entries.remove(name).is_some() {
            self.dirty.push(name.clone());
            self.emit(Event::LockFailed { name: name.clone() });
            self.maybe_finish_close();
        }
    }

    fn on_release_broadcast(&mut self, name: &LeaseName) {
        let now = self.now;
        if let Some(entry) = self.entries.get_mut(name) {
            if entry.status == Status::Candidate && entry.attempt.is_none() {
                entry.next_attempt = Some(now);
                self.dirty.push(name.clone());
            }
        }
    }

    /// Ends the held term of `name`, if any, for `reason` (S3.4), in the
    /// order of S6: revoke, interrupt, then release now or after the task.
    fn revoke(&mut self, name: &LeaseName, reason: RevokeReason) -> bool {
        let deadline_passed = self.deadline_passed();
        let Some(entry) = self.entries.get_mut(name) else {
            return false;
        };
        let Some(held) = entry.held.take() else {
            return false;
        };
        if entry.status == Status::Leader {
            entry.status = Status::Candidate;
        }
        self.dirty.push(name.clone());
        let term = held.term;
        if reason.is_voluntary() && self.mutant_is(MutantKind::ReleaseBeforeRevoke) {
            self.release(term.session, term.name.clone(), term.token);
            self.emit(Event::Revoked {
                term: term.clone(),
                reason,
            });
            if held.task_running {
                self.out
                    .push_back(Output::Task(TaskOrder::Interrupt { term: term.clone() }));
            }
            self.term_names.remove(&term.id);
            return true;
        }
        // 1. revoke
        self.emit(Event::Revoked {
            term: term.clone(),
            reason,
        });
        // 2. interrupt
        if held.task_running {
            self.out
                .push_back(Output::Task(TaskOrder::Interrupt { term: term.clone() }));
        }
        if !reason.is_voluntary() {
            // S6.3: lost involuntarily; nothing to hand over.
            self.term_names.remove(&term.id);
            return true;
        }
        if held.task_running && !deadline_passed {
            // 3. hold the lease until the task exits or the deadline (as of
            //    now) passes.
            let until = self.session.deadline.unwrap_or(self.now);
            if let Some(entry) = self.entries.get_mut(name) {
                entry.handover = Some(Handover { term, until });
            }
        } else {
            // 4. release with the term's token.
            self.term_names.remove(&term.id);
            self.release_voluntarily(term);
        }
        true
    }

    /// Releases a voluntarily ended term, unless the client is closing: then
    /// the one `CloseSession` releases every lease at once (S1.4).
    fn release_voluntarily(&mut self, term: Term) {
        if !self.closing {
            self.release(term.session, term.name, term.token);
        }
    }

    /// S6.1 steps 4–5: the wait is over; release, then resolve what waited.
    fn complete_handover(&mut self, name: &LeaseName) {
        let Some(h) = self.entries.get_mut(name).and_then(|e| e.handover.take()) else {
            return;
        };
        self.term_names.remove(&h.term.id);
        self.release_voluntarily(h.term);
        self.dirty.push(name.clone());
        self.after_handover_step(name);
    }

    /// After an involuntary loss of a term: a lock is gone for good (S5.3);
    /// an election competes again at once (S5.2).
    fn after_involuntary_loss(&mut self, name: &LeaseName) {
        let now = self.now;
        let Some(entry) = self.entries.get_mut(name) else {
            return;
        };
        self.dirty.push(name.clone());
        if entry.stopping {
            return;
        }
        if entry.kind == Kind::Lock {
            self.entries.remove(name);
            self.maybe_finish_close();
        } else if entry.status == Status::Candidate {
            entry.attempt = None;
            entry.next_attempt = Some(now);
        }
    }

    /// Completes what waits on a handover: removes a stopped entry, resolves
    /// `stop()`/`step_down()` with [`Event::Completed`], finishes a close.
    fn after_handover_step(&mut self, name: &LeaseName) {
        let forget = self.mutant_is(MutantKind::ForgetCompletion);
        let Some(entry) = self.entries.get_mut(name) else {
            return;
        };
        if entry.handover.is_some() {
            return;
        }
        if entry.stopping {
            self.entries.remove(name);
            self.dirty.push(name.clone());
            if !forget {
                self.emit(Event::Completed { name: name.clone() });
            }
            self.maybe_finish_close();
        } else if entry.pending_completion {
            entry.pending_completion = false;
            self.dirty.push(name.clone());
            if !forget {
                self.emit(Event::Completed { name: name.clone() });
            }
        }
    }

    fn on_task_exited(&mut self, term: TermId, outcome: TaskOutcome) {
        let Some(name) = self.term_names.get(&term).cloned() else {
            return;
        };
        let Some(entry) = self.entries.get_mut(&name) else {
            self.term_names.remove(&term);
            return;
        };
        if entry
            .held
            .as_ref()
            .is_some_and(|h| h.term.id == term && h.task_running)
        {
            // S6.5: the task ended on its own while the term is held.
            self.task_ended_in_term(&name, outcome);
            return;
        }
        if entry.handover.as_ref().is_some_and(|h| h.term.id == term) {
            // S6.1 step 4: the task has exited; release with the term's token.
            self.complete_handover(&name);
        }
    }

    /// S6.5: applies the election's [`TaskExitPolicy`] to a task that ended
    /// while its term is held.
    fn task_ended_in_term(&mut self, name: &LeaseName, outcome: TaskOutcome) {
        let now = self.now;
        let lease = self.config.lease_duration();
        let interval = self.config.renew_interval();
        let keep_after_panic =
            outcome == TaskOutcome::Panicked && self.mutant_is(MutantKind::KeepTermAfterPanic);
        let Some(entry) = self.entries.get_mut(name) else {
            return;
        };
        let Some(held) = entry.held.as_mut() else {
            return;
        };
        // The task is gone: whatever happens next waits for nothing.
        held.task_running = false;
        let term = held.term.clone();
        let ran = now - held.started_at;
        let action = match (entry.exit_policy, entry.kind) {
            _ if keep_after_panic => TaskExitAction::KeptTerm,
            (TaskExitPolicy::KeepTerm, _) => TaskExitAction::KeptTerm,
            (TaskExitPolicy::StopElection, _) | (_, Kind::Lock) => TaskExitAction::Stopped,
            (TaskExitPolicy::GiveUpTerm, Kind::Election) if !outcome.is_failure() => {
                entry.task_failures = 0;
                TaskExitAction::Released
            }
            (TaskExitPolicy::GiveUpTerm, Kind::Election) => {
                // A task that ran for a lease duration or more starts the
                // count again: its failure is not part of a crash loop.
                entry.task_failures = if ran >= lease {
                    1
                } else {
                    entry.task_failures.saturating_add(1)
                };
                TaskExitAction::SteppedDown {
                    cooldown: task_failure_backoff(interval, entry.task_failures),
                    failures: entry.task_failures,
                }
            }
        };
        if !outcome.is_failure() && action != TaskExitAction::Released {
            entry.task_failures = 0;
        }
        self.emit(Event::TaskEnded {
            term,
            outcome,
            action,
        });
        match action {
            TaskExitAction::KeptTerm => {}
            TaskExitAction::Stopped => {
                if let Some(entry) = self.entries.get_mut(name) {
                    entry.stopping = true;
                    entry.status = Status::Stopped;
                    entry.attempt = None;
                    entry.cooldown_until = None;
                }
                let _ = self.revoke(name, RevokeReason::Stopped);
                self.after_handover_step(name);
            }
            TaskExitAction::Released => {
                let delay = self.retry_delay();
                let _ = self.revoke(name, RevokeReason::SteppedDown);
                if let Some(entry) = self.entries.get_mut(name) {
                    entry.attempt = None;
                    entry.next_attempt = Some(now + delay);
                }
            }
            TaskExitAction::SteppedDown { cooldown, .. } => {
                if let Some(entry) = self.entries.get_mut(name) {
                    entry.status = Status::CoolingDown;
                    entry.cooldown_until = Some(now + cooldown);
                    entry.attempt = None;
                }
                let _ = self.revoke(name, RevokeReason::SteppedDown);
            }
        }
        self.dirty.push(name.clone());
    }

    /// S7.7: nobody learned of the term, so it ends silently (no `Revoked`),
    /// its task never starts, and the election steps down for one lease duration.
    fn on_elected_rejected(&mut self, term: TermId) {
        let Some(name) = self.term_names.get(&term).cloned() else {
            return;
        };
        let until = self.now + self.config.lease_duration();
        let Some(entry) = self.entries.get_mut(&name) else {
            return;
        };
        let Some(held) = entry.held.take_if(|h| h.term.id == term) else {
            return;
        };
        self.term_names.remove(&term);
        let kind = entry.kind;
        if kind == Kind::Election {
            entry.status = Status::CoolingDown;
            entry.cooldown_until = Some(until);
        } else {
            entry.status = Status::Candidate;
        }
        self.out
            .retain(|o| !matches!(o, Output::Task(TaskOrder::Start { term: t }) if t.id == term));
        self.release(held.term.session, held.term.name, held.term.token);
        self.dirty.push(name.clone());
        if kind == Kind::Lock {
            self.lock_failed(&name);
        }
    }

    /// Emits a token-conditional release (S3.5) and remembers the token (S4.3).
    fn release(&mut self, session: SessionId, name: LeaseName, token: Token) {
        if Some(session) == self.session.id {
            let max = self.released.entry(name.clone()).or_insert(token);
            if token > *max {
                *max = token;
            }
        }
        let op = self.op();
        self.stats.releases += 1;
        self.command(Command::Release {
            op,
            session,
            name,
            token,
        });
    }
}

// ----- mutants ----------------------------------------------------------

#[cfg(feature = "mutants")]
use crate::mutant::Mutant as MutantKind;

/// Without the `mutants` feature the mutant checks are constant `false`.
#[cfg(not(feature = "mutants"))]
#[derive(Clone, Copy)]
enum MutantKind {
    IgnoreDrift,
    IgnoreMargin,
    DeadlineFromArrival,
    AcceptLateAcquire,
    SkipReleasedTokenCheck,
    ReleaseBeforeRevoke,
    AcceptAbandonedAttempts,
    ForgetCompletion,
    KeepTermAfterPanic,
    IgnoreTakenOver,
    RenewNeverTimesOut,
    AcquireWhileInFlight,
}

impl Engine {
    #[cfg(feature = "mutants")]
    fn mutant_is(&self, m: MutantKind) -> bool {
        self.config.mutant() == Some(m)
    }

    #[cfg(not(feature = "mutants"))]
    #[inline(always)]
    fn mutant_is(&self, _m: MutantKind) -> bool {
        false
    }
}
