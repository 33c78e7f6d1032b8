//! The backend restarts keeping its state (a persistent store): calls fail
//! while it is down, sessions keep their absolute expiry times, and no two
//! valid holders appear; leadership recovers after it comes back.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
use common::*;
use simulation::params::FaultKind;

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
    }
}
