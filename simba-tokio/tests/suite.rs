//! The shared integration suite (`simba_client::testkit`) on tokio, against
//! the in-memory backend, SQLite and PostgreSQL.
//!
//! Real time, not tokio's paused clock: the backends keep their own clocks
//! (the in-memory backend reads `std::time::Instant`, SQL backends the
//! database's), so a paused runtime clock would not expire their sessions.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::future::Future;
use std::sync::Arc;

fn block_on<F: Future<Output = ()>>(f: F) {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
        .block_on(f)
}

fn runtime() -> Arc<dyn simba_tokio::AsyncRuntime> {
    Arc::new(simba_tokio::TokioRuntime::try_current().expect("inside tokio"))
}

simba_client::adapter_suite!("tokio", crate::block_on, crate::runtime);
