//! Host suspend: a client's clock counts the time the host spent suspended.
//!
//! On Linux the monotonic clock (`CLOCK_MONOTONIC`, behind `Instant` and the
//! runtimes' timers) stops while the host is suspended, but the backend's
//! clock keeps counting: after a resume the backend may have expired the
//! session while the local deadline has not moved. A client therefore adds
//! the suspended time ([`SuspendClock`]) to its runtime's clock, so term
//! validity (S3.3) and every engine timestamp count it, and a term never
//! reads valid after a suspend longer than its remaining time.

use std::time::Duration;

/// The total time the host has spent suspended, from a fixed origin; it
/// never decreases. A client adds what it gains while the client lives to
/// its runtime's clock ([`SimbaBuilder::suspend_clock`](crate::SimbaBuilder::suspend_clock)).
///
/// ```
/// use simba_client::{HostSuspendClock, SuspendClock};
///
/// let before = HostSuspendClock.suspended();
/// assert!(HostSuspendClock.suspended() + std::time::Duration::from_millis(1) >= before);
/// ```
pub trait SuspendClock: Send + Sync + 'static {
    /// Time spent suspended since a fixed origin (for instance, since boot).
    fn suspended(&self) -> Duration;
}

/// The host's own count: `CLOCK_BOOTTIME` minus `CLOCK_MONOTONIC` on Linux
/// and Android (the first counts suspended time, the second does not);
/// zero elsewhere (where `Instant` already counts it, or nothing tells).
/// The default of every client.
#[derive(Clone, Copy, Debug, Default)]
pub struct HostSuspendClock;

impl SuspendClock for HostSuspendClock {
    fn suspended(&self) -> Duration {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        {
            // Monotonic first: the gap between the two reads can only make
            // the result larger (terms then end earlier, never later).
            let mono = clock_ns(rustix::time::ClockId::Monotonic);
            let boot = boottime_ns();
            Duration::from_nanos(boot.saturating_sub(mono))
        }
        #[cfg(not(any(target_os = "linux", target_os = "android")))]
        {
            Duration::ZERO
        }
    }
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn clock_ns(id: rustix::time::ClockId) -> u64 {
    let ts = rustix::time::clock_gettime(id);
    u64::try_from(ts.tv_sec)
        .unwrap_or(0)
        .saturating_mul(1_000_000_000)
        .saturating_add(u64::try_from(ts.tv_nsec).unwrap_or(0))
}

/// The host's monotonic clock **including time spent suspended**
/// (`CLOCK_BOOTTIME` on Linux and Android), in nanoseconds from an
/// unspecified origin; elsewhere, the process's monotonic clock. Simba's
/// clients ([`HostSuspendClock`]) and the `simba` command's child guard
/// read it.
///
/// ```
/// let a = simba_client::boottime_ns();
/// assert!(simba_client::boottime_ns() >= a);
/// ```
pub fn boottime_ns() -> u64 {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        clock_ns(rustix::time::ClockId::Boottime)
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    {
        use std::sync::OnceLock;
        static ORIGIN: OnceLock<std::time::Instant> = OnceLock::new();
        let origin = *ORIGIN.get_or_init(std::time::Instant::now);
        u64::try_from(origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}
