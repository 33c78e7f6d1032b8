//! Errors, one enum per area.

use simba_core::NameError;
use std::time::Duration;

/// Why an election or leader task could not start, or a call on it failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ElectionError {
    /// The name breaks S3.1; nothing was sent to the backend.
    #[error(transparent)]
    InvalidName(#[from] NameError),
    /// An election, lock or leader task of this name is already started on
    /// this client (S7.4).
    #[error("`{0}` is already started on this client (S7.4)")]
    AlreadyStarted(String),
    /// The election was stopped (or the client closed) before the call.
    #[error("the election `{0}` is stopped")]
    Stopped(String),
    /// The client is closed (S1.4).
    #[error("the client is closed")]
    Closed,
    /// A blocking call made from a callback or a leader task, where waiting
    /// would wait on itself (S7.5, S7.6): the action was started, not awaited.
    #[error("not waiting: called from a Simba callback or leader task, which would wait on itself (S7.5)")]
    WouldWaitOnItself,
    /// A blocking call made on an async runtime thread, where waiting could
    /// block the thread that must finish it (e.g. a current-thread tokio
    /// runtime): the action was started, not awaited. Await the async method.
    #[error("not waiting: a blocking call on an async runtime thread could block the thread that must finish it; await the async method instead")]
    WouldBlockRuntime,
}

/// Why a partitioned group could not be joined, or a call on it failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GroupError {
    /// The group's name breaks S3.1; nothing was sent to the backend.
    #[error(transparent)]
    InvalidName(#[from] NameError),
    /// No partitions, or a name too long for its partition names (S10).
    #[error("invalid group `{name}`: {reason}")]
    Invalid {
        /// The group.
        name: String,
        /// Why.
        reason: String,
    },
    /// The group is already joined on this client, or one of its partition
    /// names is an election or lock of this client (S7.4).
    #[error("`{0}` is already started on this client (S7.4)")]
    AlreadyStarted(String),
    /// The client is closed (S1.4).
    #[error("the client is closed")]
    Closed,
    /// A blocking call made from a callback or a partition task, where
    /// waiting would wait on itself (S7.5): the leave was started, not awaited.
    #[error(
        "not waiting: called from a Simba callback or task, which would wait on itself (S7.5)"
    )]
    WouldWaitOnItself,
    /// A blocking call made on an async runtime thread: the leave was
    /// started, not awaited. Await the async method.
    #[error("not waiting: a blocking call on an async runtime thread could block the thread that must finish it; await the async method instead")]
    WouldBlockRuntime,
}

/// Why a lock was not acquired, or its release could not be awaited.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LockError {
    /// The name breaks S3.1; nothing was sent to the backend.
    #[error(transparent)]
    InvalidName(#[from] NameError),
    /// The name is already used by an election or lock of this client (S7.4).
    #[error("`{0}` is already started on this client (S7.4)")]
    AlreadyStarted(String),
    /// `try_acquire`: another session holds the lock.
    #[error("the lock `{0}` is held elsewhere")]
    Held(String),
    /// `acquire_timeout`: the lock was not acquired in time.
    #[error("the lock `{name}` was not acquired within {timeout:?}")]
    TimedOut {
        /// The lock.
        name: String,
        /// The timeout given.
        timeout: Duration,
    },
    /// The client is closed (S1.4).
    #[error("the client is closed")]
    Closed,
    /// A blocking release from a callback or leader task (S7.5): started, not awaited.
    #[error("not waiting: called from a Simba callback or leader task, which would wait on itself (S7.5)")]
    WouldWaitOnItself,
    /// A blocking call made on an async runtime thread, where waiting could
    /// block the thread that must finish it (e.g. a current-thread tokio
    /// runtime): the action was started, not awaited. Await the async method.
    #[error("not waiting: a blocking call on an async runtime thread could block the thread that must finish it; await the async method instead")]
    WouldBlockRuntime,
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

/// Why the client could not be closed, or a request to it failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The client is closed (S1.4).
    #[error("the client is closed")]
    Closed,
    /// A blocking close from a callback or leader task (S7.5): the close was
    /// started but not awaited.
    #[error("not waiting: called from a Simba callback or leader task, which would wait on itself (S7.5)")]
    WouldWaitOnItself,
    /// A blocking call made on an async runtime thread, where waiting could
    /// block the thread that must finish it (e.g. a current-thread tokio
    /// runtime): the action was started, not awaited. Await the async method.
    #[error("not waiting: a blocking call on an async runtime thread could block the thread that must finish it; await the async method instead")]
    WouldBlockRuntime,
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

/// Why [`SimbaBuilder::build`](crate::SimbaBuilder::build) failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// No [`Runtime`](crate::Runtime) was given (the adapters' `builder`
    /// functions give one; `simba_tokio::builder` outside a tokio runtime cannot).
    #[error("no async runtime to run the Simba driver on: use simba_tokio::builder inside a tokio runtime, simba_async_std::builder, or SimbaBuilder::runtime")]
    NoRuntime,
    /// A [`SimbaBuilder::metadata`](crate::SimbaBuilder::metadata) entry
    /// was refused.
    #[error(transparent)]
    Metadata(#[from] simba_backends::MetadataError),
}

/// Why [`Simba::leader`](crate::Simba::leader) or
/// [`Simba::observe`](crate::Simba::observe) could not answer.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ObserveError {
    /// The name breaks S3.1; nothing was sent to the backend.
    #[error(transparent)]
    InvalidName(#[from] NameError),
    /// The backend call failed.
    #[error(transparent)]
    Backend(#[from] simba_core::BackendError),
    /// The client is closed (S1.4).
    #[error("the client is closed")]
    Closed,
}

/// Why a client could not be made from the environment (`from_env()` of the
/// runtime adapters, [`Settings::connect`](crate::Settings::connect)).
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FromEnvError {
    /// A `SIMBA_SESSION_*` variable does not parse, or the settings break S8.1.
    #[error(transparent)]
    Settings(#[from] ConfigSectionError),
    /// `SIMBA_BACKEND` is not set (or empty).
    #[error("SIMBA_BACKEND is not set: give the backend URL, such as postgres://user@host/db")]
    NoBackend,
    /// The backend URL is refused or the backend cannot be reached
    /// (credentials are never shown).
    #[error(transparent)]
    Backend(#[from] simba_core::BackendError),
    /// The client could not be built.
    #[error(transparent)]
    Build(#[from] BuildError),
}
