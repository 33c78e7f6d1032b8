//! The harness's one source of randomness: splitmix64 streams derived from
//! the run's seed (never the OS), so a seed replays bit for bit.

use std::time::Duration;

/// A splitmix64 stream.
#[derive(Clone, Debug)]
pub(crate) struct Rng(u64);

impl Rng {
    /// The stream for `seed`, mixed with `stream` so that derived streams
    /// (per node, for the fault plan) do not overlap.
    pub(crate) fn new(seed: u64, stream: u64) -> Rng {
        let mut r = Rng(seed ^ stream.wrapping_mul(0xD1B5_4A32_D192_ED03));
        let _ = r.next_u64();
        r
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    pub(crate) fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `[0, n)` (0 if `n` is 0).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }

    pub(crate) fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    /// Uniform between `lo` and `hi`.
    pub(crate) fn between(&mut self, lo: Duration, hi: Duration) -> Duration {
        let span = hi.saturating_sub(lo).as_nanos();
        let span = u64::try_from(span).unwrap_or(u64::MAX);
        lo + Duration::from_nanos(self.below(span.saturating_add(1)))
    }
}
