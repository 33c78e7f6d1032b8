//! Property tests over fault schedules. A strategy draws a schedule of up to
//! six faults (partitions, pauses, crashes, node clock steps, backend
//! restarts keeping state, slow backend) for the three-node scenario;
//! proptest shrinks a failing schedule to a minimal one.
//!
//! 1. The correct engine passes every schedule (few cases in CI).
//! 2. With a broken core (drift factor ignored), proptest finds a failing
//!    schedule and shrinks it to at most two faults — a long partition of
//!    the leader is all it takes.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
use common::*;
use proptest::prelude::*;
use proptest::test_runner::{
    Config, FileFailurePersistence, RngAlgorithm, TestError, TestRng, TestRunner,
};
use simulation::core_api::Mutant;
use simulation::params::{Direction, Fault, FaultKind};
use simulation::run_params;
use std::time::Duration;

fn kind() -> impl Strategy<Value = FaultKind> {
    let node = 0usize..3;
    prop_oneof![
        (
            node.clone(),
            prop_oneof![
                Just(Direction::ToBackend),
                Just(Direction::FromBackend),
                Just(Direction::Both)
            ]
        )
            .prop_map(|(node, direction)| FaultKind::Partition { node, direction }),
        (node.clone(), any::<bool>())
            .prop_map(|(node, after_send)| FaultKind::Pause { node, after_send }),
        node.clone().prop_map(|node| FaultKind::Crash { node }),
        (node, 1u64..5_000).prop_map(|(node, ms)| FaultKind::NodeClockStep {
            node,
            forward: Duration::from_millis(ms)
        }),
        Just(FaultKind::BackendRestart { keep_state: true }),
        (1u64..1_000).prop_map(|ms| FaultKind::SlowBackend {
            extra: Duration::from_millis(ms)
        }),
    ]
}

/// A fault schedule: up to six faults in the first 50 s, each lasting
/// between its minimum (10 ms) and 10 s; sorted by start.
fn schedule() -> impl Strategy<Value = Vec<Fault>> {
    prop::collection::vec((0u64..50_000, 10u64..10_000, kind()), 0..6).prop_map(|v| {
        let mut faults: Vec<Fault> = v
            .into_iter()
            .map(|(at, dur, kind)| {
                let dur = if matches!(kind, FaultKind::NodeClockStep { .. }) {
                    0
                } else {
                    dur
                };
                fault(at, dur, kind)
            })
            .collect();
        faults.sort_by_key(|f| f.at);
        faults
    })
}

proptest! {
    #![proptest_config(Config {
        cases: 16,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "proptest-regressions/proptest_schedules.txt"
        ))),
        ..Config::default()
    })]

    #[test]
    fn any_schedule_within_the_assumptions_passes(faults in schedule()) {
        let mut p = three_nodes();
        p.faults = faults;
        let r = run_params(p);
        prop_assert!(r.violations.is_empty(), "{:#?}", r.violations);
    }
}

#[test]
fn a_failing_schedule_shrinks_to_a_minimal_one() {
    let config = Config {
        cases: 256,
        failure_persistence: None,
        ..Config::default()
    };
    let mut runner =
        TestRunner::new_with_rng(config, TestRng::deterministic_rng(RngAlgorithm::ChaCha));
    let result = runner.run(&schedule(), |faults| {
        let mut p = three_nodes();
        p.mutant = Some(Mutant::IgnoreDrift);
        p.faults = faults;
        let r = run_params(p);
        prop_assert!(r.violations.is_empty(), "{}", r.violations[0]);
        Ok(())
    });
    match result {
        Err(TestError::Fail(why, minimal)) => {
            println!("minimal failing schedule: {minimal:#?}\n{why}");
            assert!(minimal.len() <= 2, "not shrunk: {minimal:#?}");
        }
        other => panic!("ignore-drift survived 256 schedules: {other:?}"),
    }
}
