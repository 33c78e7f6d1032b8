//! Elections and locks: the per-name state (S4, S5, S6) and its snapshot.

use crate::ids::{EntryId, OpId, SessionId, TermId, Token};
use crate::name::LeaseName;
pub use crate::protocol::Kind;
use crate::protocol::{TaskExitPolicy, Term};
use crate::time::Timestamp;
use std::fmt;
use std::time::Duration;

/// How long a lock keeps trying to acquire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockWait {
    /// One attempt once a session is open (`try_acquire`).
    Try,
    /// Keep trying until this instant.
    Until(Timestamp),
    /// Keep trying for this long from the `acquire_lock` call
    /// (`acquire_timeout`): the engine turns it into `Until(now + d)`.
    For(Duration),
    /// Keep trying until acquired or stopped (`acquire`).
    Forever,
}

/// The election states of S5.1, as `snapshot()` reports them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Status {
    /// Wants the lease and competes for it (S4.1).
    Candidate,
    /// Holds a term.
    Leader,
    /// Stepped down; competes again when the cooldown ends (S6.4).
    CoolingDown,
    /// Stopped; the name is free once the handover completes.
    Stopped,
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Status::Candidate => "candidate",
            Status::Leader => "leader",
            Status::CoolingDown => "cooling_down",
            Status::Stopped => "stopped",
        })
    }
}

/// The one acquire in flight of an election (S4.1).
#[derive(Clone, Debug)]
pub(crate) struct Attempt {
    pub(crate) op: OpId,
    pub(crate) sent_at: Timestamp,
    /// A release broadcast of the name arrived while the attempt was in
    /// flight: if it loses, try again at once (S4.2).
    pub(crate) freed: bool,
}

/// The term an election holds.
#[derive(Clone, Debug)]
pub(crate) struct Held {
    pub(crate) term: Term,
    /// Input sequence number at which the term was created (see `TakenOver`).
    pub(crate) created_seq: u64,
    pub(crate) task_running: bool,
}

/// A voluntarily ended term whose lease is kept until its task exits (S6.1 step 3).
#[derive(Clone, Debug)]
pub(crate) struct Handover {
    pub(crate) term: Term,
    /// The session deadline when the term was revoked: a task that ignores
    /// its interruption delays the release at most until then (S6.2).
    pub(crate) until: Timestamp,
}

/// One election or lock of the engine.
#[derive(Clone, Debug)]
pub(crate) struct Entry {
    /// What the application started: this election or lock, or the group
    /// this partition belongs to.
    pub(crate) id: EntryId,
    pub(crate) kind: Kind,
    pub(crate) runs_task: bool,
    pub(crate) wait: LockWait,
    pub(crate) status: Status,
    pub(crate) attempt: Option<Attempt>,
    pub(crate) next_attempt: Option<Timestamp>,
    pub(crate) cooldown_until: Option<Timestamp>,
    pub(crate) held: Option<Held>,
    pub(crate) handover: Option<Handover>,
    /// `stop()` was called: the entry goes away once the handover completes.
    pub(crate) stopping: bool,
    /// A `step_down()` waits for its handover before emitting `Completed`.
    pub(crate) pending_completion: bool,
    /// What a task ending on its own does to the term (S6.5).
    pub(crate) exit_policy: TaskExitPolicy,
    /// Consecutive failed or panicked tasks (S6.5 back-off).
    pub(crate) task_failures: u32,
    /// An `Acquire` was sent on the current session since the last term
    /// (or the last withdraw): giving up now must withdraw (S4.5).
    pub(crate) asked: bool,
    /// Due, but every acquire slot is taken: the name waits in the engine's
    /// queue and no timer of its own wakes it (S4.6).
    pub(crate) parked: bool,
    /// A release broadcast named the lease since the last attempt (S4.2):
    /// the next attempt takes the next free acquire slot ahead of those
    /// that are not (S4.6).
    pub(crate) hinted: bool,
    /// For a partition: the instant `next_attempt` was last set to by a
    /// wait for calls of this member's on it still in flight, or for its
    /// holder's expiry (S4.1, S4.4). The reply to such a call ends the
    /// wait, whenever the call went out; a `next_attempt` set since for
    /// another reason (a retry's back-off) is not shortened.
    pub(crate) waits_for: Option<Timestamp>,
}

impl Entry {
    pub(crate) fn new(
        id: EntryId,
        kind: Kind,
        runs_task: bool,
        wait: LockWait,
        now: Timestamp,
    ) -> Self {
        Entry {
            id,
            kind,
            runs_task,
            wait,
            status: Status::Candidate,
            attempt: None,
            next_attempt: Some(now),
            cooldown_until: None,
            held: None,
            handover: None,
            stopping: false,
            pending_completion: false,
            exit_policy: TaskExitPolicy::default(),
            task_failures: 0,
            asked: false,
            parked: false,
            hinted: false,
            waits_for: None,
        }
    }

    /// When this entry next needs the engine's attention.
    pub(crate) fn wake(
        &self,
        can_acquire: bool,
        call_timeout: std::time::Duration,
    ) -> Option<Timestamp> {
        let mut wake: Option<Timestamp> = None;
        let mut consider = |t: Option<Timestamp>| {
            if let Some(t) = t {
                wake = Some(wake.map_or(t, |w| w.min(t)));
            }
        };
        if let Some(h) = &self.handover {
            consider(Some(h.until));
        }
        match self.status {
            Status::Candidate => {
                if let Some(a) = &self.attempt {
                    consider(Some(a.sent_at + call_timeout));
                } else if can_acquire && !self.parked {
                    consider(self.next_attempt);
                }
                if let LockWait::Until(t) = self.wait {
                    if self.kind == Kind::Lock {
                        consider(Some(t));
                    }
                }
            }
            // The cooldown ends only once any handover has completed.
            Status::CoolingDown if self.handover.is_none() => consider(self.cooldown_until),
            Status::CoolingDown => {}
            Status::Leader | Status::Stopped => {}
        }
        wake
    }
}

/// What `snapshot()` reports of one election or lock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EntrySnapshot {
    /// The lease name.
    pub name: LeaseName,
    /// Election or lock.
    pub kind: Kind,
    /// The state of S5.1.
    pub status: Status,
    /// The current term and its token, while leader.
    pub term: Option<(TermId, Token)>,
    /// A voluntarily ended term whose task has not exited yet (S6.1 step 3).
    pub handover_pending: Option<(TermId, Token)>,
}

/// What `snapshot()` reports of the session (S1.5).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionSnapshot {
    /// The session state.
    pub state: crate::protocol::SessionState,
    /// The session, once one is open.
    pub id: Option<SessionId>,
    /// Time left before the local deadline, while a session is open.
    pub time_to_deadline: Option<std::time::Duration>,
    /// The renewal period in force (S8.4).
    pub renew_period: std::time::Duration,
}

/// A picture of the engine at one instant (S1.5).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// The session.
    pub session: SessionSnapshot,
    /// Every election and lock, by name.
    pub entries: Vec<EntrySnapshot>,
}
