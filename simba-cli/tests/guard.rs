//! The guard (S3.3, S6.2): a child of `simba run` is stopped by its term's
//! deadline even when the `simba` process itself is stopped (SIGSTOP) and
//! cannot stop it. Checked through the children's own output: the stopped
//! leader's child never writes after the next leader's child has started.
//!
//! To see the check fire on a simba without the deadline guard, run it with
//! `SIMBA_TEST_BIN=/path/to/an/older/simba`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::*;
use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// A child that appends `token nanos` (wall clock) every 20 ms to `$TICKS`.
const TICKER: &str =
    "while true; do echo \"$SIMBA_FENCING_TOKEN $(date +%s%N)\" >> \"$TICKS\"; sleep 0.02; done";

fn spawn_ticker(backend: &TestBackend, name: &str, ticks: &Path) -> Child {
    spawn_with(
        backend,
        &[
            "--lease-duration",
            "2s",
            "run",
            name,
            "--",
            "sh",
            "-c",
            TICKER,
        ],
        "TICKS",
        ticks,
    )
}

/// `(token, nanos)` of every complete line of a ticks file.
fn ticks(path: &Path) -> Vec<(u64, u128)> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let (t, n) = l.split_once(' ')?;
            Some((t.parse().ok()?, n.trim().parse().ok()?))
        })
        .collect()
}

fn signal(child: &Child, sig: rustix::process::Signal) {
    let pid = rustix::process::Pid::from_raw(i32::try_from(child.id()).unwrap()).unwrap();
    rustix::process::kill_process(pid, sig).unwrap();
}

fn wall_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

/// The whole check on one backend: leader `a` is SIGSTOPped (simba alone,
/// not its child) for 7 s with a 2 s lease; `b` takes over meanwhile.
fn a_stopped_simba_cannot_keep_its_child_running(backend: &TestBackend) {
    let name = unique("guard");
    let (ticks_a, ticks_b) = (backend.path("a"), backend.path("b"));
    let mut a = spawn_ticker(backend, &name, &ticks_a);
    wait_for_file(&ticks_a, Duration::from_secs(30));
    let mut b = spawn_ticker(backend, &name, &ticks_b);
    std::thread::sleep(Duration::from_millis(1500)); // b is a candidate by now
    assert!(ticks(&ticks_b).is_empty(), "b must not run while a leads");

    signal(&a, rustix::process::Signal::STOP);
    let stopped = wall_ns();
    // b takes over once a's lease expires (~2 s after a's last renewal).
    wait_for_file(&ticks_b, Duration::from_secs(30));
    let b_started = Instant::now();
    // Let a stay stopped well past b's start: without the guard, a's child
    // would keep ticking all this time.
    while b_started.elapsed() < Duration::from_secs(3) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let a_ticks = ticks(&ticks_a);
    let b_ticks = ticks(&ticks_b);
    signal(&a, rustix::process::Signal::CONT);

    let a_last = a_ticks.iter().map(|t| t.1).max().unwrap();
    let b_first = b_ticks.iter().map(|t| t.1).min().unwrap();
    let token_a = a_ticks[0].0;
    let token_b = b_ticks[0].0;
    eprintln!(
        "[{}] simba SIGSTOPped (lease 2 s): its child's last tick {:.0} ms after the stop; \
         the next leader's first tick {:.0} ms after it (token {token_a} -> {token_b})",
        backend.kind,
        (a_last.saturating_sub(stopped)) as f64 / 1e6,
        (b_first as f64 - a_last as f64) / 1e6,
    );
    assert!(token_b > token_a, "tokens increase (S3.2)");
    assert!(
        a_ticks.iter().all(|t| t.0 == token_a),
        "a ran one term only while stopped"
    );
    assert!(
        a_last < b_first,
        "the stopped leader's child ticked {:.0} ms after the next leader's child started",
        (a_last - b_first) as f64 / 1e6
    );
    // Generous: the child stops by the local deadline, at most one lease
    // after the stop (plus slack for a loaded machine).
    assert!(
        a_last < stopped + 2_000_000_000 + 1_500_000_000,
        "a's child ticked {:.0} ms after simba was stopped (lease 2 s)",
        (a_last - stopped) as f64 / 1e6
    );

    // a wakes, finds its term over and competes again; both stop cleanly.
    std::thread::sleep(Duration::from_millis(500));
    sigterm(&a);
    sigterm(&b);
    wait_exit(&mut a, Duration::from_secs(30));
    wait_exit(&mut b, Duration::from_secs(30));
}

backend_tests! {
    sqlite_a_stopped_simba_cannot_keep_its_child_running: sqlite => a_stopped_simba_cannot_keep_its_child_running;
    postgres_a_stopped_simba_cannot_keep_its_child_running: postgres("guard") => a_stopped_simba_cannot_keep_its_child_running;
}
