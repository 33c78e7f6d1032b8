//! # simba-client: Simba's application API over any async runtime
//!
//! Elections, locks and leader-only tasks for processes on many machines,
//! driven by the sans-IO engine of `simba-core` over a [`Backend`]. This
//! crate holds the whole API and the one runtime-agnostic driver; the
//! runtime adapters `simba-tokio` and `simba-async-std` only implement the
//! small [`AsyncRuntime`] trait (spawn, spawn blocking, sleep until, now) and
//! re-export this crate. Applications normally depend on an adapter.
//!
//! Rule ids such as `S6.1` in these docs refer to Simba's rulebook,
//! `docs/RULES.md` in Simba's repository: each rule's statement, its
//! reason, and the code and tests behind it.
//!
//! ## How it runs
//!
//! One driver task per client owns the engine. It receives API requests and
//! backend replies over a channel, sleeps until the engine's one next
//! deadline, polls the backend calls in flight itself (no task per call),
//! each abandoned after the renewal period in force (S2.4), forwards
//! release broadcasts (S4.2), and
//! delivers events to listeners serially per election (S7.2). It makes no
//! decision of its own: every rule of the specification lives in the engine.
//!
//! A [`Term`] shares its session's local deadline (an atomic the driver moves
//! on every renewal) and a revoked flag, so [`Term::is_valid`] is a pure read
//! of the monotonic clock: no background task has to run first (S3.3).
//!
//! ## Example (with `simba-tokio`)
//!
//! This crate alone has no runtime; the adapters give it one. The same code
//! with `simba_tokio` in place of the runtime line:
//!
//! ```no_run
//! # use std::sync::Arc;
//! # async fn bill_next_batch(token: u64) {}
//! # async fn demo(runtime: Arc<dyn simba_client::AsyncRuntime>) -> Result<(), Box<dyn std::error::Error>> {
//! let backend = simba_client::connect("postgres://simba@db/simba").await?;
//! let simba = simba_client::Simba::builder_dyn(backend.into())
//!     .runtime(runtime) // simba_tokio::builder_dyn(backend.into()) does this
//!     .build()?;
//! let task = simba
//!     .run_while_leader("billing.leader", |term| async move {
//!         while term.is_valid() {
//!             bill_next_batch(term.token()).await;
//!         }
//!     })
//!     .await?;
//! // …
//! task.stop().await; // revoke, cancel the task, release after it exited (S6.1)
//! simba.close().await;
//! # Ok(()) }
//! ```
//!
//! ## Blocking calls and callbacks
//!
//! `close_blocking`, `stop_blocking` and `release_blocking` refuse to wait
//! when called from a callback or a leader task (S7.5, S7.6): they start the
//! action and return `WouldWaitOnItself` instead of deadlocking.
//!
//! ## Observability
//!
//! `tracing` spans (`simba_client`, `simba_callbacks`, `simba_leader_task`)
//! and events for every state change; metrics through the `metrics` facade,
//! listed in the table below, with bounded label cardinality.
//!
#![doc = include_str!("metrics.md")]
#![forbid(unsafe_code)]

mod client;
mod config;
mod driver;
mod error;
mod group;
mod handle;
mod listener;
mod mutant;
mod observe;
mod runtime;
mod schedule;
mod suspend;
mod term;
#[cfg(feature = "testkit")]
pub mod testkit;
mod turns;

pub use client::{
    default_metadata, CallbackExecutor, ClientEvent, Election, ElectionBuilder, ElectionListener,
    LeaderTask, Lock, LockTerm, NoListener, Simba, SimbaBuilder, CALLBACK_QUEUE, EVENT_QUEUE,
};
pub use config::{ConfigSection, Settings, BACKEND_VAR, ENV_VARS};
pub use error::{ConfigSectionError, Error, TermError};
pub use group::{Group, GroupBuilder, GroupListener, GroupTask};
pub use handle::Running;
#[cfg(feature = "mutants")]
pub use mutant::ClientMutant;
pub use runtime::AsyncRuntime;
pub use schedule::{MissedRuns, Schedule, ScheduleBuilder, ScheduledJob, ScheduledRun};
pub use suspend::{boottime_ns, HostSuspendClock, SuspendClock};
pub use term::{in_callback_or_task, CancelSignal, TaskOutput, Term};

pub use simba_backends::{Backend, MemoryBackend};
pub use simba_core::{
    parse_partition_name, partition_name, EntrySnapshot, GroupSnapshot, Kind, LeaseName,
    RevokeReason, SessionSnapshot, SessionState, SimbaConfig, SimbaConfigBuilder, Snapshot, Status,
    TaskExitAction, TaskExitPolicy, TaskOutcome, TASK_BACKOFF_MAX_INTERVALS,
};

// What an application names besides the client API, so that one dependency
// (an adapter, which re-exports this crate) is enough.
/// The backends crate, for its backend types (`backends::postgres::PgBackend`, …)
/// and the [`Backend`] contract.
pub use simba_backends as backends;
// Every backend module alike, each under its feature.
#[cfg(feature = "etcd")]
pub use simba_backends::etcd;
#[cfg(feature = "mysql")]
pub use simba_backends::mysql;
#[cfg(feature = "postgres")]
pub use simba_backends::postgres;
#[cfg(feature = "redis")]
pub use simba_backends::redis;
#[cfg(feature = "sqlite")]
pub use simba_backends::sqlite;
#[cfg(feature = "zookeeper")]
pub use simba_backends::zookeeper;
pub use simba_backends::{
    connect, fencing, redact, BackendConfig, BackendKind, ConfigError as BackendConfigError,
    LeaseHolder, MetadataError, PoolOptions, SessionMetadata,
};
pub use simba_core::{BackendError, BackendErrorKind, ConfigError, NameError, Token};
