//! Errors: typed errors for bad API input, and backend failures as data.

use crate::name::LeaseName;
use std::fmt;

/// A backend call that failed. Backend failures are *data* inside an input
/// (a reply), never an `Err` from the engine: the engine reacts to them
/// (back-off, retry, suspension) and reports them as events.
///
/// ```
/// use simba_core::{BackendError, BackendErrorKind};
/// let e = BackendError::new(BackendErrorKind::Unavailable, "connection refused");
/// assert_eq!(e.to_string(), "backend unavailable: connection refused");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{kind}: {message}")]
pub struct BackendError {
    /// What went wrong, coarsely.
    pub kind: BackendErrorKind,
    /// A human-readable detail (credentials already redacted by the backend).
    pub message: String,
}

impl BackendError {
    /// A backend error of `kind` with a detail message.
    pub fn new(kind: BackendErrorKind, message: impl Into<String>) -> Self {
        BackendError {
            kind,
            message: message.into(),
        }
    }
}

/// The coarse kind of a [`BackendError`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BackendErrorKind {
    /// The call did not finish within the renewal period in force (S2.4).
    Timeout,
    /// The backend could not be reached, or the connection broke mid-call.
    Unavailable,
    /// The backend answered something that breaks the backend contract.
    Malformed,
    /// The backend refused the call (privileges, schema, constraint).
    Rejected,
    /// The backend does not implement this call (for example partitioned
    /// groups or schedule slots on a backend that lacks them).
    Unsupported,
    /// Anything else.
    Other,
}

impl fmt::Display for BackendErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BackendErrorKind::Timeout => "backend call timed out",
            BackendErrorKind::Unavailable => "backend unavailable",
            BackendErrorKind::Malformed => "malformed backend reply",
            BackendErrorKind::Rejected => "backend refused the call",
            BackendErrorKind::Unsupported => "backend does not support the call",
            BackendErrorKind::Other => "backend error",
        })
    }
}

/// Bad input to an engine API call. Nothing changed in the engine.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ApiError {
    /// The name is already in use by an election or lock of this engine (S7.4).
    #[error("`{0}` is already started on this client")]
    AlreadyStarted(LeaseName),
    /// No election or lock of that name is started on this engine.
    #[error("no election or lock named `{0}` is started on this client")]
    NotStarted(LeaseName),
    /// The call needs an election but the name is a lock, or the reverse.
    #[error("`{name}` is a {actual}, not a {expected}")]
    WrongKind {
        /// The name.
        name: LeaseName,
        /// What the call expected.
        expected: &'static str,
        /// What the name actually is.
        actual: &'static str,
    },
    /// The name has no current term with that token, or its session's
    /// local deadline has passed (S11.1: a slot is claimed only by a valid term).
    #[error("`{0}` has no valid term with that token")]
    NoValidTerm(LeaseName),
    /// The engine is closing or closed (S1.4).
    #[error("the client is closed")]
    Closed,
    /// A partitioned group that cannot be joined: no partitions, or a name
    /// too long for its partition names (S10, S3.1).
    #[error("cannot join group `{group}`: {reason}")]
    InvalidGroup {
        /// The group.
        group: LeaseName,
        /// Why.
        reason: String,
    },
}
