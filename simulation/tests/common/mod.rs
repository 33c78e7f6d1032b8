//! Shared helpers of the scenario tests: a three-node cluster competing for
//! `e0` (node 0 starts first and wins), 3 s leases, drift 0.05 with node
//! clocks at the slow edge, and a fast network (see `params::scenario`).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use simba_core::LeaseName;
use simulation::params::{scenario, Fault, FaultKind, RunParams, ScriptCall, Scripted};
use simulation::{run_params, RunReport};
use std::time::Duration;

pub fn e0() -> LeaseName {
    LeaseName::new("e0").unwrap()
}

/// Three nodes start `e0` at 0, 100 and 200 ms: node 0 becomes leader.
pub fn three_nodes() -> RunParams {
    let mut p = scenario(1, 3);
    p.script = (0..3)
        .map(|i| Scripted {
            at: Duration::from_millis(100 * i as u64),
            node: i,
            call: ScriptCall::Start(e0()),
        })
        .collect();
    p
}

pub fn fault(at_ms: u64, dur_ms: u64, kind: FaultKind) -> Fault {
    Fault {
        at: Duration::from_millis(at_ms),
        duration: Duration::from_millis(dur_ms),
        kind,
    }
}

/// Runs and asserts that every checker passed.
pub fn run_clean(p: RunParams) -> RunReport {
    let r = run_params(p);
    assert!(r.violations.is_empty(), "violations: {:#?}", r.violations);
    r
}

/// The first election of `e0` by a node other than `node` after `after`.
pub fn takeover_after(r: &RunReport, node: usize, after: Duration) -> Option<(Duration, usize)> {
    r.elections
        .iter()
        .find(|(t, n, name, _)| *t >= after && *n != node && name.as_str() == "e0")
        .map(|(t, n, _, _)| (*t, *n))
}

/// Every revocation of `e0` on `node` in `[from, to]`, with its reason.
pub fn revocations(
    r: &RunReport,
    node: usize,
    from: Duration,
    to: Duration,
) -> Vec<(Duration, String)> {
    r.revocations
        .iter()
        .filter(|(t, n, name, _)| *n == node && name.as_str() == "e0" && *t >= from && *t <= to)
        .map(|(t, _, _, why)| (*t, why.clone()))
        .collect()
}

/// Who was elected first.
pub fn first_leader(r: &RunReport) -> usize {
    r.elections.first().map(|e| e.1).unwrap()
}
