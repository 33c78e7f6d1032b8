//! Simulated clocks: a rate relative to true time, an offset and optional steps.
//!
//! True time is the simulator's own timeline (nanoseconds, `u64`). A clock maps
//! it to the clock's local reading, piecewise linearly: each segment starts at
//! a true instant with a local reading and runs at a rate given in parts per
//! billion (`1_000_000_000` = exactly true time). A step starts a new segment
//! whose reading jumps by a signed amount. Integer arithmetic only, so a run
//! replays bit for bit.

use simba_core::Timestamp;

/// Parts per billion of true time: `PPB` is a clock running exactly at true rate.
pub const PPB: u64 = 1_000_000_000;

#[derive(Clone, Debug, PartialEq, Eq)]
struct Segment {
    /// True instant the segment starts at.
    from: u64,
    /// Local reading at `from`.
    base: i128,
}

/// A clock: local reading as a function of true time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Clock {
    rate_ppb: u64,
    segments: Vec<Segment>,
}

impl Clock {
    /// A clock reading `offset` at true time zero and running at `rate_ppb`
    /// parts per billion of true time.
    pub fn new(rate_ppb: u64, offset: u64) -> Clock {
        Clock {
            rate_ppb: rate_ppb.max(1),
            segments: vec![Segment {
                from: 0,
                base: i128::from(offset),
            }],
        }
    }

    /// The clock's rate, in parts per billion of true time.
    pub fn rate_ppb(&self) -> u64 {
        self.rate_ppb
    }

    /// Adds a step of `delta_ns` (forward if positive) at true instant `at`.
    /// Steps must be added in increasing order of `at`.
    pub fn add_step(&mut self, at: u64, delta_ns: i64) {
        let before = self.local_i128(at);
        self.segments.push(Segment {
            from: at,
            base: before + i128::from(delta_ns),
        });
    }

    fn segment_index(&self, t: u64) -> usize {
        // Few segments: a linear scan from the end is fastest.
        let mut i = self.segments.len() - 1;
        while i > 0 && self.segments[i].from > t {
            i -= 1;
        }
        i
    }

    fn local_in(&self, i: usize, t: u64) -> i128 {
        let s = &self.segments[i];
        let dt = i128::from(t.saturating_sub(s.from));
        s.base + dt * i128::from(self.rate_ppb) / i128::from(PPB)
    }

    fn local_i128(&self, t: u64) -> i128 {
        self.local_in(self.segment_index(t), t)
    }

    /// The clock's reading at true instant `t` (clamped at zero).
    pub fn local(&self, t: u64) -> Timestamp {
        let v = self.local_i128(t).clamp(0, i128::from(u64::MAX));
        Timestamp::from_nanos(u64::try_from(v).unwrap_or(u64::MAX))
    }

    /// The earliest true instant `t ≥ after` at which the clock reads at least
    /// `target`, or `None` if that is beyond the representable range.
    pub fn true_at(&self, target: Timestamp, after: u64) -> Option<u64> {
        let x = i128::from(target.as_nanos());
        let mut i = self.segment_index(after);
        loop {
            let start = after.max(self.segments[i].from);
            let end = self.segments.get(i + 1).map(|s| s.from);
            if self.local_in(i, start) >= x {
                return Some(start);
            }
            let s = &self.segments[i];
            let need = x - s.base;
            let rate = i128::from(self.rate_ppb);
            let dt = (need * i128::from(PPB) + rate - 1) / rate;
            let mut t = i128::from(s.from) + dt;
            // Correct rounding, so that the reading at `t` is reached and the
            // reading just before is not.
            while t > i128::from(start) && self.local_in(i, u64::try_from(t - 1).ok()?) >= x {
                t -= 1;
            }
            while self.local_in(i, u64::try_from(t).ok()?) < x {
                t += 1;
            }
            let t = u64::try_from(t).ok()?;
            match end {
                Some(e) if t >= e => i += 1,
                _ => return Some(t),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inverse_is_exact() {
        let mut c = Clock::new(990_000_000, 5_000);
        c.add_step(1_000_000, 777);
        c.add_step(2_000_000, -100_000);
        for target in [
            5_000u64, 5_001, 900_000, 1_000_500, 1_500_000, 1_980_000, 2_500_000,
        ] {
            let t = c.true_at(Timestamp::from_nanos(target), 0).unwrap_or(0);
            assert!(c.local(t).as_nanos() >= target);
            if t > 0 {
                // Just before, the reading was lower (within this monotone stretch).
                assert!(c.local(t - 1).as_nanos() < target || t == 1_000_000 || t == 2_000_000);
            }
        }
    }

    #[test]
    fn rate_applies() {
        let c = Clock::new(PPB / 2, 0);
        assert_eq!(c.local(1_000).as_nanos(), 500);
        assert_eq!(c.true_at(Timestamp::from_nanos(500), 0), Some(1_000));
    }
}
