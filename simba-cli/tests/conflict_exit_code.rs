//! `--conflict-exit-code N` (like `flock -E`): the status of a lease that
//! could not be obtained, chosen so that it cannot collide with the
//! command's own.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::*;
use std::time::Duration;

#[test]
fn lock_not_acquired_within_wait_exits_with_the_conflict_exit_code() {
    let b = TestBackend::sqlite();
    let name = unique("conflict");
    let mark = b.path("holder");
    let mut holder = spawn_lock_holder(&b, &name, &mark);

    let out = b
        .simba()
        .args([
            "lock",
            &name,
            "--wait",
            "500ms",
            "--conflict-exit-code",
            "9",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(9), "{stderr}");
    assert!(stderr.contains("not acquired"), "{stderr}");

    stop_cleanly(&mut holder, Duration::from_secs(30));

    // Once free, the command runs and its own status (here 75) is mirrored.
    let out = b
        .simba()
        .args([
            "lock",
            &name,
            "--conflict-exit-code",
            "9",
            "--",
            "sh",
            "-c",
            "exit 75",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(75));
}

#[test]
fn run_and_lock_on_an_unreachable_backend_exit_with_the_conflict_exit_code() {
    for cmd in ["run", "lock"] {
        let out = simba()
            .args([
                "--backend",
                "postgres://127.0.0.1:1/x",
                cmd,
                "--fail-fast",
                "--conflict-exit-code",
                "200",
                &unique("down"),
                "--",
                "true",
            ])
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(200),
            "{cmd}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn a_conflict_exit_code_outside_1_to_255_is_a_usage_error() {
    for bad in ["0", "256", "-1", "x"] {
        for cmd in ["run", "lock"] {
            let out = simba()
                .args([cmd, "--conflict-exit-code", bad, "n", "--", "true"])
                .output()
                .unwrap();
            assert_eq!(
                out.status.code(),
                Some(2),
                "{cmd} --conflict-exit-code {bad}"
            );
        }
    }
}
