//! The engine: one session and any number of elections and locks on it.
//!
//! The [`Engine`] struct, its getters, its inputs and the timer plumbing live
//! here; the rest is split by topic:
//!
//! - [`session`]: the session lifecycle (S1, S2, S8.3, S8.4);
//! - [`elections`]: elections and locks, terms and the hand-over order
//!   (S4, S5, S6, S7.7);
//! - [`groups`]: partitioned groups (S10);
//! - [`slots`]: schedule slot claims (S11).

mod elections;
mod groups;
mod session;
mod slots;

use self::elections::AcquireOp;
use self::groups::Group;
use self::session::Session;
use crate::config::{Fraction, SimbaConfig};
use crate::election::{Entry, EntrySnapshot, SessionSnapshot, Snapshot};
use crate::ids::{EntryId, OpId, SessionId, TermId, Token};
use crate::name::LeaseName;
use crate::protocol::{Command, Event, Input, Kind, Level, Output, SessionState};
use crate::time::Timestamp;
use crate::timers::Timers;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

/// What a backend supplies about itself to the engine.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BackendProfile {
    /// The fraction of the granted session timeout that one renewal proves
    /// (S8.5): [`Fraction::ONE`] for SQL, Redis and etcd; 5/12 for ZooKeeper.
    pub renewal_proves: Fraction,
    /// How many calls the backend serves at once (`simba-backends`'
    /// `Backend::max_concurrent_calls`): the engine keeps at most this many
    /// calls other than renewals and session openings in flight, holds the
    /// other commands back and lets the other due candidates wait their
    /// turn, oldest first (S4.6). `None`: no limit.
    pub call_slots: Option<usize>,
    /// How many acquires, releases and withdraws one call may carry
    /// (`simba-backends`' `Backend::max_batch`, S4.7): those the engine
    /// decides at one instant go out together in a [`Command::Batch`] of
    /// at most this many, which takes one call slot. 0 or 1: each is its
    /// own call.
    pub batch: usize,
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
    /// Withdraw commands emitted (S4.5).
    pub withdrawals: u64,
    /// Sessions opened.
    pub sessions: u64,
    /// Terms created.
    pub terms: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum TimerKey {
    Session,
    Entry(LeaseName),
    /// The oldest unanswered slot claim times out (S11.1, S2.4).
    Claims,
    /// The oldest acquire in flight reaches its call timeout, which frees
    /// its slot for a waiting candidate (S4.6).
    Slots,
}

/// A release decided by this engine (see `Engine::releasing`).
#[derive(Clone, Copy, Debug)]
struct Releasing {
    /// When it was sent (`None` while it waits for a call slot, S4.6):
    /// unanswered for a call timeout after it was sent, it counts as lost.
    sent_at: Option<Timestamp>,
    /// The input count when its reply came.
    answered_seq: Option<u64>,
    /// Whether a release broadcast of its name came since it was decided:
    /// the first is its own (S10.2), any later one another's release.
    heard: bool,
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
    next_entry: u64,
    session: Session,
    entries: BTreeMap<LeaseName, Entry>,
    /// Partitioned groups joined, by name (S10).
    groups: BTreeMap<LeaseName, Group>,
    /// While [`Engine::handle_all`] feeds a batch: the groups whose target
    /// (S10.2) is computed once the batch is in, not after each input.
    retarget_after: Option<BTreeSet<LeaseName>>,
    /// Acquire commands awaiting a reply, current or abandoned.
    acquires: BTreeMap<OpId, AcquireOp>,
    /// Live and handed-over terms, to find an entry from a term id.
    term_names: BTreeMap<TermId, LeaseName>,
    /// The highest token this session released, per name (S4.3).
    released: BTreeMap<LeaseName, Token>,
    /// Releases decided and not yet known to be applied, by name and
    /// token (S3.4 orphans): a renewal that lists such a lease as owned
    /// may predate the release, and is no reason to release it again.
    releasing: BTreeMap<(LeaseName, Token), Releasing>,
    /// The release commands in flight or waiting for a slot, by id.
    release_ops: BTreeMap<OpId, (LeaseName, Token)>,
    timers: Timers<TimerKey>,
    /// Entries whose timer must be recomputed (duplicates are harmless).
    dirty: Vec<LeaseName>,
    out: VecDeque<Output>,
    closing: bool,
    stats: Stats,
    /// Slot claims awaiting a reply (S11.1).
    claims: BTreeMap<OpId, slots::PendingClaim>,
    /// Withdraw commands awaiting a reply: when each was sent, its session
    /// and its name (S4.5).
    withdraws: BTreeMap<OpId, (Timestamp, SessionId, LeaseName)>,
    /// Names whose withdraw on the current session failed: withdrawn again
    /// after its next successful renewal, unless the name competes again by
    /// then (S4.5). Emptied when the session ends.
    withdraw_again: BTreeSet<LeaseName>,
    /// Due candidates that a release broadcast named since their last
    /// attempt (S4.2), waiting for a slot: they take the next free slots
    /// ahead of `waiting`, first come first served among themselves (S4.6).
    /// An acquire of a name just freed is likely to win; the others mostly
    /// ask for leases still held. An entry is here while its `parked` and
    /// `hinted` flags are both set.
    waiting_first: VecDeque<LeaseName>,
    /// Commands and due candidates waiting for a slot of the backend, first
    /// come first served (S4.6). A candidate's entry is here while its
    /// `parked` flag is set; a name whose entry is gone or no longer waits
    /// is skipped when it comes up.
    waiting: VecDeque<Waiting>,
    /// Calls other than acquires, renewals and session openings that were
    /// sent and are neither answered nor known past their call timeout,
    /// with when each was sent: they take a slot (S4.6). Kept only with a
    /// slot limit.
    calls_out: BTreeMap<OpId, (Timestamp, u64)>,
    /// The calls decided at this instant that go out together as one
    /// [`Command::Batch`] (S4.7), with the call number they share: sent when
    /// the instant's work is done, when it is full, or before a call that
    /// does not batch (so calls keep their order).
    batch: Vec<Command>,
    /// The call number of `batch`, or of the last call sent: every call in
    /// flight is counted once per call number, whatever it carries (S4.6).
    call_no: u64,
    /// Entries with a term given up on purpose whose hand-over has not
    /// completed: since when (told with [`Event::Completed`]).
    handing_over: BTreeMap<EntryId, Timestamp>,
}

/// What waits for a slot of the backend (S4.6).
#[derive(Debug)]
enum Waiting {
    /// A command other than an acquire, a renewal or a session opening.
    Command(Command),
    /// A due candidate, whose acquire is built when it is sent.
    Candidate(LeaseName),
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
                renew_soon: false,
                round_trip: None,
                open_failures: 0,
            },
            config,
            profile,
            now,
            seq: 0,
            next_op: 0,
            next_term: 0,
            next_entry: 0,
            entries: BTreeMap::new(),
            groups: BTreeMap::new(),
            retarget_after: None,
            acquires: BTreeMap::new(),
            term_names: BTreeMap::new(),
            released: BTreeMap::new(),
            releasing: BTreeMap::new(),
            release_ops: BTreeMap::new(),
            timers: Timers::new(),
            dirty: Vec::new(),
            out: VecDeque::new(),
            closing: false,
            stats: Stats::default(),
            claims: BTreeMap::new(),
            withdraws: BTreeMap::new(),
            withdraw_again: BTreeSet::new(),
            waiting_first: VecDeque::new(),
            waiting: VecDeque::new(),
            calls_out: BTreeMap::new(),
            batch: Vec::new(),
            call_no: 0,
            handing_over: BTreeMap::new(),
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

    /// What the application started with the id `entry` (as its start
    /// returned it), while the engine has it: an election, a lock, or a
    /// group ([`Kind::Partition`]).
    ///
    /// ```
    /// use simba_core::{BackendProfile, Engine, Kind, LeaseName, SimbaConfig, Timestamp};
    /// let now = Timestamp::ZERO;
    /// let mut engine = Engine::new(SimbaConfig::default(), BackendProfile::default(), now);
    /// let entry = engine.start_election(now, LeaseName::new("reports")?, false)?;
    /// assert_eq!(engine.kind_of(entry), Some(Kind::Election));
    /// engine.stop(now, &LeaseName::new("reports")?)?;
    /// assert_eq!(engine.kind_of(entry), None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn kind_of(&self, entry: EntryId) -> Option<Kind> {
        if self.groups.values().any(|g| g.id == entry) {
            return Some(Kind::Partition);
        }
        self.entries
            .values()
            .find(|e| e.id == entry)
            .map(|e| e.kind)
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
        self.send_batch();
        self.out.pop_front()
    }

    /// The one next instant at which [`Engine::handle_timeout`] must be
    /// called. Always later than the `now` of the last call.
    pub fn poll_timeout(&self) -> Option<Timestamp> {
        self.timers.next()
    }

    // ----- inputs --------------------------------------------------------

    /// Feeds one fact: a backend reply, a release broadcast, a task exit or
    /// a refused callback. Backend failures are data here, never an error,
    /// and no input (stale, duplicated, malformed) can make the engine panic.
    pub fn handle(&mut self, now: Timestamp, input: Input) {
        self.advance(now);
        self.take(input);
        self.finish();
    }

    /// Feeds facts that came together, in order, as [`Engine::handle`]
    /// feeds each, except that each group's target (S10.2) is computed once,
    /// after the last of them, instead of after each: with 1,000 partitions
    /// a burst of release broadcasts or `Held` replies otherwise cost one
    /// pass over every partition each, and the member fell behind the
    /// backend. A driver calls it with what is ready at once (replies and
    /// broadcasts that arrived while it was busy); an empty batch only lets
    /// time pass.
    ///
    /// ```
    /// use simba_core::{BackendProfile, Engine, Input, LeaseName, SimbaConfig, Timestamp};
    /// let mut engine = Engine::new(SimbaConfig::default(), BackendProfile::default(), Timestamp::ZERO);
    /// let freed = ["a", "b"].map(|n| Input::ReleaseBroadcast { name: LeaseName::new(n).unwrap() });
    /// engine.handle_all(Timestamp::ZERO, freed);
    /// ```
    pub fn handle_all(&mut self, now: Timestamp, inputs: impl IntoIterator<Item = Input>) {
        self.retarget_after = Some(BTreeSet::new());
        for input in inputs {
            self.advance(now);
            self.take(input);
        }
        self.advance(now);
        let groups = self.retarget_after.take().unwrap_or_default();
        for group in groups {
            self.retarget(&group);
        }
        self.finish();
    }

    /// One input of [`Engine::handle`] or [`Engine::handle_all`], without
    /// the deadlines that follow it.
    fn take(&mut self, input: Input) {
        if let Some(op) = input.op() {
            // Its call is over: its slot is free (S4.6).
            self.calls_out.remove(&op);
        }
        match input {
            Input::Batch { replies } => {
                for reply in replies {
                    self.take(reply);
                }
            }
            Input::SessionOpened { op, result } => self.on_session_opened(op, result),
            Input::RenewReplied { op, result } => self.on_renew_replied(op, result),
            Input::AcquireReplied { op, result } => self.on_acquire_replied(op, result),
            Input::ReleaseReplied { op, result } => {
                if let Some(key) = self.release_ops.remove(&op) {
                    let seq = self.seq;
                    if let Some(r) = self.releasing.get_mut(&key) {
                        r.answered_seq = Some(seq);
                    }
                    // S4.1: a new entry of the partition may wait for it.
                    self.partition_wait_over(&key.0);
                }
                if let Err(error) = result {
                    self.emit(Event::BackendFailed {
                        command: "release",
                        error,
                    });
                }
            }
            Input::WithdrawReplied { op, result } => self.on_withdraw_replied(op, result),
            Input::SessionClosed { op, result } => self.on_session_closed(op, result),
            Input::GroupJoined { op, result } => self.on_group_joined(op, result),
            Input::GroupLeft { op, result } => self.on_group_left(op, result),
            Input::SlotClaimed { op, result } => self.on_slot_claimed(op, result),
            Input::ReleaseBroadcast { name } => self.on_release_broadcast(&name),
            Input::TaskExited { term, outcome } => self.on_task_exited(term, outcome),
            Input::ElectedRejected { term } => self.on_elected_rejected(term),
        }
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

    fn emit(&mut self, mut event: Event) {
        match &mut event {
            Event::Revoked { term, reason } if reason.is_voluntary() => {
                self.handing_over.entry(term.entry).or_insert(self.now);
            }
            // Elected again: no hand-over of this entry is under way.
            Event::Elected { term } => {
                self.handing_over.remove(&term.entry);
            }
            Event::Completed {
                entry, handover, ..
            } => {
                *handover = self
                    .handing_over
                    .remove(entry)
                    .map(|since| self.now.saturating_duration_since(since));
            }
            Event::Ended { entry, .. } => {
                self.handing_over.remove(entry);
            }
            _ => {}
        }
        self.out.push_back(Output::Event(event));
    }

    /// Emits `command`, or holds it back while every slot of the backend
    /// is taken (S4.6). Renewals and session openings never wait (S1.1);
    /// acquires are only sent when a slot is free (their candidates wait
    /// in the same queue, see `fill_call_slots`).
    fn command(&mut self, command: Command) {
        let takes_slot = self.profile.call_slots.is_some()
            && !matches!(
                command,
                Command::Renew { .. } | Command::OpenSession { .. } | Command::Acquire { .. }
            );
        if takes_slot {
            if !self.waiting.is_empty() || !self.slot_for(&command) {
                self.waiting.push_back(Waiting::Command(command));
                return;
            }
            let op = command.op();
            let call = self.send(command);
            self.calls_out.insert(op, (self.now, call));
            return;
        }
        self.send(command);
    }

    /// Puts `command` out, in a batch with the calls decided at this
    /// instant if it batches and the backend takes batches (S4.7); answers
    /// the number of the call that carries it (S4.6 counts calls, not what
    /// they carry).
    fn send(&mut self, command: Command) -> u64 {
        let max = self.profile.batch;
        if max <= 1 || !command.batches() {
            self.send_batch();
            self.call_no += 1;
            self.out.push_back(Output::Command(command));
            return self.call_no;
        }
        if self.batch.len() >= max {
            self.send_batch();
        }
        if self.batch.is_empty() {
            self.call_no += 1;
        }
        self.batch.push(command);
        self.call_no
    }

    /// Sends the batch being formed, if any: one call alone as itself.
    fn send_batch(&mut self) {
        let command = match self.batch.len() {
            0 => return,
            1 => self.batch.pop(),
            _ => Some(Command::Batch {
                calls: std::mem::take(&mut self.batch),
            }),
        };
        if let Some(command) = command {
            self.out.push_back(Output::Command(command));
        }
    }

    /// How many more calls fit in the batch being formed (S4.7).
    fn batch_room(&self) -> usize {
        if self.batch.is_empty() {
            0
        } else {
            self.profile.batch.saturating_sub(self.batch.len())
        }
    }

    /// A new id for an election, lock or group started now.
    fn next_entry_id(&mut self) -> EntryId {
        self.next_entry += 1;
        EntryId(self.next_entry)
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
            self.fill_call_slots();
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
                Some(TimerKey::Claims) => self.on_claims_wake(),
                // Never due after `rearm` (its instant lies after `now`):
                // the freed slot was filled at the top of the loop.
                Some(TimerKey::Slots) => self.timers.set(&TimerKey::Slots, None),
                None => {
                    self.send_batch();
                    return;
                }
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
        self.send_batch();
    }

    fn rearm(&mut self) {
        let session_wake = self.session_wake();
        self.timers.set(&TimerKey::Session, session_wake);
        let claims_wake = self.claims_wake();
        self.timers.set(&TimerKey::Claims, claims_wake);
        let slots_wake = self.slots_wake();
        self.timers.set(&TimerKey::Slots, slots_wake);
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
    GroupIgnoresShare,
    GroupNotSticky,
    PartitionSkipsHandover,
    RetryBeforeExpiry,
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
