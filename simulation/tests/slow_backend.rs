//! A slow backend (replies up to one renewal interval late; S2.1, S2.4):
//! deadlines count from the send, so slow replies only shorten them; calls
//! time out after one renewal period; no overlap.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
use common::*;
use simulation::params::FaultKind;
use std::time::Duration;

#[test]
fn slow_backend_replies_only_shorten_deadlines_s2_4() {
    let mut p = three_nodes();
    p.faults = vec![fault(
        5_000,
        20_000,
        FaultKind::SlowBackend {
            extra: Duration::from_millis(1_000),
        },
    )];
    let r = run_clean(p);
    assert!(r.terms >= 1);
    println!(
        "revocations {:?}\nelections {:?}",
        r.revocations, r.elections
    );
    // The fault had its effect: replies 1 s late hit the 1 s call timeout
    // (S2.4), so the leader's renewals failed and its term ended during the
    // slow period.
    let ended = revocations(&r, 0, Duration::from_secs(5), Duration::from_secs(25));
    assert!(
        !ended.is_empty(),
        "the slow backend never ended node 0's term: the fault had no effect"
    );
}
