//! Two-way and one-way partitions of the leader (S2.1, S2.2): the leader's
//! local deadline passes before the backend expires its session, so the
//! next leader's term never overlaps the old one (checked at every step).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
use common::*;
use simulation::params::{Direction, FaultKind};
use std::time::Duration;

fn partitioned(direction: Direction) {
    let mut p = three_nodes();
    p.faults = vec![fault(
        10_000,
        8_000,
        FaultKind::Partition { node: 0, direction },
    )];
    let r = run_clean(p);
    assert_eq!(first_leader(&r), 0);
    let (t, n) = takeover_after(&r, 0, Duration::from_secs(10)).expect("a takeover");
    println!("{direction:?}: node {n} took over at {t:?}");
    assert!(t <= Duration::from_secs(14));
}

#[test]
fn two_way_partition_of_the_leader_hands_over_safely_s2_2() {
    partitioned(Direction::Both);
}

#[test]
fn requests_lost_partition_of_the_leader_hands_over_safely_s2_2() {
    partitioned(Direction::ToBackend);
}

#[test]
fn replies_lost_partition_of_the_leader_hands_over_safely_s2_2() {
    partitioned(Direction::FromBackend);
}
