//! Timing parameters (S8) and their validation (S8.1).

use std::fmt;
use std::time::Duration;

/// Simba's timing parameters (S8). Build with [`SimbaConfig::builder`];
/// derive variants with [`SimbaConfig::to_builder`].
///
/// ```
/// use simba_core::SimbaConfig;
/// use std::time::Duration;
/// let config = SimbaConfig::builder()
///     .lease_duration(Duration::from_secs(3))
///     .build()
///     .unwrap();
/// assert_eq!(config.renew_interval(), Duration::from_secs(1));
/// assert_eq!(config.retry_jitter(), Duration::from_millis(500));
/// let faster = config.to_builder().drift(0.05).build().unwrap();
/// assert_eq!(faster.drift(), 0.05);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct SimbaConfig {
    lease_duration: Duration,
    renew_interval: Duration,
    drift: f64,
    margin: Duration,
    retry_jitter: Duration,
    min_backoff: Duration,
    seed: Option<u64>,
    #[cfg(feature = "mutants")]
    mutant: Option<crate::mutant::Mutant>,
}

impl Default for SimbaConfig {
    fn default() -> Self {
        SimbaConfig {
            lease_duration: Duration::from_secs(15),
            renew_interval: Duration::from_secs(5),
            drift: 0.01,
            margin: Duration::from_millis(50),
            retry_jitter: Duration::from_millis(2500),
            min_backoff: Duration::from_millis(100),
            seed: None,
            #[cfg(feature = "mutants")]
            mutant: None,
        }
    }
}

impl SimbaConfig {
    /// A builder with the defaults of S8.
    pub fn builder() -> SimbaConfigBuilder {
        SimbaConfigBuilder::default()
    }

    /// A builder holding exactly this configuration's explicit settings.
    pub fn to_builder(&self) -> SimbaConfigBuilder {
        SimbaConfigBuilder {
            lease_duration: Some(self.lease_duration),
            renew_interval: Some(self.renew_interval),
            drift: Some(self.drift),
            margin: Some(self.margin),
            retry_jitter: Some(self.retry_jitter),
            min_backoff: Some(self.min_backoff),
            seed: self.seed,
            #[cfg(feature = "mutants")]
            mutant: self.mutant,
        }
    }

    /// How long after its last renewal the backend expires a session.
    pub fn lease_duration(&self) -> Duration {
        self.lease_duration
    }
    /// The renewal period (S1.1).
    pub fn renew_interval(&self) -> Duration {
        self.renew_interval
    }
    /// Bound on the rate difference of node and backend clocks (S2.1).
    pub fn drift(&self) -> f64 {
        self.drift
    }
    /// Extra safety subtracted from every deadline (S2.1).
    pub fn margin(&self) -> Duration {
        self.margin
    }
    /// Upper bound of the random part of a candidate's retry delay (S4.1).
    pub fn retry_jitter(&self) -> Duration {
        self.retry_jitter
    }
    /// Floor of the back-off after a failed renewal (S8.3).
    pub fn min_backoff(&self) -> Duration {
        self.min_backoff
    }
    /// The seed of the engine's only source of randomness, the retry
    /// jitter of S4.1: the explicit seed if one was set, else 0. The engine
    /// (sans-IO) uses it as it is; `simba-client`'s builder replaces an
    /// unset seed with one drawn from the OS, so candidates in different
    /// processes retry on different schedules.
    pub fn seed(&self) -> u64 {
        self.seed.unwrap_or(0)
    }

    /// The seed set with [`SimbaConfigBuilder::seed`], if any.
    pub fn explicit_seed(&self) -> Option<u64> {
        self.seed
    }

    /// The deliberately broken behaviour this engine runs with, if any.
    #[cfg(feature = "mutants")]
    pub fn mutant(&self) -> Option<crate::mutant::Mutant> {
        self.mutant
    }
}

/// Builds a [`SimbaConfig`], checking the inequalities of S8.1.
#[derive(Clone, Debug, Default)]
pub struct SimbaConfigBuilder {
    lease_duration: Option<Duration>,
    renew_interval: Option<Duration>,
    drift: Option<f64>,
    margin: Option<Duration>,
    retry_jitter: Option<Duration>,
    min_backoff: Option<Duration>,
    seed: Option<u64>,
    #[cfg(feature = "mutants")]
    mutant: Option<crate::mutant::Mutant>,
}

impl SimbaConfigBuilder {
    /// Sets `lease_duration` (default 15 s).
    pub fn lease_duration(mut self, d: Duration) -> Self {
        self.lease_duration = Some(d);
        self
    }
    /// Sets `renew_interval` (default `lease_duration / 3`).
    pub fn renew_interval(mut self, d: Duration) -> Self {
        self.renew_interval = Some(d);
        self
    }
    /// Sets `drift`, in `[0, 0.5)` (default 0.01).
    pub fn drift(mut self, drift: f64) -> Self {
        self.drift = Some(drift);
        self
    }
    /// Sets `margin` (default 50 ms).
    pub fn margin(mut self, d: Duration) -> Self {
        self.margin = Some(d);
        self
    }
    /// Sets `retry_jitter` (default `renew_interval / 2`).
    pub fn retry_jitter(mut self, d: Duration) -> Self {
        self.retry_jitter = Some(d);
        self
    }
    /// Sets `min_backoff` (default 100 ms).
    pub fn min_backoff(mut self, d: Duration) -> Self {
        self.min_backoff = Some(d);
        self
    }
    /// Sets the seed of the retry jitter (S4.1), for reproducible runs and
    /// tests. Unset, the engine uses 0 and `simba-client`'s builder draws a
    /// seed from the OS for every client.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }
    /// Selects a deliberately broken behaviour (simulation only).
    #[cfg(feature = "mutants")]
    pub fn mutant(mut self, mutant: Option<crate::mutant::Mutant>) -> Self {
        self.mutant = mutant;
        self
    }

    /// Checks the settings and builds the configuration.
    ///
    /// # Errors
    /// A [`ConfigError`] naming the violated rule: a zero duration, `drift`
    /// outside `[0, 0.5)`, `renew_interval × 2 ≤ lease_duration` or
    /// `lease_duration × (1 − drift) − margin > renew_interval` (S8.1).
    ///
    /// ```
    /// use simba_core::{ConfigError, SimbaConfig};
    /// use std::time::Duration;
    /// let err = SimbaConfig::builder()
    ///     .lease_duration(Duration::from_secs(10))
    ///     .renew_interval(Duration::from_secs(6))
    ///     .build()
    ///     .unwrap_err();
    /// assert!(matches!(err, ConfigError::RenewIntervalTooLong { .. }));
    /// assert!(err.to_string().contains("renew_interval × 2 ≤ lease_duration"));
    /// ```
    pub fn build(self) -> Result<SimbaConfig, ConfigError> {
        let d = SimbaConfig::default();
        let lease_duration = self.lease_duration.unwrap_or(d.lease_duration);
        let renew_interval = self.renew_interval.unwrap_or(lease_duration / 3);
        let drift = self.drift.unwrap_or(d.drift);
        let margin = self.margin.unwrap_or(d.margin);
        let retry_jitter = self.retry_jitter.unwrap_or(renew_interval / 2);
        let min_backoff = self.min_backoff.unwrap_or(d.min_backoff);
        if lease_duration.is_zero() {
            return Err(ConfigError::Zero("lease_duration"));
        }
        if renew_interval.is_zero() {
            return Err(ConfigError::Zero("renew_interval"));
        }
        if min_backoff.is_zero() {
            return Err(ConfigError::Zero("min_backoff"));
        }
        if lease_duration > Duration::from_secs(365 * 24 * 3600) {
            return Err(ConfigError::TooLong("lease_duration"));
        }
        if !(0.0..0.5).contains(&drift) {
            return Err(ConfigError::DriftOutOfRange(drift));
        }
        if renew_interval.saturating_mul(2) > lease_duration {
            return Err(ConfigError::RenewIntervalTooLong {
                renew_interval,
                lease_duration,
            });
        }
        let local = lease_duration.mul_f64(1.0 - drift).saturating_sub(margin);
        if local <= renew_interval {
            return Err(ConfigError::LeaseTooShort {
                lease_duration,
                drift,
                margin,
                renew_interval,
            });
        }
        Ok(SimbaConfig {
            lease_duration,
            renew_interval,
            drift,
            margin,
            retry_jitter,
            min_backoff,
            seed: self.seed.or(d.seed),
            #[cfg(feature = "mutants")]
            mutant: self.mutant,
        })
    }
}

/// Why a configuration was refused (S8.1). Each message names the violated rule.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A duration that must be positive is zero.
    #[error("invalid Simba config: {0} must be greater than zero")]
    Zero(&'static str),
    /// A duration is absurdly long (over a year).
    #[error("invalid Simba config: {0} must be at most one year")]
    TooLong(&'static str),
    /// `drift` is outside `[0, 0.5)`.
    #[error("invalid Simba config: drift must be in [0, 0.5), got {0}")]
    DriftOutOfRange(f64),
    /// `renew_interval × 2 ≤ lease_duration` is violated (S8.1).
    #[error(
        "invalid Simba config: renew_interval × 2 ≤ lease_duration is violated \
         ({renew_interval:?} × 2 > {lease_duration:?}): two renewal tries must fit before the deadline"
    )]
    RenewIntervalTooLong {
        /// The configured renewal interval.
        renew_interval: Duration,
        /// The configured lease duration.
        lease_duration: Duration,
    },
    /// `lease_duration × (1 − drift) − margin > renew_interval` is violated (S8.1).
    #[error(
        "invalid Simba config: lease_duration × (1 − drift) − margin > renew_interval is violated \
         ({lease_duration:?} × (1 − {drift}) − {margin:?} ≤ {renew_interval:?}): every term would flap"
    )]
    LeaseTooShort {
        /// The configured lease duration.
        lease_duration: Duration,
        /// The configured drift.
        drift: f64,
        /// The configured margin.
        margin: Duration,
        /// The configured renewal interval.
        renew_interval: Duration,
    },
}

/// The fraction of the granted session timeout that one renewal proves (S8.5),
/// supplied by the backend: 1 for SQL, Redis and etcd, 5/12 for ZooKeeper.
///
/// ```
/// use simba_core::Fraction;
/// use std::time::Duration;
/// let zk = Fraction::new(5, 12).unwrap();
/// assert_eq!(zk.of(Duration::from_secs(12)), Duration::from_secs(5));
/// assert!(Fraction::new(2, 1).is_none());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fraction {
    num: u32,
    den: u32,
}

impl Fraction {
    /// The whole granted timeout.
    pub const ONE: Fraction = Fraction { num: 1, den: 1 };

    /// `num / den`, or `None` unless `0 < num ≤ den`.
    pub const fn new(num: u32, den: u32) -> Option<Fraction> {
        if num == 0 || den == 0 || num > den {
            None
        } else {
            Some(Fraction { num, den })
        }
    }

    /// This fraction of `d`, rounded down.
    pub fn of(self, d: Duration) -> Duration {
        let nanos = d.as_nanos() * u128::from(self.num) / u128::from(self.den);
        Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }
}

impl Default for Fraction {
    fn default() -> Self {
        Fraction::ONE
    }
}

impl fmt::Display for Fraction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.num, self.den)
    }
}
