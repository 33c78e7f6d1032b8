//! `simba lock` and `simba status` end to end.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::*;
use std::process::Stdio;
use std::time::{Duration, Instant};

#[test]
fn lock_mirrors_the_exit_status_and_gives_the_token() {
    let b = TestBackend::sqlite();
    let name = unique("mirror");
    let out = b
        .simba()
        .args([
            "lock",
            &name,
            "--",
            "sh",
            "-c",
            "echo \"$SIMBA_LEASE_NAME $SIMBA_FENCING_TOKEN $SIMBA_SESSION_ID\"; exit 3",
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let v: Vec<&str> = stdout.split_whitespace().collect();
    assert_eq!(v[0], name);
    assert!(v[1].parse::<u64>().unwrap() > 0);
    assert_eq!(v.len(), 3, "session id given: {stdout}");
}

fn lock_wait_times_out_with_75(b: &TestBackend) {
    let name = unique("wait");
    let mark = b.path("holder");
    let mut holder = spawn_with(
        b,
        &["lock", &name, "--", "sh", "-c", MARK_AND_SLEEP],
        "MARK",
        &mark,
    );
    wait_for_file(&mark, Duration::from_secs(30));

    // While it is held: status --json parses and shows the holder and token.
    let out = b.simba().args(["status", "--json"]).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let (token, _) = read_mark(&mark);
    let lease = json["leases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["name"] == name.as_str())
        .unwrap_or_else(|| panic!("lease {name} listed: {json}"));
    assert_eq!(lease["token"], token);
    assert!(lease["holder"].is_string());
    assert!(lease["remaining_ms"].as_u64().unwrap() > 0);
    assert!(!json["sessions"].as_array().unwrap().is_empty());
    let table = b.simba().arg("status").output().unwrap();
    assert!(String::from_utf8_lossy(&table.stdout).contains(&name));

    let started = Instant::now();
    let out = b
        .simba()
        .args(["lock", &name, "--wait", "1s", "--", "true"])
        .output()
        .unwrap();
    let waited = started.elapsed();
    assert_eq!(
        out.status.code(),
        Some(75),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A waiting lock says who holds the name (its pid) and the token.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("is held by"), "{stderr}");
    assert!(stderr.contains(&format!("pid={}", holder.id())), "{stderr}");
    assert!(stderr.contains(&format!("token {token}")), "{stderr}");
    assert!(waited >= Duration::from_secs(1), "gave up after {waited:?}");
    assert!(waited < Duration::from_secs(10), "gave up after {waited:?}");
    eprintln!("[{}] lock --wait 1s gave up after {waited:?}", b.kind);

    stop_cleanly(&mut holder, Duration::from_secs(20));
}

backend_tests! {
    sqlite_lock_wait_times_out_with_75_and_status_json_parses: sqlite => lock_wait_times_out_with_75;
    postgres_lock_wait_times_out_with_75_and_status_json_parses: postgres("wait") => lock_wait_times_out_with_75;
    mysql_lock_wait_times_out_with_75_and_status_json_parses: mysql("wait") => lock_wait_times_out_with_75;
}

#[test]
fn migrate_then_status_on_an_empty_backend() {
    let b = TestBackend::sqlite();
    let out = b.simba().arg("migrate").output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = b.simba().args(["status", "--json"]).output().unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["backend"], "sqlite");
    assert_eq!(json["leases"].as_array().unwrap().len(), 0);
}

#[test]
fn run_restart_reruns_the_command_and_ctrl_c_stops_cleanly() {
    let b = TestBackend::sqlite();
    let name = unique("restart");
    let out = b.path("runs");
    let mut p = spawn_with(
        &b,
        &[
            "run",
            &name,
            "--restart",
            "--",
            "sh",
            "-c",
            "echo \"$SIMBA_FENCING_TOKEN\" >> \"$OUT\"; sleep 0.2",
        ],
        "OUT",
        &out,
    );
    wait_for_file(&out, Duration::from_secs(30));
    std::thread::sleep(Duration::from_millis(1500));
    // Ctrl-C: SIGINT.
    let pid = rustix::process::Pid::from_raw(i32::try_from(p.id()).unwrap()).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::INT).unwrap();
    let status = wait_exit(&mut p, Duration::from_secs(20));
    assert!(
        status.code().is_some(),
        "simba exits by itself on Ctrl-C: {status:?}"
    );
    let runs = std::fs::read_to_string(&out).unwrap();
    let tokens: Vec<&str> = runs.lines().collect();
    assert!(tokens.len() >= 2, "restarted while leader: {runs:?}");
    assert!(tokens.iter().all(|t| *t == tokens[0]), "one term: {runs:?}");
    // The lease was released on the way out.
    let json = b.simba().args(["status", "--json"]).output().unwrap();
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let lease = json["leases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["name"] == name.as_str())
        .unwrap();
    assert!(lease["holder"].is_null(), "released: {json}");
}

#[test]
fn watch_refreshes_until_stopped() {
    let b = TestBackend::sqlite();
    assert_eq!(b.simba().arg("migrate").status().unwrap().code(), Some(0));
    let mut p = b
        .simba()
        .args(["watch", "--interval", "200ms"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    stop_cleanly(&mut p, Duration::from_secs(10));
    let mut text = String::new();
    std::io::Read::read_to_string(&mut p.stdout.take().unwrap(), &mut text).unwrap();
    assert!(text.matches("no leases").count() >= 2, "refreshed: {text}");
    assert!(
        !text.contains('\x1b'),
        "no escape codes when not a terminal"
    );
}

#[test]
fn the_demo_runs_in_under_30_seconds() {
    let started = Instant::now();
    let out = simba().arg("demo").output().unwrap();
    let took = started.elapsed();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for part in [
        "elected:",
        "crash:",
        "fail-over:",
        "handover:",
        "strictly increasing",
    ] {
        assert!(text.contains(part), "{part} missing:\n{text}");
    }
    assert!(took < Duration::from_secs(30), "the demo took {took:?}");
    eprintln!("demo took {took:?}");
}
