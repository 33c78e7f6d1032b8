//! The checker: terms, faults by kind, stale unfenced activity per fault
//! kind, and the three failures (stale fenced write accepted, token
//! decrease, two valid terms overlapping).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

/// The nemesis's faults.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum FaultKind {
    /// SIGSTOP of the `simba` process alone, longer than the lease.
    PauseSimba,
    /// SIGSTOP of the whole node (simba, guard, child), longer than the lease.
    PauseNode,
    /// SIGKILL of `simba`.
    Kill,
    /// SIGTERM of `simba`.
    Term,
    /// A restart of the database server.
    RestartDb,
}

impl FaultKind {
    /// Every kind.
    pub const ALL: [FaultKind; 5] = [
        FaultKind::PauseSimba,
        FaultKind::PauseNode,
        FaultKind::Kill,
        FaultKind::Term,
        FaultKind::RestartDb,
    ];

    /// The name on the command line and in the report.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::PauseSimba => "pause-simba",
            FaultKind::PauseNode => "pause-node",
            FaultKind::Kill => "kill",
            FaultKind::Term => "term",
            FaultKind::RestartDb => "restart-db",
        }
    }
}

/// One injected fault, on `CLOCK_MONOTONIC`.
#[derive(Clone, Copy, Debug)]
pub struct Fault {
    /// What.
    pub kind: FaultKind,
    /// On which node (for restart-db: the node picked, irrelevant).
    pub node: u32,
    /// When it began.
    pub start: u64,
    /// When it ended (a pause: when the node was resumed).
    pub end: u64,
}

/// One term as its child saw it.
#[derive(Clone, Debug)]
struct TermSeen {
    token: u64,
    nodes: Vec<u32>,
    first: u64,
    ticks: Vec<u64>,
}

/// Stale unfenced activity of one fault kind (or none).
#[derive(Clone, Debug, Default)]
pub struct Stale {
    /// Terms that ticked after a later term's first tick.
    pub terms: usize,
    /// Their ticks after that point.
    pub ticks: usize,
    /// The longest such activity, after the later term's first tick.
    pub max: Duration,
}

/// The checker's findings.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Terms seen (distinct tokens that ticked).
    pub terms: usize,
    /// Faults injected by kind.
    pub faults: BTreeMap<&'static str, usize>,
    /// Stale unfenced activity by the kind of the last fault on that node
    /// (`none` if there was none).
    pub stale: BTreeMap<&'static str, Stale>,
    /// Writes accepted / refused by the fence / failed.
    pub writes: (usize, usize, usize),
    /// Everything that fails the run.
    pub failures: Vec<String>,
}

impl Report {
    /// No failure.
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }

    /// The report as text.
    pub fn render(&self, backend: &str, duration: Duration, seed: u64) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "== chaos report: {backend}, {}s, seed {seed} ==",
            duration.as_secs()
        );
        let _ = writeln!(s, "terms: {}", self.terms);
        let _ = writeln!(
            s,
            "writes: {} accepted, {} refused by the fence, {} failed",
            self.writes.0, self.writes.1, self.writes.2
        );
        let _ = writeln!(
            s,
            "{:<12} {:>6} {:>12} {:>11} {:>14}",
            "fault", "count", "stale terms", "stale ticks", "max stale ms"
        );
        let mut kinds: Vec<&str> = FaultKind::ALL.iter().map(|k| k.name()).collect();
        kinds.push("none");
        for k in kinds {
            let count = self.faults.get(k).copied().unwrap_or(0);
            let st = self.stale.get(k).cloned().unwrap_or_default();
            if count == 0 && st.terms == 0 {
                continue;
            }
            let _ = writeln!(
                s,
                "{k:<12} {count:>6} {:>12} {:>11} {:>14.0}",
                st.terms,
                st.ticks,
                st.max.as_secs_f64() * 1e3
            );
        }
        if self.failures.is_empty() {
            let _ = writeln!(s, "PASS");
        } else {
            for f in &self.failures {
                let _ = writeln!(s, "FAIL: {f}");
            }
        }
        s
    }
}

/// Checks a run. `lines` are the workers' log lines, `written` the tokens
/// of the written table in write order, `unfenced` the control mode (no
/// overlap tolerated at all).
pub fn check(lines: &[String], written: &[i64], faults: &[Fault], unfenced: bool) -> Report {
    let mut report = Report::default();
    for f in faults {
        *report.faults.entry(f.kind.name()).or_default() += 1;
    }
    let mut terms: BTreeMap<u64, TermSeen> = BTreeMap::new();
    // (token, start, end) of accepted writes
    let mut accepted: Vec<(u64, u64, u64)> = Vec::new();
    for line in lines {
        let f: Vec<&str> = line.split_whitespace().collect();
        let num = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok());
        match (f.first().copied(), num(1), num(2), num(3)) {
            (Some("T"), Some(node), Some(token), Some(t)) => {
                let node = u32::try_from(node).unwrap_or(u32::MAX);
                let term = terms.entry(token).or_insert_with(|| TermSeen {
                    token,
                    nodes: Vec::new(),
                    first: t,
                    ticks: Vec::new(),
                });
                if !term.nodes.contains(&node) {
                    term.nodes.push(node);
                }
                term.first = term.first.min(t);
                term.ticks.push(t);
            }
            (Some("W"), Some(_), Some(token), Some(start)) => match (num(4), f.get(5).copied()) {
                (Some(end), Some("accepted")) => {
                    report.writes.0 += 1;
                    accepted.push((token, start, end));
                }
                (_, Some("refused")) => report.writes.1 += 1,
                _ => report.writes.2 += 1,
            },
            _ => {}
        }
    }
    report.terms = terms.len();

    // A token is won once, and terms begin in token order.
    let mut by_first: Vec<&TermSeen> = terms.values().collect();
    by_first.sort_by_key(|t| t.first);
    for t in &by_first {
        if t.nodes.len() > 1 {
            report
                .failures
                .push(format!("token {} was held by nodes {:?}", t.token, t.nodes));
        }
    }
    for w in by_first.windows(2) {
        if w[1].token < w[0].token {
            report.failures.push(format!(
                "token decrease: term {} began after term {}",
                w[1].token, w[0].token
            ));
        }
    }
    // The fenced resource saw tokens in non-decreasing order.
    for w in written.windows(2) {
        if w[1] < w[0] {
            report.failures.push(format!(
                "stale write accepted: token {} written after token {}",
                w[1], w[0]
            ));
            break;
        }
    }
    // No accepted write began after a later term's write had committed.
    let mut latest: Vec<(u64, u64)> = accepted.iter().map(|a| (a.2, a.0)).collect();
    latest.sort_unstable();
    for &(token, start, _) in &accepted {
        if let Some(&(end, higher)) = latest
            .iter()
            .take_while(|(end, _)| *end < start)
            .find(|(_, t)| *t > token)
        {
            report.failures.push(format!(
                "stale write accepted: token {token} began {:.0} ms after token {higher} had written",
                (start - end) as f64 / 1e6
            ));
            break;
        }
    }

    // Stale unfenced activity: ticks of a term after a later term's first tick.
    for t in terms.values() {
        let Some(next) = terms
            .range(t.token + 1..)
            .map(|(_, later)| later.first)
            .min()
        else {
            continue;
        };
        let stale: Vec<u64> = t.ticks.iter().copied().filter(|&x| x > next).collect();
        let Some(&first_stale) = stale.iter().min() else {
            continue;
        };
        let last_stale = stale.iter().copied().max().unwrap_or(first_stale);
        let node = t.nodes.first().copied().unwrap_or(u32::MAX);
        let fault = faults
            .iter()
            .filter(|f| f.node == node && f.start <= first_stale && f.kind != FaultKind::RestartDb)
            .max_by_key(|f| f.start);
        let kind = fault.map(|f| f.kind);
        let since_end = fault.map_or(0.0, |f| (first_stale as f64 - f.end as f64) / 1e6);
        let name = kind.map_or("none", FaultKind::name);
        let entry = report.stale.entry(name).or_default();
        entry.terms += 1;
        entry.ticks += stale.len();
        let span = Duration::from_nanos(last_stale - next);
        entry.max = entry.max.max(span);
        if unfenced || kind != Some(FaultKind::PauseNode) {
            report.failures.push(format!(
                "two valid terms overlap: token {} (node {node}, last fault: {name}, ended {since_end:.0} ms before) ticked for {:.0} ms after token {}'s first tick",
                t.token,
                span.as_secs_f64() * 1e3,
                terms.range(t.token + 1..).min_by_key(|(_, l)| l.first).map_or(0, |(k, _)| *k)
            ));
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> Vec<String> {
        text.lines().map(str::to_owned).collect()
    }

    #[test]
    fn a_clean_history_passes() {
        let l = lines("T 0 1 10\nW 0 1 11 12 accepted\nT 0 1 20\nT 1 2 30\nW 1 2 31 32 accepted\nW 0 1 33 34 refused\n");
        let r = check(&l, &[1, 2], &[], false);
        assert!(r.passed(), "{r:?}");
        assert_eq!(r.terms, 2);
        assert_eq!(r.writes, (2, 1, 0));
    }

    #[test]
    fn overlap_fails_unless_the_node_was_paused_whole() {
        let l = lines("T 0 1 10\nT 1 2 30\nT 0 1 40\n");
        assert!(
            !check(&l, &[], &[], false).passed(),
            "no fault: overlap fails"
        );
        let pause = Fault {
            kind: FaultKind::PauseNode,
            node: 0,
            start: 15,
            end: 35,
        };
        let r = check(&l, &[], &[pause], false);
        assert!(r.passed(), "{r:?}");
        assert_eq!(r.stale["pause-node"].ticks, 1);
        assert!(
            !check(&l, &[], &[pause], true).passed(),
            "the control tolerates nothing"
        );
        let simba = Fault {
            kind: FaultKind::PauseSimba,
            ..pause
        };
        assert!(!check(&l, &[], &[simba], false).passed());
    }

    #[test]
    fn stale_writes_and_token_decreases_fail() {
        assert!(!check(&[], &[1, 3, 2], &[], false).passed());
        let l = lines("W 1 2 10 11 accepted\nW 0 1 20 21 accepted\n");
        assert!(!check(&l, &[], &[], false).passed());
        let l = lines("T 0 2 10\nT 1 1 20\n");
        assert!(!check(&l, &[], &[], false).passed());
        let l = lines("T 0 2 10\nT 1 2 20\n");
        assert!(!check(&l, &[], &[], false).passed());
    }
}
