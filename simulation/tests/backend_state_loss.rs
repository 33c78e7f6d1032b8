//! A backend that restarts losing its state (Redis without persistence)
//! forgets sessions, leases and token counters: tokens restart at 1 and a
//! second holder appears while the first still trusts its deadline. This is
//! outside Simba's guarantees; the simulation must show it within 20 seeds.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use simulation::runner::hunt;
use simulation::Mode;

#[test]
fn backend_losing_state_breaks_fencing_or_mutual_exclusion() {
    let Some((seed, v)) = hunt(Mode::BackendStateLoss, None, 0, 20) else {
        panic!("backend state loss not caught in 20 seeds");
    };
    println!("caught backend-state-loss at seed {seed}: {v}");
    assert!(
        v.checker.starts_with("fencing") || v.checker == "mutual exclusion",
        "{v}"
    );
    assert!(seed < 20);
}

/// The fenced-register checker fires on its own: in a normal run the token
/// checker stops the run first (a stale acceptance needs a token out of
/// election order), so the run is continued past every violation
/// (`keep_going`) and the fenced register's own report is looked for. After
/// the backend forgets its token counters, an old and a new term can carry
/// the same token: the register cannot tell them apart and accepts the
/// older term's write after the newer one's.
#[test]
fn the_fenced_register_checker_fires_on_its_own_when_tokens_restart() {
    let mut looked = 0;
    let found = (0..200u64).find_map(|seed| {
        looked += 1;
        let r = simulation::run_seed_keep_going(seed, Mode::BackendStateLoss, None);
        let v = r
            .violations
            .iter()
            .find(|v| v.checker == "fenced register")
            .cloned()?;
        Some((seed, r, v))
    });
    let Some((seed, r, v)) = found else {
        panic!("the fenced register never accepted a stale write in {looked} seeds");
    };
    println!("seed {seed}: {v}");
    assert!(r.fenced_stale_accepted >= 1);
    // And without keep_going the same seed stops at an earlier checker:
    // the run ends with the first step that broke a rule (several checkers
    // may report that one step), and the fenced register is not among them.
    let first = simulation::run_seed(seed, Mode::BackendStateLoss, None);
    println!("seed {seed} without keep_going: {:?}", first.violations);
    let Some(at) = first.violations.first().map(|v| v.at) else {
        panic!("seed {seed} without keep_going found nothing");
    };
    assert!(first.violations.iter().all(|v| v.at == at), "one step");
    assert!(
        first
            .violations
            .iter()
            .all(|v| v.checker != "fenced register"),
        "{:?}",
        first.violations
    );
}
