//! The library hand-over taken apart: a backend wrapper that notes when
//! each release and acquire call starts and ends and when each release
//! broadcast (or wake) arrives, so a hand-over's time splits into the
//! leader's stop until its release call, the release call, the broadcast's
//! delivery, the candidate's reaction, its acquire call and the election's
//! callback.

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use simba_backends::{Backend, Inspection};
use simba_core::{
    AcquireOutcome, BackendError, Fraction, LeaseName, RenewError, Renewal, SessionGrant,
    SessionId, SlotClaim, Token,
};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What happened when.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mark {
    /// A release call started.
    ReleaseSent,
    /// A release call returned.
    ReleaseDone,
    /// A release broadcast (or wake) reached the subscriber.
    Broadcast,
    /// An acquire call started.
    AcquireSent,
    /// An acquire call returned `Won`.
    AcquireWon,
}

/// The marks of every traced backend, in order.
pub type Log = Arc<Mutex<Vec<(Instant, Mark)>>>;

fn note(log: &Log, mark: Mark) {
    if let Ok(mut l) = log.lock() {
        l.push((Instant::now(), mark));
    }
}

/// One hand-over's parts, from the marks after `t0` (the leader's `stop()`)
/// up to `t1` (the candidate's `on_elected`), the release's from the
/// leader's log, the rest from the candidate's: `[stop → release sent,
/// release call, release returned → broadcast received, broadcast →
/// acquire sent, acquire call, acquire returned → on_elected]`. `None` if
/// a mark is missing (a hand-over by retry has no broadcast).
pub fn split(
    leader: &[(Instant, Mark)],
    candidate: &[(Instant, Mark)],
    t0: Instant,
    t1: Instant,
) -> Option<[Duration; 6]> {
    let after = |log: &[(Instant, Mark)], from: Instant, m: Mark| {
        log.iter()
            .find(|(t, k)| *t >= from && *t <= t1 && *k == m)
            .map(|(t, _)| *t)
    };
    let sent = after(leader, t0, Mark::ReleaseSent)?;
    let done = after(leader, sent, Mark::ReleaseDone)?;
    let heard = after(candidate, sent, Mark::Broadcast)?;
    let asked = after(candidate, heard, Mark::AcquireSent)?;
    let won = after(candidate, asked, Mark::AcquireWon)?;
    Some([
        sent - t0,
        done - sent,
        heard.saturating_duration_since(done),
        asked - heard,
        won - asked,
        t1.saturating_duration_since(won),
    ])
}

/// The parts' names, in [`split`]'s order.
pub const PARTS: [&str; 6] = [
    "stop → release sent",
    "release call",
    "release returned → broadcast received",
    "broadcast → acquire sent",
    "acquire call",
    "acquire returned → on_elected",
];

/// A backend that notes [`Mark`]s in a [`Log`].
pub struct Traced {
    /// The backend.
    pub inner: Arc<dyn Backend>,
    /// Where the marks go.
    pub log: Log,
}

impl Backend for Traced {
    fn max_concurrent_calls(&self) -> Option<usize> {
        self.inner.max_concurrent_calls()
    }
    fn open_session_with<'a>(
        &'a self,
        lease_duration: Duration,
        metadata: &'a simba_backends::SessionMetadata,
    ) -> BoxFuture<'a, Result<SessionGrant, BackendError>> {
        self.inner.open_session_with(lease_duration, metadata)
    }
    fn open_session(
        &self,
        lease_duration: Duration,
    ) -> BoxFuture<'_, Result<SessionGrant, BackendError>> {
        self.inner.open_session(lease_duration)
    }
    fn renew(&self, session: SessionId) -> BoxFuture<'_, Result<Renewal, RenewError>> {
        self.inner.renew(session)
    }
    fn acquire<'a>(
        &'a self,
        session: SessionId,
        name: &'a LeaseName,
    ) -> BoxFuture<'a, Result<AcquireOutcome, BackendError>> {
        async move {
            note(&self.log, Mark::AcquireSent);
            let r = self.inner.acquire(session, name).await;
            if matches!(r, Ok(AcquireOutcome::Won { .. })) {
                note(&self.log, Mark::AcquireWon);
            }
            r
        }
        .boxed()
    }
    fn release<'a>(
        &'a self,
        session: SessionId,
        name: &'a LeaseName,
        token: Token,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        async move {
            note(&self.log, Mark::ReleaseSent);
            let r = self.inner.release(session, name, token).await;
            note(&self.log, Mark::ReleaseDone);
            r
        }
        .boxed()
    }
    fn withdraw<'a>(
        &'a self,
        session: SessionId,
        name: &'a LeaseName,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        self.inner.withdraw(session, name)
    }
    fn close_session(&self, session: SessionId) -> BoxFuture<'_, Result<(), BackendError>> {
        self.inner.close_session(session)
    }
    fn inspect<'a>(
        &'a self,
        prefix: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Inspection, BackendError>> {
        self.inner.inspect(prefix)
    }
    fn subscribe_releases(
        &self,
    ) -> BoxFuture<'_, Result<Option<BoxStream<'static, LeaseName>>, BackendError>> {
        async move {
            let log = Arc::clone(&self.log);
            Ok(self
                .inner
                .subscribe_releases()
                .await?
                .map(|s| s.inspect(move |_| note(&log, Mark::Broadcast)).boxed()))
        }
        .boxed()
    }
    fn broadcasts_releases(&self) -> bool {
        self.inner.broadcasts_releases()
    }
    fn renewal_proves(&self) -> Fraction {
        self.inner.renewal_proves()
    }
    fn join_group<'a>(
        &'a self,
        session: SessionId,
        group: &'a LeaseName,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        self.inner.join_group(session, group)
    }
    fn leave_group<'a>(
        &'a self,
        session: SessionId,
        group: &'a LeaseName,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        self.inner.leave_group(session, group)
    }
    fn claim_slot<'a>(
        &'a self,
        session: SessionId,
        name: &'a LeaseName,
        token: Token,
        slot: u64,
    ) -> BoxFuture<'a, Result<SlotClaim, BackendError>> {
        self.inner.claim_slot(session, name, token, slot)
    }
    fn name(&self) -> &'static str {
        self.inner.name()
    }
}
