//! `simba elect`: a campaign that holds an election until stopped, and
//! `--listen`, which only watches who leads (leader observation).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::*;
use std::process::{Child, Stdio};
use std::time::Duration;

/// Generous: the machine running the tests may be loaded.
const LONG: Duration = Duration::from_secs(30);

fn spawn_elect(b: &TestBackend, args: &[&str]) -> (Child, Lines) {
    let mut child = b
        .simba()
        .args(["--lease-duration", "3s", "elect"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = Lines::new(child.stdout.take().unwrap());
    (child, lines)
}

fn json(line: &str) -> serde_json::Value {
    serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
}

#[test]
fn one_candidate_leads_a_listener_sees_it_then_its_successor_with_their_proposals() {
    let b = TestBackend::sqlite();
    let name = unique("elect");

    let (mut first, mut first_out) = spawn_elect(&b, &[&name, "alpha"]);
    let elected = first_out.wait_for(LONG, |l| l.starts_with("elected "));
    assert!(elected.contains(&format!("name={name}")), "{elected}");
    assert!(elected.contains("proposal=alpha"), "{elected}");

    // The second candidate competes and waits.
    let (mut second, mut second_out) = spawn_elect(&b, &[&name, "beta"]);
    second_out.wait_for(LONG, |l| l.starts_with("campaigning "));

    let (mut listener, mut seen) = spawn_elect(&b, &["--listen", &name, "--json"]);
    let leader = json(&seen.wait_for(LONG, |l| json(l)["event"] == "leader"));
    assert_eq!(leader["name"], name.as_str());
    assert_eq!(leader["metadata"]["proposal"], "alpha", "{leader}");
    let first_token = leader["token"].as_u64().unwrap();
    assert!(leader["holder"].is_string(), "{leader}");

    // A SIGTERM hands over cleanly: the first prints its revocation and exits 0.
    stop_cleanly(&mut first, LONG);
    let rest = first_out.rest(LONG);
    assert!(
        rest.iter()
            .any(|l| l.starts_with("revoked ") && l.contains("reason=stopped")),
        "{rest:?}"
    );

    // The second leads now, with a higher token, and the listener says so.
    let elected = second_out.wait_for(LONG, |l| l.starts_with("elected "));
    assert!(elected.contains("proposal=beta"), "{elected}");
    let next = json(&seen.wait_for(LONG, |l| {
        let v = json(l);
        v["event"] == "leader" && v["metadata"]["proposal"] == "beta"
    }));
    assert!(next["token"].as_u64().unwrap() > first_token, "{next}");

    stop_cleanly(&mut second, LONG);
    stop_cleanly(&mut listener, LONG);
    // Every line of --json output is one JSON object with an event and a time.
    for line in &seen.seen {
        let v = json(line);
        assert!(v["event"].is_string() && v["at"].is_string(), "{line}");
    }
}

#[test]
fn a_proposal_that_cannot_be_published_is_refused_with_65() {
    let b = TestBackend::sqlite();
    let out = b
        .simba()
        .args(["elect", &unique("bad"), "line\nbreak"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(65));
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid proposal"));
}

#[test]
fn listen_and_a_proposal_together_are_a_usage_error() {
    let b = TestBackend::sqlite();
    let out = b
        .simba()
        .args(["elect", "--listen", &unique("x"), "alpha"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}
