//! Voluntary handover order (S6.1, S6.2): `stop()` revokes, interrupts, and
//! releases only after the task exited or the deadline as of the revoke
//! passed; the next leader's task starts after that. A task that ignores its
//! interruption for longer delays the handover by at most that time. Also
//! `step_down` with a cooldown that ends while the handover still waits (an
//! engine bug found by the simulation, fixed on main in 847d6ef).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
use common::*;
use simulation::params::{ScriptCall, Scripted};
use std::time::Duration;

#[test]
fn stop_waits_for_a_slow_task_s6_1() {
    for exit_ms in [1, 500, 2_000, 6_000] {
        let mut p = three_nodes();
        p.workload.slow_exit_permille = 1_000;
        p.workload.slow_exit_max = Duration::from_millis(exit_ms);
        p.script.push(Scripted {
            at: Duration::from_secs(10),
            node: 0,
            call: ScriptCall::Stop(e0()),
        });
        let r = run_clean(p);
        assert!(takeover_after(&r, 0, Duration::from_secs(10)).is_some());
    }
}

#[test]
fn cooldown_ending_during_a_handover_is_no_engine_error_s6_4() {
    let mut p = three_nodes();
    p.workload.slow_exit_permille = 1_000;
    p.workload.slow_exit_max = Duration::from_millis(2_000);
    p.script.push(Scripted {
        at: Duration::from_secs(10),
        node: 0,
        call: ScriptCall::StepDown(e0(), Duration::from_millis(100)),
    });
    // No ERROR log ("a deadline did not move past now"), no violation.
    let r = run_clean(p);
    assert!(r.terms >= 2, "someone is elected after the step-down");
}
