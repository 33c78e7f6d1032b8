//! # simba-async-std: Simba on async-std and smol-compatible executors
//!
//! Leader elections, locks and leader-only tasks for processes on many
//! machines, through a shared backend. This crate is glue: an [`AsyncRuntime`]
//! implementation over async-std's task spawner and timer, and the API of
//! [`simba_client`], re-exported.
//!
//! async-std is discontinued upstream; this adapter stays because users
//! asked for it. It runs on `async-global-executor` and the `async-io`
//! reactor, the same foundations as **smol**, so it works with
//! smol-compatible clients too: sqlx with its `runtime-async-std` feature
//! (`simba-backends`' `runtime-async-std`) for the SQL backends, and the
//! smol-compatible modes of the clients later backends will use. Nothing here needs an
//! async-std-only API beyond `task::spawn`, `task::spawn_blocking` and the
//! timer, so an application driven by smol's own executor can use it as it is
//! (the tasks this adapter spawns run on the global executor).
//!
//! ```
//! use simba_async_std::{MemoryBackend, SimbaConfig};
//! use std::time::Duration;
//!
//! # async_std::task::block_on(async {
//! let config = SimbaConfig::builder().lease_duration(Duration::from_secs(3)).build()?;
//! let simba = simba_async_std::builder(MemoryBackend::new()).config(config).build()?;
//! let lock = simba.lock("invoice-42").acquire().await?;
//! assert!(lock.is_valid());
//! lock.release().await;
//! simba.close().await;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```
//!
//! ## Time
//!
//! async-std has no virtual clock: tests use real time, with short leases.
#![forbid(unsafe_code)]

pub use simba_client::*;

use futures::future::BoxFuture;
use std::sync::Arc;
use std::time::Instant;

/// [`AsyncRuntime`] over async-std's global executor and timer.
#[derive(Clone, Copy, Debug, Default)]
pub struct AsyncStdRuntime;

impl AsyncRuntime for AsyncStdRuntime {
    fn spawn(&self, task: BoxFuture<'static, ()>) {
        drop(async_std::task::spawn(task));
    }

    fn spawn_blocking(&self, work: Box<dyn FnOnce() + Send>) {
        drop(async_std::task::spawn_blocking(work));
    }

    fn sleep_until(&self, at: Instant) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            let left = at.saturating_duration_since(Instant::now());
            if !left.is_zero() {
                async_std::task::sleep(left).await;
            }
        })
    }

    fn now(&self) -> Instant {
        Instant::now()
    }

    /// Inside an async-std task (including `task::block_on`): waiting there
    /// may block the thread that must finish the call.
    fn blocking_would_deadlock(&self) -> bool {
        async_std::task::try_current().is_some()
    }
}

/// A client builder over `backend` on async-std.
pub fn builder(backend: impl Backend) -> SimbaBuilder {
    builder_dyn(Arc::new(backend))
}

/// As [`builder`], for a shared or boxed backend.
pub fn builder_dyn(backend: Arc<dyn Backend>) -> SimbaBuilder {
    Simba::builder_dyn(backend).runtime(Arc::new(AsyncStdRuntime))
}

/// A client configured like the `simba` command: connects to the backend of
/// `SIMBA_BACKEND` (with its feature enabled on this crate: `sqlite`, the
/// default, `postgres`, `mysql`, `redis` (`redis-tls` for `rediss://`),
/// `zookeeper` (`zookeeper-tls` for `zks://`) or `etcd`; the URL schemes are
/// those of [`connect`]) with the timing settings of
/// `SIMBA_SESSION_*` (S8.1), on async-std.
///
/// # Errors
/// [`Error`]: a variable that does not parse, no `SIMBA_BACKEND` or
/// an unreachable backend.
pub async fn from_env() -> Result<Simba, Error> {
    let builder = Settings::from_env()?.connect().await?;
    builder.runtime(Arc::new(AsyncStdRuntime)).build()
}
