//! The etcd backend against a raw `get` round trip on the same client:
//! uncontended acquire+release (goal: at most 2.5x a `get`), renewal,
//! graceful handover to a waiter woken by the release watch (goal: 1.5 ms
//! median), and crash fail-over as a ratio of the lease duration.
//!
//! `cargo bench -p simba-backends --features etcd --bench etcd`
//! (env `SIMBA_BENCH_ETCD` overrides `etcd://127.0.0.1:2379`;
//! `SIMBA_BENCH_ITERS` the iteration count, default 1000).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod common;

use futures::StreamExt;
use simba_backends::etcd::EtcdBackend;
use simba_backends::Backend;
use simba_core::{AcquireOutcome, LeaseName};
use std::time::{Duration, Instant};

fn iters() -> usize {
    common::iters()
}

fn pct(mut v: Vec<Duration>, p: f64) -> Duration {
    v.sort();
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v.get(i).copied().unwrap_or_default()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn won(o: AcquireOutcome) -> simba_core::Token {
    match o {
        AcquireOutcome::Won { token, .. } => token,
        other => panic!("expected to win, got {other:?}"),
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let base = std::env::var("SIMBA_BENCH_ETCD").unwrap_or_else(|_| "etcd://127.0.0.1:2379".into());
    let id = simba_backends::random_session_id().unwrap().to_string();
    let url = format!("{base}/simba-bench/b{}", &id[..8]);
    let a = EtcdBackend::connect_url(&url).await.unwrap();
    let b = EtcdBackend::connect_url(&url).await.unwrap();
    let n = iters();
    println!(
        "etcd backend at {} ({n} iterations, medians unless said)",
        a.prefix()
    );

    let sa = common::session(&a, Duration::from_secs(30)).await;
    let sb = common::session(&b, Duration::from_secs(30)).await;
    let name = LeaseName::new("bench.lease").unwrap();
    let key = format!("{}/l/{name}", a.prefix());

    // Interleaved so that both see the same machine load.
    let (mut get, mut put, mut cycle, mut renew) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut raw = a.client();
    let scratch = format!("{}/bench-put", a.prefix());
    for i in 0..n + n / 10 {
        let t = Instant::now();
        a.raw_get(&key).await.unwrap();
        let g = t.elapsed();
        let t = Instant::now();
        raw.put(scratch.as_str(), "x", None).await.unwrap();
        let p = t.elapsed();
        let t = Instant::now();
        let token = won(a.acquire(sa, &name).await.unwrap());
        a.release(sa, &name, token).await.unwrap();
        let c = t.elapsed();
        let t = Instant::now();
        a.renew(sa).await.unwrap();
        let r = t.elapsed();
        if i >= n / 10 {
            get.push(g);
            put.push(p);
            cycle.push(c);
            renew.push(r);
        }
    }
    let g = pct(get.clone(), 0.5);
    let c = pct(cycle, 0.5);
    let p = pct(put, 0.5);
    println!("raw get round trip            {:>8.3} ms", ms(g));
    println!("raw put (one durable write)   {:>8.3} ms", ms(p));
    println!(
        "acquire + release (uncontended) {:>6.3} ms = {:.2}x get (goal <= 2.5x), {:.2}x put (two writes: floor 2x)",
        ms(c),
        c.as_secs_f64() / g.as_secs_f64(),
        c.as_secs_f64() / p.as_secs_f64()
    );
    println!(
        "renew (keep-alive + owned list) {:>6.3} ms",
        ms(pct(renew, 0.5))
    );

    // Graceful handover: b waits on the release watch, a releases; time from
    // the start of a's release to b's won acquire.
    let mut releases = b.subscribe_releases().await.unwrap().unwrap();
    let mut handover = Vec::new();
    let rounds = (n / 2).max(20);
    for _ in 0..rounds {
        let token = won(a.acquire(sa, &name).await.unwrap());
        assert!(matches!(
            b.acquire(sb, &name).await.unwrap(),
            AcquireOutcome::Held { .. }
        ));
        let t = Instant::now();
        let waiter = async {
            loop {
                if releases.next().await.as_ref() == Some(&name) {
                    let token = won(b.acquire(sb, &name).await.unwrap());
                    return (t.elapsed(), token);
                }
            }
        };
        let (done, ()) =
            futures::join!(waiter, async { a.release(sa, &name, token).await.unwrap() });
        handover.push(done.0);
        b.release(sb, &name, done.1).await.unwrap();
        // Drain b's own release broadcast.
        while releases.next().await.as_ref() != Some(&name) {}
    }
    println!(
        "graceful handover             {:>8.3} ms median, {:.3} ms p99 (goal <= 1.5 ms median)",
        ms(pct(handover.clone(), 0.5)),
        ms(pct(handover, 0.99))
    );

    // Crash fail-over: a 2 s session takes the lease and stops renewing; b
    // wins once etcd expires it (woken by the delete). Ratio to the TTL, from
    // the last renewal a sent.
    let ttl = Duration::from_secs(2);
    let mut ratios = Vec::new();
    for _ in 0..5 {
        let crashed = a.open_session(ttl).await.unwrap().session;
        won(a.acquire(crashed, &name).await.unwrap());
        let t = Instant::now();
        a.renew(crashed).await.unwrap();
        loop {
            match b.acquire(sb, &name).await.unwrap() {
                AcquireOutcome::Won { token, .. } => {
                    ratios.push(t.elapsed().as_secs_f64() / ttl.as_secs_f64());
                    b.release(sb, &name, token).await.unwrap();
                    break;
                }
                _ => {
                    let _ = tokio::time::timeout(Duration::from_secs(5), releases.next()).await;
                }
            }
        }
        while let Ok(Some(_)) =
            tokio::time::timeout(Duration::from_millis(50), releases.next()).await
        {}
    }
    ratios.sort_by(f64::total_cmp);
    println!(
        "crash fail-over at a 2 s TTL   {:.2}x TTL median, {:.2}x max of {}",
        ratios[ratios.len() / 2],
        ratios[ratios.len() - 1],
        ratios.len()
    );
    a.close_session(sa).await.unwrap();
    b.close_session(sb).await.unwrap();
    a.delete_all().await.unwrap();
}
