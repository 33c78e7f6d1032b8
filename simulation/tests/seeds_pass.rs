//! The main randomized test: 4,000 seeds of the default mode (faults within
//! Simba's assumptions: partitions, pauses, crashes, node clock steps,
//! backend restarts keeping state, slow backend, delayed grants, loss,
//! duplication, long-tail delays) pass every checker, including liveness
//! after healing.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use simulation::{runner::run_many, Mode};

#[test]
fn four_thousand_seeds_pass_every_checker() {
    let summary = run_many(Mode::Default, 0, 4_000, 2);
    println!("{summary}");
    assert_eq!(summary.seeds, 4_000);
    assert!(summary.terms > 10_000, "the workload elects leaders");
    assert_eq!(summary.violations(), 0, "{summary}");
}
