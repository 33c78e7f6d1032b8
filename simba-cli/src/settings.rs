//! Where the backend URL and the timing settings come from.
//!
//! Precedence, highest first: command-line flags, environment variables
//! (`SIMBA_BACKEND`, `SIMBA_SESSION_*`; clap reads them into the same
//! fields as the flags), the TOML file of `--config` / `SIMBA_CONFIG`, and
//! the defaults of the rules S8 (backend: the user's own SQLite file, see
//! [`default_backend`]).
//!
//! The TOML file uses the `simba.session.*` keys of S8.1:
//!
//! ```toml
//! [simba]
//! backend = "postgres://app@db/app"
//!
//! [simba.session]
//! lease_duration = "15s"
//! renew_interval = "5s"
//! drift = 0.01
//! margin = "50ms"
//! retry_jitter = "2500ms"
//! min_backoff = "100ms"
//! ```

use crate::cli::TimingArgs;
use crate::error::CliError;
#[cfg(test)]
use crate::style::human;
use serde::Deserialize;
use simba_core::SimbaConfig;
use simba_tokio::ConfigSection;
use std::path::Path;
use std::time::Duration;

/// The backend used when no flag, variable or file names one: one SQLite
/// file per user, at an absolute path, so two terminals in different working
/// directories never compete in two different files by accident:
/// `$XDG_STATE_HOME/simba/simba.db`, else `$HOME/.local/state/simba/simba.db`,
/// else `/tmp/simba-<uid>/simba.db`. Commands that create the tables
/// (`run`, `lock`, `cron`, `migrate`) create its directory first
/// ([`make_default_dir`]); read-only commands create nothing.
pub fn default_backend() -> String {
    let from = |var: &str| {
        std::env::var_os(var)
            .filter(|v| !v.is_empty())
            .map(std::path::PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    let dir = from("XDG_STATE_HOME")
        .or_else(|| from("HOME").map(|h| h.join(".local").join("state")))
        .unwrap_or_else(|| {
            std::env::temp_dir().join(format!("simba-{}", rustix::process::getuid().as_raw()))
        });
    format!("sqlite://{}", dir.join("simba").join("simba.db").display())
}

/// The whole configuration file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    /// The `[simba]` table.
    #[serde(default)]
    pub simba: SimbaSection,
}

/// The `[simba]` table of the configuration file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimbaSection {
    /// The backend URL.
    pub backend: Option<String>,
    /// The `[simba.session]` timing settings (the client's own section).
    #[serde(default)]
    pub session: ConfigSection,
}

/// Reads and parses the configuration file at `path`.
///
/// # Errors
/// [`CliError::BadConfigFile`] if it cannot be read or is not valid.
pub fn read_file(path: &Path) -> Result<FileConfig, CliError> {
    let bad = |message: String| CliError::BadConfigFile {
        path: path.display().to_string(),
        message,
    };
    let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
    toml::from_str(&text).map_err(|e| bad(simba_backends::redact(e.message())))
}

/// Parses a humane duration such as `3s`, `500ms` or `1m 30s`.
///
/// # Errors
/// [`CliError::InvalidTiming`] naming the setting.
pub fn parse_duration(setting: &str, text: &str) -> Result<Duration, CliError> {
    humantime::parse_duration(text.trim())
        .map_err(|e| CliError::InvalidTiming(format!("{setting} = {text:?}: {e}")))
}

/// Creates the directory of the default backend's file when `url` is that
/// default (see [`default_backend`]); other URLs are the user's to prepare.
/// Best effort: if it cannot be made, opening the file says why.
pub fn make_default_dir(url: &str) {
    if url != default_backend() {
        return;
    }
    if let Some(dir) = url
        .strip_prefix("sqlite://")
        .and_then(|path| Path::new(path).parent())
    {
        let _ = std::fs::create_dir_all(dir);
    }
}

/// The backend URL: flag or `SIMBA_BACKEND`, else the file, else the default.
pub fn backend_url(flag: Option<&str>, file: &FileConfig) -> String {
    flag.map(str::to_owned)
        .or_else(|| file.simba.backend.clone())
        .unwrap_or_else(default_backend)
}

/// Builds the timing settings: flags and `SIMBA_SESSION_*` first, then the
/// file, then the defaults; then checks them (S8.1).
///
/// # Errors
/// [`CliError::InvalidTiming`] for a value that does not parse or settings
/// that break S8.1.
pub fn timing(args: &TimingArgs, file: &FileConfig) -> Result<SimbaConfig, CliError> {
    let duration = |name: &str, flag: &Option<String>| {
        flag.as_ref().map(|t| parse_duration(name, t)).transpose()
    };
    let drift = match &args.drift {
        Some(t) => Some(
            t.trim()
                .parse::<f64>()
                .map_err(|e| CliError::InvalidTiming(format!("drift = {t:?}: {e}")))?,
        ),
        None => None,
    };
    let flags = ConfigSection {
        lease_duration: duration("lease_duration", &args.lease_duration)?,
        renew_interval: duration("renew_interval", &args.renew_interval)?,
        drift,
        margin: duration("margin", &args.margin)?,
        retry_jitter: duration("retry_jitter", &args.retry_jitter)?,
        min_backoff: duration("min_backoff", &args.min_backoff)?,
    };
    let config = file
        .simba
        .session
        .clone()
        .merged_with(&flags)
        .to_config()
        .map_err(|e| CliError::InvalidTiming(e.to_string()))?;
    // A seed per process, so candidates of different processes do not retry in step.
    Ok(config.to_builder().seed(process_seed()).build()?)
}

/// A seed that differs between processes and runs (for retry jitter only).
pub fn process_seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    (u64::from(std::process::id()) << 32) ^ u64::from(nanos)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn durations_print_humanly() {
        let ms = Duration::from_millis;
        assert_eq!(human(Duration::from_nanos(1_996_863_846)), "2s");
        assert_eq!(human(ms(2_000)), "2s");
        assert_eq!(human(ms(2_950)), "2.95s");
        assert_eq!(human(ms(2_500)), "2.5s");
        assert_eq!(human(ms(950)), "950ms");
        assert_eq!(human(ms(90_000)), "1m 30s");
        assert_eq!(human(ms(3_600_400)), "1h");
        assert_eq!(human(Duration::from_micros(400)), "0s");
    }

    #[test]
    fn flags_beat_the_file_and_s8_1_is_checked() {
        let file: FileConfig = toml::from_str(
            "[simba]\nbackend = \"sqlite://x.db\"\n[simba.session]\nlease_duration = \"6s\"\ndrift = 0.02\n",
        )
        .unwrap();
        assert_eq!(backend_url(None, &file), "sqlite://x.db");
        assert_eq!(
            backend_url(Some("postgres://h/db"), &file),
            "postgres://h/db"
        );
        let args = TimingArgs {
            lease_duration: Some("3s".into()),
            ..TimingArgs::default()
        };
        let c = timing(&args, &file).unwrap();
        assert_eq!(c.lease_duration(), Duration::from_secs(3));
        assert_eq!(c.renew_interval(), Duration::from_secs(1));
        assert_eq!(c.drift(), 0.02);
        let bad = TimingArgs {
            lease_duration: Some("3s".into()),
            renew_interval: Some("2s".into()),
            ..TimingArgs::default()
        };
        assert!(matches!(
            timing(&bad, &file),
            Err(CliError::InvalidTiming(_))
        ));
        let garbage = TimingArgs {
            margin: Some("soon".into()),
            ..TimingArgs::default()
        };
        assert!(matches!(
            timing(&garbage, &file),
            Err(CliError::InvalidTiming(_))
        ));
    }

    #[test]
    fn unknown_keys_in_the_file_are_refused() {
        assert!(toml::from_str::<FileConfig>("[simba]\nbakend = \"x\"\n").is_err());
    }
}
