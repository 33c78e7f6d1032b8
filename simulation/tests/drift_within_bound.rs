//! Drift within the bound (S2.1, S2.2): every node clock runs exactly
//! `1 − drift` of the backend's rate (the slow edge), the network is nearly
//! instant and the backend broadcasts expiries, so a successor acquires at
//! the very instant the backend expires the old leader: still no overlap.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
use common::*;
use simulation::params::{Direction, FaultKind};
use std::time::Duration;

#[test]
fn slow_edge_clocks_never_overlap_s2_2() {
    for (i, at) in [5_000u64, 7_777, 9_999, 12_345].into_iter().enumerate() {
        let mut p = three_nodes();
        p.seed = i as u64;
        p.faults = vec![fault(
            at,
            6_000,
            FaultKind::Partition {
                node: 0,
                direction: Direction::Both,
            },
        )];
        let r = run_clean(p);
        assert!(r.terms >= 2, "leadership moved");
        // The fault had its effect: another node took over while node 0 was
        // cut off, no later than one lease (3 s) plus one renewal interval
        // (1 s) after the partition began (node 0's last renewal came at
        // most one interval before it; the successor acquires at expiry).
        let at = Duration::from_millis(at);
        let (t, n) = takeover_after(&r, 0, at).expect("a takeover");
        println!("partition at {at:?}: node {n} took over at {t:?}");
        assert!(
            t <= at + Duration::from_secs(4) + Duration::from_millis(100),
            "took over at {t:?}, after partition at {at:?}"
        );
    }
}
