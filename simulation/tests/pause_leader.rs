//! A leader paused for several lease durations (GC pause, SIGSTOP; S3.3):
//! the others take over once its session expires; when it wakes, its term
//! reads invalid on the first check and it never overlaps the new leader.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
use common::*;
use simulation::params::FaultKind;
use std::time::Duration;

#[test]
fn paused_leader_is_replaced_and_wakes_invalid_s3_3() {
    let mut p = three_nodes();
    p.faults = vec![fault(
        10_000,
        9_000,
        FaultKind::Pause {
            node: 0,
            after_send: false,
        },
    )];
    let r = run_clean(p);
    assert_eq!(first_leader(&r), 0);
    let (t, n) = takeover_after(&r, 0, Duration::from_secs(10)).expect("a takeover");
    println!("node {n} took over at {t:?}");
    assert!(t < Duration::from_secs(19), "taken over during the pause");
}
