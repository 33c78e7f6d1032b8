//! Simba's backends: the contract every backend fulfils, a conformance suite
//! that checks it, and the backends (PostgreSQL, MySQL/MariaDB, SQLite,
//! Redis, ZooKeeper, etcd), each behind its cargo feature.
//!
//! A backend stores sessions and leases (S1, S3). The engine in
//! `simba-core` decides *when* to call it; a [`Backend`] only answers each call
//! atomically, on the backend's own clock:
//!
//! | call | answer |
//! |---|---|
//! | [`Backend::open_session`] | a new session id (128 random bits, S1.3) and its remaining time |
//! | [`Backend::renew`] | remaining time and every lease the session still owns, or `Expired` (S1.1, S1.2) |
//! | [`Backend::acquire`] | `Won { token, remaining }`, `Held { holder, token, holder_remaining }` (S4.4) or `Expired` |
//! | [`Backend::release`] | frees the lease only if that session still owns it with that token (S3.5) |
//! | [`Backend::close_session`] | ends the session and frees all of its leases (S1.4) |
//! | [`Backend::open_session_with`] | as `open_session`, storing the session's [`SessionMetadata`] with it |
//! | [`Backend::inspect`] | leases and live sessions (with their metadata), for `simba status` |
//! | [`Backend::holder`] | who holds one lease: session, token, remaining time, metadata |
//! | [`Backend::subscribe_releases`] | a stream of freed names, where the backend broadcasts (S4.2) |
//!
//! To count, time, log or fail a backend's calls, wrap it in a [`Layer`]: it
//! sees each call as one [`Call`] value and forwards everything else
//! ([`Layered`] is the wrapped backend).
//!
//! Features: `sqlite` (default), `postgres`, `mysql`, `redis` (with
//! `redis-tls` / `redis-tls-async-std` for `rediss://`), `etcd` (needs
//! `protoc` at build time), `zookeeper` (with `zookeeper-tls` for `zks://`), `testkit` (test
//! support only: the conformance suite, [`testkit`]; [`test_servers`]; and
//! with `zookeeper` a private ZooKeeper server for tests), and the sqlx runtimes `runtime-tokio`
//! (default) and `runtime-async-std`. The in-memory [`MemoryBackend`] is always
//! available; it is a shell over the one sequential lease model,
//! [`simba_core::model::LeaseModel`].
//!
//! ```
//! use simba_backends::{Backend, MemoryBackend};
//! use simba_core::{AcquireOutcome, LeaseName};
//! use std::time::Duration;
//!
//! # futures::executor::block_on(async {
//! let backend = MemoryBackend::new();
//! let grant = backend.open_session(Duration::from_secs(15)).await.unwrap();
//! let name = LeaseName::new("billing.leader").unwrap();
//! let won = backend.acquire(grant.session, &name).await.unwrap();
//! assert!(matches!(won, AcquireOutcome::Won { .. }));
//! # });
//! ```
#![forbid(unsafe_code)]

mod config;
pub mod fencing;
mod forward;
mod layer;
mod memory;
mod metadata;
mod pool;
#[cfg(any(feature = "sqlite", feature = "postgres", feature = "mysql"))]
mod sql;
#[cfg(feature = "testkit")]
pub mod test_servers;
#[cfg(feature = "testkit")]
pub mod testkit;

#[cfg(feature = "etcd")]
pub mod etcd;
#[cfg(feature = "etcd")]
mod etcd_queue;
#[cfg(feature = "mysql")]
pub mod mysql;
#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(any(feature = "etcd", feature = "zookeeper"))]
mod queue;
#[cfg(feature = "redis")]
pub mod redis;
#[cfg(feature = "sqlite")]
pub mod sqlite;
#[cfg(feature = "zookeeper")]
pub mod zookeeper;
#[cfg(feature = "zookeeper")]
mod zookeeper_queue;
#[cfg(feature = "zookeeper")]
mod zookeeper_tls;

pub use config::{
    redact, BackendConfig, BackendKind, ConfigError, SessionAttrs, DEFAULT_KEY_PREFIX,
    DEFAULT_POOL_ACQUIRE_TIMEOUT, DEFAULT_POOL_MAX, DEFAULT_TABLE_PREFIX, PING_IDLE_AFTER,
};
pub use layer::{Call, Layer, Layered, Reply};
#[cfg(feature = "testkit")]
pub use memory::Flaw;
pub use memory::MemoryBackend;
pub use metadata::{MetadataError, SessionMetadata, MAX_METADATA_KEY_LEN, MAX_METADATA_LEN};
pub use pool::PoolOptions;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use simba_core::{
    AcquireOutcome, BackendError, BackendErrorKind, Command, Fraction, Input, LeaseName,
    RenewError, Renewal, SessionGrant, SessionId, SlotClaim, Token,
};
use std::time::Duration;

/// What a backend must do (see the crate docs and `docs/BACKENDS.md`).
///
/// The trait is dyn-compatible (`Box<dyn Backend>`) and runtime-agnostic: its
/// futures need no particular executor beyond what the backend's driver (sqlx's
/// runtime feature) needs. Every method is one atomic operation on the
/// backend, and all expiry arithmetic happens on the backend's clock: the
/// client never sends a time of its own, only durations.
pub trait Backend: Send + Sync + 'static {
    /// Opens a new session that the backend expires `lease_duration` after its
    /// last renewal (S1.1); its id is 128 random bits (S1.3). It stores
    /// `metadata` with the session until it ends, for [`Backend::inspect`]
    /// and [`Backend::holder`] to show (leader observation); every backend
    /// of this crate stores it, and one that cannot may drop it.
    ///
    /// # Errors
    /// A [`BackendError`] if the call failed (nothing was created, or the
    /// created session is never returned and simply expires).
    fn open_session_with<'a>(
        &'a self,
        lease_duration: Duration,
        metadata: &'a SessionMetadata,
    ) -> BoxFuture<'a, Result<SessionGrant, BackendError>>;

    /// [`Backend::open_session_with`] without metadata.
    ///
    /// # Errors
    /// As [`Backend::open_session_with`].
    fn open_session(
        &self,
        lease_duration: Duration,
    ) -> BoxFuture<'_, Result<SessionGrant, BackendError>> {
        self.open_session_with(lease_duration, &metadata::NO_METADATA)
    }

    /// Who holds `name` now: the live holder's session, the term's token,
    /// its remaining time and the metadata its session was opened with;
    /// `None` if the lease is free (or was never acquired). The default
    /// reads it from [`Backend::inspect`] with the name as prefix.
    ///
    /// # Errors
    /// A [`BackendError`] if the call failed.
    fn holder<'a>(
        &'a self,
        name: &'a LeaseName,
    ) -> BoxFuture<'a, Result<Option<LeaseHolder>, BackendError>> {
        Box::pin(async move {
            let seen = self.inspect(Some(name.as_str())).await?;
            Ok(LeaseHolder::find(&seen, name))
        })
    }

    /// Renews `session` for another lease duration, in one backend call
    /// however many leases it holds (S1.1), and lists the leases it still owns.
    ///
    /// # Errors
    /// [`RenewError::Expired`] once the backend has expired the session: it
    /// never comes back (S1.2). [`RenewError::Backend`] if the call failed.
    fn renew(&self, session: SessionId) -> BoxFuture<'_, Result<Renewal, RenewError>>;

    /// Tries to acquire `name` for `session`. A free lease, or one whose holder
    /// has expired, is won with a token greater than every earlier token of
    /// that name; the owning session acquiring again gets `Won` with the same
    /// token (idempotent).
    ///
    /// # Errors
    /// A [`BackendError`] if the call failed; the outcome is then unknown.
    fn acquire<'a>(
        &'a self,
        session: SessionId,
        name: &'a LeaseName,
    ) -> BoxFuture<'a, Result<AcquireOutcome, BackendError>>;

    /// Frees `name` if `session` still owns it with `token`; otherwise a
    /// no-op (S3.5). The token counter of the name is kept.
    ///
    /// # Errors
    /// A [`BackendError`] if the call failed.
    fn release<'a>(
        &'a self,
        session: SessionId,
        name: &'a LeaseName,
        token: Token,
    ) -> BoxFuture<'a, Result<(), BackendError>>;

    /// Gives up `session`'s wait for `name` (S4.5): a backend that queues
    /// waiting candidates on the server (ZooKeeper, etcd) removes the place a
    /// `Held` acquire left there, so it can never become a holder nobody
    /// wants. It never ends a term: a place whose acquire answered `Won`
    /// stays until [`Backend::release`] with its token. The default (every
    /// backend that keeps nothing for a `Held` acquire) does no I/O.
    ///
    /// ```
    /// use simba_backends::{Backend, MemoryBackend};
    /// use simba_core::LeaseName;
    /// use std::time::Duration;
    /// # futures::executor::block_on(async {
    /// let backend = MemoryBackend::new();
    /// let session = backend.open_session(Duration::from_secs(10)).await?.session;
    /// backend.withdraw(session, &LeaseName::new("jobs")?).await?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    ///
    /// # Errors
    /// A [`BackendError`] if the call failed (the place may remain; the
    /// engine withdraws again after a later `Held`, and the place ends with
    /// the session at the latest).
    fn withdraw<'a>(
        &'a self,
        session: SessionId,
        name: &'a LeaseName,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        let _ = (session, name);
        Box::pin(async { Ok(()) })
    }

    /// Ends `session` and frees all of its leases at once (S1.4). Closing an
    /// unknown or expired session is `Ok`.
    ///
    /// # Errors
    /// A [`BackendError`] if the call failed.
    fn close_session(&self, session: SessionId) -> BoxFuture<'_, Result<(), BackendError>>;

    /// Lists the leases whose name starts with `prefix` (all if `None`) and
    /// the live sessions, for `simba status` and, later, partitioned groups.
    ///
    /// # Errors
    /// [`BackendErrorKind::Rejected`] before any I/O if `prefix` holds a
    /// character no lease name may contain (S3.1); a [`BackendError`] if the
    /// call failed.
    fn inspect<'a>(
        &'a self,
        prefix: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Inspection, BackendError>>;

    /// Subscribes to release broadcasts (S4.2): the returned stream yields the
    /// name of every lease freed by a release or a close from the moment the
    /// future resolves, and the name of a partitioned group whose membership
    /// changed by a join, a leave or a close (S10.5; optional: members
    /// otherwise learn the change at their next renewal). `Ok(None)` where the backend has no broadcast (the
    /// engine's retry takes over). A broadcast is a hint: it may be lost (for
    /// instance while the listener reconnects) and never replaces renewals.
    ///
    /// # Errors
    /// A [`BackendError`] if subscribing failed.
    fn subscribe_releases(
        &self,
    ) -> BoxFuture<'_, Result<Option<BoxStream<'static, LeaseName>>, BackendError>>;

    /// Whether [`Backend::subscribe_releases`] can yield anything.
    fn broadcasts_releases(&self) -> bool {
        false
    }

    /// How many calls this backend can serve at once, if that is bounded: a
    /// SQL backend's connection pool; 32 on ZooKeeper and etcd, whose
    /// servers commit writes one after the other; `None` (Redis, memory)
    /// where more at once costs nothing.
    ///
    /// A client never has more acquires, releases and other calls in flight
    /// than this, and queues the rest itself: many at once would only wait
    /// for a connection inside the pool, where each one's call timeout (S2.4)
    /// runs down and a renewal (S1.1), sent past that local queue, would wait
    /// behind all of them.
    ///
    /// ```
    /// use simba_backends::{Backend, MemoryBackend};
    /// assert_eq!(MemoryBackend::new().max_concurrent_calls(), None);
    /// ```
    fn max_concurrent_calls(&self) -> Option<usize> {
        None
    }

    /// How many acquires, releases and withdraws one call may carry (S4.7):
    /// the client sends those it decides at one instant together, as one
    /// [`Command::Batch`] that takes one of the
    /// [`max_concurrent_calls`](Backend::max_concurrent_calls) and one round
    /// trip ([`Backend::execute_batch`]). 1 (the default): each is its own
    /// call.
    ///
    /// ```
    /// use simba_backends::{Backend, MemoryBackend};
    /// assert!(MemoryBackend::new().max_batch() > 1);
    /// ```
    fn max_batch(&self) -> usize {
        1
    }

    /// Runs the calls of one [`Command::Batch`] (S4.7) and answers one reply
    /// per call, each as [`Backend::execute`] answers it alone. The default
    /// runs them all at once where the backend serves any number of calls at
    /// once ([`max_concurrent_calls`](Backend::max_concurrent_calls) `None`),
    /// else one after the other on the batch's one slot (S4.6); a SQL
    /// backend runs them in one transaction on one connection.
    ///
    /// ```
    /// use simba_backends::{Backend, MemoryBackend, SessionMetadata};
    /// use simba_core::{AcquireOutcome, Command, Input, LeaseName, OpId};
    /// use std::time::Duration;
    ///
    /// # futures::executor::block_on(async {
    /// let backend = MemoryBackend::new();
    /// let session = backend.open_session(Duration::from_secs(10)).await?.session;
    /// let acquire = |op, name: &str| -> Result<Command, Box<dyn std::error::Error>> {
    ///     Ok(Command::Acquire { op: OpId(op), session, name: LeaseName::new(name)? })
    /// };
    /// let calls = vec![acquire(1, "orders.0")?, acquire(2, "orders.1")?];
    /// let replies = backend.execute_batch(calls, &SessionMetadata::default()).await;
    /// assert!(replies.iter().all(|r| matches!(
    ///     r,
    ///     Input::AcquireReplied { result: Ok(AcquireOutcome::Won { .. }), .. }
    /// )));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    fn execute_batch<'a>(
        &'a self,
        calls: Vec<Command>,
        metadata: &'a SessionMetadata,
    ) -> BoxFuture<'a, Vec<Input>> {
        Box::pin(async move {
            if self.max_concurrent_calls().is_none() {
                let each = calls.into_iter().map(|c| self.execute(c, metadata));
                futures::future::join_all(each).await
            } else {
                let mut replies = Vec::with_capacity(calls.len());
                for call in calls {
                    replies.push(self.execute(call, metadata).await);
                }
                replies
            }
        })
    }

    /// Which part of the granted remaining time one renewal proves (S8.5):
    /// the whole of it on every backend here.
    fn renewal_proves(&self) -> Fraction {
        Fraction::ONE
    }

    /// Makes `session` a member of the partitioned group `group` (S10):
    /// from then on every [`Backend::renew`] of the session lists the
    /// group's live members in [`Renewal::groups`]. The membership ends with
    /// the session (close or expiry) or [`Backend::leave_group`]. Joining
    /// twice is a no-op.
    ///
    /// # Errors
    /// [`BackendErrorKind::Unsupported`] where the backend has no groups
    /// (the default); a [`BackendError`] if the call failed.
    fn join_group<'a>(
        &'a self,
        session: SessionId,
        group: &'a LeaseName,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        let _ = (session, group);
        Box::pin(async move { Err(unsupported(self.name(), "partitioned groups")) })
    }

    /// Ends `session`'s membership of `group`; a no-op if it is not a member.
    ///
    /// # Errors
    /// As [`Backend::join_group`].
    fn leave_group<'a>(
        &'a self,
        session: SessionId,
        group: &'a LeaseName,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        let _ = (session, group);
        Box::pin(async move { Err(unsupported(self.name(), "partitioned groups")) })
    }

    /// Records `slot` of the schedule `name` as claimed, in one atomic step,
    /// only if `session` owns `name` with `token` and `slot` is later than
    /// the last claimed slot of `name` (S11). The record outlives sessions
    /// and leases.
    ///
    /// # Errors
    /// [`BackendErrorKind::Unsupported`] where the backend has no schedule
    /// slots (the default); a [`BackendError`] if the call failed (the claim
    /// may or may not have been recorded).
    fn claim_slot<'a>(
        &'a self,
        session: SessionId,
        name: &'a LeaseName,
        token: Token,
        slot: u64,
    ) -> BoxFuture<'a, Result<SlotClaim, BackendError>> {
        let _ = (session, name, token, slot);
        Box::pin(async move { Err(unsupported(self.name(), "schedule slots")) })
    }

    /// Runs one engine [`Command`] and returns its reply as the engine's
    /// [`Input`]: the one mapping from a command to its call and back.
    /// `metadata` goes with a session opening ([`Backend::open_session_with`]).
    /// A call that never finishes is the caller's to drop at
    /// [`Engine::call_timeout`](simba_core::Engine::call_timeout): the
    /// engine times it out on its own clock (S2.4), so no reply stands in
    /// for it.
    ///
    /// ```
    /// use simba_backends::{Backend, MemoryBackend, SessionMetadata};
    /// use simba_core::{Command, Input, OpId};
    /// use std::time::Duration;
    ///
    /// let backend = MemoryBackend::new();
    /// let open = Command::OpenSession { op: OpId(1), lease_duration: Duration::from_secs(10) };
    /// let reply = futures::executor::block_on(backend.execute(open, &SessionMetadata::default()));
    /// assert!(matches!(reply, Input::SessionOpened { op: OpId(1), result: Ok(_) }));
    /// ```
    fn execute<'a>(
        &'a self,
        command: Command,
        metadata: &'a SessionMetadata,
    ) -> BoxFuture<'a, Input> {
        Box::pin(async move {
            match command {
                Command::OpenSession { op, lease_duration } => Input::SessionOpened {
                    op,
                    result: self.open_session_with(lease_duration, metadata).await,
                },
                Command::Renew { op, session } => Input::RenewReplied {
                    op,
                    result: self.renew(session).await,
                },
                Command::Acquire { op, session, name } => Input::AcquireReplied {
                    op,
                    result: self.acquire(session, &name).await,
                },
                Command::Release {
                    op,
                    session,
                    name,
                    token,
                } => Input::ReleaseReplied {
                    op,
                    result: self.release(session, &name, token).await,
                },
                Command::Withdraw { op, session, name } => Input::WithdrawReplied {
                    op,
                    result: self.withdraw(session, &name).await,
                },
                Command::CloseSession { op, session } => Input::SessionClosed {
                    op,
                    result: self.close_session(session).await,
                },
                Command::JoinGroup { op, session, group } => Input::GroupJoined {
                    op,
                    result: self.join_group(session, &group).await,
                },
                Command::LeaveGroup { op, session, group } => Input::GroupLeft {
                    op,
                    result: self.leave_group(session, &group).await,
                },
                Command::ClaimSlot {
                    op,
                    session,
                    name,
                    token,
                    slot,
                } => Input::SlotClaimed {
                    op,
                    result: self.claim_slot(session, &name, token, slot).await,
                },
                Command::Batch { calls } => Input::Batch {
                    replies: self.execute_batch(calls, metadata).await,
                },
            }
        })
    }

    /// A short stable name: `memory`, `sqlite`, `postgres`, `mysql`, `redis`, `etcd`.
    fn name(&self) -> &'static str;
}

fn unsupported(backend: &str, what: &str) -> BackendError {
    BackendError::new(
        BackendErrorKind::Unsupported,
        format!("the {backend} backend does not support {what}"),
    )
}

impl<B: Backend + ?Sized> Backend for Box<B> {
    fn open_session_with<'a>(
        &'a self,
        lease_duration: Duration,
        metadata: &'a SessionMetadata,
    ) -> BoxFuture<'a, Result<SessionGrant, BackendError>> {
        (**self).open_session_with(lease_duration, metadata)
    }
    fn holder<'a>(
        &'a self,
        name: &'a LeaseName,
    ) -> BoxFuture<'a, Result<Option<LeaseHolder>, BackendError>> {
        (**self).holder(name)
    }
    fn renew(&self, session: SessionId) -> BoxFuture<'_, Result<Renewal, RenewError>> {
        (**self).renew(session)
    }
    fn acquire<'a>(
        &'a self,
        session: SessionId,
        name: &'a LeaseName,
    ) -> BoxFuture<'a, Result<AcquireOutcome, BackendError>> {
        (**self).acquire(session, name)
    }
    fn release<'a>(
        &'a self,
        session: SessionId,
        name: &'a LeaseName,
        token: Token,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        (**self).release(session, name, token)
    }
    fn withdraw<'a>(
        &'a self,
        session: SessionId,
        name: &'a LeaseName,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        (**self).withdraw(session, name)
    }
    fn close_session(&self, session: SessionId) -> BoxFuture<'_, Result<(), BackendError>> {
        (**self).close_session(session)
    }
    fn inspect<'a>(
        &'a self,
        prefix: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Inspection, BackendError>> {
        (**self).inspect(prefix)
    }
    fn subscribe_releases(
        &self,
    ) -> BoxFuture<'_, Result<Option<BoxStream<'static, LeaseName>>, BackendError>> {
        (**self).subscribe_releases()
    }
    fn broadcasts_releases(&self) -> bool {
        (**self).broadcasts_releases()
    }
    fn max_concurrent_calls(&self) -> Option<usize> {
        (**self).max_concurrent_calls()
    }
    fn max_batch(&self) -> usize {
        (**self).max_batch()
    }
    fn execute_batch<'a>(
        &'a self,
        calls: Vec<Command>,
        metadata: &'a SessionMetadata,
    ) -> BoxFuture<'a, Vec<Input>> {
        (**self).execute_batch(calls, metadata)
    }
    fn renewal_proves(&self) -> Fraction {
        (**self).renewal_proves()
    }
    fn join_group<'a>(
        &'a self,
        session: SessionId,
        group: &'a LeaseName,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        (**self).join_group(session, group)
    }
    fn leave_group<'a>(
        &'a self,
        session: SessionId,
        group: &'a LeaseName,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        (**self).leave_group(session, group)
    }
    fn claim_slot<'a>(
        &'a self,
        session: SessionId,
        name: &'a LeaseName,
        token: Token,
        slot: u64,
    ) -> BoxFuture<'a, Result<SlotClaim, BackendError>> {
        (**self).claim_slot(session, name, token, slot)
    }
    fn execute<'a>(
        &'a self,
        command: Command,
        metadata: &'a SessionMetadata,
    ) -> BoxFuture<'a, Input> {
        (**self).execute(command, metadata)
    }
    fn name(&self) -> &'static str {
        (**self).name()
    }
}

/// What [`Backend::inspect`] saw, at one instant of the backend's clock.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Inspection {
    /// Leases by name (ascending), held or not. A lease that was never
    /// acquired is absent.
    pub leases: Vec<LeaseInfo>,
    /// Sessions the backend has not expired, by id (ascending).
    pub sessions: Vec<SessionInfo>,
}

/// One lease in an [`Inspection`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseInfo {
    /// The lease name.
    pub name: LeaseName,
    /// The live session owning it, or `None` if it is free (released, or its
    /// holder expired or closed).
    pub holder: Option<SessionId>,
    /// The latest token handed out for this name (the current term's token if
    /// held); `None` if the backend keeps the name without ever having handed
    /// one out.
    pub token: Option<Token>,
    /// The holder's remaining time by the backend clock; `None` if free.
    pub remaining: Option<Duration>,
}

/// One live session in an [`Inspection`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionInfo {
    /// The session id.
    pub session: SessionId,
    /// Time until the backend expires it, by the backend clock.
    pub remaining: Duration,
    /// The lease duration each renewal grants.
    pub lease_duration: Duration,
    /// What the session was opened with ([`Backend::open_session_with`]);
    /// empty if nothing.
    pub metadata: SessionMetadata,
}

/// Who holds a lease ([`Backend::holder`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseHolder {
    /// The holder's live session.
    pub session: SessionId,
    /// The current term's fencing token.
    pub token: Token,
    /// The holder's remaining time by the backend clock.
    pub remaining: Duration,
    /// The metadata the holder's session was opened with.
    pub metadata: SessionMetadata,
}

impl LeaseHolder {
    /// The live holder of `name` in `seen`, with its session's metadata.
    pub fn find(seen: &Inspection, name: &LeaseName) -> Option<LeaseHolder> {
        let lease = seen.leases.iter().find(|l| &l.name == name)?;
        let (session, token) = (lease.holder?, lease.token?);
        let metadata = seen
            .sessions
            .iter()
            .find(|s| s.session == session)
            .map(|s| s.metadata.clone())
            .unwrap_or_default();
        Some(LeaseHolder {
            session,
            token,
            remaining: lease.remaining.unwrap_or_default(),
            metadata,
        })
    }
}

/// Makes sure rustls has a process-wide default crypto provider before a
/// backend connects over TLS. With the `zookeeper-tls` feature, rustls is
/// built with two providers (ring, which Simba uses, and aws-lc-rs, which
/// zookeeper-client's TLS enables), and then it cannot pick a default by
/// itself: the libraries that use the default (redis's TLS, sqlx's check of
/// a CA without the host name, zookeeper-client) would panic. So ring's
/// becomes the default, unless the application installed one. Without
/// `zookeeper-tls` there is one provider and nothing to do.
#[cfg(feature = "zookeeper-tls")]
pub(crate) fn ensure_rustls_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Losing a race to another installer is fine: one is set.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

/// See the `zookeeper-tls` version: nothing to do without it.
#[cfg(all(
    not(feature = "zookeeper-tls"),
    any(feature = "postgres", feature = "mysql", feature = "redis")
))]
pub(crate) fn ensure_rustls_provider() {}

/// A fresh session id: 128 random bits from the operating system (S1.3).
///
/// # Errors
/// [`BackendErrorKind::Other`] if the OS has no randomness to give.
pub fn random_session_id() -> Result<SessionId, BackendError> {
    let mut bytes = [0u8; 16];
    getrandom::getrandom(&mut bytes).map_err(|e| {
        BackendError::new(
            BackendErrorKind::Other,
            format!("no OS randomness for a session id: {e}"),
        )
    })?;
    Ok(SessionId::from_bytes(bytes))
}

/// Checks an [`Backend::inspect`] prefix before any I/O: every character must
/// be one a lease name may contain (S3.1), and it is at most 128 long.
///
/// # Errors
/// [`BackendErrorKind::Rejected`] naming the offending character.
pub fn check_prefix(prefix: &str) -> Result<(), BackendError> {
    if prefix.len() > simba_core::MAX_NAME_LEN {
        return Err(BackendError::new(
            BackendErrorKind::Rejected,
            format!(
                "invalid lease name prefix: {} characters, more than the 128 allowed",
                prefix.chars().count()
            ),
        ));
    }
    if let Some((index, ch)) = prefix
        .chars()
        .enumerate()
        .find(|&(_, c)| !simba_core::is_name_char(c))
    {
        return Err(BackendError::new(
            BackendErrorKind::Rejected,
            format!(
                "invalid lease name prefix: character {ch:?} at index {index} is not one of [A-Za-z0-9._:-]"
            ),
        ));
    }
    Ok(())
}

/// A lease duration the SQL backends and the memory backend accept: at least
/// one millisecond and at most one year (so the backend's arithmetic in
/// microseconds never overflows).
///
/// # Errors
/// [`BackendErrorKind::Rejected`] naming the duration.
pub fn check_lease_duration(lease_duration: Duration) -> Result<i64, BackendError> {
    simba_core::model::check_lease_duration(lease_duration)?;
    i64::try_from(lease_duration.as_micros()).map_err(|_| {
        BackendError::new(
            BackendErrorKind::Rejected,
            format!("lease duration {lease_duration:?} is too long"),
        )
    })
}

/// Connects to the backend that `url` names, creating its tables if they
/// are missing: `postgres://…` or `postgresql://…`, `mysql://…` or
/// `mariadb://…`, `sqlite://PATH` or `sqlite::memory:`, `redis://…` or
/// `rediss://…` or `redis+sentinel://…`, `zk://…`, `zookeeper://…` or `zks://…`, `etcd://…` or
/// `etcds://…` ([`BackendKind::schemes`]; each needs its feature,
/// [`BackendKind::feature`]). See [`BackendConfig`] for the options.
///
/// The box it returns is a [`Backend`] itself, so it goes straight to a
/// client builder: `simba_tokio::builder(connect(url).await?)`.
///
/// # Errors
/// [`BackendErrorKind::Rejected`] for a bad URL or a backend whose feature is
/// off, [`BackendErrorKind::Unavailable`] if the server cannot be reached, and
/// whatever [`BackendConfig::connect`] reports; credentials are never shown.
///
/// ```
/// # futures::executor::block_on(async {
/// let err = simba_backends::connect("redis://u:secret@host/").await.err().unwrap();
/// assert!(!err.to_string().contains("secret"));
/// # });
/// ```
pub async fn connect(url: &str) -> Result<Box<dyn Backend>, BackendError> {
    BackendConfig::parse(url)?.connect().await
}
