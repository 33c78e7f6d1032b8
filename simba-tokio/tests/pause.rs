//! S3.3 on a real pause: a process that wakes from a pause longer than its
//! lease reads `is_valid() == false` on its very first call, before the driver
//! has run at all, because validity is a pure read of the clock and the
//! session's shared deadline. The pause is a blocked thread of a
//! single-threaded runtime (so nothing else runs meanwhile), not tokio's
//! paused clock: the in-memory backend reads `std::time::Instant`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use simba_tokio::{MemoryBackend, RevokeReason, SimbaConfig};
use std::time::Duration;

#[tokio::test(flavor = "current_thread")]
async fn s3_3_term_is_invalid_on_first_read_after_a_long_pause() {
    let config = SimbaConfig::builder()
        .lease_duration(Duration::from_millis(900))
        .renew_interval(Duration::from_millis(300))
        .build()
        .unwrap();
    let simba = simba_tokio::builder(MemoryBackend::new())
        .config(config)
        .build()
        .unwrap();
    let lock = simba.lock("pause.me").acquire().await.unwrap();
    assert!(lock.is_valid());
    let term = lock.term().clone();
    // The only runtime thread stops: no renewal, no driver, no callback.
    std::thread::sleep(Duration::from_millis(1200));
    assert!(
        !term.is_valid(),
        "S3.3: invalid on the first read after the pause"
    );
    assert_eq!(term.remaining(), Duration::ZERO);
    // Once the driver runs again, the term ends with DeadlinePassed (S2.3)
    // and never becomes valid again, even though the backend may still
    // count the session alive.
    assert_eq!(term.revoked().await, RevokeReason::DeadlinePassed);
    assert!(!term.is_valid());
    drop(lock);
    simba.close().await;
}

#[tokio::test(flavor = "current_thread")]
async fn build_outside_a_runtime_fails_cleanly() {
    let handle = std::thread::spawn(|| simba_tokio::builder(MemoryBackend::new()).build().err());
    assert_eq!(handle.join().unwrap(), Some(simba_tokio::Error::NoRuntime));
}
