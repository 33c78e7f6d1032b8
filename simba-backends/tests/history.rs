//! The history check (issue 9, part 2): several clients issue random calls on
//! one lease name with short leases, so that expiry and takeover happen; the
//! recorded history must linearize against the sequential lease model and
//! keep the direct invariants (S3.2 tokens strictly increase; S1.2 no two
//! valid terms at once). A deliberately broken backend must be caught.
//! The long form: `cargo run -p simba-backends --all-features --release
//! --example history -- --help`.
#![cfg(feature = "testkit")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::*;
use simba_backends::testkit::history::{check, record, Check, History, Load};
use simba_backends::testkit::Factory;
use simba_backends::{Backend, MemoryBackend};
use simba_core::LeaseName;
use std::time::Duration;

const CLIENTS: usize = 4;

fn load(seed: u64) -> Load {
    Load {
        calls: 60,
        lease: Duration::from_millis(300),
        seed,
        queueing: false,
    }
}

async fn clients<F: Factory>(f: &F, ns: &str) -> Vec<F::Backend> {
    clients_of(f, ns, CLIENTS).await
}

fn verify(label: &str, h: &History) {
    verify_history(label, h, Check::default().late);
}

/// The history of random calls by `cs` on the name "history", from `seed`.
async fn history_of<B: Backend>(cs: &[B], seed: u64) -> History {
    record(cs, &LeaseName::new("history").unwrap(), &load(seed)).await
}

/// `CLIENTS` clients of one memory backend `b`.
fn memory_clients(b: &MemoryBackend) -> Vec<MemoryBackend> {
    (0..CLIENTS).map(|_| b.clone()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_history_linearizes() {
    let b = MemoryBackend::new();
    let cs = memory_clients(&b);
    let h = history_of(&cs, 1).await;
    verify("memory", &h);
}

/// Must fail: a memory backend whose acquire ignores a live holder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_checker_fires_on_a_backend_that_skips_the_holder_check() {
    let b = MemoryBackend::broken_skipping_holder_check();
    let cs = memory_clients(&b);
    let h = history_of(&cs, 2).await;
    let v = check(&h, &Check::default());
    println!("[broken memory] {v}");
    assert!(
        v.not_linearizable.is_some(),
        "the model search missed it: {v}"
    );
    assert!(
        !v.invariant_violations.is_empty(),
        "the direct invariants missed it: {v}"
    );
}

#[cfg(feature = "sqlite")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_history_linearizes() {
    let (factory, path) = SqliteFactory::new();
    let cs = clients(&factory, "h").await;
    let h = history_of(&cs, 3).await;
    drop(cs);
    remove_db(&path);
    verify("sqlite", &h);
}

#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_history_linearizes() {
    if !pg_available().await {
        return;
    }
    let factory = PgFactory { tag: tag() };
    let cs = clients(&factory, "h").await;
    let h = history_of(&cs, 4).await;
    for c in &cs {
        c.pool().close().await;
    }
    drop_pg_tables(&factory.tag).await;
    verify("postgres", &h);
}

#[cfg(feature = "mysql")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_history_linearizes() {
    if !mysql_available().await {
        return;
    }
    let factory = MysqlFactory { tag: tag() };
    let cs = clients(&factory, "h").await;
    let h = history_of(&cs, 5).await;
    for c in &cs {
        c.pool().close().await;
    }
    drop_mysql_tables(&factory.tag).await;
    verify("mysql", &h);
}

#[allow(dead_code)]
fn _assert_backend<B: Backend>() {}
