//! Crash of the leader (S1.2, S8.2): the backend expires its session one
//! lease after its last renewal and broadcasts the expiry; another node takes
//! over within `lease_duration + renew_interval`, with no two valid holders.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
use common::*;
use simulation::params::FaultKind;
use std::time::Duration;

#[test]
fn leader_crash_fails_over_within_a_lease_s8_2() {
    let mut p = three_nodes();
    p.faults = vec![fault(10_000, 5_000, FaultKind::Crash { node: 0 })];
    let r = run_clean(p);
    assert_eq!(first_leader(&r), 0);
    let (t, n) = takeover_after(&r, 0, Duration::from_secs(10)).expect("a takeover");
    println!("node {n} took over at {t:?}");
    assert!(t <= Duration::from_secs(10) + Duration::from_secs(3) + Duration::from_secs(1));
}
