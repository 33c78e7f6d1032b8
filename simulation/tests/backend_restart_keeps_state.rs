//! The backend restarts keeping its state (a persistent store): calls fail
//! while it is down, sessions keep their absolute expiry times, and no two
//! valid holders appear; leadership recovers after it comes back.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
use common::*;
use simulation::params::FaultKind;
use std::time::Duration;

#[test]
fn backend_restart_with_state_is_safe() {
    for down_ms in [200, 2_000, 5_000] {
        let mut p = three_nodes();
        p.faults = vec![fault(
            10_000,
            down_ms,
            FaultKind::BackendRestart { keep_state: true },
        )];
        let r = run_clean(p);
        assert!(r.terms >= 1);
        println!(
            "down {down_ms} ms: revocations {:?} warnings {} lost {} shortened {}",
            r.revocations, r.warnings, r.messages_lost, r.leases_shortened
        );
        let from = Duration::from_secs(10);
        let to = from + Duration::from_millis(down_ms) + Duration::from_secs(3);
        let ended = revocations(&r, 0, from, to);
        if down_ms >= 5_000 {
            // Down longer than a lease: the leader's term ended during the
            // outage (its deadline passed), and a term began after it.
            assert!(!ended.is_empty(), "a 5 s outage did not end the 3 s term");
            assert!(
                r.elections.iter().any(|e| e.0 > from),
                "no term after the outage"
            );
        } else {
            // Shorter than the lease minus a renewal interval: the leader
            // keeps its term through the outage (sessions keep their expiry).
            assert!(
                ended.is_empty(),
                "a {down_ms} ms outage ended the term: {ended:?}"
            );
        }
    }
}
