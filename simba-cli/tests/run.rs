//! `simba run` end to end, on SQLite and on PostgreSQL: mutual exclusion of
//! the children (S3), fail-over after a crash (S8.2) and the graceful
//! handover order on SIGTERM (S6.1). Measured times are printed (run with
//! `--nocapture` to see them).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::*;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// Three `simba run` processes on one name, each child running ~0.6 s and
/// appending `token start end`: only one child runs at a time and tokens
/// increase (S3.2).
fn only_one_child_runs_at_a_time(backend: &TestBackend) {
    let name = unique("excl");
    let out = backend.path("intervals");
    let script =
        "s=$(date +%s%N); sleep 0.6; echo \"$SIMBA_FENCING_TOKEN $s $(date +%s%N)\" >> \"$OUT\"";
    let mut procs: Vec<_> = (0..3)
        .map(|_| {
            spawn_with(
                backend,
                &[
                    "--lease-duration",
                    "3s",
                    "run",
                    &name,
                    "--",
                    "sh",
                    "-c",
                    script,
                ],
                "OUT",
                &out,
            )
        })
        .collect();
    for p in &mut procs {
        let status = wait_exit(p, Duration::from_secs(60));
        assert_eq!(
            status.code(),
            Some(0),
            "simba run mirrors the child's exit 0"
        );
    }
    let text = std::fs::read_to_string(&out).unwrap();
    let mut runs: Vec<(u64, u128, u128)> = number_triples(&text);
    assert_eq!(runs.len(), 3, "every process ran its child once:\n{text}");
    runs.sort_by_key(|r| r.1);
    for w in runs.windows(2) {
        assert!(w[0].0 < w[1].0, "tokens increase (S3.2): {runs:?}");
        assert!(w[0].2 <= w[1].1, "intervals do not overlap: {runs:?}");
        eprintln!(
            "[{}] handover after the child exited: {:.0} ms (token {} -> {})",
            backend.kind,
            (w[1].1 - w[0].2) as f64 / 1e6,
            w[0].0,
            w[1].0
        );
    }
}

/// SIGKILL of the leading simba: its child dies with it (the guard) and the
/// other process takes over once the lease expires (3 s), within 3 s + 1 s
/// (asserted with slack for a loaded machine).
fn sigkill_fails_over_within_the_lease(backend: &TestBackend) {
    let name = unique("kill");
    let (mark_a, mark_b) = (backend.path("a"), backend.path("b"));
    let mut a = spawn_marking_leader(backend, &name, &mark_a);
    wait_for_file(&mark_a, Duration::from_secs(30));
    let mut b = spawn_marking_leader(backend, &name, &mark_b);
    std::thread::sleep(Duration::from_millis(1500)); // b is a candidate by now
    assert!(!mark_b.exists(), "b must not run while a leads");
    let (token_a, child_a) = read_mark(&mark_a);
    a.kill().unwrap(); // SIGKILL: a crash
    let killed = Instant::now();
    let _ = a.wait();
    let guard_deadline = Instant::now() + Duration::from_secs(3);
    while !process_gone(child_a) {
        assert!(Instant::now() < guard_deadline, "a's child outlived a");
        std::thread::sleep(Duration::from_millis(10));
    }
    let child_gone = killed.elapsed();
    let took_over = wait_for_file(&mark_b, Duration::from_secs(20)) - killed;
    let (token_b, _) = read_mark(&mark_b);
    eprintln!(
        "[{}] SIGKILL: child stopped by the guard after {:.0} ms; fail-over after {:.0} ms (lease 3 s); token {token_a} -> {token_b}",
        backend.kind,
        child_gone.as_secs_f64() * 1e3,
        took_over.as_secs_f64() * 1e3
    );
    assert!(token_b > token_a);
    assert!(
        took_over < Duration::from_millis(3000 + 2500),
        "fail-over took {took_over:?}, more than lease_duration + 1 s (+ slack)"
    );
    stop(&mut b, Duration::from_secs(20));
}

/// SIGTERM to the leading simba: child stopped first, then the lease
/// released (S6.1), and the other process takes over within about 1 s.
fn sigterm_hands_over_gracefully(backend: &TestBackend) {
    let name = unique("term");
    let (mark_a, mark_b) = (backend.path("a"), backend.path("b"));
    let mut a = spawn_marking_leader(backend, &name, &mark_a);
    wait_for_file(&mark_a, Duration::from_secs(30));
    let mut b = spawn_marking_leader(backend, &name, &mark_b);
    std::thread::sleep(Duration::from_millis(1500));
    assert!(!mark_b.exists(), "b must not run while a leads");
    let (token_a, child_a) = read_mark(&mark_a);
    sigterm(&a);
    let stopped = Instant::now();
    let took_over = wait_for_file(&mark_b, Duration::from_secs(20)) - stopped;
    let status = wait_exit(&mut a, Duration::from_secs(20));
    assert!(process_gone(child_a), "a's child was stopped");
    assert_eq!(
        status.code(),
        Some(0),
        "a clean stop on SIGTERM (its child died of the SIGTERM passed on) exits 0"
    );
    let (token_b, _) = read_mark(&mark_b);
    eprintln!(
        "[{}] SIGTERM: graceful handover after {:.0} ms; token {token_a} -> {token_b}",
        backend.kind,
        took_over.as_secs_f64() * 1e3
    );
    assert!(token_b > token_a);
    assert!(
        took_over < Duration::from_millis(1000 + 2000),
        "graceful handover took {took_over:?}, more than 1 s (+ slack)"
    );
    stop(&mut b, Duration::from_secs(20));
}

backend_tests! {
    sqlite_only_one_child_runs_at_a_time: sqlite => only_one_child_runs_at_a_time;
    sqlite_sigkill_fails_over_within_the_lease: sqlite => sigkill_fails_over_within_the_lease;
    sqlite_sigterm_hands_over_gracefully: sqlite => sigterm_hands_over_gracefully;
    postgres_only_one_child_runs_at_a_time: postgres("excl") => only_one_child_runs_at_a_time;
    postgres_sigkill_fails_over_within_the_lease: postgres("kill") => sigkill_fails_over_within_the_lease;
    postgres_sigterm_hands_over_gracefully_via_notify: postgres("term") => sigterm_hands_over_gracefully;
    mysql_only_one_child_runs_at_a_time: mysql("excl") => only_one_child_runs_at_a_time;
}

/// A paused simba (SIGSTOP longer than the lease) finds its term over when
/// it wakes (S3.3): its child is stopped at once (S6.3) and, with `--once`,
/// simba exits instead of competing again.
#[test]
fn sqlite_once_exits_after_a_term_lost_to_a_pause() {
    let b = TestBackend::sqlite();
    let name = unique("pause");
    let mark = b.path("a");
    let mut a = spawn_with(
        &b,
        &[
            "--lease-duration",
            "3s",
            "run",
            "--once",
            &name,
            "--",
            "sh",
            "-c",
            MARK_AND_SLEEP,
        ],
        "MARK",
        &mark,
    );
    wait_for_file(&mark, Duration::from_secs(30));
    let (_, child) = read_mark(&mark);
    let pid = rustix::process::Pid::from_raw(i32::try_from(a.id()).unwrap()).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::STOP).unwrap();
    std::thread::sleep(Duration::from_millis(4000));
    rustix::process::kill_process(pid, rustix::process::Signal::CONT).unwrap();
    let woke = Instant::now();
    let status = wait_exit(&mut a, Duration::from_secs(20));
    let took = woke.elapsed();
    assert!(process_gone(child), "the child was stopped");
    let code = status.code().unwrap();
    assert!(
        code == 143 || code == 137,
        "mirrors the stopped child: {code}"
    );
    eprintln!("[sqlite] after a 4 s pause, --once exited {took:?} after waking (exit {code})");
    assert!(took < Duration::from_secs(5), "took {took:?}");
}

/// A waiting `simba run` says who holds the name: the holder's session
/// metadata (its pid among it) and the term's token.
#[test]
fn sqlite_a_waiting_run_says_who_holds_the_name() {
    let b = TestBackend::sqlite();
    let dir = tempfile::tempdir().unwrap();
    let mark = dir.path().join("a");
    let name = unique("who");
    let mut a = spawn_marking_leader(&b, &name, &mark);
    wait_for_file(&mark, Duration::from_secs(30));
    let (token, _) = read_mark(&mark);
    let waiting = b
        .simba()
        .args(["--lease-duration", "3s", "run", &name, "--", "true"])
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    sigterm(&waiting);
    let out = waiting.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("is held by"), "{stderr}");
    assert!(stderr.contains(&format!("pid={}", a.id())), "{stderr}");
    assert!(stderr.contains(&format!("token {token}")), "{stderr}");
    sigterm(&a);
    let _ = wait_exit(&mut a, Duration::from_secs(20));
}
