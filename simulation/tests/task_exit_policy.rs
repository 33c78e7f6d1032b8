//! S6.5: a leader task that panics gives up its term at once (the default
//! policy), so no node holds a lease with nothing running; the election
//! steps down for a back-off and another node takes over. The simulation's
//! "task-exit policy" checker fires on the mutant that keeps the term.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
use common::*;
use simulation::core_api::Mutant;
use simulation::run_params;

fn crashing(mutant: Option<Mutant>) -> simulation::params::RunParams {
    let mut p = three_nodes();
    p.workload.task_crash_permille = 1_000;
    p.mutant = mutant;
    p
}

#[test]
fn panicking_tasks_give_up_their_terms_s6_5() {
    let r = run_clean(crashing(None));
    // Every term's task panics, so leadership keeps moving between nodes.
    assert!(r.terms >= 3, "terms: {}", r.terms);
    let leaders: std::collections::BTreeSet<usize> = r.elections.iter().map(|e| e.1).collect();
    assert!(leaders.len() >= 2, "a crash-looping job moves: {leaders:?}");
}

#[test]
fn keeping_the_term_after_a_panic_is_caught_s6_5() {
    let r = run_params(crashing(Some(Mutant::KeepTermAfterPanic)));
    let v = r
        .violations
        .first()
        .unwrap_or_else(|| panic!("the mutant was not caught"));
    assert!(v.checker.starts_with("task-exit policy"), "{v}");
    println!("caught keep-term-after-panic: {v}");
}
