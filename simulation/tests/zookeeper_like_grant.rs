//! A ZooKeeper-like backend (S8.4, S8.5): it grants less than the requested
//! lease (`maxSessionTimeout`) and one renewal proves only 5/12 of it. The
//! engine publishes one `SessionLeaseShortened` per session, renews faster,
//! and mutual exclusion holds through a leader partition.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
use common::*;
use simulation::params::{Direction, FaultKind};
use std::time::Duration;

#[test]
fn shortened_grants_are_announced_once_and_stay_safe_s8_4() {
    let mut p = three_nodes();
    p.zk_like = true;
    p.backend.max_grant = Some(Duration::from_secs(2));
    p.margin = Duration::from_millis(2);
    p.faults = vec![fault(
        10_000,
        6_000,
        FaultKind::Partition {
            node: 0,
            direction: Direction::Both,
        },
    )];
    let r = run_clean(p);
    assert!(r.leases_shortened >= 3, "each node's session announced it");
    assert!(takeover_after(&r, 0, Duration::from_secs(10)).is_some());
}
