//! Performance figures of the driver (issue 4):
//!
//! 1. driver CPU per renewal: process CPU time over many renewals with a
//!    10 ms renewal interval against the in-memory backend, minus the CPU of
//!    an idle runtime over the same wall time;
//! 2. backend calls of 1,000 elections on one client, per renewal interval,
//!    counted by a decorator around the backend (S1.1).
//!
//! ```text
//! cargo run --release -p simba-tokio --example perf
//! ```
use futures::future::BoxFuture;
use simba_backends::{Backend, Call, Layer, Layered, MemoryBackend, Reply};
use simba_core::Command;
use simba_tokio::{NoListener, SimbaConfig, Status};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Counts every call by kind, then delegates (a backend as [`Layered`]).
#[derive(Default)]
struct Counting {
    inner: MemoryBackend,
    open: AtomicU64,
    renew: AtomicU64,
    acquire: AtomicU64,
    release: AtomicU64,
    close: AtomicU64,
}

impl Counting {
    fn counts(&self) -> [u64; 5] {
        [
            &self.open,
            &self.renew,
            &self.acquire,
            &self.release,
            &self.close,
        ]
        .map(|c| c.load(Ordering::Relaxed))
    }
}

impl Layer for Counting {
    fn inner(&self) -> &dyn Backend {
        &self.inner
    }
    fn call<'a>(&'a self, call: Call<'a>) -> BoxFuture<'a, Reply> {
        let counter = match call {
            Call::OpenSession { .. } => Some(&self.open),
            Call::Renew { .. } => Some(&self.renew),
            Call::Acquire { .. } => Some(&self.acquire),
            Call::Release { .. } => Some(&self.release),
            Call::CloseSession { .. } => Some(&self.close),
            _ => None,
        };
        if let Some(c) = counter {
            c.fetch_add(1, Ordering::Relaxed);
        }
        // A batch (S4.7) counts the acquires and releases it carries.
        if let Call::Batch { calls, .. } = call {
            for c in calls {
                match c {
                    Command::Acquire { .. } => self.acquire.fetch_add(1, Ordering::Relaxed),
                    Command::Release { .. } => self.release.fetch_add(1, Ordering::Relaxed),
                    _ => 0,
                };
            }
        }
        call.run(&self.inner)
    }
    fn name(&self) -> &'static str {
        "counting-memory"
    }
}

/// CPU time of the whole process (all threads), from /proc (Linux): the sum
/// of every live thread's `schedstat` run time (nanoseconds), or the
/// coarser `stat` ticks where `schedstat` is missing.
fn process_cpu() -> Option<Duration> {
    let mut total = 0u64;
    let mut any = false;
    for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        if let Ok(s) = std::fs::read_to_string(task.path().join("schedstat")) {
            if let Some(ns) = s
                .split_whitespace()
                .next()
                .and_then(|v| v.parse::<u64>().ok())
            {
                total += ns;
                any = true;
            }
        }
    }
    if any {
        return Some(Duration::from_nanos(total));
    }
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let after = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    // USER_HZ is 100 on Linux.
    Some(Duration::from_millis((utime + stime) * 10))
}

async fn cpu_per_renewal() -> Result<(), Box<dyn std::error::Error>> {
    let run = Duration::from_secs(10);
    // Idle baseline: the runtime alone, over the same wall time.
    let c0 = process_cpu().ok_or("no /proc")?;
    tokio::time::sleep(run).await;
    let idle = process_cpu().ok_or("no /proc")? - c0;

    // The runtime's own cost of one timer wake-up every 10 ms, doing nothing.
    let c0 = process_cpu().ok_or("no /proc")?;
    let t0 = tokio::time::Instant::now();
    let mut ticks = 0u32;
    while t0.elapsed() < run {
        ticks += 1;
        tokio::time::sleep_until(t0 + Duration::from_millis(10) * ticks).await;
    }
    let tick = (process_cpu().ok_or("no /proc")? - c0).saturating_sub(idle) / ticks;

    let backend = Arc::new(Layered(Counting::default()));
    let config = SimbaConfig::builder()
        .lease_duration(Duration::from_millis(60))
        .renew_interval(Duration::from_millis(10))
        .margin(Duration::from_millis(2))
        .build()?;
    let simba = simba_tokio::builder_dyn(backend.clone())
        .config(config)
        .build()?;
    let e = simba.election("perf.one").start(NoListener).await?;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let r0 = backend.counts()[1];
    let c0 = process_cpu().ok_or("no /proc")?;
    tokio::time::sleep(run).await;
    let busy = process_cpu().ok_or("no /proc")? - c0;
    let renewals = backend.counts()[1] - r0;
    let per = busy.saturating_sub(idle).as_secs_f64() * 1e6 / renewals.max(1) as f64;
    let tick_us = tick.as_secs_f64() * 1e6;
    println!(
        "driver CPU per renewal: {per:.1} µs ({renewals} renewals in {run:?}; CPU {busy:?} minus idle {idle:?}; \
         includes the in-memory backend's own work and the runtime's wake-ups)"
    );
    println!(
        "  of which a bare 10 ms timer wake-up of the runtime costs {tick_us:.1} µs; \
         beyond it: {:.1} µs per renewal",
        per - tick_us
    );
    println!("still leader: {:?}", e.snapshot().await?.map(|s| s.status));
    simba.close().await;
    Ok(())
}

async fn thousand_elections() -> Result<(), Box<dyn std::error::Error>> {
    let backend = Arc::new(Layered(Counting::default()));
    let renew = Duration::from_millis(500);
    let config = SimbaConfig::builder()
        .lease_duration(Duration::from_millis(1500))
        .renew_interval(renew)
        .build()?;
    let simba = simba_tokio::builder_dyn(backend.clone())
        .config(config)
        .build()?;
    let mut elections = Vec::new();
    for i in 0..1000 {
        elections.push(
            simba
                .election(format!("perf.e{i}"))
                .start(NoListener)
                .await?,
        );
    }
    let t0 = Instant::now();
    loop {
        let snap = simba.snapshot().await?;
        if snap.entries.iter().all(|e| e.status == Status::Leader) {
            break;
        }
        if t0.elapsed() > Duration::from_secs(30) {
            return Err("1,000 elections not all won in 30 s".into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!("1,000 elections won in {:?}", t0.elapsed());
    let before = backend.counts();
    let intervals = 10;
    tokio::time::sleep(renew * intervals).await;
    let after = backend.counts();
    let d: Vec<u64> = after.iter().zip(before).map(|(a, b)| a - b).collect();
    let total: u64 = d.iter().sum();
    println!(
        "1,000 elections, {intervals} renewal intervals: {total} backend calls \
         (open {}, renew {}, acquire {}, release {}, close {}) = {:.2} per interval",
        d[0],
        d[1],
        d[2],
        d[3],
        d[4],
        total as f64 / f64::from(intervals)
    );
    simba.close().await;
    Ok(())
}

/// `perf [multi|current]`: a multi-threaded runtime with 2 workers (the
/// default), or a current-thread one (no cross-thread wake-ups).
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let current = std::env::args().nth(1).as_deref() == Some("current");
    let runtime = if current {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?
    };
    println!(
        "runtime: {}",
        if current {
            "current_thread"
        } else {
            "multi_thread, 2 workers"
        }
    );
    runtime.block_on(async {
        cpu_per_renewal().await?;
        thousand_elections().await
    })
}
