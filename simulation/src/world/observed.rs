//! What happened, as the world tells its checkers ([`super::check`]).

use super::types::{Api, Removal};
use simba_core::{
    Command, Input, LeaseName, Level, SessionId, TaskOutcome, Term, TermId, Timestamp, Token,
};
use std::time::Duration;

/// What happened, as the world tells its checkers. Each variant says at
/// which point of a step it is observed (before or after the world acts).
#[derive(Debug)]
pub(super) enum Observed<'a> {
    /// `node`'s timer fired; its engine is about to handle the timeout.
    TimerFired { node: usize },
    /// `node`'s engine handled a timeout at local `local`.
    Woken { node: usize, local: Timestamp },
    /// `input` reaches `node` at local `local`; its engine has not taken it yet.
    Delivered {
        node: usize,
        input: &'a Input,
        local: Timestamp,
    },
    /// `node`'s engine took the input just delivered; `fresh`: not as a
    /// stale reply. Its outputs are not acted on yet.
    Taken { node: usize, fresh: bool },
    /// The outputs of the input just taken have been acted on.
    Settled { node: usize },
    /// `node` sends `cmd` at local `local`.
    Sent {
        node: usize,
        cmd: &'a Command,
        local: Timestamp,
    },
    /// Acquire `op` of `node` reaches the backend (up) at backend time `b`,
    /// before the backend answers it.
    AcquireArrived {
        node: usize,
        op: u64,
        name: &'a LeaseName,
        b: u64,
    },
    /// The backend answered acquire `op` of `node` `Held` by `holder`
    /// (token `token`, expiring at backend time `expiry`, reported as
    /// `remaining`).
    HeldAnswered {
        node: usize,
        op: u64,
        name: &'a LeaseName,
        holder: SessionId,
        token: Token,
        expiry: u64,
        remaining: Duration,
    },
    /// `node` is elected for `term` at local `local`; `api` is what the
    /// workload had asked of the name. The world has not recorded the term.
    Elected {
        node: usize,
        term: &'a Term,
        api: Option<&'a Api>,
        local: Timestamp,
    },
    /// The valid holders of `name` may have changed (a term recorded, a
    /// deadline moved on, healing).
    HoldersMayChange { name: &'a LeaseName },
    /// `node`'s term `term` is revoked; the world has not recorded it.
    Revoked { node: usize, term: &'a Term },
    /// `node`'s session deadline moved from `old` to `new` at local `local`.
    DeadlineChanged {
        node: usize,
        old: Option<Timestamp>,
        new: Timestamp,
        local: Timestamp,
    },
    /// `stop()` or `step_down()` of `name` on `node` completed.
    Completed { node: usize, name: &'a LeaseName },
    /// `node`'s engine said `Closed`; the world has not marked it closed.
    Closed { node: usize },
    /// `node`'s engine logged `message`.
    Diagnostic {
        node: usize,
        level: Level,
        message: &'a str,
    },
    /// `node`'s engine said `SessionLeaseShortened` for `session`.
    LeaseShortened { node: usize, session: SessionId },
    /// A member computed `target` for `group` from `members`.
    GroupChanged {
        node: usize,
        group: &'a LeaseName,
        members: &'a [SessionId],
        target: &'a [u32],
    },
    /// An API call reaches `node`'s engine (it may reset schedules).
    ApiCalled { node: usize },
    /// `node`'s engine accepted `what` (`stop` or `step_down`) of `name`:
    /// it must complete.
    MustComplete {
        node: usize,
        name: &'a LeaseName,
        what: &'static str,
    },
    /// `node`'s drawn configuration was refused.
    ConfigRefused { error: String },
    /// `node` could not join a group.
    JoinRefused { node: usize, error: String },
    /// `node`'s engine orders the task of `term` started; the world has
    /// not started it.
    TaskStart { node: usize, term: &'a Term },
    /// The task of `term` on `node` ended on its own with `outcome`, and
    /// the engine's outputs were acted on.
    TaskEndedOnItsOwn {
        node: usize,
        term: TermId,
        outcome: TaskOutcome,
    },
    /// A write of the term `order` (in election order) with `token`
    /// reaches the registers of `name`.
    WriteArrives {
        name: &'a LeaseName,
        order: u64,
        token: Token,
    },
    /// An outside actor removed a live holder's lease (S3.4).
    LeaseRemoved(&'a Removal),
    /// `node`'s process died (crash or exit): its records go.
    Crashed { node: usize },
    /// The faults healed: the liveness phase starts.
    Healed,
}
