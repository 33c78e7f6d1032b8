//! The history check's long form: many clients, many calls, several rounds,
//! against one backend; prints one line per round and a summary.
//!
//! ```text
//! cargo run -p simba-backends --all-features --release --example history -- \
//!     --backend postgres --clients 8 --calls 400 --lease-ms 300 --rounds 3
//! ```
//! Backends: `memory`, `broken` (a memory backend that skips the holder
//! check: the checker must fire), `sqlite`, `postgres`
//! (`postgres://postgres@127.0.0.1:5432/test`), `mysql`
//! (`mysql://root@127.0.0.1:3306/test`); `--url` overrides the URL. Tables
//! get a random prefix and are dropped afterwards.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stdout
)]

use simba_backends::testkit::history::{check, record, Check, Load};
use simba_backends::{Backend, BackendConfig, MemoryBackend};
use simba_core::LeaseName;
use std::time::{Duration, Instant};

struct Args {
    backend: String,
    url: Option<String>,
    clients: usize,
    calls: usize,
    lease_ms: u64,
    rounds: u64,
    seed: u64,
}

fn args() -> Args {
    let mut a = Args {
        backend: "memory".into(),
        url: None,
        clients: 8,
        calls: 300,
        lease_ms: 300,
        rounds: 3,
        seed: 1,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut val = || it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--backend" => a.backend = val(),
            "--url" => a.url = Some(val()),
            "--clients" => a.clients = val().parse().unwrap(),
            "--calls" => a.calls = val().parse().unwrap(),
            "--lease-ms" => a.lease_ms = val().parse().unwrap(),
            "--rounds" => a.rounds = val().parse().unwrap(),
            "--seed" => a.seed = val().parse().unwrap(),
            _ => {
                println!(
                    "usage: history [--backend memory|broken|sqlite|postgres|mysql] [--url URL] \
                     [--clients 8] [--calls 300] [--lease-ms 300] [--rounds 3] [--seed 1]"
                );
                std::process::exit(2);
            }
        }
    }
    a
}

fn url(a: &Args, prefix: &str) -> String {
    match (a.url.clone(), a.backend.as_str()) {
        (Some(u), _) => u,
        (None, "sqlite") => format!(
            "sqlite://{}",
            std::env::temp_dir().join(format!("{prefix}.db")).display()
        ),
        (None, "postgres") => "postgres://postgres@127.0.0.1:5432/test".into(),
        (None, "mysql") => "mysql://root@127.0.0.1:3306/test".into(),
        (None, other) => panic!("unknown backend {other}"),
    }
}

/// Drops the round's tables (or removes the SQLite file).
async fn cleanup(a: &Args, prefix: &str) {
    let url = url(a, prefix);
    let drop = format!("DROP TABLE IF EXISTS {prefix}leases, {prefix}sessions");
    match a.backend.as_str() {
        "postgres" => {
            let pool = sqlx::PgPool::connect(&url).await.unwrap();
            sqlx::query(&drop).execute(&pool).await.unwrap();
        }
        "mysql" => {
            let pool = sqlx::MySqlPool::connect(&url).await.unwrap();
            sqlx::query(&drop).execute(&pool).await.unwrap();
        }
        "sqlite" => {
            let path = url.trim_start_matches("sqlite://").to_owned();
            for suffix in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{path}{suffix}"));
            }
        }
        _ => {}
    }
}

async fn clients(a: &Args, prefix: &str) -> Vec<Box<dyn Backend>> {
    let url = url(a, prefix);
    let config = BackendConfig::parse(&url)
        .unwrap()
        .with_table_prefix(prefix)
        .unwrap()
        .with_max_connections(2);
    let mut v = Vec::new();
    for _ in 0..a.clients {
        v.push(config.connect().await.unwrap());
    }
    v
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let a = args();
    let name = LeaseName::new("history").unwrap();
    let (mut calls, mut terms, mut steps, mut failed, mut bad) = (0, 0, 0, 0, 0);
    let started = Instant::now();
    for round in 0..a.rounds {
        let load = Load {
            calls: a.calls,
            lease: Duration::from_millis(a.lease_ms),
            seed: a.seed + round,
            queueing: a.backend == "zookeeper" || a.backend == "etcd",
        };
        let prefix = format!(
            "hist{}_",
            &simba_backends::random_session_id().unwrap().to_string()[..8]
        );
        let t0 = Instant::now();
        let h = match a.backend.as_str() {
            "memory" | "broken" => {
                let b = if a.backend == "memory" {
                    MemoryBackend::new()
                } else {
                    MemoryBackend::broken_skipping_holder_check()
                };
                let cs: Vec<MemoryBackend> = (0..a.clients).map(|_| b.clone()).collect();
                record(&cs, &name, &load).await
            }
            _ => {
                let cs = clients(&a, &prefix).await;
                let h = record(&cs, &name, &load).await;
                drop(cs);
                cleanup(&a, &prefix).await;
                h
            }
        };
        let recorded = t0.elapsed();
        let t1 = Instant::now();
        let v = check(&h, &Check::default());
        println!(
            "round {round}: recorded in {recorded:.1?}, checked in {:.1?}: {v}",
            t1.elapsed()
        );
        calls += v.calls;
        terms += v.terms;
        steps += v.steps;
        failed += v.failed;
        bad += u64::from(!v.ok());
    }
    println!(
        "{}: {} rounds x {} clients x {} calls, lease {} ms: {calls} calls, {terms} terms, \
         {failed} failed calls, {steps} search steps, {bad} rounds failing, {:.1?} in all",
        a.backend,
        a.rounds,
        a.clients,
        a.calls,
        a.lease_ms,
        started.elapsed()
    );
    if bad > 0 {
        std::process::exit(1);
    }
}
