//! The library hand-over taken apart: a backend wrapper that notes when
//! each release and acquire call starts and ends and when each release
//! broadcast (or wake) arrives, so a hand-over's time splits into the
//! leader's stop until its release call, the release call, the broadcast's
//! delivery, the candidate's reaction, its acquire call and the election's
//! callback.

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use simba_backends::{Backend, Call, Layer, Reply};
use simba_core::{AcquireOutcome, BackendError, LeaseName};
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

/// A layer that notes [`Mark`]s in a [`Log`] (a backend as [`simba_backends::Layered`]).
pub struct Traced {
    /// The backend.
    pub inner: Arc<dyn Backend>,
    /// Where the marks go.
    pub log: Log,
}

impl Layer for Traced {
    fn inner(&self) -> &dyn Backend {
        &*self.inner
    }
    fn call<'a>(&'a self, call: Call<'a>) -> BoxFuture<'a, Reply> {
        let (sent, done) = match call {
            Call::Acquire { .. } => (Mark::AcquireSent, Mark::AcquireWon),
            Call::Release { .. } => (Mark::ReleaseSent, Mark::ReleaseDone),
            _ => return call.run(&*self.inner),
        };
        async move {
            note(&self.log, sent);
            let r = call.run(&*self.inner).await;
            if matches!(
                r,
                Reply::Done(_) | Reply::Acquired(Ok(AcquireOutcome::Won { .. }))
            ) {
                note(&self.log, done);
            }
            r
        }
        .boxed()
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
}
