//! Wrapping a backend: a [`Layer`] sees every call made to the backend it
//! wraps, as one [`Call`] value, and answers it with one [`Reply`], by
//! default the wrapped backend's. [`Layered`] makes a layer a [`Backend`].
//!
//! A layer writes only what it changes: counting, timing or logging calls,
//! failing them while a simulated crash lasts, or lying in a reply to show
//! that a check catches the lie. Everything it does not override (the other
//! calls, the release broadcasts, the call limit of S4.6, what a renewal
//! proves, S8.5) is the wrapped backend's, so a wrapper cannot drift from
//! it by forgetting to forward one of the trait's methods.
//!
//! ```
//! use futures::future::{BoxFuture, FutureExt};
//! use simba_backends::{Backend, Call, Layer, Layered, MemoryBackend, Reply};
//! use std::sync::atomic::{AtomicU64, Ordering};
//! use std::time::Duration;
//!
//! /// Counts the renewals, then lets the memory backend answer them.
//! struct CountRenewals {
//!     inner: MemoryBackend,
//!     renewals: AtomicU64,
//! }
//!
//! impl Layer for CountRenewals {
//!     fn inner(&self) -> &dyn Backend {
//!         &self.inner
//!     }
//!     fn call<'a>(&'a self, call: Call<'a>) -> BoxFuture<'a, Reply> {
//!         if let Call::Renew { .. } = call {
//!             self.renewals.fetch_add(1, Ordering::Relaxed);
//!         }
//!         call.run(&self.inner)
//!     }
//! }
//!
//! # futures::executor::block_on(async {
//! let backend = Layered(CountRenewals { inner: MemoryBackend::new(), renewals: AtomicU64::new(0) });
//! let session = backend.open_session(Duration::from_secs(10)).await?.session;
//! backend.renew(session).await?;
//! assert_eq!(backend.renewals.load(Ordering::Relaxed), 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```

use crate::{Backend, Inspection, LeaseHolder, SessionMetadata};
use futures::future::{BoxFuture, FutureExt};
use futures::stream::BoxStream;
use simba_core::{
    AcquireOutcome, BackendError, BackendErrorKind, Command, Fraction, Input, LeaseName,
    RenewError, Renewal, SessionGrant, SessionId, SlotClaim, Token,
};
use std::time::Duration;

/// One call to a backend with its arguments: one variant per call of
/// [`Backend`] that goes to the backend's store.
#[derive(Clone, Copy, Debug)]
pub enum Call<'a> {
    /// [`Backend::open_session_with`] (and [`Backend::open_session`], with
    /// empty metadata).
    OpenSession {
        /// The lease duration asked for.
        lease_duration: Duration,
        /// The session's metadata.
        metadata: &'a SessionMetadata,
    },
    /// [`Backend::renew`].
    Renew {
        /// The session renewed.
        session: SessionId,
    },
    /// [`Backend::acquire`].
    Acquire {
        /// The acquiring session.
        session: SessionId,
        /// The lease.
        name: &'a LeaseName,
    },
    /// [`Backend::release`].
    Release {
        /// The releasing session.
        session: SessionId,
        /// The lease.
        name: &'a LeaseName,
        /// The term's token.
        token: Token,
    },
    /// [`Backend::withdraw`].
    Withdraw {
        /// The waiting session.
        session: SessionId,
        /// The lease.
        name: &'a LeaseName,
    },
    /// [`Backend::close_session`].
    CloseSession {
        /// The session closed.
        session: SessionId,
    },
    /// [`Backend::join_group`].
    JoinGroup {
        /// The joining session.
        session: SessionId,
        /// The group.
        group: &'a LeaseName,
    },
    /// [`Backend::leave_group`].
    LeaveGroup {
        /// The leaving session.
        session: SessionId,
        /// The group.
        group: &'a LeaseName,
    },
    /// [`Backend::claim_slot`].
    ClaimSlot {
        /// The claiming session.
        session: SessionId,
        /// The schedule's lease.
        name: &'a LeaseName,
        /// The term's token.
        token: Token,
        /// The slot.
        slot: u64,
    },
    /// [`Backend::inspect`].
    Inspect {
        /// The prefix of the names listed, all if `None`.
        prefix: Option<&'a str>,
    },
    /// [`Backend::holder`].
    Holder {
        /// The lease.
        name: &'a LeaseName,
    },
    /// [`Backend::execute_batch`]: acquires, releases and withdraws sent
    /// as one call (S4.7). A layer that must see each of them looks into
    /// `calls`; one that fails every call fails it with [`Call::failed`].
    Batch {
        /// The calls it carries.
        calls: &'a [Command],
        /// The session's metadata (unused by these calls).
        metadata: &'a SessionMetadata,
    },
}

/// What a [`Call`] returned: one variant per kind of result.
#[derive(Debug)]
pub enum Reply {
    /// Of [`Call::OpenSession`].
    Opened(Result<SessionGrant, BackendError>),
    /// Of [`Call::Renew`].
    Renewed(Result<Renewal, RenewError>),
    /// Of [`Call::Acquire`].
    Acquired(Result<AcquireOutcome, BackendError>),
    /// Of a release, withdraw, close, join or leave.
    Done(Result<(), BackendError>),
    /// Of [`Call::ClaimSlot`].
    Claimed(Result<SlotClaim, BackendError>),
    /// Of [`Call::Inspect`].
    Inspected(Result<Inspection, BackendError>),
    /// Of [`Call::Holder`].
    Holder(Result<Option<LeaseHolder>, BackendError>),
    /// Of [`Call::Batch`]: one reply per call it carried.
    Batch(Vec<Input>),
}

impl<'a> Call<'a> {
    /// Runs the call on `backend`.
    pub fn run<B: Backend + ?Sized>(self, backend: &'a B) -> BoxFuture<'a, Reply> {
        match self {
            Call::OpenSession {
                lease_duration,
                metadata,
            } => backend
                .open_session_with(lease_duration, metadata)
                .map(Reply::Opened)
                .boxed(),
            Call::Renew { session } => backend.renew(session).map(Reply::Renewed).boxed(),
            Call::Acquire { session, name } => {
                backend.acquire(session, name).map(Reply::Acquired).boxed()
            }
            Call::Release {
                session,
                name,
                token,
            } => backend
                .release(session, name, token)
                .map(Reply::Done)
                .boxed(),
            Call::Withdraw { session, name } => {
                backend.withdraw(session, name).map(Reply::Done).boxed()
            }
            Call::CloseSession { session } => {
                backend.close_session(session).map(Reply::Done).boxed()
            }
            Call::JoinGroup { session, group } => {
                backend.join_group(session, group).map(Reply::Done).boxed()
            }
            Call::LeaveGroup { session, group } => {
                backend.leave_group(session, group).map(Reply::Done).boxed()
            }
            Call::ClaimSlot {
                session,
                name,
                token,
                slot,
            } => backend
                .claim_slot(session, name, token, slot)
                .map(Reply::Claimed)
                .boxed(),
            Call::Inspect { prefix } => backend.inspect(prefix).map(Reply::Inspected).boxed(),
            Call::Holder { name } => backend.holder(name).map(Reply::Holder).boxed(),
            Call::Batch { calls, metadata } => backend
                .execute_batch(calls.to_vec(), metadata)
                .map(Reply::Batch)
                .boxed(),
        }
    }

    /// The call's kind in a few words: `open session`, `renew`, `acquire`,
    /// `release`, `withdraw`, `close session`, `join group`, `leave group`,
    /// `claim slot`, `inspect`, `holder` or `batch`.
    pub fn kind(&self) -> &'static str {
        match self {
            Call::OpenSession { .. } => "open session",
            Call::Renew { .. } => "renew",
            Call::Acquire { .. } => "acquire",
            Call::Release { .. } => "release",
            Call::Withdraw { .. } => "withdraw",
            Call::CloseSession { .. } => "close session",
            Call::JoinGroup { .. } => "join group",
            Call::LeaveGroup { .. } => "leave group",
            Call::ClaimSlot { .. } => "claim slot",
            Call::Inspect { .. } => "inspect",
            Call::Holder { .. } => "holder",
            Call::Batch { .. } => "batch",
        }
    }

    /// The lease or group the call is about, if it is about one.
    pub fn name(&self) -> Option<&'a LeaseName> {
        match *self {
            Call::Acquire { name, .. }
            | Call::Release { name, .. }
            | Call::Withdraw { name, .. }
            | Call::ClaimSlot { name, .. }
            | Call::Holder { name } => Some(name),
            Call::JoinGroup { group, .. } | Call::LeaveGroup { group, .. } => Some(group),
            Call::OpenSession { .. }
            | Call::Renew { .. }
            | Call::CloseSession { .. }
            | Call::Inspect { .. }
            | Call::Batch { .. } => None,
        }
    }

    /// The reply a failed call of this kind gets: `error` as its result.
    pub fn failed(&self, error: BackendError) -> Reply {
        match self {
            Call::OpenSession { .. } => Reply::Opened(Err(error)),
            Call::Renew { .. } => Reply::Renewed(Err(RenewError::Backend(error))),
            Call::Acquire { .. } => Reply::Acquired(Err(error)),
            Call::Release { .. }
            | Call::Withdraw { .. }
            | Call::CloseSession { .. }
            | Call::JoinGroup { .. }
            | Call::LeaveGroup { .. } => Reply::Done(Err(error)),
            Call::ClaimSlot { .. } => Reply::Claimed(Err(error)),
            Call::Inspect { .. } => Reply::Inspected(Err(error)),
            Call::Holder { .. } => Reply::Holder(Err(error)),
            Call::Batch { calls, .. } => Reply::Batch(
                calls
                    .iter()
                    .map(|c| Input::failed(c, error.clone()))
                    .collect(),
            ),
        }
    }
}

impl Reply {
    /// The error of a failed call, if it failed (a renewal answered
    /// `Expired` included).
    pub fn error(&self) -> Option<&dyn std::error::Error> {
        fn err<T, E: std::error::Error + 'static>(
            r: &Result<T, E>,
        ) -> Option<&(dyn std::error::Error + 'static)> {
            r.as_ref().err().map(|e| e as _)
        }
        match self {
            Reply::Opened(r) => err(r),
            Reply::Renewed(r) => err(r),
            Reply::Acquired(r) => err(r),
            Reply::Done(r) => err(r),
            Reply::Claimed(r) => err(r),
            Reply::Inspected(r) => err(r),
            Reply::Holder(r) => err(r),
            // The first failed call of the batch.
            Reply::Batch(replies) => replies.iter().find_map(|r| match r {
                Input::AcquireReplied { result, .. } => err(result),
                Input::ReleaseReplied { result, .. } | Input::WithdrawReplied { result, .. } => {
                    err(result)
                }
                _ => None,
            }),
        }
    }
}

/// A wrapper around a backend that sees each of its calls (module docs).
/// Every method has a default: the wrapped backend's.
pub trait Layer: Send + Sync + 'static {
    /// The wrapped backend.
    fn inner(&self) -> &dyn Backend;

    /// Runs `call` and answers it; the default runs it on [`Layer::inner`].
    /// The reply must be of the call's kind: [`Layered`] turns any other
    /// into a [`BackendErrorKind::Malformed`] error.
    fn call<'a>(&'a self, call: Call<'a>) -> BoxFuture<'a, Reply> {
        call.run(self.inner())
    }

    /// As [`Backend::subscribe_releases`].
    fn subscribe_releases(
        &self,
    ) -> BoxFuture<'_, Result<Option<BoxStream<'static, LeaseName>>, BackendError>> {
        self.inner().subscribe_releases()
    }

    /// As [`Backend::broadcasts_releases`].
    fn broadcasts_releases(&self) -> bool {
        self.inner().broadcasts_releases()
    }

    /// As [`Backend::max_concurrent_calls`]: a wrapper adds no capacity (S4.6).
    fn max_concurrent_calls(&self) -> Option<usize> {
        self.inner().max_concurrent_calls()
    }

    /// As [`Backend::max_batch`] (S4.7): batches reach the layer as
    /// [`Call::Batch`].
    fn max_batch(&self) -> usize {
        self.inner().max_batch()
    }

    /// As [`Backend::renewal_proves`]: a wrapper must not make the engine
    /// believe more than the backend proves (S8.5).
    fn renewal_proves(&self) -> Fraction {
        self.inner().renewal_proves()
    }

    /// As [`Backend::name`].
    fn name(&self) -> &'static str {
        self.inner().name()
    }
}

/// A [`Layer`] as a [`Backend`]: every call goes through [`Layer::call`].
/// It dereferences to the layer, so the layer's own fields and methods stay
/// at hand.
#[derive(Clone, Debug, Default)]
pub struct Layered<L>(pub L);

impl<L> std::ops::Deref for Layered<L> {
    type Target = L;
    fn deref(&self) -> &L {
        &self.0
    }
}

/// The error for a [`Reply`] of another kind than its [`Call`].
fn mismatch(kind: &str, reply: &Reply) -> BackendError {
    BackendError::new(
        BackendErrorKind::Malformed,
        format!("a layer answered a {kind} call with {reply:?}"),
    )
}

/// Runs `call` through `layer` and takes the reply's result out of the
/// variant `$variant`, or a [`mismatch`] error (`$wrap` makes it the
/// result's error type).
macro_rules! through {
    ($layer:expr, $call:expr, $variant:ident, $wrap:expr) => {{
        let call = $call;
        let kind = call.kind();
        let reply = $layer.call(call);
        Box::pin(async move {
            match reply.await {
                Reply::$variant(r) => r,
                other => Err($wrap(mismatch(kind, &other))),
            }
        })
    }};
    ($layer:expr, $call:expr, $variant:ident) => {
        through!($layer, $call, $variant, std::convert::identity)
    };
}

impl<L: Layer> Backend for Layered<L> {
    fn open_session_with<'a>(
        &'a self,
        lease_duration: Duration,
        metadata: &'a SessionMetadata,
    ) -> BoxFuture<'a, Result<SessionGrant, BackendError>> {
        let call = Call::OpenSession {
            lease_duration,
            metadata,
        };
        through!(self.0, call, Opened)
    }

    fn holder<'a>(
        &'a self,
        name: &'a LeaseName,
    ) -> BoxFuture<'a, Result<Option<LeaseHolder>, BackendError>> {
        through!(self.0, Call::Holder { name }, Holder)
    }

    fn renew(&self, session: SessionId) -> BoxFuture<'_, Result<Renewal, RenewError>> {
        through!(
            self.0,
            Call::Renew { session },
            Renewed,
            RenewError::Backend
        )
    }

    fn acquire<'a>(
        &'a self,
        session: SessionId,
        name: &'a LeaseName,
    ) -> BoxFuture<'a, Result<AcquireOutcome, BackendError>> {
        through!(self.0, Call::Acquire { session, name }, Acquired)
    }

    fn release<'a>(
        &'a self,
        session: SessionId,
        name: &'a LeaseName,
        token: Token,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        let call = Call::Release {
            session,
            name,
            token,
        };
        through!(self.0, call, Done)
    }

    fn withdraw<'a>(
        &'a self,
        session: SessionId,
        name: &'a LeaseName,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        through!(self.0, Call::Withdraw { session, name }, Done)
    }

    fn close_session(&self, session: SessionId) -> BoxFuture<'_, Result<(), BackendError>> {
        through!(self.0, Call::CloseSession { session }, Done)
    }

    fn inspect<'a>(
        &'a self,
        prefix: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Inspection, BackendError>> {
        through!(self.0, Call::Inspect { prefix }, Inspected)
    }

    fn subscribe_releases(
        &self,
    ) -> BoxFuture<'_, Result<Option<BoxStream<'static, LeaseName>>, BackendError>> {
        self.0.subscribe_releases()
    }

    fn broadcasts_releases(&self) -> bool {
        self.0.broadcasts_releases()
    }

    fn max_concurrent_calls(&self) -> Option<usize> {
        self.0.max_concurrent_calls()
    }

    fn max_batch(&self) -> usize {
        self.0.max_batch()
    }

    fn execute_batch<'a>(
        &'a self,
        calls: Vec<Command>,
        metadata: &'a SessionMetadata,
    ) -> BoxFuture<'a, Vec<Input>> {
        Box::pin(async move {
            let call = Call::Batch {
                calls: &calls,
                metadata,
            };
            match self.0.call(call).await {
                Reply::Batch(replies) => replies,
                other => {
                    let error = mismatch("batch", &other);
                    calls
                        .iter()
                        .map(|c| Input::failed(c, error.clone()))
                        .collect()
                }
            }
        })
    }

    fn renewal_proves(&self) -> Fraction {
        self.0.renewal_proves()
    }

    fn join_group<'a>(
        &'a self,
        session: SessionId,
        group: &'a LeaseName,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        through!(self.0, Call::JoinGroup { session, group }, Done)
    }

    fn leave_group<'a>(
        &'a self,
        session: SessionId,
        group: &'a LeaseName,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        through!(self.0, Call::LeaveGroup { session, group }, Done)
    }

    fn claim_slot<'a>(
        &'a self,
        session: SessionId,
        name: &'a LeaseName,
        token: Token,
        slot: u64,
    ) -> BoxFuture<'a, Result<SlotClaim, BackendError>> {
        let call = Call::ClaimSlot {
            session,
            name,
            token,
            slot,
        };
        through!(self.0, call, Claimed)
    }

    fn name(&self) -> &'static str {
        self.0.name()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]
    use super::*;
    use crate::MemoryBackend;

    /// Answers every renewal with a release's reply.
    struct Wrong(MemoryBackend);

    impl Layer for Wrong {
        fn inner(&self) -> &dyn Backend {
            &self.0
        }
        fn call<'a>(&'a self, call: Call<'a>) -> BoxFuture<'a, Reply> {
            match call {
                Call::Renew { .. } => Box::pin(async { Reply::Done(Ok(())) }),
                other => other.run(&self.0),
            }
        }
    }

    #[test]
    fn a_reply_of_another_kind_is_a_malformed_error() -> Result<(), Box<dyn std::error::Error>> {
        futures::executor::block_on(async {
            let b = Layered(Wrong(MemoryBackend::new()));
            let s = b.open_session(Duration::from_secs(10)).await?.session;
            match b.renew(s).await {
                Err(RenewError::Backend(e)) => assert_eq!(e.kind, BackendErrorKind::Malformed),
                other => panic!("expected a malformed error, got {other:?}"),
            }
            let name = LeaseName::new("x")?;
            assert!(matches!(
                b.acquire(s, &name).await?,
                AcquireOutcome::Won { .. }
            ));
            assert_eq!(b.name(), "memory");
            Ok(())
        })
    }

    #[test]
    fn a_failed_call_is_of_its_kind() {
        let name = LeaseName::new("x").unwrap();
        let e = || BackendError::new(BackendErrorKind::Unavailable, "cut");
        let renew = Call::Renew {
            session: SessionId::from_bytes([1; 16]),
        };
        assert!(matches!(renew.failed(e()), Reply::Renewed(Err(_))));
        let acquire = Call::Acquire {
            session: SessionId::from_bytes([1; 16]),
            name: &name,
        };
        assert_eq!(acquire.name(), Some(&name));
        assert!(matches!(acquire.failed(e()), Reply::Acquired(Err(_))));
        assert!(acquire.failed(e()).error().is_some());
    }
}
