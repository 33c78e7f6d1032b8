//! The group workload (S10): every node joins one group of 12 partitions,
//! each owned partition runs a task, under the default mode's faults
//! (crashes, partitions, pauses, restarts, slow and lossy links). Checkers:
//! mutual exclusion and the hand-over order per partition, and after the
//! faults heal, within the liveness bound (docs/FAULTS.md), every partition
//! owned by exactly one live member and max − min ≤ 1 ("group balance");
//! on every target a member computes, it keeps what it holds up to its
//! share ("group stickiness", S10.2).
//! Each checker is shown to fire on a mutant.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use simulation::core_api::Mutant;
use simulation::{group_workload, run_params};

#[test]
fn group_runs_pass_every_checker() {
    for seed in 0..60 {
        let report = run_params(group_workload(seed, 12, None));
        assert!(
            report.violations.is_empty(),
            "seed {seed}: {:?}",
            report.violations
        );
    }
}

/// The first seed (of at most `max`) whose run `m` breaks, and its checker.
fn caught(m: Mutant, checkers: &[&str], max: u64) {
    let found = (0..max).find_map(|seed| {
        let r = run_params(group_workload(seed, 12, Some(m)));
        r.violations.into_iter().next().map(|v| (seed, v))
    });
    let Some((seed, v)) = found else {
        panic!("mutant {} not caught within {max} seeds", m.name());
    };
    println!("caught {} at seed {seed}: {v}", m.name());
    assert!(
        checkers.iter().any(|c| v.checker.starts_with(c)),
        "{} caught by an unexpected checker: {v}",
        m.name()
    );
}

/// A moving partition released while its task still runs: the next
/// owner's task starts before the old one has stopped.
#[test]
fn partition_skips_handover_is_caught_s10_3() {
    caught(
        Mutant::PartitionSkipsHandover,
        &["handover order (S6.1)"],
        200,
    );
}

/// Members that target every partition never balance.
#[test]
fn group_ignores_share_is_caught_s10_4() {
    caught(Mutant::GroupIgnoresShare, &["group balance (S10.4)"], 200);
}

/// Members that take the assignment of the membership alone give up
/// partitions they hold within their share when the membership changes.
#[test]
fn group_not_sticky_is_caught_s10_2() {
    caught(Mutant::GroupNotSticky, &["group stickiness (S10.2)"], 200);
}
