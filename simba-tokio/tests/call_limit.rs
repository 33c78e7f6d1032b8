//! `Backend::max_concurrent_calls`: a client never has more acquires in
//! flight than its backend can serve at once (a SQL pool's connections), and
//! queues the rest itself, so that a burst of elections neither times its own
//! calls out inside the pool (S2.4) nor makes a renewal (S1.1) wait behind
//! all of them. Runs in tokio's virtual time: every acquire takes 5 ms of
//! it, so 300 of them take 1.5 s one at a time — longer than the call
//! timeout (1 s), so a third of them are abandoned by the engine while they
//! wait, and must not reach the backend afterwards.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use simba_backends::{Backend, Call, Layer, Layered, MemoryBackend, Reply};
use simba_core::{BackendError, LeaseName};
use simba_tokio::{ElectionListener, SimbaConfig, Term};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A memory backend whose acquires take `SLOW` each and which says it can
/// serve `limit` calls at once; it counts the most acquires ever in flight
/// and every acquire that came in.
struct Narrow {
    inner: MemoryBackend,
    limit: Option<usize>,
    in_flight: AtomicUsize,
    peak: AtomicUsize,
    acquires: AtomicUsize,
}

const SLOW: Duration = Duration::from_millis(5);

impl Layer for Narrow {
    fn inner(&self) -> &dyn Backend {
        &self.inner
    }
    fn call<'a>(&'a self, call: Call<'a>) -> BoxFuture<'a, Reply> {
        if !matches!(call, Call::Acquire { .. }) {
            return call.run(&self.inner);
        }
        Box::pin(async move {
            self.acquires.fetch_add(1, Ordering::SeqCst);
            let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            self.peak.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(SLOW).await;
            let out = call.run(&self.inner).await;
            self.in_flight.fetch_sub(1, Ordering::SeqCst);
            out
        })
    }
    fn subscribe_releases(
        &self,
    ) -> BoxFuture<'_, Result<Option<BoxStream<'static, LeaseName>>, BackendError>> {
        Box::pin(async { Ok(None) })
    }
    fn broadcasts_releases(&self) -> bool {
        false
    }
    fn max_concurrent_calls(&self) -> Option<usize> {
        self.limit
    }
    /// One acquire per call (S4.7's batches are the memory backend's; here
    /// each acquire is timed and counted on its own).
    fn max_batch(&self) -> usize {
        1
    }
    fn name(&self) -> &'static str {
        "narrow"
    }
}

struct Count(Arc<AtomicUsize>);

impl ElectionListener for Count {
    fn on_elected(&self, _term: &Term) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Starts `n` elections on one client and waits until all are won; returns
/// the backend (for its counters) and the virtual time it took.
async fn burst(limit: Option<usize>, n: usize) -> (Arc<Layered<Narrow>>, Duration) {
    let backend = Arc::new(Layered(Narrow {
        inner: MemoryBackend::new(),
        limit,
        in_flight: AtomicUsize::new(0),
        peak: AtomicUsize::new(0),
        acquires: AtomicUsize::new(0),
    }));
    // A 3 s lease: renewals every second, calls time out after a second.
    let config = SimbaConfig::builder()
        .lease_duration(Duration::from_secs(3))
        .build()
        .unwrap();
    let simba = simba_tokio::builder_dyn(backend.clone())
        .config(config)
        .build()
        .unwrap();
    let won = Arc::new(AtomicUsize::new(0));
    let start = tokio::time::Instant::now();
    let mut elections = Vec::new();
    for i in 0..n {
        elections.push(
            simba
                .election(format!("burst.{i}"))
                .start(Count(won.clone()))
                .await
                .unwrap(),
        );
    }
    while won.load(Ordering::SeqCst) < n {
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "{} of {n} won after {:?}",
            won.load(Ordering::SeqCst),
            start.elapsed()
        );
    }
    let took = start.elapsed();
    drop(elections);
    simba.close().await;
    (backend, took)
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_burst_of_acquires_waits_for_the_backends_connections_not_inside_them() {
    let (b, took) = burst(Some(1), 300).await;
    assert_eq!(
        b.peak.load(Ordering::SeqCst),
        1,
        "acquires in flight at once"
    );
    // An acquire still queued when the engine abandons it (S2.4, after 1 s)
    // is not sent: the backend sees about one acquire per name. (Sent all
    // at once, those still waiting for the connection after 1 s were each
    // sent again: 400 here.) One may be abandoned during its own 5 ms call.
    let acquires = b.acquires.load(Ordering::SeqCst);
    assert!(
        (300..=303).contains(&acquires),
        "{acquires} acquires for 300 names"
    );
    eprintln!(
        "300 elections, one connection: all won after {took:?} (virtual), {acquires} acquires"
    );
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_backend_without_a_limit_gets_every_call_at_once() {
    let (b, _) = burst(None, 50).await;
    assert!(
        b.peak.load(Ordering::SeqCst) > 1,
        "no limit, yet one at a time"
    );
    assert_eq!(b.acquires.load(Ordering::SeqCst), 50);
}
