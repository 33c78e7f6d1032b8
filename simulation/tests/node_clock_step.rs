//! A node's monotonic clock jumping forward (a VM resumed): the node's
//! deadlines pass early, which only shortens its terms; no overlap.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
use common::*;
use simulation::params::FaultKind;
use std::time::Duration;

#[test]
fn forward_step_of_the_leaders_clock_is_safe() {
    let mut p = three_nodes();
    p.faults = vec![fault(
        10_000,
        0,
        FaultKind::NodeClockStep {
            node: 0,
            forward: Duration::from_secs(5),
        },
    )];
    let r = run_clean(p);
    assert_eq!(first_leader(&r), 0);
    // The fault had its effect: the leader's deadline passed at the step
    // (its clock read 5 s later at once, beyond the 3 s lease), not later.
    let at = Duration::from_secs(10);
    let ended = revocations(&r, 0, at, at + Duration::from_millis(1));
    println!("{:?}", r.revocations);
    assert_eq!(
        ended.iter().map(|(_, w)| w.as_str()).collect::<Vec<_>>(),
        ["DeadlinePassed"],
        "the clock step ended node 0's term at once"
    );
}
