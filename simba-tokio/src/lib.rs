//! # simba-tokio: Simba on tokio
//!
//! Leader elections, locks and leader-only tasks for processes on many
//! machines, through a shared backend, on the tokio runtime. This crate is
//! glue: an [`AsyncRuntime`] implementation over tokio and the API of
//! [`simba_client`], re-exported. Use backends built with sqlx's
//! `runtime-tokio` feature (the default of `simba-backends`).
//!
//! ```
//! use simba_tokio::{MemoryBackend, SimbaConfig};
//! use std::time::Duration;
//!
//! # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let config = SimbaConfig::builder().lease_duration(Duration::from_secs(3)).build()?;
//! let simba = simba_tokio::builder(MemoryBackend::new()).config(config).build()?;
//! let lock = simba.lock("invoice-42").acquire().await?;
//! assert!(lock.is_valid());
//! println!("writing with fencing token {}", lock.token());
//! lock.release().await;
//! simba.close().await;
//! # Ok(())
//! # }
//! ```
//!
//! An election with a listener, and a leader-only task:
//!
//! ```
//! use simba_tokio::{ElectionListener, MemoryBackend, RevokeReason, SimbaConfig, Term};
//! use std::time::Duration;
//!
//! struct Log;
//! impl ElectionListener for Log {
//!     fn on_elected(&self, term: &Term) {
//!         println!("leading {} with token {}", term.name(), term.token());
//!     }
//!     fn on_revoked(&self, term: &Term, reason: RevokeReason) {
//!         println!("term {} of {} ended: {reason}", term.token(), term.name());
//!     }
//! }
//!
//! # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let config = SimbaConfig::builder().lease_duration(Duration::from_secs(3)).build()?;
//! let simba = simba_tokio::builder(MemoryBackend::new()).config(config).build()?;
//! let election = simba.election("scheduler").start(Log).await?;
//! let task = simba
//!     .run_while_leader("compactor", |term| async move {
//!         while term.is_valid() {
//!             // one unit of leader-only work, fenced with term.token()
//!             tokio::time::sleep(Duration::from_millis(100)).await;
//!         }
//!     })
//!     .await?;
//! election.step_down(Duration::from_secs(1)).await?; // S6.4
//! task.stop().await; // S6.1: revoke, cancel, release once the task is gone
//! simba.close().await;
//! # Ok(())
//! # }
//! ```
//!
//! ## Time
//!
//! The driver sleeps with `tokio::time` and reads `tokio::time::Instant`, so
//! a paused test clock moves the engine's timers and [`Term::is_valid`].
//! The backends keep their own clock (the in-memory backend reads
//! `std::time::Instant`, SQL backends the database's clock), so paused time
//! does not expire their sessions: tests with real backends use real time.
#![forbid(unsafe_code)]

pub use simba_client::*;

// The Rust snippets of the repository's documents, compiled (and, where not
// `no_run`, run) as doctests: `cargo test --doc -p simba-tokio --all-features`.
#[cfg(all(doctest, feature = "postgres", feature = "mysql", feature = "redis"))]
#[doc = include_str!("../../README.md")]
struct ReadmeSnippets;
#[cfg(all(doctest, feature = "postgres", feature = "mysql"))]
#[doc = include_str!("../../docs/BACKENDS.md")]
struct BackendsSnippets;
#[cfg(all(doctest, feature = "postgres", feature = "mysql"))]
#[doc = include_str!("../../docs/CLIENT.md")]
struct ClientSnippets;
#[cfg(all(doctest, feature = "postgres", feature = "mysql"))]
#[doc = include_str!("../../docs/COMING_FROM.md")]
struct ComingFromSnippets;
#[cfg(all(doctest, feature = "postgres", feature = "mysql"))]
#[doc = include_str!("../../docs/FAULTS.md")]
struct FaultsSnippets;

use futures::future::BoxFuture;
use std::sync::Arc;
use std::time::Instant;

/// [`AsyncRuntime`] over a tokio runtime handle.
#[derive(Clone, Debug)]
pub struct TokioRuntime {
    handle: tokio::runtime::Handle,
}

impl TokioRuntime {
    /// The runtime of the calling context, if inside one.
    pub fn try_current() -> Option<TokioRuntime> {
        tokio::runtime::Handle::try_current()
            .ok()
            .map(|handle| TokioRuntime { handle })
    }

    /// A runtime over `handle`.
    pub fn from_handle(handle: tokio::runtime::Handle) -> TokioRuntime {
        TokioRuntime { handle }
    }
}

impl AsyncRuntime for TokioRuntime {
    fn spawn(&self, task: BoxFuture<'static, ()>) {
        drop(self.handle.spawn(task));
    }

    fn spawn_blocking(&self, work: Box<dyn FnOnce() + Send>) {
        drop(self.handle.spawn_blocking(work));
    }

    fn sleep_until(&self, at: Instant) -> BoxFuture<'static, ()> {
        Box::pin(tokio::time::sleep_until(tokio::time::Instant::from_std(at)))
    }

    fn now(&self) -> Instant {
        tokio::time::Instant::now().into_std()
    }

    /// Inside any tokio runtime context (a worker, a current-thread
    /// runtime's `block_on`, or a `spawn_blocking` thread): waiting there may
    /// block the thread that must finish the call.
    fn blocking_would_deadlock(&self) -> bool {
        tokio::runtime::Handle::try_current().is_ok()
    }
}

/// A client builder over `backend` on the tokio runtime of the calling
/// context. `build()` fails with [`Error::NoRuntime`] outside one.
pub fn builder(backend: impl Backend) -> SimbaBuilder {
    builder_dyn(Arc::new(backend))
}

/// As [`builder`], for a shared or boxed backend (such as the one
/// `simba_backends::connect` returns: `Arc::from(boxed)`).
pub fn builder_dyn(backend: Arc<dyn Backend>) -> SimbaBuilder {
    let b = Simba::builder_dyn(backend);
    match TokioRuntime::try_current() {
        Some(rt) => b.runtime(Arc::new(rt)),
        None => b,
    }
}

/// A client configured like the `simba` command: connects to the backend of
/// `SIMBA_BACKEND` (with its feature enabled on this crate: `sqlite`, the
/// default, `postgres`, `mysql`, `redis` (`redis-tls` for `rediss://`),
/// `zookeeper` (`zookeeper-tls` for `zks://`) or `etcd`; the URL schemes are
/// those of [`connect`]) with the timing settings of
/// `SIMBA_SESSION_*` (S8.1), on the tokio runtime of the calling context.
///
/// ```no_run
/// # #[tokio::main]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// // SIMBA_BACKEND=postgres://app@db/app SIMBA_SESSION_LEASE_DURATION=10s
/// let simba = simba_tokio::from_env().await?;
/// # Ok(())
/// # }
/// ```
///
/// # Errors
/// [`Error`]: a variable that does not parse, no `SIMBA_BACKEND`, an
/// unreachable backend, or no tokio runtime.
pub async fn from_env() -> Result<Simba, Error> {
    let builder = Settings::from_env()?.connect().await?;
    let builder = match TokioRuntime::try_current() {
        Some(rt) => builder.runtime(Arc::new(rt)),
        None => builder,
    };
    builder.build()
}
