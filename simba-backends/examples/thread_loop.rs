//! Embedding Simba without an async runtime: one plain thread drives the
//! sans-IO engine (`simba-core`) against a real backend, one blocking
//! backend call per command, and sleeps until `poll_timeout` between
//! rounds.
//!
//! ```text
//! cargo run -p simba-backends --example thread_loop -- [BACKEND_URL] [SECONDS]
//! ```
//!
//! The default backend is a SQLite file in the temporary directory; run two
//! copies at once to see one lead and the other wait, then take over when
//! the first one stops (or is killed: then at the end of its lease).
//!
//! # When to choose this over an adapter
//!
//! - Choose a loop like this one when the program has no async runtime and
//!   will not get one (a C-style main loop, a game or simulation tick, an
//!   embedded host loop), or when it must decide itself when each backend
//!   call runs. Everything Simba promises lives in the engine, so the
//!   promises hold here too, provided the loop obeys the three rules below.
//! - Choose `simba-tokio` or `simba-async-std` otherwise. They run calls
//!   concurrently (a slow acquire never delays a renewal), react to release
//!   broadcasts at once (S4.2), run leader tasks and stop them by their
//!   deadline (S6), and bound the calls in flight by the backend's
//!   connections; this loop does none of that.
//!
//! The three rules a hand-written loop must obey:
//! 1. After every call into the engine, drain `poll_output` to `None`, and
//!    act on the outputs in order (a `Revoked` comes before the `Release`
//!    of its lease, S3.5).
//! 2. Cancel each backend call after `engine.call_timeout()` (S2.4) and
//!    report nothing for it: the engine times the call out on its own
//!    clock. Here a blocking call runs on a small I/O executor whose timeout
//!    cancels it. A call that could block the loop for longer than the
//!    renewal period would let a term outlive its session.
//! 3. Tell the engine the time from one monotonic clock (`Instant`), and
//!    judge a term's validity with `term_is_valid` (S3.3) at the moment of
//!    use, never from a flag set at election time.
#![allow(clippy::print_stdout)]

use simba_backends::{Backend, SessionMetadata};
use simba_core::{BackendProfile, Engine, Event, LeaseName, Output, SimbaConfig, Timestamp};
use std::time::{Duration, Instant};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let url = args.next().filter(|s| !s.is_empty()).unwrap_or_else(|| {
        let path = std::env::temp_dir().join("simba-thread-loop.db");
        format!("sqlite://{}?mode=rwc", path.display())
    });
    let seconds: u64 = match args.next() {
        Some(s) => s.parse()?,
        None => 10,
    };

    // The I/O executor: used only to run one backend call at a time to
    // completion (or to its timeout). The engine never sees it.
    let io = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let backend = io.block_on(simba_backends::connect(&url))?;

    let origin = Instant::now();
    let clock =
        || Timestamp::from_nanos(u64::try_from(origin.elapsed().as_nanos()).unwrap_or(u64::MAX));
    let config = SimbaConfig::builder()
        .lease_duration(Duration::from_secs(3))
        .build()?;
    let profile = BackendProfile {
        renewal_proves: backend.renewal_proves(),
        call_slots: backend.max_concurrent_calls(),
        batch: backend.max_batch(),
    };
    let mut engine = Engine::new(config, profile, clock());
    let name = LeaseName::new("thread-loop.demo")?;
    engine.start_election(clock(), name.clone(), false)?;
    println!(
        "campaigning for `{name}` on {}",
        simba_backends::redact(&url)
    );

    let metadata = SessionMetadata::default();
    let stop_at = origin + Duration::from_secs(seconds);
    let mut stopping = false;
    loop {
        // Rule 1: drain every output after every call into the engine.
        while let Some(output) = engine.poll_output() {
            match output {
                Output::Command(cmd) => {
                    // Rule 2: the call, or nothing once its time is up.
                    let call = backend.execute(cmd, &metadata);
                    if let Some(reply) = within(&io, engine.call_timeout(), call) {
                        engine.handle(clock(), reply);
                    }
                }
                Output::Event(Event::Elected { term }) => {
                    println!("elected: `{}` with token {}", term.name, term.token);
                }
                Output::Event(Event::Revoked { term, reason }) => {
                    println!("revoked: token {} ({reason})", term.token);
                }
                Output::Event(_) | Output::Task(_) => {}
            }
        }
        if !stopping && Instant::now() >= stop_at {
            // A clean stop: revoke, release, close (S6.1, S1.4).
            stopping = true;
            engine.close(clock());
            continue;
        }
        // Rule 3: one sleep, until the engine's one next deadline.
        match engine.poll_timeout() {
            Some(at) => {
                let now = clock();
                let wait = Duration::from_nanos(at.as_nanos().saturating_sub(now.as_nanos()));
                let wait = if stopping {
                    wait
                } else {
                    wait.min(stop_at.saturating_duration_since(Instant::now()))
                };
                std::thread::sleep(wait);
                engine.handle_timeout(clock());
            }
            None if stopping => break,
            None => std::thread::sleep(Duration::from_millis(50)),
        }
    }
    println!("closed");
    Ok(())
}

/// Runs `fut` on the I/O executor, cancelled after `timeout`.
fn within<T>(
    io: &tokio::runtime::Runtime,
    timeout: Duration,
    fut: impl std::future::Future<Output = T>,
) -> Option<T> {
    io.block_on(async move { tokio::time::timeout(timeout, fut).await.ok() })
}
