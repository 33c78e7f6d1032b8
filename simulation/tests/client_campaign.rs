//! The client campaign (`simulation::client`): the real `Simba` client on
//! three nodes under `simba-sim`, workloads and faults drawn per seed.
//! Correct code passes; every client mutant (`simba-client`'s `mutants`
//! feature, `ClientMutant::ALL`) is caught within a few hundred seeds, and
//! by the checker of the rule it breaks: a checker that never fires proves
//! nothing. The seeds each needed are printed (`--nocapture`);
//! `docs/SIMULATION.md` has how many of seeds 0–999 catch each.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use simba_client::{ClientMutant, TaskExitPolicy};
use simulation::client::{checker_of, count, draw, hunt, node_run, run, sim, Broken, Workloads};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Seeds a mutant must be caught within (CI has two cores: keep it modest).
const LIMIT: u64 = 300;

/// The checker that must see each mutant first. Exhaustive: a new mutant
/// does not compile until it is listed here.
fn checker(m: ClientMutant) -> &'static str {
    match m {
        ClientMutant::TaskStartsBeforeStop | ClientMutant::PartitionStartsBeforeStop => {
            "handover order (S6.1, S10.3)"
        }
        ClientMutant::RevocationNotDelivered => "revocation delivered (S3.4, S6.3)",
        ClientMutant::SlotClaimedAfterRun => "slot at most once (S11.1)",
    }
}

fn caught(m: ClientMutant) {
    let found = hunt(Some(Broken::Client(m)), 0, LIMIT, 2).unwrap();
    let Some((seed, what)) = found else {
        panic!("client mutant {} not caught within {LIMIT} seeds", m.name());
    };
    println!(
        "caught {} at seed {seed} ({} seeds): {what}\n  workloads: {}",
        m.name(),
        seed + 1,
        draw(seed)
    );
    assert_eq!(
        checker_of(&what),
        checker(m),
        "{} caught by an unexpected checker: {what}",
        m.name()
    );
}

#[test]
fn s6_1_task_starts_before_stop_is_caught_by_the_handover_order_checker() {
    caught(ClientMutant::TaskStartsBeforeStop);
}

#[test]
fn s6_3_revocation_not_delivered_is_caught_by_the_revocation_checker() {
    caught(ClientMutant::RevocationNotDelivered);
}

#[test]
fn s11_1_slot_claimed_after_run_is_caught_by_the_slot_checker() {
    caught(ClientMutant::SlotClaimedAfterRun);
}

#[test]
fn s10_3_partition_starts_before_stop_is_caught_by_the_handover_order_checker() {
    caught(ClientMutant::PartitionStartsBeforeStop);
}

#[test]
fn every_client_mutant_has_a_test_above() {
    // `checker` is exhaustive; this keeps the list of tests honest.
    assert_eq!(ClientMutant::ALL.len(), 4);
    for m in ClientMutant::ALL {
        assert_eq!(Broken::from_name(m.name()), Some(Broken::Client(m)));
    }
}

#[test]
fn correct_client_passes_the_campaign() {
    let summary = run(None, 0, 60, 2).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(summary.seeds, 60);
}

#[test]
fn s3_3_the_term_validity_checker_fires_on_an_engine_reusing_tokens() {
    // No client mutant breaks S3.3 alone. The engine's
    // `skip-released-token-check` (S4.3) makes a term of a token at most
    // one it released: a node then holds a valid term while a later one
    // has started (seeds 0-199: 10 seeds first by this checker, 68 by the
    // revocation checker, which the reused token confuses; the validity
    // checker runs first at each step, since a valid term is the fault).
    let m = simba_core::Mutant::SkipReleasedTokenCheck;
    let by = count(Some(Broken::Core(m)), 0, 200, 2).unwrap();
    println!("{}: {by:?}", m.name());
    assert!(by.contains_key("term validity (S3.3)"), "{by:?}");
}

/// Blocking leader tasks (`run_blocking_while_leader`) run through the
/// real client's blocking path under the campaign's faults, under both
/// exit policies the campaign draws (S6.5): terms move between nodes, the
/// tasks' fenced writes land, and every checker passes.
#[test]
fn s6_5_blocking_leader_tasks_run_under_the_campaign() {
    for policy in [TaskExitPolicy::GiveUpTerm, TaskExitPolicy::KeepTerm] {
        let tokens: Arc<Mutex<BTreeSet<u64>>> = Arc::default();
        let seen = tokens.clone();
        let w = Workloads {
            elections: 0,
            exits: false,
            blocking: Some(policy),
            locks: false,
            schedule: None,
            group: None,
            finish: Duration::from_millis(200),
            moves: Duration::from_secs(4),
        };
        let summary = sim(None, 2)
            .invariant("blocking writes seen", move |world| {
                let mut t = seen.lock().unwrap_or_else(|p| p.into_inner());
                for write in world.register_history("blocking") {
                    if write.accepted && write.value.contains(":b") {
                        let _ = t.insert(write.fence.token());
                    }
                }
                Ok(())
            })
            .run(0..20, move |node| node_run(node, w.clone()))
            .unwrap_or_else(|e| panic!("{policy:?}: {e}"));
        let terms = tokens.lock().unwrap().len();
        println!("{policy:?}: {} seeds, {terms} terms wrote", summary.seeds);
        // Measured: 79 terms (GiveUpTerm) and 14 (KeepTerm: a term ends only when
        // lost or stepped down) over seeds 0-19.
        assert!(
            terms >= 10,
            "{policy:?}: blocking tasks wrote in {terms} terms"
        );
    }
}
