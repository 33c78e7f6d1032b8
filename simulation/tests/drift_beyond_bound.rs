//! S2.2 holds only while clock rates differ by at most `1 ± drift`: node
//! clocks 2–4 × `drift` slower than the backend's must produce a
//! mutual-exclusion violation, within 20 seeds (measured: seed 0).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use simulation::runner::hunt;
use simulation::Mode;

#[test]
fn drift_beyond_the_bound_breaks_mutual_exclusion_s2_2() {
    let found = hunt(Mode::DriftBeyondBound, None, 0, 20);
    let Some((seed, v)) = found else {
        panic!("drift beyond the bound not caught in 20 seeds");
    };
    println!("caught drift-beyond-bound at seed {seed}: {v}");
    assert_eq!(v.checker, "mutual exclusion");
}
