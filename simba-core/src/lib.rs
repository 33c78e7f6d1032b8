//! Simba's sans-IO engine (work in progress).
#![forbid(unsafe_code)]

mod config;
mod error;
mod ids;
mod name;
mod protocol;
mod time;

pub use config::{ConfigError, Fraction, SimbaConfig, SimbaConfigBuilder};
pub use error::{ApiError, BackendError, BackendErrorKind};
pub use ids::{OpId, ParseSessionIdError, SessionId, TermId, Token};
pub use name::{is_name_char, LeaseName, NameError, MAX_NAME_LEN};
pub use protocol::{
    AcquireOutcome, Command, Event, Input, Level, Output, RenewError, Renewal, RevokeReason,
    SessionGrant, SessionState, TaskOrder, Term,
};
pub use time::Timestamp;
