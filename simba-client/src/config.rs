//! `SimbaConfig` from configuration: a serde section (the original's
//! `simba.session.*` properties) and `SIMBA_SESSION_*` environment variables
//! (S8.1), with humane durations such as `"15s"` or `"500ms"`.

use crate::error::{ConfigSectionError, Error};
use serde::{Deserialize, Serialize};
use simba_core::SimbaConfig;
use std::time::Duration;

/// The `simba.session` configuration section. Every field is optional; a
/// missing one takes its S8 default (`renew_interval` and `retry_jitter`
/// derive from the others as [`SimbaConfig::builder`] documents).
///
/// ```
/// use simba_client::ConfigSection;
/// use std::time::Duration;
/// let section: ConfigSection =
///     serde_json::from_str(r#"{ "lease_duration": "6s", "margin": "100ms" }"#)?;
/// let config = section.to_config()?;
/// assert_eq!(config.lease_duration(), Duration::from_secs(6));
/// assert_eq!(config.renew_interval(), Duration::from_secs(2));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ConfigSection {
    /// `lease_duration` (S8): the backend expires a session this long after its last renewal.
    #[serde(with = "humantime_serde", skip_serializing_if = "Option::is_none")]
    pub lease_duration: Option<Duration>,
    /// `renew_interval` (S8): the renewal period.
    #[serde(with = "humantime_serde", skip_serializing_if = "Option::is_none")]
    pub renew_interval: Option<Duration>,
    /// `drift` (S8): bound on the clock rate difference, in `[0, 0.5)`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drift: Option<f64>,
    /// `margin` (S8): extra safety subtracted from every deadline.
    #[serde(with = "humantime_serde", skip_serializing_if = "Option::is_none")]
    pub margin: Option<Duration>,
    /// `retry_jitter` (S8): random extra delay of a candidate's retries.
    #[serde(with = "humantime_serde", skip_serializing_if = "Option::is_none")]
    pub retry_jitter: Option<Duration>,
    /// `min_backoff` (S8): floor of the back-off after a failed renewal.
    #[serde(with = "humantime_serde", skip_serializing_if = "Option::is_none")]
    pub min_backoff: Option<Duration>,
}

/// The environment variables [`ConfigSection::from_env`] reads.
pub const ENV_VARS: [&str; 6] = [
    "SIMBA_SESSION_LEASE_DURATION",
    "SIMBA_SESSION_RENEW_INTERVAL",
    "SIMBA_SESSION_DRIFT",
    "SIMBA_SESSION_MARGIN",
    "SIMBA_SESSION_RETRY_JITTER",
    "SIMBA_SESSION_MIN_BACKOFF",
];

impl ConfigSection {
    /// Reads the `SIMBA_SESSION_*` variables of the process environment
    /// (see [`ENV_VARS`]); unset variables stay `None`.
    ///
    /// # Errors
    /// [`ConfigSectionError::Env`] naming a variable whose value does not parse.
    pub fn from_env() -> Result<ConfigSection, ConfigSectionError> {
        Self::from_vars(std::env::vars())
    }

    /// As [`ConfigSection::from_env`], from any list of `(name, value)` pairs.
    ///
    /// ```
    /// use simba_client::ConfigSection;
    /// use std::time::Duration;
    /// let section = ConfigSection::from_vars([
    ///     ("SIMBA_SESSION_LEASE_DURATION", "3s"),
    ///     ("SIMBA_SESSION_DRIFT", "0.02"),
    ///     ("PATH", "/bin"),
    /// ])?;
    /// assert_eq!(section.lease_duration, Some(Duration::from_secs(3)));
    /// assert_eq!(section.drift, Some(0.02));
    /// assert!(ConfigSection::from_vars([("SIMBA_SESSION_MARGIN", "soon")]).is_err());
    /// # Ok::<(), simba_client::ConfigSectionError>(())
    /// ```
    ///
    /// # Errors
    /// [`ConfigSectionError::Env`] naming a variable whose value does not parse.
    pub fn from_vars<K, V>(
        vars: impl IntoIterator<Item = (K, V)>,
    ) -> Result<ConfigSection, ConfigSectionError>
    where
        K: AsRef<str>,
        V: AsRef<str>,
    {
        let mut section = ConfigSection::default();
        for (key, value) in vars {
            let (key, value) = (key.as_ref(), value.as_ref().trim());
            let duration = || {
                humantime::parse_duration(value).map_err(|e| ConfigSectionError::Env {
                    var: key.to_owned(),
                    message: format!("{value:?} is not a duration such as \"15s\": {e}"),
                })
            };
            match key {
                "SIMBA_SESSION_LEASE_DURATION" => section.lease_duration = Some(duration()?),
                "SIMBA_SESSION_RENEW_INTERVAL" => section.renew_interval = Some(duration()?),
                "SIMBA_SESSION_MARGIN" => section.margin = Some(duration()?),
                "SIMBA_SESSION_RETRY_JITTER" => section.retry_jitter = Some(duration()?),
                "SIMBA_SESSION_MIN_BACKOFF" => section.min_backoff = Some(duration()?),
                "SIMBA_SESSION_DRIFT" => {
                    section.drift =
                        Some(value.parse::<f64>().map_err(|e| ConfigSectionError::Env {
                            var: key.to_owned(),
                            message: format!("{value:?} is not a number such as 0.01: {e}"),
                        })?)
                }
                _ => {}
            }
        }
        Ok(section)
    }

    /// This section with every value set in `other` taking precedence (for
    /// example a file section overridden by the environment).
    pub fn merged_with(mut self, other: &ConfigSection) -> ConfigSection {
        self.lease_duration = other.lease_duration.or(self.lease_duration);
        self.renew_interval = other.renew_interval.or(self.renew_interval);
        self.drift = other.drift.or(self.drift);
        self.margin = other.margin.or(self.margin);
        self.retry_jitter = other.retry_jitter.or(self.retry_jitter);
        self.min_backoff = other.min_backoff.or(self.min_backoff);
        self
    }

    /// Builds the [`SimbaConfig`], checking the rules of S8.1.
    ///
    /// # Errors
    /// [`ConfigSectionError::Invalid`] when a rule of S8.1 is broken.
    pub fn to_config(&self) -> Result<SimbaConfig, ConfigSectionError> {
        let mut b = SimbaConfig::builder();
        if let Some(d) = self.lease_duration {
            b = b.lease_duration(d);
        }
        if let Some(d) = self.renew_interval {
            b = b.renew_interval(d);
        }
        if let Some(d) = self.drift {
            b = b.drift(d);
        }
        if let Some(d) = self.margin {
            b = b.margin(d);
        }
        if let Some(d) = self.retry_jitter {
            b = b.retry_jitter(d);
        }
        if let Some(d) = self.min_backoff {
            b = b.min_backoff(d);
        }
        Ok(b.build()?)
    }
}

/// The environment variable naming the backend URL, as the `simba` command
/// reads it: `postgres://…`, `mysql://…`, `sqlite://path` (see
/// [`BackendConfig`](simba_backends::BackendConfig)).
pub const BACKEND_VAR: &str = "SIMBA_BACKEND";

/// Where a client comes from when an application is configured like the
/// `simba` command: the backend URL of `SIMBA_BACKEND` and the timing
/// settings of `SIMBA_SESSION_*` (S8.1). The adapters' `from_env()` reads
/// these and connects.
///
/// ```
/// use simba_client::Settings;
/// use std::time::Duration;
/// let settings = Settings::from_vars([
///     ("SIMBA_BACKEND", "postgres://app@db/app"),
///     ("SIMBA_SESSION_LEASE_DURATION", "6s"),
/// ])?;
/// assert_eq!(settings.backend.as_deref(), Some("postgres://app@db/app"));
/// assert_eq!(settings.config()?.renew_interval(), Duration::from_secs(2));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Settings {
    /// The backend URL (`SIMBA_BACKEND`), if set. It may hold credentials:
    /// log it through [`simba_backends::redact`].
    pub backend: Option<String>,
    /// The timing settings (`SIMBA_SESSION_*`).
    pub session: ConfigSection,
}

impl Settings {
    /// Reads `SIMBA_BACKEND` and the `SIMBA_SESSION_*` variables of the
    /// process environment.
    ///
    /// # Errors
    /// [`ConfigSectionError::Env`] naming a variable whose value does not parse.
    pub fn from_env() -> Result<Settings, ConfigSectionError> {
        Self::from_vars(std::env::vars())
    }

    /// As [`Settings::from_env`], from any list of `(name, value)` pairs.
    ///
    /// # Errors
    /// [`ConfigSectionError::Env`] naming a variable whose value does not parse.
    pub fn from_vars<K, V>(
        vars: impl IntoIterator<Item = (K, V)>,
    ) -> Result<Settings, ConfigSectionError>
    where
        K: AsRef<str>,
        V: AsRef<str>,
    {
        let vars: Vec<(K, V)> = vars.into_iter().collect();
        let backend = vars
            .iter()
            .filter(|(k, _)| k.as_ref() == BACKEND_VAR)
            .map(|(_, v)| v.as_ref().trim().to_owned())
            .filter(|v| !v.is_empty())
            .last();
        let session = ConfigSection::from_vars(vars.iter().map(|(k, v)| (k.as_ref(), v.as_ref())))?;
        Ok(Settings { backend, session })
    }

    /// The checked timing settings (S8.1).
    ///
    /// # Errors
    /// [`ConfigSectionError::Invalid`] when a rule of S8.1 is broken.
    pub fn config(&self) -> Result<SimbaConfig, ConfigSectionError> {
        self.session.to_config()
    }

    /// Connects to the backend of [`Settings::backend`] (creating its tables
    /// if missing) and returns a builder with the timing settings applied.
    /// The runtime adapters add their runtime; with this crate alone, call
    /// [`SimbaBuilder::runtime`](crate::SimbaBuilder::runtime) before `build()`.
    ///
    /// # Errors
    /// [`Error::NoBackend`] if no backend URL is set, otherwise the
    /// settings' or the backend's error.
    pub async fn connect(&self) -> Result<crate::SimbaBuilder, Error> {
        let config = self.config()?;
        let url = self.backend.as_deref().ok_or(Error::NoBackend)?;
        let backend = simba_backends::connect(url).await?;
        Ok(crate::Simba::builder_dyn(std::sync::Arc::from(backend)).config(config))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn s8_1_section_rejects_renew_interval_longer_than_half_the_lease() {
        let section = ConfigSection::from_vars([
            ("SIMBA_SESSION_LEASE_DURATION", "4s"),
            ("SIMBA_SESSION_RENEW_INTERVAL", "3s"),
        ])
        .unwrap();
        assert!(matches!(
            section.to_config(),
            Err(ConfigSectionError::Invalid(_))
        ));
    }

    #[test]
    fn s8_1_environment_overrides_file_section() {
        let file: ConfigSection = serde_json::from_str(r#"{"lease_duration":"30s"}"#).unwrap();
        let env = ConfigSection::from_vars([("SIMBA_SESSION_LEASE_DURATION", "9s")]).unwrap();
        let config = file.merged_with(&env).to_config().unwrap();
        assert_eq!(config.lease_duration(), Duration::from_secs(9));
        assert_eq!(config.renew_interval(), Duration::from_secs(3));
    }

    #[test]
    fn s8_1_settings_read_the_backend_and_the_session_like_the_cli() {
        let s = Settings::from_vars([
            ("SIMBA_BACKEND", " sqlite::memory: "),
            ("SIMBA_SESSION_MARGIN", "70ms"),
        ])
        .unwrap();
        assert_eq!(s.backend.as_deref(), Some("sqlite::memory:"));
        assert_eq!(s.config().unwrap().margin(), Duration::from_millis(70));
        let empty = Settings::from_vars([("SIMBA_BACKEND", "")]).unwrap();
        assert_eq!(empty.backend, None);
        let err = futures::executor::block_on(empty.connect()).err().unwrap();
        assert!(matches!(err, Error::NoBackend), "{err}");
        assert!(Settings::from_vars([("SIMBA_SESSION_DRIFT", "lots")]).is_err());
    }

    #[test]
    fn s8_1_section_round_trips_with_humane_durations() {
        let section = ConfigSection {
            margin: Some(Duration::from_millis(75)),
            ..ConfigSection::default()
        };
        let text = serde_json::to_string(&section).unwrap();
        assert_eq!(text, r#"{"margin":"75ms"}"#);
        assert_eq!(
            serde_json::from_str::<ConfigSection>(&text).unwrap(),
            section
        );
    }
}
