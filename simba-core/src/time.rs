//! The time contract: an opaque monotonic [`Timestamp`] that every mutating
//! call receives from its caller.

use std::fmt;
use std::ops::{Add, Sub};
use std::time::Duration;

/// A point on the caller's monotonic clock, in nanoseconds from an origin the
/// caller picks (an adapter uses the `Instant` it was built at; the simulation
/// uses virtual time).
///
/// The engine never reads a clock. Every mutating call takes `now`; a `now`
/// earlier than one already seen is clamped to the latest seen, so time never
/// runs backwards inside the engine.
///
/// ```
/// use simba_core::Timestamp;
/// use std::time::Duration;
/// let t = Timestamp::from_nanos(5);
/// assert_eq!((t + Duration::from_nanos(10)).as_nanos(), 15);
/// assert_eq!(t.saturating_duration_since(Timestamp::from_nanos(9)), Duration::ZERO);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(u64);

impl Timestamp {
    /// The origin of the caller's clock.
    pub const ZERO: Timestamp = Timestamp(0);
    /// The largest representable instant (about 584 years after the origin).
    pub const MAX: Timestamp = Timestamp(u64::MAX);

    /// A timestamp `nanos` nanoseconds after the origin.
    pub const fn from_nanos(nanos: u64) -> Self {
        Timestamp(nanos)
    }

    /// Nanoseconds since the origin.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// A timestamp `d` after the origin, saturating at [`Timestamp::MAX`].
    pub fn from_duration(d: Duration) -> Self {
        Timestamp(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
    }

    /// The time since the origin.
    pub const fn as_duration(self) -> Duration {
        Duration::from_nanos(self.0)
    }

    /// `self - earlier`, or zero if `earlier` is later than `self`.
    pub fn saturating_duration_since(self, earlier: Timestamp) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }

    /// `self + d`, saturating at [`Timestamp::MAX`].
    pub fn saturating_add(self, d: Duration) -> Timestamp {
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        Timestamp(self.0.saturating_add(nanos))
    }

    /// `self - d`, saturating at [`Timestamp::ZERO`].
    pub fn saturating_sub(self, d: Duration) -> Timestamp {
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        Timestamp(self.0.saturating_sub(nanos))
    }
}

impl Add<Duration> for Timestamp {
    type Output = Timestamp;
    /// Saturating addition.
    fn add(self, d: Duration) -> Timestamp {
        self.saturating_add(d)
    }
}

impl Sub<Timestamp> for Timestamp {
    type Output = Duration;
    /// Saturating difference.
    fn sub(self, earlier: Timestamp) -> Duration {
        self.saturating_duration_since(earlier)
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.as_duration())
    }
}
