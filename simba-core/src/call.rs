//! The one mapping between a [`Command`] and the backend call it names, and
//! from the call's result (or failure) back to its [`Input`].
//!
//! [`Input::failed`] answers any command with a failure; [`Command::call`]
//! runs a command on a synchronous backend ([`Calls`]: the lease model, a
//! test cluster's backend, the simulator's). The asynchronous backends of
//! `simba-backends` run it through `Backend::execute`, which builds its
//! replies with the same constructors ([`Input::failed`] and the variants
//! named by each command's docs).

use crate::error::BackendError;
use crate::ids::{SessionId, Token};
use crate::name::LeaseName;
use crate::protocol::{
    AcquireOutcome, Command, Input, RenewError, Renewal, SessionGrant, SlotClaim,
};
use std::time::Duration;

impl Command {
    /// A short lowercase name of the call, for logs and errors.
    pub fn label(&self) -> &'static str {
        match self {
            Command::OpenSession { .. } => "open",
            Command::Renew { .. } => "renew",
            Command::Acquire { .. } => "acquire",
            Command::Release { .. } => "release",
            Command::Withdraw { .. } => "withdraw",
            Command::CloseSession { .. } => "close",
            Command::JoinGroup { .. } => "join_group",
            Command::LeaveGroup { .. } => "leave_group",
            Command::ClaimSlot { .. } => "claim_slot",
            Command::Batch { .. } => "batch",
        }
    }

    /// Runs this command on `backend` and returns its reply.
    ///
    /// ```
    /// use simba_core::*;
    /// use std::time::Duration;
    ///
    /// /// A backend that is down: every call fails.
    /// struct Down;
    /// fn down() -> BackendError { BackendError::new(BackendErrorKind::Unavailable, "down") }
    /// impl Calls for Down {
    ///     fn open_session(&mut self, _: Duration) -> Result<SessionGrant, BackendError> { Err(down()) }
    ///     fn renew(&mut self, _: SessionId) -> Result<Renewal, RenewError> { Err(down().into()) }
    ///     fn acquire(&mut self, _: SessionId, _: &LeaseName) -> Result<AcquireOutcome, BackendError> { Err(down()) }
    ///     fn release(&mut self, _: SessionId, _: &LeaseName, _: Token) -> Result<(), BackendError> { Err(down()) }
    ///     fn close_session(&mut self, _: SessionId) -> Result<(), BackendError> { Err(down()) }
    ///     fn join_group(&mut self, _: SessionId, _: &LeaseName) -> Result<(), BackendError> { Err(down()) }
    ///     fn leave_group(&mut self, _: SessionId, _: &LeaseName) -> Result<(), BackendError> { Err(down()) }
    ///     fn claim_slot(&mut self, _: SessionId, _: &LeaseName, _: Token, _: u64) -> Result<SlotClaim, BackendError> { Err(down()) }
    /// }
    ///
    /// let open = Command::OpenSession { op: OpId(1), lease_duration: Duration::from_secs(10) };
    /// assert_eq!(open.clone().call(&mut Down), Input::failed(&open, down()));
    /// ```
    pub fn call(self, backend: &mut (impl Calls + ?Sized)) -> Input {
        match self {
            Command::OpenSession { op, lease_duration } => Input::SessionOpened {
                op,
                result: backend.open_session(lease_duration),
            },
            Command::Renew { op, session } => Input::RenewReplied {
                op,
                result: backend.renew(session),
            },
            Command::Acquire { op, session, name } => Input::AcquireReplied {
                op,
                result: backend.acquire(session, &name),
            },
            Command::Release {
                op,
                session,
                name,
                token,
            } => Input::ReleaseReplied {
                op,
                result: backend.release(session, &name, token),
            },
            Command::Withdraw { op, session, name } => Input::WithdrawReplied {
                op,
                result: backend.withdraw(session, &name),
            },
            Command::CloseSession { op, session } => Input::SessionClosed {
                op,
                result: backend.close_session(session),
            },
            Command::JoinGroup { op, session, group } => Input::GroupJoined {
                op,
                result: backend.join_group(session, &group),
            },
            Command::LeaveGroup { op, session, group } => Input::GroupLeft {
                op,
                result: backend.leave_group(session, &group),
            },
            Command::ClaimSlot {
                op,
                session,
                name,
                token,
                slot,
            } => Input::SlotClaimed {
                op,
                result: backend.claim_slot(session, &name, token, slot),
            },
            Command::Batch { calls } => Input::Batch {
                replies: calls.into_iter().map(|c| c.call(backend)).collect(),
            },
        }
    }
}

impl Input {
    /// The reply to `command` when its call failed with `error` (the backend
    /// answered an error, or could not be reached).
    ///
    /// ```
    /// use simba_core::{BackendError, BackendErrorKind, Command, Input, OpId, SessionId};
    /// let renew = Command::Renew { op: OpId(7), session: SessionId::from_u128(1) };
    /// let down = BackendError::new(BackendErrorKind::Unavailable, "down");
    /// assert!(matches!(Input::failed(&renew, down), Input::RenewReplied { op: OpId(7), result: Err(_) }));
    /// ```
    pub fn failed(command: &Command, error: BackendError) -> Input {
        let op = command.op();
        match command {
            Command::OpenSession { .. } => Input::SessionOpened {
                op,
                result: Err(error),
            },
            Command::Renew { .. } => Input::RenewReplied {
                op,
                result: Err(RenewError::Backend(error)),
            },
            Command::Acquire { .. } => Input::AcquireReplied {
                op,
                result: Err(error),
            },
            Command::Release { .. } => Input::ReleaseReplied {
                op,
                result: Err(error),
            },
            Command::Withdraw { .. } => Input::WithdrawReplied {
                op,
                result: Err(error),
            },
            Command::CloseSession { .. } => Input::SessionClosed {
                op,
                result: Err(error),
            },
            Command::JoinGroup { .. } => Input::GroupJoined {
                op,
                result: Err(error),
            },
            Command::LeaveGroup { .. } => Input::GroupLeft {
                op,
                result: Err(error),
            },
            Command::ClaimSlot { .. } => Input::SlotClaimed {
                op,
                result: Err(error),
            },
            Command::Batch { calls } => Input::Batch {
                replies: calls
                    .iter()
                    .map(|c| Input::failed(c, error.clone()))
                    .collect(),
            },
        }
    }
}

/// A backend answered synchronously, one call at a time: what
/// [`Command::call`] runs a command on. Each method is the call of the
/// [`Command`] variant of the same name, with the same meaning as
/// `simba-backends`' `Backend` method.
pub trait Calls {
    /// [`Command::OpenSession`].
    fn open_session(&mut self, lease_duration: Duration) -> Result<SessionGrant, BackendError>;
    /// [`Command::Renew`].
    fn renew(&mut self, session: SessionId) -> Result<Renewal, RenewError>;
    /// [`Command::Acquire`].
    fn acquire(
        &mut self,
        session: SessionId,
        name: &LeaseName,
    ) -> Result<AcquireOutcome, BackendError>;
    /// [`Command::Release`]; `Ok` also when it was a no-op.
    fn release(
        &mut self,
        session: SessionId,
        name: &LeaseName,
        token: Token,
    ) -> Result<(), BackendError>;
    /// [`Command::Withdraw`]; a backend that keeps nothing for a `Held`
    /// acquire has nothing to remove (S4.5).
    fn withdraw(&mut self, session: SessionId, name: &LeaseName) -> Result<(), BackendError> {
        let _ = (session, name);
        Ok(())
    }
    /// [`Command::CloseSession`]; `Ok` also when the session was gone.
    fn close_session(&mut self, session: SessionId) -> Result<(), BackendError>;
    /// [`Command::JoinGroup`].
    fn join_group(&mut self, session: SessionId, group: &LeaseName) -> Result<(), BackendError>;
    /// [`Command::LeaveGroup`].
    fn leave_group(&mut self, session: SessionId, group: &LeaseName) -> Result<(), BackendError>;
    /// [`Command::ClaimSlot`].
    fn claim_slot(
        &mut self,
        session: SessionId,
        name: &LeaseName,
        token: Token,
        slot: u64,
    ) -> Result<SlotClaim, BackendError>;
}
