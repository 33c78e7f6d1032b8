//! What the application hears from a client: election callbacks
//! ([`ElectionListener`]), where they run ([`CallbackExecutor`]) and the
//! client's event stream ([`ClientEvent`]). The driver delivers them; the
//! API hands them in. Nothing here refers back to either.

use crate::term::Term;
use simba_core::{BackendError, RevokeReason, SessionState, TaskExitAction, TaskOutcome};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Where election callbacks run (S7.2). Callbacks of one election always run
/// one at a time, in order; the engine never waits for them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum CallbackExecutor {
    /// One serial worker task per election on the runtime (the default).
    #[default]
    Spawned,
    /// As `Spawned`, but an `on_elected` is refused while `n` callbacks of
    /// that election are still waiting to run: the term then ends silently
    /// and the election steps down for one lease duration (S7.7).
    /// `Spawned` is `SpawnedBounded(`[`CALLBACK_QUEUE`]`)`. A group's
    /// queue holds two more callbacks per partition than `n`.
    SpawnedBounded(usize),
    /// Callbacks run on the driver loop itself (S7.6): keep them short, and
    /// only chain on the futures the client returns; blocking calls made
    /// there are refused with a `WouldWaitOnItself` error.
    Inline,
}

/// How many callbacks of one election may wait to run with the default
/// [`CallbackExecutor::Spawned`] before an `on_elected` is refused (S7.7).
/// Each queued `on_elected` brings at most one `on_revoked` and the waiters
/// of `stop()`/`step_down()`, so an election's queue stays bounded.
pub const CALLBACK_QUEUE: usize = 64;

/// The default bound of each [`Simba::events`] subscriber's queue; see
/// [`SimbaBuilder::event_queue`].
pub const EVENT_QUEUE: usize = 1024;

/// An event of the client, for observability ([`Simba::events`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClientEvent {
    /// This client won a term of `name`.
    Elected {
        /// The lease name.
        name: String,
        /// The term's fencing token.
        token: u64,
    },
    /// A term of `name` ended (S3.4).
    Revoked {
        /// The lease name.
        name: String,
        /// The term's fencing token.
        token: u64,
        /// Why it ended.
        reason: RevokeReason,
    },
    /// The session state changed (S1.5).
    SessionState {
        /// The new state.
        state: SessionState,
    },
    /// The backend grants a shorter lease than configured (S8.4).
    SessionLeaseShortened {
        /// The local validity one renewal proves.
        validity: Duration,
        /// The renewal period now in force.
        renew_period: Duration,
    },
    /// A backend call failed; the engine has already reacted.
    BackendFailed {
        /// `open`, `renew`, `acquire`, `release` or `close`.
        command: &'static str,
        /// The failure.
        error: BackendError,
    },
    /// A leader task ended on its own while its term was held, and the
    /// election's [`TaskExitPolicy`] acted on it (S6.5).
    TaskExited {
        /// The lease name.
        name: String,
        /// The term's fencing token.
        token: u64,
        /// How the task ended.
        outcome: TaskOutcome,
        /// What the election did about it.
        action: TaskExitAction,
        /// The task's error or panic message, if it failed.
        error: Option<String>,
    },
    /// This subscriber read too slowly: `missed` events were dropped from
    /// its full queue (see [`SimbaBuilder::event_queue`]) before this one.
    Lagged {
        /// How many events were dropped.
        missed: u64,
    },
    /// A renewal saw a new membership of a partitioned group (S10.2).
    GroupChanged {
        /// The group.
        group: String,
        /// How many live members it has (0 once this client is not one).
        members: usize,
        /// The partitions this client should own now.
        target: Vec<u32>,
    },
    /// The client is closed (S1.4).
    Closed,
}

impl ClientEvent {
    /// Whether the event concerns the election (or leader task, or
    /// schedule) of lease `name`: its terms, its task's exit, and the
    /// stream's own `Lagged` and `Closed`.
    pub(crate) fn concerns_lease(&self, name: &str) -> bool {
        match self {
            ClientEvent::Elected { name: n, .. }
            | ClientEvent::Revoked { name: n, .. }
            | ClientEvent::TaskExited { name: n, .. } => n == name,
            ClientEvent::Lagged { .. } | ClientEvent::Closed => true,
            _ => false,
        }
    }

    /// Whether the event concerns the partitioned group `group`: its
    /// partitions' terms and tasks, its membership, and the stream's own
    /// `Lagged` and `Closed`.
    pub(crate) fn concerns_group(&self, group: &str) -> bool {
        let partition_of_group =
            |n: &str| simba_core::parse_partition_name(n).is_some_and(|(g, _)| g == group);
        match self {
            ClientEvent::Elected { name, .. }
            | ClientEvent::Revoked { name, .. }
            | ClientEvent::TaskExited { name, .. } => partition_of_group(name),
            ClientEvent::GroupChanged { group: g, .. } => g == group,
            ClientEvent::Lagged { .. } | ClientEvent::Closed => true,
            _ => false,
        }
    }
}

/// What an election tells the application (S7.1): every `on_elected(term)`
/// is followed by exactly one `on_revoked(term, reason)` for the same term.
/// Callbacks of one election run one at a time on the callback executor (S7.2).
pub trait ElectionListener: Send + Sync + 'static {
    /// This client won `term`.
    fn on_elected(&self, term: &Term) {
        let _ = term;
    }
    /// `term` ended for `reason`; it is already invalid.
    fn on_revoked(&self, term: &Term, reason: RevokeReason) {
        let _ = (term, reason);
    }
}

/// A listener that ignores everything (for leader tasks without callbacks).
#[derive(Clone, Copy, Debug, Default)]
pub struct NoListener;
impl ElectionListener for NoListener {}

/// The election's latest term, set by the driver when it is won (S7.1).
pub(crate) type CurrentTerm = Arc<Mutex<Option<Term>>>;
