//! Lease arithmetic: local deadlines (S2.1), back-off (S8.3) and the renewal
//! period in force (S8.4). Pure functions of their arguments.

use crate::config::Fraction;
use crate::time::Timestamp;
use std::time::Duration;

/// The local validity one reply proves (S2.1, S8.5):
/// `proves(remaining) × (1 − drift) − margin`, rounded down, zero if negative.
///
/// ```
/// use simba_core::{local_validity, Fraction};
/// use std::time::Duration;
/// let v = local_validity(Duration::from_secs(15), Fraction::ONE, 0.01, Duration::from_millis(50));
/// assert_eq!(v, Duration::from_millis(14_800));
/// ```
pub fn local_validity(
    remaining: Duration,
    proves: Fraction,
    drift: f64,
    margin: Duration,
) -> Duration {
    let proven = proves.of(remaining);
    // `mul_f64` panics only on negative or non-finite results; drift is
    // validated to [0, 0.5) by the config, so the factor is in (0.5, 1].
    let factor = (1.0 - drift).clamp(0.0, 1.0);
    let scaled = Duration::from_nanos((proven.as_nanos() as f64 * factor).floor() as u64);
    scaled.saturating_sub(margin)
}

/// The local deadline of S2.1: `sent_at + remaining × (1 − drift) − margin`.
///
/// `sent_at` is when the call was *sent*: the backend may have started
/// counting `remaining` at any moment between send and receive, so a slow
/// reply only shortens the deadline.
///
/// ```
/// use simba_core::{local_deadline, Fraction, Timestamp};
/// use std::time::Duration;
/// let sent = Timestamp::from_nanos(1_000_000_000);
/// let d = local_deadline(sent, Duration::from_secs(15), Fraction::ONE, 0.01, Duration::from_millis(50));
/// assert_eq!(d - sent, Duration::from_millis(14_800));
/// ```
pub fn local_deadline(
    sent_at: Timestamp,
    remaining: Duration,
    proves: Fraction,
    drift: f64,
    margin: Duration,
) -> Timestamp {
    sent_at + local_validity(remaining, proves, drift, margin)
}

/// The renewal period in force (S8.4): `renew_interval`, unless two renewals
/// at that interval no longer fit in the local `validity` one renewal proves;
/// then a third of that validity. Returns the period and whether it is shortened.
///
/// ```
/// use simba_core::renew_period;
/// use std::time::Duration;
/// let five = Duration::from_secs(5);
/// assert_eq!(renew_period(five, Duration::from_millis(14_800)), (five, false));
/// assert_eq!(renew_period(five, Duration::from_secs(6)), (Duration::from_secs(2), true));
/// ```
pub fn renew_period(renew_interval: Duration, validity: Duration) -> (Duration, bool) {
    if renew_interval.saturating_mul(2) > validity {
        (validity / 3, true)
    } else {
        (renew_interval, false)
    }
}

/// The back-off after a failed renewal (S8.3): half the time left before the
/// deadline, at most the renewal period in force, at least `min_backoff`.
///
/// ```
/// use simba_core::renewal_backoff;
/// use std::time::Duration;
/// let ms = Duration::from_millis;
/// assert_eq!(renewal_backoff(ms(8000), ms(5000), ms(100)), ms(4000));
/// assert_eq!(renewal_backoff(ms(20000), ms(5000), ms(100)), ms(5000));
/// assert_eq!(renewal_backoff(ms(50), ms(5000), ms(100)), ms(100));
/// ```
pub fn renewal_backoff(left: Duration, period: Duration, min_backoff: Duration) -> Duration {
    (left / 2).min(period).max(min_backoff)
}

/// Whether a term of a session whose local deadline is `deadline` is valid
/// at `now` (S3.3): not revoked, and the deadline has not passed. A pure
/// function, so an adapter can answer `is_valid()` without a background task
/// and a process waking from a pause reads `false` on its first call.
///
/// ```
/// use simba_core::{term_is_valid, Timestamp};
/// let deadline = Timestamp::from_nanos(100);
/// assert!(term_is_valid(deadline, false, Timestamp::from_nanos(99)));
/// assert!(!term_is_valid(deadline, false, Timestamp::from_nanos(100)));
/// assert!(!term_is_valid(deadline, true, Timestamp::from_nanos(0)));
/// ```
pub fn term_is_valid(deadline: Timestamp, revoked: bool, now: Timestamp) -> bool {
    !revoked && now < deadline
}

/// Time until the term's deadline, zero once it is over (S3.2 `remaining()`).
///
/// ```
/// use simba_core::{term_remaining, Timestamp};
/// use std::time::Duration;
/// let deadline = Timestamp::from_nanos(100);
/// assert_eq!(term_remaining(deadline, false, Timestamp::from_nanos(40)), Duration::from_nanos(60));
/// assert_eq!(term_remaining(deadline, true, Timestamp::from_nanos(40)), Duration::ZERO);
/// ```
pub fn term_remaining(deadline: Timestamp, revoked: bool, now: Timestamp) -> Duration {
    if term_is_valid(deadline, revoked, now) {
        deadline - now
    } else {
        Duration::ZERO
    }
}

/// The most a failed leader task's back-off grows to, in renewal intervals.
pub const TASK_BACKOFF_MAX_INTERVALS: u32 = 32;

/// How long an election steps down after its leader task failed or panicked
/// for the `failures`-th time in a row (S6.5): one renewal interval, doubling
/// with each consecutive failure, at most
/// [`TASK_BACKOFF_MAX_INTERVALS`] renewal intervals. The count starts again
/// after a task that returned normally, or one whose term lasted at least
/// one lease duration.
///
/// ```
/// use simba_core::task_failure_backoff;
/// use std::time::Duration;
/// let i = Duration::from_secs(5);
/// assert_eq!(task_failure_backoff(i, 1), i);
/// assert_eq!(task_failure_backoff(i, 2), i * 2);
/// assert_eq!(task_failure_backoff(i, 4), i * 8);
/// assert_eq!(task_failure_backoff(i, 60), i * 32);
/// ```
pub fn task_failure_backoff(renew_interval: Duration, failures: u32) -> Duration {
    let exp = failures.saturating_sub(1).min(31);
    let factor = (1u32 << exp).min(TASK_BACKOFF_MAX_INTERVALS);
    renew_interval.saturating_mul(factor)
}

/// When a candidate tries again after a `Held` reply that carried the
/// holder's remaining time (S4.4): `received_at + (holder_remaining + 1 ms)
/// × (1 + drift)`, rounded up — the *latest* instant the backend can still
/// count the holder live (the mirror image of [`local_deadline`], which
/// takes the earliest). The backend may have read its clock as late as the
/// reply's arrival; the node's clock may run faster than the backend's by
/// the rate `drift`; and a backend counting whole milliseconds expires a key
/// only once its expiry time has passed, hence the extra millisecond.
///
/// ```
/// use simba_core::{retry_after_holder_expiry, Timestamp};
/// use std::time::Duration;
/// let got = Timestamp::from_nanos(1_000_000_000);
/// let at = retry_after_holder_expiry(got, Duration::from_millis(999), 0.01);
/// assert_eq!(at - got, Duration::from_millis(1010));
/// ```
pub fn retry_after_holder_expiry(
    received_at: Timestamp,
    holder_remaining: Duration,
    drift: f64,
) -> Timestamp {
    let wait = holder_remaining.saturating_add(Duration::from_millis(1));
    // drift is validated to [0, 0.5) by the config: the factor is in [1, 1.5).
    let factor = 1.0 + drift.clamp(0.0, 0.5);
    let scaled = (wait.as_nanos() as f64 * factor).ceil();
    let nanos = if scaled >= u64::MAX as f64 {
        u64::MAX
    } else {
        scaled as u64
    };
    received_at.saturating_add(Duration::from_nanos(nanos))
}
