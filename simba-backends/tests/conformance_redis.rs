//! The conformance suite against the Redis on 127.0.0.1:6379 (required when
//! `CI=true`), on tokio and on async-std. Every run uses its own key prefix
//! and deletes its keys afterwards; the shared server is never flushed.
#![cfg(all(feature = "testkit", feature = "redis"))]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::*;
use futures::future::{BoxFuture, FutureExt};
use simba_backends::redis::RedisBackend;
use simba_backends::testkit::{run_all, Capability, Factory, Hold, HoldError};
use simba_backends::BackendConfig;
use simba_core::{AcquireOutcome, BackendError, BackendErrorKind, LeaseName, SessionId};

const REDIS_URL: &str = "redis://127.0.0.1:6379/0";

/// Clients of namespace `ns` share the key prefix `<tag>.<ns>`.
struct RedisFactory {
    url: String,
    tag: String,
}

impl Factory for RedisFactory {
    type Backend = RedisBackend;
    fn connect<'a>(&'a self, ns: &'a str) -> BoxFuture<'a, Result<RedisBackend, BackendError>> {
        async move {
            let c =
                BackendConfig::parse(&self.url)?.with_key_prefix(&format!("{}.{ns}", self.tag))?;
            RedisBackend::connect(&c).await
        }
        .boxed()
    }
    fn acquire_while_killed<'a>(
        &'a self,
        backend: &'a RedisBackend,
        session: SessionId,
        name: &'a LeaseName,
    ) -> Option<BoxFuture<'a, Result<AcquireOutcome, BackendError>>> {
        Some(async move { backend.acquire_while_killed(session, name).await? }.boxed())
    }
    fn lacks(&self) -> Vec<Capability> {
        vec![Capability::LockHold]
    }
    fn hold<'a>(
        &'a self,
        _backend: &'a RedisBackend,
    ) -> BoxFuture<'a, Result<Box<dyn Hold>, HoldError>> {
        futures::future::ready(Err(HoldError::NotApplicable(
            "Redis runs each call as one Lua script on its single command thread: \
             no call can wait inside another (docs/BACKENDS.md)"
                .into(),
        )))
        .boxed()
    }
}

async fn redis_probe(url: &str) -> Result<(), BackendError> {
    let b = RedisBackend::connect_url(url).await?;
    b.ping().await
}

/// Deletes every key under `{<tag>…}` (SCAN, never FLUSH).
async fn delete_keys(url: &str, tag: &str) {
    let client = redis::Client::open(url).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let mut cursor: u64 = 0;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(format!("{{{tag}*"))
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_passes_the_conformance_suite() {
    if !server_available("Redis at 127.0.0.1:6379", redis_probe(REDIS_URL).await) {
        return;
    }
    let factory = RedisFactory {
        url: REDIS_URL.into(),
        tag: tag(),
    };
    let report = run_all(&factory).await;
    println!("{report}");
    delete_keys(REDIS_URL, &factory.tag).await;
    report.assert_passed();
}

/// The same backend on async-std (redis's smol support).
#[cfg(feature = "runtime-async-std")]
#[test]
fn redis_passes_core_cases_on_async_std() {
    async_std::task::block_on(async {
        if !server_available("Redis at 127.0.0.1:6379", redis_probe(REDIS_URL).await) {
            return;
        }
        let factory = RedisFactory {
            url: REDIS_URL.into(),
            tag: tag(),
        };
        let report = simba_backends::testkit::run_selected(&factory, |c| {
            !c.contains("expir") && !c.contains("s1_open")
        })
        .await;
        println!("{report}");
        delete_keys(REDIS_URL, &factory.tag).await;
        report.assert_passed();
    });
}

/// Wrong credentials and a bad URL give typed errors that never show the
/// password.
#[tokio::test]
async fn bad_credentials_and_urls_are_typed_and_redacted() {
    if !server_available("Redis at 127.0.0.1:6379", redis_probe(REDIS_URL).await) {
        return;
    }
    let e = RedisBackend::connect_url("redis://nobody:hunter2@127.0.0.1:6379/0")
        .await
        .unwrap_err();
    assert_eq!(e.kind, BackendErrorKind::Rejected, "{e}");
    assert!(!e.to_string().contains("hunter2"), "{e}");
    let e = RedisBackend::connect_url("redis://u:hunter2@127.0.0.1:6379/0?simba_key_prefix={x}")
        .await
        .unwrap_err();
    assert_eq!(e.kind, BackendErrorKind::Rejected, "{e}");
    assert!(!e.to_string().contains("hunter2"), "{e}");
    let e = RedisBackend::connect_url("postgres://u:hunter2@h/db")
        .await
        .unwrap_err();
    assert_eq!(e.kind, BackendErrorKind::Rejected, "{e}");
    assert!(!e.to_string().contains("hunter2"), "{e}");
}

/// The history check (issue 9) on Redis: four clients, random calls on one
/// name with 300 ms leases; the history must linearize (S1.2, S3.2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_history_linearizes() {
    if !server_available("Redis at 127.0.0.1:6379", redis_probe(REDIS_URL).await) {
        return;
    }
    let factory = RedisFactory {
        url: REDIS_URL.into(),
        tag: tag(),
    };
    let mut clients = Vec::new();
    for _ in 0..4 {
        clients.push(factory.connect("h").await.unwrap());
    }
    let load = simba_backends::testkit::history::Load {
        calls: 60,
        lease: std::time::Duration::from_millis(300),
        seed: 6,
    };
    history_check("redis", &clients, load, factory.expiry_lateness()).await;
    delete_keys(REDIS_URL, &factory.tag).await;
}
