//! S11.1: leader-only schedules under the drawn faults (crashes, partitions,
//! pauses, lossy and slow networks, clock drift, backend restarts): the slots
//! of a schedule run in strictly increasing order across leaders, so no slot
//! ever runs twice, and a slot runs only on a valid term. The same workload
//! with the `skip_claim` mutant (each slot run without claiming it in the
//! backend) is caught. Figures are printed (`--nocapture`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use simulation::params::ScheduleWorkload;
use simulation::{draw, run_params, Mode, RunParams};

const SEEDS: u64 = 40;

fn scheduled(seed: u64, skip_claim: bool) -> RunParams {
    let mut p = draw(seed, Mode::Default, None);
    p.workload.schedule = Some(ScheduleWorkload {
        period: p.renew_interval,
        run: p.renew_interval / 3,
        run_once: seed % 2 == 0,
        skip_claim,
        max_skew: p.renew_interval / 2,
    });
    p
}

#[test]
fn scheduled_slots_run_at_most_once_in_order_under_faults_s11_1() {
    let (mut runs, mut claimed, mut already, mut terms) = (0, 0, 0, 0);
    for seed in 0..SEEDS {
        let r = run_params(scheduled(seed, false));
        assert!(r.violations.is_empty(), "seed {seed}: {:#?}", r.violations);
        runs += r.scheduled_runs;
        claimed += r.slots_claimed;
        already += r.slots_already_claimed;
        terms += r.terms;
    }
    println!(
        "{SEEDS} seeds: {runs} scheduled runs ({claimed} claimed), {already} claims answered AlreadyClaimed, {terms} terms"
    );
    assert_eq!(runs, claimed, "every run was claimed first");
    assert!(runs > 200, "the workload ran: {runs}");
    assert!(
        already > 0,
        "leaders met slots their predecessors had claimed"
    );
}

#[test]
fn a_schedule_that_skips_the_claim_is_caught_s11_1() {
    let mut caught = Vec::new();
    for seed in 0..SEEDS {
        let r = run_params(scheduled(seed, true));
        if let Some(v) = r
            .violations
            .iter()
            .find(|v| v.checker.starts_with("schedule slots"))
        {
            caught.push((seed, v.clone()));
        }
    }
    println!(
        "skip-claim mutant caught on {} of {SEEDS} seeds; first: {:?}",
        caught.len(),
        caught.first()
    );
    assert!(
        caught.len() * 4 >= SEEDS as usize,
        "the checker fires on the mutant often: {} of {SEEDS}",
        caught.len()
    );
}

#[test]
fn the_schedule_workload_replays_from_its_seed() {
    let a = run_params(scheduled(3, false));
    let b = run_params(scheduled(3, false));
    assert_eq!(a.trace_hash, b.trace_hash);
    assert_eq!(a.scheduled_runs, b.scheduled_runs);
}
