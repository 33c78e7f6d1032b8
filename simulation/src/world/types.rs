//! The plain facts the world's parts share: what the workload asks of a
//! node and a name, where a term and its task are, a removed lease, and
//! the arithmetic of true time and draws. The parts (queue, network,
//! cluster, faults, workload, checkers) import these; this module imports
//! none of them.

use simba_core::{LeaseName, RevokeReason, SessionId, Term, TermId, Timestamp};
use std::time::Duration;

/// A duration in ns (saturating).
pub(super) fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// `true` with probability `permille` / 1000.
pub(super) fn chance(rng: &mut fastrand::Rng, permille: u32) -> bool {
    permille > 0 && rng.u32(..1000) < permille
}

/// A uniform duration in `[0, max)`, ns.
pub(super) fn uniform(rng: &mut fastrand::Rng, max: Duration) -> u64 {
    let m = nanos(max);
    if m == 0 {
        0
    } else {
        rng.u64(..m)
    }
}

/// Where a term's task is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum TaskState {
    None,
    Running,
    Interrupted,
    Exited,
}

/// A term as the node's application knows it, from the engine's events.
#[derive(Clone, Debug)]
pub(super) struct TermRec {
    pub(super) term: Term,
    /// The term's place in the order of all elections of the run.
    pub(super) order: u64,
    /// The world's step at which the node was elected.
    pub(super) elected_step: u64,
    pub(super) revoked: Option<RevokeReason>,
    /// The session's local deadline when the term was revoked: a voluntary
    /// handover waits for the task at most until then (S6.1 step 3, S6.2).
    pub(super) revoke_deadline: Option<Timestamp>,
    pub(super) task: TaskState,
}

/// What the workload has asked of a name on a node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Api {
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

/// An API call a node makes.
#[derive(Clone, Debug)]
pub(super) enum ApiCall {
    /// Draw one from the workload.
    Random,
    Start(LeaseName),
    Stop(LeaseName),
    StepDown(LeaseName, Duration),
    Lock(LeaseName, LockSpec, bool),
    Close,
}

/// How long a lock call waits.
#[derive(Clone, Copy, Debug)]
pub(super) enum LockSpec {
    Try,
    For(Duration),
    Forever,
}

/// A lease an outside actor removed from a live holder (a `lease removed`
/// fault), remembered until the holder's first renewal sent after the
/// removal is answered and taken.
#[derive(Clone, Debug)]
pub(super) struct Removal {
    /// The world's step of the removal.
    pub step: u64,
    /// The holder's node.
    pub node: usize,
    /// The holder's term: its session, name and token are those the
    /// backend dropped.
    pub term: TermId,
    pub session: SessionId,
}
