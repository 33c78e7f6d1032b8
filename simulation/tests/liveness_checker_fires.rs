//! A checker that never fired proves nothing: the liveness checker reports a
//! name without a leader when the bound is too short for the fail-over (the
//! leader crashes just before healing; its session must first expire), and
//! stays quiet with the derived bound.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
use common::*;
use simulation::params::FaultKind;
use simulation::run_params;
use std::time::Duration;

fn leader_crashes_before_healing() -> simulation::RunParams {
    let mut p = three_nodes();
    p.safety_phase = Duration::from_secs(20);
    p.faults = vec![fault(19_900, 60_000, FaultKind::Crash { node: 0 })];
    p
}

#[test]
fn a_too_short_bound_is_reported() {
    let mut p = leader_crashes_before_healing();
    p.liveness_override = Some(Duration::from_millis(500));
    let r = run_params(p);
    let v = r.violations.first().expect("the liveness checker fired");
    assert_eq!(v.checker, "liveness", "{v}");
}

#[test]
fn the_derived_bound_holds() {
    let r = run_clean(leader_crashes_before_healing());
    let t = r.max_time_to_leader.expect("a leader after healing");
    println!("leader {t:?} after healing; bound {:?}", r.liveness_bound);
    assert!(
        t > Duration::from_millis(500),
        "the crashed leader's session had to expire"
    );
}
