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
}
