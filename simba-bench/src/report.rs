//! The results table (markdown) and its rows.

use crate::stats::{fmt_secs, Stat};
use std::fmt::Write as _;

/// One measured figure.
#[derive(Clone, Debug, PartialEq)]
pub enum Figure {
    /// Durations (seconds): median and p99.
    Time(Stat),
    /// A single value with its unit already printed (a rate, a size).
    Value(String),
    /// Not measured, and why.
    Missing(String),
}

impl Figure {
    /// The median column.
    fn median(&self) -> String {
        match self {
            Figure::Time(s) => fmt_secs(s.median),
            Figure::Value(v) => v.clone(),
            Figure::Missing(why) => format!("not measured: {why}"),
        }
    }

    /// The p99 column.
    fn p99(&self) -> String {
        match self {
            Figure::Time(s) => format!("{} (n={})", fmt_secs(s.p99), s.n),
            _ => "—".into(),
        }
    }

    /// The median in seconds, for a time.
    pub fn median_secs(&self) -> Option<f64> {
        match self {
            Figure::Time(s) => Some(s.median),
            _ => None,
        }
    }
}

/// A figure of Simba's and the peer it is compared with.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// The backend (or "all").
    pub backend: String,
    /// What was measured.
    pub what: String,
    /// Simba's figure (or the floor's, for a floor row).
    pub simba: Figure,
    /// The figure relative to something (a floor, the lease duration).
    pub relative: String,
    /// The peer's name and figure.
    pub peer: Option<(String, Figure)>,
    /// The goal from issue 15 or the rulebook, where one exists.
    pub goal: String,
}

impl Row {
    /// A row without a peer, relative figure or goal.
    pub fn new(backend: &str, what: &str, simba: Figure) -> Row {
        Row {
            backend: backend.into(),
            what: what.into(),
            simba,
            relative: String::new(),
            peer: None,
            goal: String::new(),
        }
    }

    /// With a relative figure.
    pub fn relative(mut self, text: impl Into<String>) -> Row {
        self.relative = text.into();
        self
    }

    /// With a peer.
    pub fn peer(mut self, name: &str, figure: Figure) -> Row {
        self.peer = Some((name.into(), figure));
        self
    }

    /// With a goal.
    pub fn goal(mut self, goal: impl Into<String>) -> Row {
        self.goal = goal.into();
        self
    }
}

/// `a / b` as "1.23×", or "" when either is missing.
pub fn ratio(a: &Figure, b: &Figure) -> String {
    match (a.median_secs(), b.median_secs()) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}×", a / b),
        _ => String::new(),
    }
}

fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// The markdown table of `rows`.
///
/// ```
/// use simba_bench::report::{markdown, Figure, Row};
/// let t = markdown(&[Row::new("redis", "PING", Figure::Value("1".into()))]);
/// assert!(t.contains("| redis | PING | 1 |"));
/// ```
pub fn markdown(rows: &[Row]) -> String {
    let mut out = String::new();
    out.push_str(
        "| backend | measurement | Simba median | Simba p99 | relative | peer | peer median | peer p99 | goal |\n\
         |---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let (pn, pm, pp) = match &r.peer {
            Some((name, f)) => (name.clone(), f.median(), f.p99()),
            None => (String::new(), String::new(), String::new()),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            cell(&r.backend),
            cell(&r.what),
            cell(&r.simba.median()),
            cell(&r.simba.p99()),
            cell(&r.relative),
            cell(&pn),
            cell(&pm),
            cell(&pp),
            cell(&r.goal)
        );
    }
    out
}

/// One line of console output for `row`.
pub fn line(r: &Row) -> String {
    let mut s = format!(
        "{:10} {:44} {:>14} p99 {:>18} {}",
        r.backend,
        r.what,
        r.simba.median(),
        r.simba.p99(),
        r.relative
    );
    if let Some((name, f)) = &r.peer {
        let _ = write!(s, " | {name}: {} p99 {}", f.median(), f.p99());
    }
    if !r.goal.is_empty() {
        let _ = write!(s, " | goal {}", r.goal);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(median: f64, p99: f64) -> Figure {
        Figure::Time(Stat { n: 10, median, p99 })
    }

    #[test]
    fn a_row_with_peer_and_goal() {
        let r = Row::new("postgres", "hand-over", t(0.0015, 0.003))
            .peer("advisory lock", t(0.0004, 0.001))
            .goal("≤ 2 ms median");
        let md = markdown(&[r]);
        assert!(md.contains(
            "| postgres | hand-over | 1.5 ms | 3.0 ms (n=10) |  | advisory lock | 400 µs | 1.0 ms (n=10) | ≤ 2 ms median |"
        ));
        assert_eq!(md.lines().count(), 3);
    }

    #[test]
    fn missing_figures_say_why_and_pipes_are_escaped() {
        let r = Row::new("etcd", "a|b", Figure::Missing("no etcdctl".into()));
        let md = markdown(&[r]);
        assert!(md.contains("| etcd | a\\|b | not measured: no etcdctl | — |"));
    }

    #[test]
    fn ratios() {
        assert_eq!(ratio(&t(3.0, 3.0), &t(2.0, 2.0)), "1.50×");
        assert_eq!(ratio(&t(3.0, 3.0), &Figure::Missing(String::new())), "");
    }
}
