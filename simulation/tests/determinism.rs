//! The seed picks everything: the same seed twice gives the same trace hash
//! (and different seeds different ones), so any failure replays with `--seed`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use simulation::{run_seed, Mode};

#[test]
fn same_seed_same_trace_hash() {
    for seed in [0, 1, 42, 1_000_003] {
        let a = run_seed(seed, Mode::Default, None);
        let b = run_seed(seed, Mode::Default, None);
        assert_eq!(a.trace_hash, b.trace_hash, "seed {seed} diverged");
        assert_eq!(a.steps, b.steps);
        assert!(a.steps > 100, "seed {seed} did something");
    }
}

#[test]
fn different_seeds_differ() {
    let a = run_seed(5, Mode::Default, None);
    let b = run_seed(6, Mode::Default, None);
    assert_ne!(a.trace_hash, b.trace_hash);
}
