//! ZooKeeper costs, measured with the same clients in the same run and
//! interleaved one iteration at a time (medians):
//! - a raw `exists` round trip on a session's own client (the floor);
//! - an uncontended acquire + release (goal: at most 2.5× `exists`);
//! - a graceful handover: the holder releases, the waiting candidate hears
//!   the watch event and acquires (goal: at most 1.5 ms).
//!
//! `cargo bench -p simba-backends --all-features --bench zookeeper`
//! (env `SIMBA_BENCH_ZK` overrides `zk://127.0.0.1:2181`,
//! `SIMBA_BENCH_ITERS` the iteration count, default 1000).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod common;

use futures::StreamExt;
use simba_backends::zookeeper::ZkBackend;
use simba_backends::{Backend, BackendConfig};
use simba_core::{AcquireOutcome, LeaseName};
use std::time::{Duration, Instant};

use common::{median, us};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let base = std::env::var("SIMBA_BENCH_ZK").unwrap_or_else(|_| "zk://127.0.0.1:2181".into());
    let n: usize = common::iters();
    let tag = simba_backends::random_session_id().unwrap().to_string();
    let url = format!("{base}/simba-bench-{}", &tag[..8]);
    let config = BackendConfig::parse(&url).unwrap();
    let a = ZkBackend::connect(&config).await.unwrap();
    let b = ZkBackend::connect(&config).await.unwrap();
    let sa = common::session(&a, Duration::from_secs(30)).await;
    let sb = common::session(&b, Duration::from_secs(30)).await;
    let raw = a.zk_client(sa).unwrap();
    let solo = LeaseName::new("bench.solo").unwrap();
    let hand = LeaseName::new("bench.handover").unwrap();
    let mut releases = b.subscribe_releases().await.unwrap().unwrap();

    let (mut exists, mut cycle, mut handover) = (Vec::new(), Vec::new(), Vec::new());
    let warm = n / 10;
    for i in 0..n + warm {
        // The floor: one read round trip.
        let t = Instant::now();
        raw.check_stat("/").await.unwrap();
        let e = t.elapsed();
        // Uncontended acquire + release.
        let t = Instant::now();
        let AcquireOutcome::Won { token, .. } = a.acquire(sa, &solo).await.unwrap() else {
            panic!("uncontended acquire lost");
        };
        a.release(sa, &solo, token).await.unwrap();
        let c = t.elapsed();
        // Handover: a holds, b waits on the broadcast, a releases.
        let (from, to, sfrom, sto) = if i % 2 == 0 {
            (&a, &b, sa, sb)
        } else {
            (&b, &a, sb, sa)
        };
        let AcquireOutcome::Won { token, .. } = from.acquire(sfrom, &hand).await.unwrap() else {
            panic!("holder lost");
        };
        let t = Instant::now();
        from.release(sfrom, &hand, token).await.unwrap();
        loop {
            let name = releases.next().await.unwrap();
            if name == hand {
                break;
            }
        }
        let AcquireOutcome::Won { token, .. } = to.acquire(sto, &hand).await.unwrap() else {
            panic!("the waiting candidate lost after the release");
        };
        let h = t.elapsed();
        to.release(sto, &hand, token).await.unwrap();
        // Drain the broadcast of that release.
        let _ = releases.next().await;
        if i >= warm {
            exists.push(e);
            cycle.push(c);
            handover.push(h);
        }
    }
    let (e, c, h) = (median(exists), median(cycle), median(handover));
    println!("ZooKeeper at {base}, {n} interleaved iterations, medians:");
    println!("  exists round trip          {:>8.0} µs", us(e));
    println!(
        "  acquire + release          {:>8.0} µs  = {:.2}× exists (goal ≤ 2.5×)",
        us(c),
        us(c) / us(e)
    );
    println!(
        "  graceful handover          {:>8.0} µs  (goal ≤ 1500 µs)",
        us(h)
    );
    a.close_session(sa).await.unwrap();
    b.close_session(sb).await.unwrap();
    a.remove_tree().await.unwrap();
}
