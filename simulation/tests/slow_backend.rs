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
    // Replies up to 1 s late within a 3 s lease renewed every second: the
    // leader keeps its term (nothing to assert beyond "no checker fired";
    // the next test shows the fault ending a term once replies pass the
    // call timeout).
    println!("revocations {:?}", r.revocations);
}

/// S2.4: replies 2.5 s late (beyond the 1 s call timeout, one renewal
/// period) time out, so the leader's renewals all fail and its term ends
/// with `DeadlinePassed` during the slow period: the fault has its effect,
/// and still no checker fires.
#[test]
fn replies_later_than_the_call_timeout_end_the_term_s2_4() {
    let mut p = three_nodes();
    p.faults = vec![fault(
        5_000,
        20_000,
        FaultKind::SlowBackend {
            extra: Duration::from_millis(2_500),
        },
    )];
    let r = run_clean(p);
    println!("revocations {:?}", r.revocations);
    let ended = revocations(&r, 0, Duration::from_secs(5), Duration::from_secs(25));
    assert!(
        ended.iter().any(|(_, why)| why == "DeadlinePassed"),
        "the slow backend never ended node 0's term: {ended:?}"
    );
}
