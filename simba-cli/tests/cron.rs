//! `simba cron` end to end on SQLite and PostgreSQL: three processes on one
//! schedule, only the leader runs the command, each slot at most once across
//! a graceful hand-over (S11.1, S6.1); a bad schedule is refused before any
//! I/O.
//! Measured figures are printed (run with `--nocapture` to see them).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::*;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// Each run appends `slot token simba-pid`.
const RECORD: &str = "echo \"$SIMBA_SCHEDULE_SLOT $SIMBA_FENCING_TOKEN $PPID\" >> \"$OUT\"";

fn runs(path: &std::path::Path) -> Vec<(u64, u64, u32)> {
    number_triples(&std::fs::read_to_string(path).unwrap_or_default())
}

fn wait_runs(path: &std::path::Path, n: usize, timeout: Duration) -> Vec<(u64, u64, u32)> {
    let start = Instant::now();
    loop {
        let r = runs(path);
        if r.len() >= n {
            return r;
        }
        assert!(
            start.elapsed() < timeout,
            "only {} runs after {timeout:?}: {r:?}",
            r.len()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn cron_each_slot_once_across_a_handover(backend: &TestBackend) {
    let name = unique("cron");
    let out = backend.path("runs");
    let mut procs: Vec<_> = (0..3)
        .map(|_| {
            spawn_with(
                backend,
                &[
                    "--lease-duration",
                    "3s",
                    "cron",
                    &name,
                    "every 500ms",
                    "--",
                    "sh",
                    "-c",
                    RECORD,
                ],
                "OUT",
                &out,
            )
        })
        .collect();
    let first = wait_runs(&out, 4, Duration::from_secs(30));
    let leader = first[0].2;
    let i = procs
        .iter()
        .position(|p| p.id() == leader)
        .expect("the child's parent is one of the simba processes");
    sigterm(&procs[i]);
    let stopped = Instant::now();
    let status = wait_exit(&mut procs[i], Duration::from_secs(20));
    assert_eq!(status.code(), Some(0), "a clean stop on SIGTERM exits 0");
    let before = runs(&out).len();
    let after = wait_runs(&out, before + 4, Duration::from_secs(30));
    let next = after[before..]
        .iter()
        .find(|r| r.2 != leader)
        .expect("another process leads");
    eprintln!(
        "[{}] cron: {} runs by pid {leader} (token {}), then pid {} (token {}) after the SIGTERM ({:.0} ms to the stop)",
        backend.kind,
        before,
        first[0].1,
        next.2,
        next.1,
        stopped.elapsed().as_secs_f64() * 1e3
    );
    for (j, p) in procs.iter_mut().enumerate() {
        if j != i {
            sigterm(p);
            wait_exit(p, Duration::from_secs(20));
        }
    }
    let all = runs(&out);
    for w in all.windows(2) {
        assert!(
            w[0].0 < w[1].0,
            "S11.1: slots strictly increase, none repeats: {all:?}"
        );
        assert!(w[0].1 <= w[1].1, "tokens never go back: {all:?}");
    }
    for r in &all {
        assert_eq!(r.0 % 500, 0, "S11.2: slots on the 500 ms grid: {all:?}");
    }
    assert!(
        !all[before..].iter().any(|r| r.2 == leader),
        "the stopped process ran no more"
    );
}

backend_tests! {
    sqlite_cron_runs_each_slot_once_across_a_handover: sqlite => cron_each_slot_once_across_a_handover;
    postgres_cron_runs_each_slot_once_across_a_handover: postgres("cron") => cron_each_slot_once_across_a_handover;
}

#[test]
fn a_bad_schedule_is_refused_before_any_io() {
    for (schedule, tz) in [
        ("every soon", None),
        ("61 * * * *", None),
        ("0 3 * * *", Some("Nowhere/Else")),
    ] {
        let mut cmd = simba();
        cmd.args([
            "--backend",
            "postgres://nobody@127.0.0.1:1/none",
            "cron",
            "job",
            schedule,
        ]);
        if let Some(tz) = tz {
            cmd.args(["--tz", tz]);
        }
        let out = cmd.args(["--", "true"]).output().unwrap();
        assert_eq!(out.status.code(), Some(65), "{schedule}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("invalid schedule"), "{err}");
    }
}

/// A `simba cron` node that does not lead says who holds the name (host,
/// pid, token, time left), as `run` and `lock` do.
#[test]
fn a_waiting_cron_says_who_holds() {
    let backend = TestBackend::sqlite();
    let name = unique("cron-held");
    let mark = backend.path("mark");
    let mut holder = spawn_lock_holder(&backend, &name, &mark);
    let (token, _) = read_mark(&mark);
    let mut waiting = backend
        .simba()
        .args(["cron", &name, "every 1s", "--", "true"])
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = Lines::new(waiting.stderr.take().unwrap());
    let line = lines.wait_for(Duration::from_secs(20), |l| l.contains("is held by"));
    assert!(line.contains(&format!("pid={}", holder.id())), "{line}");
    assert!(line.contains(&format!("token {token}")), "{line}");
    stop_cleanly(&mut waiting, Duration::from_secs(20));
    stop(&mut holder, Duration::from_secs(20));
}
