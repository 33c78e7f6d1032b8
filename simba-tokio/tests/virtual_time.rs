//! Tokio's paused (virtual) clock, where it really works: with a backend
//! that has no clock of its own. `Stalling` grants sessions and leases at
//! once but never answers a renewal, so everything that happens afterwards
//! is the driver's and engine's timing on tokio's clock: renewal calls time
//! out after the renewal period (S2.4), back off (S8.3), and the term ends
//! with `DeadlinePassed` exactly at the local deadline (S2.1, S2.3), with the
//! default 15 s lease running in no real time.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use simba_backends::{Backend, Inspection, SessionMetadata};
use simba_core::{
    AcquireOutcome, BackendError, LeaseName, RenewError, Renewal, SessionGrant, SessionId, Token,
};
use simba_tokio::{RevokeReason, SimbaConfig};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[derive(Default)]
struct Stalling {
    renewals: AtomicU64,
}

impl Backend for Stalling {
    fn open_session_with<'a>(
        &'a self,
        d: Duration,
        _metadata: &'a SessionMetadata,
    ) -> BoxFuture<'a, Result<SessionGrant, BackendError>> {
        Box::pin(async move {
            Ok(SessionGrant {
                session: SessionId::from_bytes([7; 16]),
                remaining: d,
            })
        })
    }
    fn renew(&self, _s: SessionId) -> BoxFuture<'_, Result<Renewal, RenewError>> {
        self.renewals.fetch_add(1, Ordering::Relaxed);
        Box::pin(futures::future::pending())
    }
    fn acquire<'a>(
        &'a self,
        _s: SessionId,
        _n: &'a LeaseName,
    ) -> BoxFuture<'a, Result<AcquireOutcome, BackendError>> {
        Box::pin(async move {
            Ok(AcquireOutcome::Won {
                token: Token::new(1).expect("nonzero"),
                remaining: Duration::from_secs(15),
            })
        })
    }
    fn release<'a>(
        &'a self,
        _s: SessionId,
        _n: &'a LeaseName,
        _t: Token,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        Box::pin(async { Ok(()) })
    }
    fn close_session(&self, _s: SessionId) -> BoxFuture<'_, Result<(), BackendError>> {
        Box::pin(async { Ok(()) })
    }
    fn inspect<'a>(
        &'a self,
        _p: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Inspection, BackendError>> {
        Box::pin(async { Ok(Inspection::default()) })
    }
    fn subscribe_releases(
        &self,
    ) -> BoxFuture<'_, Result<Option<BoxStream<'static, LeaseName>>, BackendError>> {
        Box::pin(async { Ok(None) })
    }
    fn name(&self) -> &'static str {
        "stalling"
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn s2_3_s2_4_stalled_renewals_end_the_term_at_the_local_deadline_in_virtual_time() {
    let backend = Arc::new(Stalling::default());
    let config = SimbaConfig::default(); // 15 s lease, 5 s renewals
    let simba = simba_tokio::builder_dyn(backend.clone())
        .config(config.clone())
        .build()
        .unwrap();
    let start = tokio::time::Instant::now();
    let lock = simba.lock("virtual.lock").acquire().await.unwrap();
    let term = lock.term().clone();
    assert!(term.is_valid());
    let reason = term.revoked().await;
    let ended = start.elapsed();
    assert_eq!(reason, RevokeReason::DeadlinePassed);
    // deadline = sent_at + 15 s × (1 − 0.01) − 50 ms = 14.8 s (S2.1).
    let expected = Duration::from_millis(14_800);
    assert!(
        ended >= expected && ended <= expected + Duration::from_millis(5),
        "ended after {ended:?}, expected {expected:?}"
    );
    assert!(!term.is_valid());
    // Each stuck renewal was abandoned after the renewal period (S2.4) and
    // retried with back-off (S8.3): more than one try before the deadline.
    let tries = backend.renewals.load(Ordering::Relaxed);
    assert!((2..=6).contains(&tries), "{tries} renewal tries");
    drop(lock);
    simba.close().await;
}
