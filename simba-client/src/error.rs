//! Errors: one [`enum@Error`] for every call of the client, [`TermError`] for
//! a term that is over ([`Term::ensure_valid`](crate::Term::ensure_valid)),
//! and [`ConfigSectionError`] for settings that cannot be used.
//!
//! A caller matches on the variant, whatever the call:
//!
//! ```no_run
//! # async fn demo(simba: simba_client::Simba) {
//! use simba_client::Error;
//! match simba.lock("nightly-report").try_acquire().await {
//!     Ok(term) => println!("held with token {}", term.token()),
//!     Err(Error::Held(name)) => println!("{name} is held elsewhere"),
//!     Err(Error::Closed) => println!("the client is closed"),
//!     Err(e) => println!("no lock: {e}"),
//! }
//! # }
//! ```

use simba_core::NameError;
use std::time::Duration;

/// Why a call of the client failed: starting an election, a leader task, a
/// schedule or a group, acquiring a lock, waiting for a stop or a close,
/// asking who leads, building a client or making one from the environment.
///
/// Each variant means the same thing whichever call returns it, so one
/// `match` serves every handle.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The name breaks S3.1; nothing was sent to the backend.
    #[error(transparent)]
    InvalidName(#[from] NameError),
    /// An election, lock, leader task, schedule or group of this name is
    /// already started on this client, or a group's partition name is one
    /// (S7.4).
    #[error("`{0}` is already started on this client (S7.4)")]
    AlreadyStarted(String),
    /// The election was stopped (or the client closed) before the call.
    #[error("the election `{0}` is stopped")]
    Stopped(String),
    /// The client is closed (S1.4).
    #[error("the client is closed")]
    Closed,
    /// A blocking call made from a callback or a task, where waiting would
    /// wait on itself (S7.5, S7.6): the action was started, not awaited.
    #[error(
        "not waiting: called from a Simba callback or task, which would wait on itself (S7.5)"
    )]
    WouldWaitOnItself,
    /// A blocking call made on an async runtime thread, where waiting could
    /// block the thread that must finish it (e.g. a current-thread tokio
    /// runtime): the action was started, not awaited. Await the async method.
    #[error("not waiting: a blocking call on an async runtime thread could block the thread that must finish it; await the async method instead")]
    WouldBlockRuntime,
    /// `try_acquire`: another session holds the lock.
    #[error("the lock `{0}` is held elsewhere")]
    Held(String),
    /// `acquire_timeout`: the lock was not acquired in time.
    #[error("the lock `{name}` was not acquired within {}", humantime::format_duration(*timeout))]
    TimedOut {
        /// The lock.
        name: String,
        /// The timeout given.
        timeout: Duration,
    },
    /// A group with no partitions, or a name too long for its partition
    /// names (S10).
    #[error("invalid group `{name}`: {reason}")]
    InvalidGroup {
        /// The group.
        name: String,
        /// Why.
        reason: String,
    },
    /// A schedule whose period or delay is under one millisecond, or whose
    /// cron expression or time zone does not parse (S11.2).
    #[error("invalid schedule: {0}")]
    InvalidSchedule(String),
    /// A backend call failed ([`Simba::leader`](crate::Simba::leader)), or
    /// the backend URL is refused or the backend cannot be reached
    /// (credentials are never shown).
    #[error(transparent)]
    Backend(#[from] simba_core::BackendError),
    /// No [`AsyncRuntime`](crate::AsyncRuntime) was given (the adapters' `builder`
    /// functions give one; `simba_tokio::builder` outside a tokio runtime cannot).
    #[error("no async runtime to run the Simba driver on: use simba_tokio::builder inside a tokio runtime, simba_async_std::builder, or SimbaBuilder::runtime")]
    NoRuntime,
    /// A [`SimbaBuilder::metadata`](crate::SimbaBuilder::metadata) entry
    /// was refused.
    #[error(transparent)]
    Metadata(#[from] simba_backends::MetadataError),
    /// A `SIMBA_SESSION_*` variable does not parse, or the settings break S8.1.
    #[error(transparent)]
    Settings(#[from] ConfigSectionError),
    /// `SIMBA_BACKEND` is not set (or empty).
    #[error("SIMBA_BACKEND is not set: give the backend URL, such as postgres://user@host/db")]
    NoBackend,
}

/// A term is over, or ends too soon for the caller (S3.2 `ensure_valid`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TermError {
    /// The term is revoked, or stays valid for no more than the required time.
    #[error(
        "term `{name}` (token {token}) remains valid for {remaining:?}, not more than {required:?}"
    )]
    TermExpired {
        /// The lease name.
        name: String,
        /// The term's fencing token.
        token: u64,
        /// Time left before its local deadline (zero once over).
        remaining: Duration,
        /// What the caller asked for.
        required: Duration,
    },
}

/// A configuration section or environment variable that cannot be used.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigSectionError {
    /// An environment variable holds something that is not a value of its kind.
    #[error("environment variable {var}: {message}")]
    Env {
        /// The variable.
        var: String,
        /// What is wrong with its value.
        message: String,
    },
    /// The values parse but break a rule of S8.1.
    #[error(transparent)]
    Invalid(#[from] simba_core::ConfigError),
}
