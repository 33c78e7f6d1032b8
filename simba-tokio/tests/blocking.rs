//! Blocking calls on a current-thread tokio runtime, whose only thread also
//! runs the Simba driver: waiting there would never end, so each call starts
//! its action and returns `WouldBlockRuntime` at once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use simba_tokio::{Error, MemoryBackend, NoListener};

fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

#[test]
fn close_blocking_on_a_current_thread_runtime_does_not_deadlock() {
    current_thread().block_on(async {
        let simba = simba_tokio::builder(MemoryBackend::new()).build().unwrap();
        assert_eq!(simba.close_blocking(), Err(Error::WouldBlockRuntime));
        // The close it started completes.
        simba.close().await;
    });
}

#[test]
fn stop_blocking_on_a_current_thread_runtime_does_not_deadlock() {
    current_thread().block_on(async {
        let simba = simba_tokio::builder(MemoryBackend::new()).build().unwrap();
        let e = simba
            .election("blocking.stop")
            .start(NoListener)
            .await
            .unwrap();
        assert_eq!(e.stop_blocking(), Err(Error::WouldBlockRuntime));
        e.stop().await;
        assert!(e.snapshot().await.unwrap().is_none());
        simba.close().await;
    });
}

#[test]
fn release_blocking_on_a_current_thread_runtime_does_not_deadlock() {
    current_thread().block_on(async {
        let simba = simba_tokio::builder(MemoryBackend::new()).build().unwrap();
        let lock = simba.lock("blocking.release").acquire().await.unwrap();
        let term = lock.term().clone();
        assert_eq!(lock.release_blocking(), Err(Error::WouldBlockRuntime));
        term.revoked().await;
        // Released: the lock can be taken again.
        let again = simba.lock("blocking.release").acquire().await.unwrap();
        again.release().await;
        simba.close().await;
    });
}

#[test]
fn blocking_calls_off_the_runtime_still_wait() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let simba = rt.block_on(async { simba_tokio::builder(MemoryBackend::new()).build().unwrap() });
    let lock = rt
        .block_on(simba.lock("blocking.outside").acquire())
        .unwrap();
    // This thread is not a runtime thread: the calls block and succeed.
    assert_eq!(lock.release_blocking(), Ok(()));
    assert_eq!(simba.close_blocking(), Ok(()));
}
