//! Medians and 99th percentiles of samples, and how they are printed.

use std::time::Duration;

/// The summary of one measurement: sample count, median and 99th
/// percentile (nearest rank), in seconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stat {
    /// How many samples.
    pub n: usize,
    /// The median (the upper one of an even count).
    pub median: f64,
    /// The 99th percentile by nearest rank: with fewer than 100 samples it
    /// is the maximum.
    pub p99: f64,
}

impl Stat {
    /// The summary of `samples` (seconds), or `None` if there are none.
    ///
    /// ```
    /// let s = simba_bench::stats::Stat::of(vec![3.0, 1.0, 2.0]).unwrap();
    /// assert_eq!((s.n, s.median, s.p99), (3, 2.0, 3.0));
    /// ```
    pub fn of(mut samples: Vec<f64>) -> Option<Stat> {
        samples.retain(|x| x.is_finite());
        if samples.is_empty() {
            return None;
        }
        samples.sort_by(f64::total_cmp);
        let n = samples.len();
        let median = samples[n / 2];
        // Nearest rank: the smallest sample with at least 99 % at or below it.
        let rank = (n * 99).div_ceil(100).max(1);
        let p99 = samples[rank - 1];
        Some(Stat { n, median, p99 })
    }

    /// The summary of durations.
    pub fn of_durations(samples: &[Duration]) -> Option<Stat> {
        Stat::of(samples.iter().map(Duration::as_secs_f64).collect())
    }
}

/// A duration in seconds, printed with a unit that suits it (µs, ms, s).
///
/// ```
/// assert_eq!(simba_bench::stats::fmt_secs(0.000_123_4), "123 µs");
/// assert_eq!(simba_bench::stats::fmt_secs(0.0123), "12.3 ms");
/// assert_eq!(simba_bench::stats::fmt_secs(1.5), "1.50 s");
/// ```
pub fn fmt_secs(s: f64) -> String {
    if s < 1e-3 {
        format!("{:.0} µs", s * 1e6)
    } else if s < 0.1 {
        format!("{:.1} ms", s * 1e3)
    } else if s < 1.0 {
        format!("{:.0} ms", s * 1e3)
    } else {
        format!("{s:.2} s")
    }
}

/// A plain number with up to three significant decimals, never in
/// scientific notation.
pub fn fmt_num(x: f64) -> String {
    if x == 0.0 {
        "0".into()
    } else if x.abs() >= 100.0 {
        format!("{x:.0}")
    } else if x.abs() >= 10.0 {
        format!("{x:.1}")
    } else if x.abs() >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

/// Bytes, printed in B, KiB or MiB.
pub fn fmt_bytes(b: f64) -> String {
    if b.abs() < 1024.0 {
        format!("{b:.0} B")
    } else if b.abs() < 1024.0 * 1024.0 {
        format!("{:.1} KiB", b / 1024.0)
    } else {
        format!("{:.1} MiB", b / 1024.0 / 1024.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_p99_of_a_hundred() {
        let s = Stat::of((1..=100).map(f64::from).collect()).unwrap_or(Stat {
            n: 0,
            median: 0.0,
            p99: 0.0,
        });
        assert_eq!(s.n, 100);
        assert_eq!(s.median, 51.0);
        assert_eq!(s.p99, 99.0);
    }

    #[test]
    fn p99_of_few_samples_is_the_maximum() {
        let s = Stat::of(vec![5.0, 1.0, 9.0, 2.0]);
        assert_eq!(s.map(|s| (s.median, s.p99)), Some((5.0, 9.0)));
    }

    #[test]
    fn empty_and_non_finite_samples() {
        assert_eq!(Stat::of(vec![]), None);
        assert_eq!(Stat::of(vec![f64::NAN]), None);
        assert_eq!(Stat::of(vec![f64::NAN, 2.0]).map(|s| s.n), Some(1));
    }

    #[test]
    fn units() {
        assert_eq!(fmt_secs(0.5), "500 ms");
        assert_eq!(fmt_num(90.0), "90.0");
        assert_eq!(fmt_num(1234.4), "1234");
        assert_eq!(fmt_bytes(2048.0), "2.0 KiB");
    }
}
