//! The command-line interface other checks rely on: `--seed S` replays a
//! seed exactly (same trace hash twice), `--seeds N` ends with
//! `violations: V` and exits non-zero iff V > 0, `--mutant list` lists the
//! broken cores, `--mutant NAME` exits 0 iff caught, bad arguments give a
//! clear error.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::{Command, Output};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_simulation"))
        .args(args)
        .output()
        .unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn hash_line(o: &Output) -> String {
    stdout(o)
        .lines()
        .find(|l| l.starts_with("trace hash:"))
        .unwrap()
        .to_owned()
}

#[test]
fn a_seed_replays_with_the_same_trace_hash() {
    let a = run(&["--seed", "17"]);
    let b = run(&["--seed", "17"]);
    assert!(a.status.success(), "{}", stdout(&a));
    assert_eq!(hash_line(&a), hash_line(&b));
    assert!(
        stdout(&a).contains("lease_duration"),
        "prints the drawn parameters"
    );
}

#[test]
fn seeds_end_with_the_violation_count() {
    let o = run(&["--seeds", "5", "--first-seed", "100"]);
    assert!(o.status.success());
    let out = stdout(&o);
    assert_eq!(out.lines().last(), Some("violations: 0"));
    assert!(out.contains("simulated hours:") && out.contains("faults by kind:"));
}

#[test]
fn mutants_are_listed_and_caught() {
    let o = run(&["--mutant", "list"]);
    assert!(stdout(&o).lines().any(|l| l == "ignore-drift"));
    let o = run(&["--mutant", "release-before-revoke", "--seeds", "50"]);
    assert!(o.status.success());
    assert!(stdout(&o).starts_with("caught release-before-revoke at seed "));
}

#[test]
fn bad_arguments_are_clear_errors() {
    let o = run(&["--mutant", "no-such-thing", "--seeds", "1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown mutant"));
    let o = run(&["--seeds", "0"]);
    assert!(!o.status.success());
    let o = run(&["--seeds", "x"]);
    assert!(!o.status.success());
}
