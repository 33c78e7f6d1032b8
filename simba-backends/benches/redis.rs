//! Redis backend figures (issue 10), against the Redis on 127.0.0.1:6379
//! (or `SIMBA_BENCH_REDIS`), with a key prefix of its own that it deletes
//! afterwards:
//!
//! 1. a raw `PING` round trip and an uncontended acquire+release cycle on the
//!    same client and connection, interleaved one iteration at a time;
//! 2. a backend-level handover: the holder releases, the waiting candidate
//!    hears the pub/sub broadcast and acquires (release start → `Won`);
//! 3. one renewal of a session holding 1, 100 and 10,000 leases (one server
//!    call each).
//!
//! ```text
//! cargo bench -p simba-backends --features redis --bench redis
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod common;

use futures::StreamExt;
use simba_backends::redis::RedisBackend;
use simba_backends::{Backend, BackendConfig};
use simba_core::{AcquireOutcome, LeaseName, Token};
use std::time::{Duration, Instant};

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn p90(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() * 9 / 10]
}

async fn won(b: &RedisBackend, s: simba_core::SessionId, n: &LeaseName) -> Token {
    match b.acquire(s, n).await.unwrap() {
        AcquireOutcome::Won { token, .. } => token,
        other => panic!("expected to win, got {other:?}"),
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let url = std::env::var("SIMBA_BENCH_REDIS").unwrap_or("redis://127.0.0.1:6379/0".into());
    let prefix = format!(
        "bench.{}",
        &simba_backends::random_session_id().unwrap().to_string()[..8]
    );
    let config = BackendConfig::parse(&url)
        .unwrap()
        .with_key_prefix(&prefix)
        .unwrap();
    let b = match RedisBackend::connect(&config).await {
        Ok(b) => b,
        Err(e) => {
            eprintln!("no Redis at {}: {e}", config.redacted_url());
            return;
        }
    };
    let iters = 2000;
    let s = common::session(&b, Duration::from_secs(60)).await;
    let n = LeaseName::new("bench.cycle").unwrap();
    // Warm up (script cache, connection).
    for _ in 0..100 {
        b.ping().await.unwrap();
        let t = won(&b, s, &n).await;
        b.release(s, &n, t).await.unwrap();
    }
    let (mut ping, mut cycle) = (Vec::new(), Vec::new());
    for _ in 0..iters {
        let t0 = Instant::now();
        b.ping().await.unwrap();
        ping.push(t0.elapsed());
        let t0 = Instant::now();
        let t = won(&b, s, &n).await;
        b.release(s, &n, t).await.unwrap();
        cycle.push(t0.elapsed());
    }
    let (pm, cm) = (median(&mut ping), median(&mut cycle));
    println!(
        "PING round trip:          median {pm:>10.1?}  p90 {:>10.1?}",
        p90(&mut ping)
    );
    println!(
        "acquire + release:        median {cm:>10.1?}  p90 {:>10.1?}  = {:.2}x PING (goal <= 2.5x)",
        p90(&mut cycle),
        cm.as_secs_f64() / pm.as_secs_f64()
    );

    // Handover: holder on one client, candidate on another, listening.
    let c = RedisBackend::connect(&config).await.unwrap();
    let cs = common::session(&c, Duration::from_secs(60)).await;
    let mut releases = c.subscribe_releases().await.unwrap().unwrap();
    let h = LeaseName::new("bench.handover").unwrap();
    let mut handover = Vec::new();
    for _ in 0..300 {
        let t = won(&b, s, &h).await;
        assert!(matches!(
            c.acquire(cs, &h).await.unwrap(),
            AcquireOutcome::Held { .. }
        ));
        let candidate = async {
            loop {
                let got = releases.next().await.unwrap();
                if got == h {
                    break;
                }
            }
            let ct = won(&c, cs, &h).await;
            (Instant::now(), ct)
        };
        let t0 = Instant::now();
        let (_, (t1, ct)) = tokio::join!(b.release(s, &h, t), candidate);
        handover.push(t1 - t0);
        c.release(cs, &h, ct).await.unwrap();
        // Consume the broadcast of the candidate's own release.
        while releases.next().await.unwrap() != h {}
    }
    println!(
        "handover (backend level): median {:>10.1?}  p90 {:>10.1?}  (release -> broadcast -> Won)",
        median(&mut handover),
        p90(&mut handover)
    );

    // Renewal with 1, 100 and 10,000 held leases.
    for count in [1usize, 100, 10_000] {
        let rs = common::session(&b, Duration::from_secs(120)).await;
        for i in 0..count {
            let name = LeaseName::new(format!("bench.r{count}.{i}")).unwrap();
            won(&b, rs, &name).await;
        }
        // The first renewal after the wins lists them all; the next ones
        // find the list unchanged.
        let t0 = Instant::now();
        let r = b.renew(rs).await.unwrap();
        let first = t0.elapsed();
        assert_eq!(r.owned.len(), count);
        let mut times = Vec::new();
        let rounds = if count > 1000 { 50 } else { 300 };
        for _ in 0..rounds {
            let t0 = Instant::now();
            let r = b.renew(rs).await.unwrap();
            times.push(t0.elapsed());
            assert_eq!(r.owned.len(), count);
        }
        println!(
            "renew, {count:>6} leases:    median {:>10.1?}  p90 {:>10.1?}  (one call; the first, listing them all: {first:.1?})",
            median(&mut times),
            p90(&mut times)
        );
        b.close_session(rs).await.unwrap();
    }
    b.close_session(s).await.unwrap();
    c.close_session(cs).await.unwrap();

    // Clean up this run's keys (SCAN + DEL, never FLUSH).
    let client = redis::Client::open(config.url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let mut cursor: u64 = 0;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(format!("{{{prefix}}}*"))
            .arg("COUNT")
            .arg(1000)
            .query_async(&mut conn)
            .await
            .unwrap();
        if !keys.is_empty() {
            let _: i64 = redis::cmd("DEL")
                .arg(&keys)
                .query_async(&mut conn)
                .await
                .unwrap();
        }
        if next == 0 {
            break;
        }
        cursor = next;
    }
}
