//! Every user or backend error: one clear line on stderr, a distinct
//! documented exit code, no credentials, no panic.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::*;
use std::process::Output;

fn one_line_error(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(stderr.lines().count(), 1, "one line on stderr: {stderr:?}");
    assert!(stderr.starts_with("simba: error:"), "{stderr:?}");
    assert!(!stderr.contains("panicked"), "{stderr:?}");
    stderr
}

/// Runs `cmd`; it exits `code` with one clear error line, which it returns.
fn fails_with(cmd: &mut std::process::Command, code: i32) -> String {
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(code));
    one_line_error(&out)
}

#[test]
fn a_bad_url_exits_78_without_its_password() {
    let line = fails_with(
        simba().args(["--backend", "ftp://admin:hunter2@db/x", "status"]),
        78,
    );
    assert!(!line.contains("hunter2"), "{line}");
}

#[test]
fn a_url_with_a_bad_port_says_so_and_exits_78() {
    let line = fails_with(
        simba().args(["--backend", "redis://u:hunter2@127.0.0.1:99999/", "status"]),
        78,
    );
    assert!(line.contains("port 99999 is out of range"), "{line}");
    assert!(!line.contains("hunter2"), "{line}");
}

#[test]
fn an_unreachable_backend_exits_69_without_its_password() {
    let line = fails_with(
        simba().args([
            "--backend",
            "postgres://admin:hunter2@127.0.0.1:1/x",
            "status",
        ]),
        69,
    );
    assert!(!line.contains("hunter2"), "{line}");
}

#[test]
fn an_invalid_name_exits_65_before_any_io() {
    // The backend is unreachable: the name is refused before connecting (S3.1).
    let line = fails_with(
        simba().args([
            "--backend",
            "postgres://127.0.0.1:1/x",
            "run",
            "a/b",
            "--",
            "true",
        ]),
        65,
    );
    assert!(line.contains("invalid lease name"), "{line}");
}

#[test]
fn settings_that_break_s8_1_exit_65() {
    let b = TestBackend::sqlite();
    fails_with(
        b.simba().args([
            "--lease-duration",
            "3s",
            "--renew-interval",
            "2s",
            "run",
            "x",
            "--",
            "true",
        ]),
        65,
    );
    fails_with(
        b.simba()
            .env("SIMBA_SESSION_LEASE_DURATION", "soon")
            .args(["lock", "x", "--", "true"]),
        65,
    );
}

#[test]
fn a_missing_config_file_exits_78() {
    fails_with(
        simba().args(["--config", "/nonexistent/simba.toml", "status"]),
        78,
    );
}

#[test]
fn a_command_that_does_not_exist_exits_127() {
    let b = TestBackend::sqlite();
    fails_with(
        b.simba()
            .args(["lock", &unique("nf"), "--", "simba-no-such-command-xyz"]),
        127,
    );
}

/// Issue 18: `simba lock --wait` on a backend that cannot be reached
/// retries with back-off for the wait, says so once (not once per attempt),
/// then exits 69; `--fail-fast` exits 69 at once.
#[test]
fn an_unreachable_backend_is_retried_until_the_wait_unless_fail_fast() {
    let url = "postgres://admin:hunter2@127.0.0.1:1/x";
    let t0 = std::time::Instant::now();
    let out = simba()
        .args([
            "--backend",
            url,
            "lock",
            "--wait",
            "2s",
            "retried",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    let took = t0.elapsed();
    assert_eq!(out.status.code(), Some(69));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr.matches("cannot connect").count(),
        1,
        "said once per state change: {stderr}"
    );
    assert!(!stderr.contains("hunter2"), "{stderr}");
    assert!(
        took >= std::time::Duration::from_millis(1500),
        "gave up after {took:?}, before the wait"
    );
    eprintln!("lock --wait 2s on an unreachable backend: exit 69 after {took:?}");
    let t0 = std::time::Instant::now();
    fails_with(
        simba().args([
            "--backend",
            url,
            "lock",
            "--fail-fast",
            "retried",
            "--",
            "true",
        ]),
        69,
    );
    assert!(t0.elapsed() < std::time::Duration::from_secs(5));
}

#[test]
fn help_documents_the_exit_codes() {
    let out = simba().arg("--help").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let help = String::from_utf8_lossy(&out.stdout);
    for code in ["65", "69", "75", "78", "127"] {
        assert!(help.contains(code), "exit code {code} missing from --help");
    }
}

#[test]
fn usage_errors_exit_2() {
    let out = simba().args(["run", "x"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// A malformed duration argument is a usage error (exit 2), like any other
/// bad argument, and names the argument.
#[test]
fn malformed_duration_arguments_exit_2() {
    for args in [
        &["lock", "--wait", "xyz", "n", "--", "true"][..],
        &["run", "--grace", "abc", "n", "--", "true"][..],
        &["watch", "--interval", "often"][..],
    ] {
        let out = simba().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(args[1]), "{args:?}: {stderr}");
    }
}

/// Read-only commands create nothing: `simba status` on a SQLite path where
/// nothing has run leaves no file behind, and says so in the CLI's words.
#[test]
fn status_on_a_fresh_sqlite_path_creates_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("never.db");
    let url = format!("sqlite://{}", db.display());
    let out = simba()
        .args(["--backend", &url, "status"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(69), "{out:?}");
    let line = one_line_error(&out);
    assert!(line.contains("simba migrate"), "{line}");
    assert!(!line.contains("migrate()"), "speaks library: {line}");
    assert!(!db.exists(), "status created {}", db.display());
}

/// Without a backend, simba uses one SQLite file per user at an absolute
/// path: two runs from different working directories share it (the second
/// lock's token follows the first's), and nothing lands in either directory.
#[test]
fn the_default_backend_is_one_file_per_user_wherever_simba_runs() {
    let state = tempfile::tempdir().unwrap();
    let (here, there) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let name = unique("default");
    let mut tokens = Vec::new();
    for cwd in [here.path(), there.path()] {
        let out = simba()
            .env_remove("SIMBA_BACKEND")
            .env("XDG_STATE_HOME", state.path())
            .current_dir(cwd)
            .args(["lock", &name, "--", "sh", "-c", "echo $SIMBA_FENCING_TOKEN"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        tokens.push(String::from_utf8_lossy(&out.stdout).trim().to_owned());
    }
    assert_eq!(
        tokens,
        ["1", "2"],
        "one file: the second term follows the first"
    );
    assert!(state.path().join("simba").join("simba.db").exists());
    assert_eq!(std::fs::read_dir(here.path()).unwrap().count(), 0);
    assert_eq!(std::fs::read_dir(there.path()).unwrap().count(), 0);
    let out = simba()
        .env_remove("SIMBA_BACKEND")
        .env("XDG_STATE_HOME", state.path())
        .args(["status", "--json"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(&name), "{text}");
}
