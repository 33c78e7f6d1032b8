//! The shared integration suite (`simba_client::testkit`) on async-std,
//! against the in-memory backend, SQLite and PostgreSQL (sqlx on its
//! async-std runtime). async-std has no virtual clock: real time throughout.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::future::Future;
use std::sync::Arc;

fn block_on<F: Future<Output = ()>>(f: F) {
    async_std::task::block_on(f)
}

fn runtime() -> Arc<dyn simba_async_std::AsyncRuntime> {
    Arc::new(simba_async_std::AsyncStdRuntime)
}

simba_client::adapter_suite!("async-std", crate::block_on, crate::runtime);
