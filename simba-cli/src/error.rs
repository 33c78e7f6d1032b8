//! The `simba` command's errors and their documented exit codes.
//!
//! Every failure the user or a backend can cause ends as one [`CliError`]:
//! one line on stderr (credentials redacted) and the exit code of
//! [`CliError::exit_code`]. Nothing on these paths panics.

use std::time::Duration;

/// Exit code: success.
pub const EXIT_OK: u8 = 0;
/// Exit code of a command-line usage error (clap's own convention).
pub const EXIT_USAGE: u8 = 2;
/// Exit code of an invalid lease name or invalid timing settings (`EX_DATAERR`).
pub const EXIT_DATAERR: u8 = 65;
/// Exit code of an unreachable or failing backend (`EX_UNAVAILABLE`).
pub const EXIT_UNAVAILABLE: u8 = 69;
/// Exit code of an internal error (`EX_SOFTWARE`).
pub const EXIT_SOFTWARE: u8 = 70;
/// Exit code of an I/O error of simba itself, e.g. writing output (`EX_IOERR`).
pub const EXIT_IOERR: u8 = 74;
/// Exit code of `simba lock` when the lock was not acquired in time (`EX_TEMPFAIL`).
pub const EXIT_TEMPFAIL: u8 = 75;
/// Exit code of a bad backend URL or configuration file (`EX_CONFIG`).
pub const EXIT_CONFIG: u8 = 78;
/// Exit code when the command exists but cannot be executed (shell convention).
pub const EXIT_CANNOT_EXECUTE: u8 = 126;
/// Exit code when the command does not exist (shell convention).
pub const EXIT_NOT_FOUND: u8 = 127;

/// The exit-code table printed by `simba --help` and in the crate docs.
pub const EXIT_CODES_HELP: &str = "\
Exit codes:
  0     success (run/lock: the command exited 0)
  1-125 run/lock: the command's own exit status, mirrored
  2     usage error (bad flags or arguments)
  65    invalid lease name (or prefix), timing settings, schedule or proposal
  69    backend unreachable or failing
  70    internal error
  74    I/O error of simba itself
  75    lock: not acquired within --wait (EX_TEMPFAIL)
        (run/lock --conflict-exit-code N: N instead of 75 and 69)
  78    bad backend URL or configuration file
  126   the command cannot be executed
  127   the command does not exist
  128+n run/lock: the command was killed by signal n (not by simba's stop);
        130: simba interrupted by Ctrl-C (SIGINT) before any command ran
A SIGTERM to simba (a service manager's stop) is a clean stop: the command
is terminated, the lease released, and simba exits 0 unless the command
exited with a failure of its own, which is mirrored.";

/// Everything that can make `simba` fail, each with its own exit code.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CliError {
    /// The lease name breaks S3.1.
    #[error("{0}")]
    InvalidName(#[from] simba_core::NameError),
    /// A lease name prefix holds a character no lease name may contain (S3.1).
    #[error("{0}")]
    InvalidPrefix(String),
    /// The timing settings break S8.1, or a timing value does not parse.
    #[error("invalid timing settings: {0}")]
    InvalidTiming(String),
    /// The backend URL is malformed or names an unknown backend.
    #[error("{0}")]
    BadUrl(String),
    /// A schedule of `simba cron` does not parse (S11.2).
    #[error("invalid schedule: {0}")]
    InvalidSchedule(String),
    /// The proposal of `simba elect` cannot be published as session metadata.
    #[error("invalid proposal: {0}")]
    InvalidProposal(String),
    /// The configuration file is missing or malformed.
    #[error("configuration file {path}: {message}")]
    BadConfigFile {
        /// The file.
        path: String,
        /// What is wrong with it.
        message: String,
    },
    /// The backend cannot be reached or failed (message already redacted).
    #[error("{0}")]
    Backend(String),
    /// The command to run does not exist.
    #[error("command not found: {0}")]
    CommandNotFound(String),
    /// The command exists but cannot be executed.
    #[error("cannot execute {program}: {message}")]
    CannotExecute {
        /// The program.
        program: String,
        /// The operating system's reason.
        message: String,
    },
    /// `simba lock --wait` gave up.
    #[error("lock `{name}` not acquired within {}", crate::style::human(*.waited))]
    NotAcquired {
        /// The lease name.
        name: String,
        /// How long it waited.
        waited: Duration,
    },
    /// The lease could not be obtained, with the exit status chosen by
    /// `--conflict-exit-code` instead of the error's own.
    #[error("{error}")]
    Conflict {
        /// Why the lease could not be obtained.
        error: Box<CliError>,
        /// The exit status to use.
        code: u8,
    },
    /// An I/O error of simba itself.
    #[error("{0}")]
    Io(String),
    /// A bug or an unexpected state.
    #[error("internal error: {0}")]
    Internal(String),
}

impl CliError {
    /// The documented exit code of this error (see [`EXIT_CODES_HELP`]).
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::InvalidName(_)
            | CliError::InvalidPrefix(_)
            | CliError::InvalidTiming(_)
            | CliError::InvalidSchedule(_)
            | CliError::InvalidProposal(_) => EXIT_DATAERR,
            CliError::BadUrl(_) | CliError::BadConfigFile { .. } => EXIT_CONFIG,
            CliError::Backend(_) => EXIT_UNAVAILABLE,
            CliError::CommandNotFound(_) => EXIT_NOT_FOUND,
            CliError::CannotExecute { .. } => EXIT_CANNOT_EXECUTE,
            CliError::NotAcquired { .. } => EXIT_TEMPFAIL,
            CliError::Conflict { code, .. } => *code,
            CliError::Io(_) => EXIT_IOERR,
            CliError::Internal(_) => EXIT_SOFTWARE,
        }
    }

    /// Maps a backend error: a refused URL or option is a configuration
    /// error, anything else means the backend is unavailable.
    pub fn from_backend(e: &simba_core::BackendError) -> CliError {
        let text = simba_backends::redact(&e.to_string());
        match e.kind {
            simba_core::BackendErrorKind::Rejected if looks_like_config(&e.message) => {
                CliError::BadUrl(text)
            }
            _ => CliError::Backend(text),
        }
    }
}

/// Gives `result`'s error the exit status `code` (`--conflict-exit-code`)
/// if it says that the lease could not be obtained: not acquired in time
/// ([`CliError::NotAcquired`]) or the backend unreachable or failing
/// ([`CliError::Backend`]).
pub fn on_conflict(result: Result<u8, CliError>, code: Option<u8>) -> Result<u8, CliError> {
    match (result, code) {
        (Err(e @ (CliError::NotAcquired { .. } | CliError::Backend(_))), Some(code)) => {
            Err(CliError::Conflict {
                error: Box::new(e),
                code,
            })
        }
        (other, _) => other,
    }
}

fn looks_like_config(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    m.contains("url") || m.contains("not compiled in") || m.contains("table prefix")
}

impl From<simba_core::ConfigError> for CliError {
    fn from(e: simba_core::ConfigError) -> Self {
        CliError::InvalidTiming(e.to_string())
    }
}

impl From<simba_backends::ConfigError> for CliError {
    fn from(e: simba_backends::ConfigError) -> Self {
        CliError::BadUrl(simba_backends::redact(&e.to_string()))
    }
}

impl From<std::io::Error> for CliError {
    fn from(e: std::io::Error) -> Self {
        CliError::Io(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_has_a_distinct_documented_code() {
        let errors = [
            CliError::InvalidTiming(String::new()),
            CliError::BadUrl(String::new()),
            CliError::Backend(String::new()),
            CliError::CommandNotFound(String::new()),
            CliError::CannotExecute {
                program: String::new(),
                message: String::new(),
            },
            CliError::NotAcquired {
                name: String::new(),
                waited: Duration::ZERO,
            },
            CliError::Io(String::new()),
            CliError::Internal(String::new()),
        ];
        let mut codes: Vec<u8> = errors.iter().map(CliError::exit_code).collect();
        for code in &codes {
            assert!(
                EXIT_CODES_HELP.contains(&format!("  {code} ")),
                "exit code {code} is not documented"
            );
        }
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), errors.len());
    }

    #[test]
    fn backend_errors_never_show_passwords() {
        let e = CliError::from_backend(&simba_core::BackendError::new(
            simba_core::BackendErrorKind::Unavailable,
            "cannot reach postgres://app:hunter2@db/x",
        ));
        assert!(!e.to_string().contains("hunter2"), "{e}");
    }

    #[test]
    fn conflict_exit_code_replaces_only_the_codes_of_a_lease_not_obtained() {
        let not_acquired = || {
            Err(CliError::NotAcquired {
                name: "x".into(),
                waited: Duration::ZERO,
            })
        };
        let code = |r: Result<u8, CliError>| match r {
            Ok(c) => c,
            Err(e) => e.exit_code(),
        };
        assert_eq!(code(on_conflict(not_acquired(), Some(9))), 9);
        assert_eq!(code(on_conflict(not_acquired(), None)), EXIT_TEMPFAIL);
        assert_eq!(
            code(on_conflict(Err(CliError::Backend(String::new())), Some(9))),
            9
        );
        assert_eq!(
            code(on_conflict(Ok(75), Some(9))),
            75,
            "the command's own status"
        );
        assert_eq!(
            code(on_conflict(
                Err(CliError::CommandNotFound(String::new())),
                Some(9)
            )),
            EXIT_NOT_FOUND
        );
    }
}
