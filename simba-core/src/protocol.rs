//! What goes in and out of the engine: backend commands and their replies,
//! application events and task orders.

use crate::error::BackendError;
use crate::ids::{EntryId, OpId, SessionId, TermId, Token};
use crate::name::LeaseName;
use crate::time::Timestamp;
use std::fmt;
use std::time::Duration;

/// A backend call the driver must make, in the imperative. Each carries an
/// [`OpId`] that its reply must echo. The driver cancels a call that has not
/// finished after [`Engine::call_timeout`](crate::Engine::call_timeout) (S2.4);
/// the engine times it out on its own clock as well.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// Open a new session whose expiry, measured by the backend clock, is
    /// `lease_duration` after its last renewal. Reply: [`Input::SessionOpened`].
    OpenSession {
        /// Echoed by the reply.
        op: OpId,
        /// The lease duration the backend should grant.
        lease_duration: Duration,
    },
    /// Renew the session: one call for all its leases (S1.1). Reply:
    /// [`Input::RenewReplied`].
    Renew {
        /// Echoed by the reply.
        op: OpId,
        /// The session to renew.
        session: SessionId,
    },
    /// Try to acquire `name` for `session`. Reply: [`Input::AcquireReplied`].
    Acquire {
        /// Echoed by the reply.
        op: OpId,
        /// The owning session.
        session: SessionId,
        /// The lease.
        name: LeaseName,
    },
    /// Release `name` if `session` still owns it with `token` (S3.5); a no-op
    /// otherwise. Reply: [`Input::ReleaseReplied`].
    Release {
        /// Echoed by the reply.
        op: OpId,
        /// The owning session.
        session: SessionId,
        /// The lease.
        name: LeaseName,
        /// The token of the term being released.
        token: Token,
    },
    /// Give up `session`'s wait for `name` (S4.5): a backend that queues
    /// waiting candidates removes the place a `Held` acquire left there. It
    /// never ends a term (a won lease ends only by [`Command::Release`]).
    /// Reply: [`Input::WithdrawReplied`].
    Withdraw {
        /// Echoed by the reply.
        op: OpId,
        /// The waiting session.
        session: SessionId,
        /// The lease it no longer competes for.
        name: LeaseName,
    },
    /// Close the session, releasing all of its leases at once (S1.4). Reply:
    /// [`Input::SessionClosed`].
    CloseSession {
        /// Echoed by the reply.
        op: OpId,
        /// The session to close.
        session: SessionId,
    },
    /// Make `session` a member of the partitioned group `group` (S10). The
    /// membership lives and dies with the session; joining twice is a no-op.
    /// Reply: [`Input::GroupJoined`].
    JoinGroup {
        /// Echoed by the reply.
        op: OpId,
        /// The joining session.
        session: SessionId,
        /// The group.
        group: LeaseName,
    },
    /// End `session`'s membership of `group` (a no-op if it is not a
    /// member). Reply: [`Input::GroupLeft`].
    LeaveGroup {
        /// Echoed by the reply.
        op: OpId,
        /// The leaving session.
        session: SessionId,
        /// The group.
        group: LeaseName,
    },
    /// Record `slot` of the schedule `name` as claimed, atomically and only
    /// if `session` owns `name` with `token` and `slot` is later than the
    /// last claimed slot of `name` (S11). Reply: [`Input::SlotClaimed`].
    ClaimSlot {
        /// Echoed by the reply.
        op: OpId,
        /// The owning session.
        session: SessionId,
        /// The lease (the schedule's election).
        name: LeaseName,
        /// The token of the term claiming the slot.
        token: Token,
        /// The slot number (for example whole seconds of the slot's start).
        slot: u64,
    },
    /// Several acquires, releases and withdraws sent as one call (S4.7):
    /// they take one call slot (S4.6) and one round trip, and a backend may
    /// run them in one transaction. Each keeps its own op and meaning; the
    /// engine forms a batch only of calls it decided at the same instant,
    /// and only for a backend that says it takes them
    /// (`BackendProfile::batch`). Reply: [`Input::Batch`], one reply per
    /// call, in any order.
    Batch {
        /// The calls, each an [`Command::Acquire`], [`Command::Release`] or
        /// [`Command::Withdraw`].
        calls: Vec<Command>,
    },
}

impl Command {
    /// The id the reply must echo.
    pub fn op(&self) -> OpId {
        match self {
            Command::OpenSession { op, .. }
            | Command::Renew { op, .. }
            | Command::Acquire { op, .. }
            | Command::Release { op, .. }
            | Command::Withdraw { op, .. }
            | Command::CloseSession { op, .. }
            | Command::JoinGroup { op, .. }
            | Command::LeaveGroup { op, .. }
            | Command::ClaimSlot { op, .. } => *op,
            // A batch has no reply of its own: its calls' ops are echoed.
            Command::Batch { calls } => calls.first().map_or(OpId(0), Command::op),
        }
    }

    /// Whether this call may travel in a [`Command::Batch`] (S4.7).
    pub fn batches(&self) -> bool {
        matches!(
            self,
            Command::Acquire { .. } | Command::Release { .. } | Command::Withdraw { .. }
        )
    }
}

/// What a successful `OpenSession` returned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionGrant {
    /// The new session's id (S1.3).
    pub session: SessionId,
    /// Time left before the backend expires it, by the backend clock (S2.1).
    pub remaining: Duration,
}

/// What a successful `Renew` returned.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Renewal {
    /// Time left before the backend expires the session, by the backend clock (S2.1).
    pub remaining: Duration,
    /// Every lease this session still owns, in any order (S3.4 `TakenOver`).
    pub owned: Vec<(LeaseName, Token)>,
    /// For every partitioned group this session has joined
    /// ([`Command::JoinGroup`]), the group's live members, itself included
    /// (S10). Empty when the session has joined no group. Membership costs no
    /// extra call: it rides on the renewal (S1.1).
    pub groups: Vec<GroupView>,
}

/// The live members of one partitioned group, as a renewal saw them (S10).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupView {
    /// The group.
    pub group: LeaseName,
    /// Its live members' sessions, ascending and without duplicates.
    pub members: Vec<SessionId>,
}

/// What a successful [`Command::ClaimSlot`] answered (S11).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotClaim {
    /// The session owns the lease with the token, and `slot` was later than
    /// the last claimed slot of that name: it is now recorded as claimed.
    Claimed,
    /// The slot (or a later one) was already claimed; `last` is the latest.
    AlreadyClaimed {
        /// The latest claimed slot of that name.
        last: u64,
    },
    /// The session does not own the lease with that token (any more): nothing
    /// was recorded.
    NotHolder,
}

/// Why a `Renew` did not succeed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RenewError {
    /// The backend has expired the session; it never comes back (S1.2).
    #[error("session expired on the backend")]
    Expired,
    /// The call failed; the session may still be alive.
    #[error(transparent)]
    Backend(#[from] BackendError),
}

/// What a successful `Acquire` call answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AcquireOutcome {
    /// The session owns the lease with this token (a repeated acquire by the
    /// owning session answers `Won` with the same token).
    Won {
        /// The fencing token of the lease.
        token: Token,
        /// The session's remaining time, by the backend clock.
        remaining: Duration,
    },
    /// Another session owns the lease.
    Held {
        /// The holder, where the backend tells.
        holder: Option<SessionId>,
        /// The holder's token, where the backend tells.
        token: Option<Token>,
        /// The holder session's remaining time by the backend's clock, where
        /// the backend tells: the lease cannot be won before it has passed
        /// (unless the holder releases it), and the engine times the
        /// candidate's next attempt just after it (S4.4). `None` where the
        /// backend cannot tell cheaply (ZooKeeper, etcd: their release
        /// broadcast covers expiry, S4.2).
        holder_remaining: Option<Duration>,
    },
    /// The session has expired on the backend (S1.2).
    Expired,
}

/// A fact the engine learns: a backend reply (echoing its command's id), a
/// release broadcast, or news from a task or the callback executor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    /// Reply to [`Command::OpenSession`].
    SessionOpened {
        /// The command's id.
        op: OpId,
        /// The grant, or why it failed.
        result: Result<SessionGrant, BackendError>,
    },
    /// Reply to [`Command::Renew`].
    RenewReplied {
        /// The command's id.
        op: OpId,
        /// The renewal, or why it failed.
        result: Result<Renewal, RenewError>,
    },
    /// Reply to [`Command::Acquire`].
    AcquireReplied {
        /// The command's id.
        op: OpId,
        /// The outcome, or why the call failed.
        result: Result<AcquireOutcome, BackendError>,
    },
    /// Reply to [`Command::Release`].
    ReleaseReplied {
        /// The command's id.
        op: OpId,
        /// `Ok` also when the release was a no-op.
        result: Result<(), BackendError>,
    },
    /// Reply to [`Command::Withdraw`].
    WithdrawReplied {
        /// The command's id.
        op: OpId,
        /// `Ok` also when there was no place to remove.
        result: Result<(), BackendError>,
    },
    /// Reply to [`Command::CloseSession`].
    SessionClosed {
        /// The command's id.
        op: OpId,
        /// `Ok` also when the session was already gone.
        result: Result<(), BackendError>,
    },
    /// Reply to [`Command::JoinGroup`].
    GroupJoined {
        /// The command's id.
        op: OpId,
        /// `Ok` also when the session already was a member.
        result: Result<(), BackendError>,
    },
    /// Reply to [`Command::LeaveGroup`].
    GroupLeft {
        /// The command's id.
        op: OpId,
        /// `Ok` also when the session was not a member.
        result: Result<(), BackendError>,
    },
    /// Reply to [`Command::ClaimSlot`].
    SlotClaimed {
        /// The command's id.
        op: OpId,
        /// The claim's outcome, or why the call failed.
        result: Result<SlotClaim, BackendError>,
    },
    /// Reply to [`Command::Batch`]: one reply for each of its calls (S4.7).
    Batch {
        /// The calls' replies.
        replies: Vec<Input>,
    },
    /// The backend announced that `name` became free (S4.2).
    ReleaseBroadcast {
        /// The freed lease.
        name: LeaseName,
    },
    /// The task started for `term` has exited: after its interrupt (S6.1
    /// step 3), or on its own, which the election's [`TaskExitPolicy`]
    /// answers (S6.5).
    TaskExited {
        /// The term whose task exited.
        term: TermId,
        /// How it ended.
        outcome: TaskOutcome,
    },
    /// The callback executor refused the `on_elected` of `term` (S7.7).
    ElectedRejected {
        /// The refused term.
        term: TermId,
    },
}

impl Input {
    /// The id of the command this input answers; `None` for a fact that
    /// answers no command (a release broadcast, a task exit, a refused
    /// callback).
    ///
    /// ```
    /// use simba_core::{Input, LeaseName, OpId};
    /// let broadcast = Input::ReleaseBroadcast { name: LeaseName::new("a").unwrap() };
    /// assert_eq!(broadcast.op(), None);
    /// let released = Input::ReleaseReplied { op: OpId(3), result: Ok(()) };
    /// assert_eq!(released.op(), Some(OpId(3)));
    /// ```
    pub fn op(&self) -> Option<OpId> {
        match self {
            Input::SessionOpened { op, .. }
            | Input::RenewReplied { op, .. }
            | Input::AcquireReplied { op, .. }
            | Input::ReleaseReplied { op, .. }
            | Input::WithdrawReplied { op, .. }
            | Input::SessionClosed { op, .. }
            | Input::GroupJoined { op, .. }
            | Input::GroupLeft { op, .. }
            | Input::SlotClaimed { op, .. } => Some(*op),
            Input::Batch { .. }
            | Input::ReleaseBroadcast { .. }
            | Input::TaskExited { .. }
            | Input::ElectedRejected { .. } => None,
        }
    }
}

/// How a leader task ended (S6.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TaskOutcome {
    /// It returned normally (`()` or `Ok(())`).
    Returned,
    /// It returned an error.
    Failed,
    /// It panicked.
    Panicked,
}

impl TaskOutcome {
    /// Whether the task failed (returned an error or panicked).
    pub fn is_failure(self) -> bool {
        !matches!(self, TaskOutcome::Returned)
    }

    /// A stable lowercase label, for logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskOutcome::Returned => "returned",
            TaskOutcome::Failed => "failed",
            TaskOutcome::Panicked => "panicked",
        }
    }
}

impl fmt::Display for TaskOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What an election does when its leader task ends on its own, while the
/// term is still held (S6.5). No node holds a lease with nothing running
/// unless asked to ([`TaskExitPolicy::KeepTerm`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TaskExitPolicy {
    /// The default. A task that **returns** gives up its term: revoke
    /// (`SteppedDown`), release, and compete again after one retry delay
    /// (S4.1). A task that **fails or panics** gives up its term and steps
    /// down for a back-off that grows with repeated failures
    /// ([`task_failure_backoff`](crate::task_failure_backoff)), so a
    /// crash-looping job moves to another node.
    #[default]
    GiveUpTerm,
    /// Opt-in: keep holding the term after the task ends, until it is lost,
    /// stepped down or stopped.
    KeepTerm,
    /// Opt-in: any end of the task stops the election (revoke `Stopped`,
    /// release, and the election is gone, as after `stop()`).
    StopElection,
}

/// What the engine did about a task that ended on its own (S6.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TaskExitAction {
    /// The term was given up; the election competes again after one retry delay.
    Released,
    /// The term was given up and the election steps down for `cooldown`
    /// (the `failures`-th failure in a row).
    SteppedDown {
        /// How long the election stays out of the competition.
        cooldown: Duration,
        /// Consecutive failures, this one included.
        failures: u32,
    },
    /// The term is kept ([`TaskExitPolicy::KeepTerm`]).
    KeptTerm,
    /// The election was stopped ([`TaskExitPolicy::StopElection`], or a lock).
    Stopped,
}

impl TaskExitAction {
    /// A stable lowercase label, for logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskExitAction::Released => "released",
            TaskExitAction::SteppedDown { .. } => "stepped_down",
            TaskExitAction::KeptTerm => "kept_term",
            TaskExitAction::Stopped => "stopped",
        }
    }
}

/// Whether a name is an election (competes again after losing a term) or a
/// lock (one term only, S5.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// An election: competes for term after term until stopped.
    Election,
    /// A lock: takes one term; when it ends the lock is gone (S5.3).
    Lock,
    /// A partition of a partitioned group (S10): competes like an election
    /// while it is in this member's target, and is handed over when it
    /// leaves it (S10.3).
    Partition,
}

impl Kind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Kind::Election => "election",
            Kind::Lock => "lock",
            Kind::Partition => "partition",
        }
    }
}

/// One term (S3.2): a period in which this node owns a lease.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Term {
    /// Unique for the engine's lifetime.
    pub id: TermId,
    /// The election or lock this term belongs to, or the group of the
    /// partition: the id its start returned.
    pub entry: EntryId,
    /// The lease name.
    pub name: LeaseName,
    /// The fencing token, constant within the term.
    pub token: Token,
    /// The session that owns the lease.
    pub session: SessionId,
    /// What the term's entry is: an election, a lock or a group's partition.
    pub kind: Kind,
    /// When the engine elected it, on the engine's clock: with the `now` of
    /// a later output, how long the term was held (S6.5 counts a task's run
    /// from here too).
    pub elected_at: Timestamp,
}

/// Why a term ended (S3.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RevokeReason {
    /// The election was stopped, the lock released, or the client closed.
    Stopped,
    /// The election stepped down.
    SteppedDown,
    /// The session's local deadline passed without a successful renewal.
    DeadlinePassed,
    /// The backend reported the session expired.
    SessionExpired,
    /// A renewal reply no longer lists the lease as this session's.
    TakenOver,
    /// A partition of a group moved to another member, or this member left
    /// the group (S10.3). Voluntary: handed over in the order of S6.1.
    Rebalanced,
}

impl RevokeReason {
    /// Whether the term was given up on purpose (S6.1) rather than lost (S6.3).
    pub fn is_voluntary(self) -> bool {
        matches!(
            self,
            RevokeReason::Stopped | RevokeReason::SteppedDown | RevokeReason::Rebalanced
        )
    }

    /// A stable lowercase label, for logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            RevokeReason::Stopped => "stopped",
            RevokeReason::SteppedDown => "stepped_down",
            RevokeReason::DeadlinePassed => "deadline_passed",
            RevokeReason::SessionExpired => "session_expired",
            RevokeReason::TakenOver => "taken_over",
            RevokeReason::Rebalanced => "rebalanced",
        }
    }
}

impl fmt::Display for RevokeReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The session state that `snapshot()` reports (S1.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SessionState {
    /// No session yet, or a new one being opened after the last one ended.
    Opening,
    /// The last renewal succeeded.
    Live,
    /// The last renewal failed; the deadline has not passed yet.
    Suspended,
    /// The client is closed.
    Closed,
}

impl fmt::Display for SessionState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SessionState::Opening => "opening",
            SessionState::Live => "live",
            SessionState::Suspended => "suspended",
            SessionState::Closed => "closed",
        })
    }
}

/// How serious a [`Event::Diagnostic`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Worth a warning in the logs (a backend misbehaving, a shortened lease).
    Warn,
    /// A broken backend contract the engine had to work around; the
    /// simulation fails a run on any of these.
    Error,
}

/// Something the application (or the adapter on its behalf) should learn.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// This node won `term`; deliver `on_elected` (S7.1).
    Elected {
        /// The new term.
        term: Term,
    },
    /// `term` ended; deliver `on_revoked` (S3.4, S7.1). Emitted before any
    /// release of the term's lease (S3.5).
    Revoked {
        /// The ended term.
        term: Term,
        /// Why it ended.
        reason: RevokeReason,
    },
    /// The session state changed (S1.5).
    SessionStateChanged {
        /// The new state.
        state: SessionState,
        /// The session, once one is open.
        session: Option<SessionId>,
    },
    /// The session's local deadline moved: terms of this session are valid
    /// until `deadline` (S2.1, S3.3).
    DeadlineChanged {
        /// The session.
        session: SessionId,
        /// The new local deadline.
        deadline: Timestamp,
    },
    /// The backend grants less than two renewals fit in; the engine renews
    /// every third of the local validity instead (S8.4). At most once per session.
    SessionLeaseShortened {
        /// The session.
        session: SessionId,
        /// The local validity one renewal proves.
        validity: Duration,
        /// The renewal period now in force.
        renew_period: Duration,
    },
    /// A `stop`, `step_down`, lock release or failed lock attempt finished:
    /// the lease is released (or was never held). Resolve the API future.
    Completed {
        /// The election, lock or group.
        name: LeaseName,
        /// Its id, as its start returned it.
        entry: EntryId,
        /// The hand-over's length: from the first term of this entry given
        /// up on purpose (stop, step-down, a lock released, a partition a
        /// group gives up; [`RevokeReason::is_voluntary`]) to this
        /// completion, when its release is done. `None` when no term was
        /// given up (a candidate stopped, a lock attempt that failed). For
        /// metrics: the engine keeps this, so a driver keeps no clock of
        /// its own.
        handover: Option<Duration>,
    },
    /// The engine forgot an election, lock or group (stopped, a lock that
    /// failed or was lost for good, S5.3, a group left or failed): nothing
    /// more comes for `entry`; whatever still waits on it resolves.
    Ended {
        /// The name it had.
        name: LeaseName,
        /// Its id, as its start returned it.
        entry: EntryId,
    },
    /// The answer to an [`Engine::claim_slot`](crate::Engine::claim_slot)
    /// (S11.1): exactly one per accepted claim, the backend's reply or a
    /// timeout after [`Engine::call_timeout`](crate::Engine::call_timeout).
    SlotClaimed {
        /// The schedule's election.
        name: LeaseName,
        /// The token of the term that claimed.
        token: Token,
        /// The slot.
        slot: u64,
        /// The backend's answer, or why the call failed (the claim may or
        /// may not have been recorded then).
        result: Result<SlotClaim, BackendError>,
        /// Run the slot: the answer is [`SlotClaim::Claimed`] and the term
        /// was still current and valid when it arrived. Anything else: the
        /// slot does not run on this term.
        run: bool,
    },
    /// A lock could not be acquired (try or timeout); the lock is gone.
    LockFailed {
        /// The lock.
        name: LeaseName,
        /// Its id, as `acquire_lock` returned it.
        entry: EntryId,
        /// It was a try ([`LockWait::Try`](crate::LockWait::Try)) and found
        /// the lock held; otherwise its wait ran out (or its term was
        /// refused, S7.7).
        tried: bool,
    },
    /// A backend call failed (for observability; the engine already reacted).
    BackendFailed {
        /// Which command failed: `open`, `renew`, `acquire`, `release`,
        /// `withdraw`, `close`, `join_group`, `leave_group`, `claim_slot`.
        command: &'static str,
        /// The failure.
        error: BackendError,
    },
    /// The task of a held term ended on its own and the election's
    /// [`TaskExitPolicy`] acted on it (S6.5). Emitted before the term's
    /// `Revoked`, if any.
    TaskEnded {
        /// The term whose task ended.
        term: Term,
        /// How the task ended.
        outcome: TaskOutcome,
        /// What the engine did about it.
        action: TaskExitAction,
    },
    /// A renewal saw a new membership of a joined group (S10.2): its live
    /// members, and the partitions this member should now own. Partitions
    /// themselves come and go as `Elected` and `Revoked` of their lease names.
    GroupChanged {
        /// The group.
        group: LeaseName,
        /// Its live members, ascending (empty once this member is not one).
        members: Vec<SessionId>,
        /// The partition indexes this member should own.
        target: Vec<u32>,
    },
    /// Joining a group failed for good (the backend has no groups): the
    /// group is forgotten.
    GroupFailed {
        /// The group.
        group: LeaseName,
        /// Why.
        error: BackendError,
    },
    /// The client is closed: every term revoked, the session closed (S1.4).
    Closed,
    /// Something a log should show.
    Diagnostic {
        /// How serious.
        level: Level,
        /// What happened.
        message: String,
    },
}

/// An order for the task that runs while a term lasts (S6).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TaskOrder {
    /// Start the election's task for `term`.
    Start {
        /// The term the task belongs to.
        term: Term,
    },
    /// Interrupt (cancel) the task of `term`; report [`Input::TaskExited`] when it has exited.
    Interrupt {
        /// The term whose task must stop.
        term: Term,
    },
}

/// One output of the engine, in the order it must be acted on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    /// A backend call to make.
    Command(Command),
    /// An event for the application.
    Event(Event),
    /// A task to start or interrupt.
    Task(TaskOrder),
}
