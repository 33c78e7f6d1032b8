//! S2.5: `drift` does not cover clock jumps. A forward step of the backend
//! clock expires sessions early while their holders still trust their local
//! deadlines: the simulation must show a mutual-exclusion violation, within
//! 20 seeds (measured: seed 0).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use simulation::runner::hunt;
use simulation::Mode;

#[test]
fn backend_clock_step_breaks_mutual_exclusion_s2_5() {
    let Some((seed, v)) = hunt(Mode::BackendClockStep, None, 0, 20) else {
        panic!("backend clock step not caught in 20 seeds");
    };
    println!("caught backend-clock-step at seed {seed}: {v}");
    assert_eq!(v.checker, "mutual exclusion");
}
