//! `--json`: NDJSON output of `run`, `lock` (on stderr: the command owns
//! stdout) and `watch` (on stdout), one object per line with stable fields.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::*;
use serde_json::Value;
use std::process::Stdio;
use std::time::Duration;

const LONG: Duration = Duration::from_secs(30);

/// Every non-empty line of `text` as a JSON object with `event` and `at`.
fn ndjson(text: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(text)
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            let v: Value =
                serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"));
            assert!(v["event"].is_string(), "no event: {l}");
            assert!(v["at"].is_string(), "no time: {l}");
            v
        })
        .collect()
}

fn kinds(events: &[Value]) -> Vec<&str> {
    events
        .iter()
        .map(|v| v["event"].as_str().unwrap())
        .collect()
}

#[test]
fn run_json_prints_competing_elected_exited_as_ndjson_on_stderr() {
    let b = TestBackend::sqlite();
    let name = unique("jrun");
    let out = b
        .simba()
        .args([
            "run",
            &name,
            "--json",
            "--",
            "sh",
            "-c",
            "echo child-output; exit 3",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    // stdout is the command's alone.
    assert_eq!(String::from_utf8_lossy(&out.stdout), "child-output\n");
    let events = ndjson(&out.stderr);
    let k = kinds(&events);
    let at = |kind: &str| {
        k.iter()
            .position(|e| *e == kind)
            .unwrap_or_else(|| panic!("no {kind} in {k:?}"))
    };
    assert!(
        at("competing") < at("elected") && at("elected") < at("exited"),
        "{k:?}"
    );
    let elected = &events[at("elected")];
    assert_eq!(elected["name"], name.as_str());
    assert!(elected["token"].as_u64().unwrap() > 0);
    assert_eq!(elected["session"].as_str().unwrap().len(), 32);
    assert_eq!(events[at("exited")]["code"], 3);
}

#[test]
fn lock_json_ends_with_an_error_event_carrying_the_exit_code() {
    let b = TestBackend::sqlite();
    let name = unique("jlock");
    let mark = b.path("holder");
    let mut holder = spawn_lock_holder(&b, &name, &mark);
    let out = b
        .simba()
        .args(["lock", &name, "--json", "--wait", "300ms", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(75));
    let events = ndjson(&out.stderr);
    let last = events.last().unwrap();
    assert_eq!(last["event"], "error", "{events:?}");
    assert_eq!(last["exit_code"], 75);
    assert!(last["message"].as_str().unwrap().contains("not acquired"));
    assert!(!kinds(&events).contains(&"elected"), "{events:?}");

    // The holder, stopped with --json off, keeps its text output.
    stop_cleanly(&mut holder, LONG);
}

#[test]
fn watch_json_prints_one_status_object_per_refresh() {
    let b = TestBackend::sqlite();
    let name = unique("jwatch");
    let out = b
        .simba()
        .args(["lock", &name, "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));

    let mut watch = b
        .simba()
        .args(["watch", "--json", "--interval", "200ms"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = Lines::new(watch.stdout.take().unwrap());
    for _ in 0..2 {
        let line = lines.wait_for(LONG, |_| true);
        let v = &ndjson(line.as_bytes())[0];
        assert_eq!(v["event"], "status", "{line}");
        assert_eq!(v["backend"], "sqlite", "{line}");
        assert!(v["sessions"].is_array(), "{line}");
        let leases = v["leases"].as_array().unwrap();
        assert!(
            leases
                .iter()
                .any(|l| l["name"] == name.as_str() && l["token"].is_u64()),
            "{line}"
        );
    }
    stop_cleanly(&mut watch, LONG);
}
