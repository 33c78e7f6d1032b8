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

/// Whether a test that needs the Redis test server may run (see
/// [`server_available`]: a missing server fails the test unless skipped).
async fn redis_available() -> bool {
    server_available("Redis at 127.0.0.1:6379", redis_probe(REDIS_URL).await)
}

/// Clients of the Redis test server under a fresh run tag, or `None` when
/// the test is to be skipped ([`redis_available`]).
async fn redis_factory() -> Option<RedisFactory> {
    redis_available().await.then(|| RedisFactory {
        url: REDIS_URL.into(),
        tag: tag(),
    })
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
    let Some(factory) = redis_factory().await else {
        return;
    };
    assert_suite_passed(
        run_all(&factory).await,
        delete_keys(REDIS_URL, &factory.tag),
    )
    .await;
}

/// S10.5 on Redis: a join is announced on the release channel.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_announces_a_join() {
    let Some(factory) = redis_factory().await else {
        return;
    };
    let (a, b) = (
        factory.connect("ann").await.unwrap(),
        factory.connect("ann").await.unwrap(),
    );
    check_join_announced(&a, &b).await;
    delete_keys(REDIS_URL, &factory.tag).await;
}

/// The same backend on async-std (redis's smol support).
#[cfg(feature = "runtime-async-std")]
#[test]
fn redis_passes_core_cases_on_async_std() {
    async_std::task::block_on(async {
        let Some(factory) = redis_factory().await else {
            return;
        };
        assert_suite_passed(
            simba_backends::testkit::run_selected(&factory, |c| {
                !c.contains("expir") && !c.contains("s1_open")
            })
            .await,
            delete_keys(REDIS_URL, &factory.tag),
        )
        .await;
    });
}

/// Wrong credentials and a bad URL give typed errors that never show the
/// password.
#[tokio::test]
async fn bad_credentials_and_urls_are_typed_and_redacted() {
    if !redis_available().await {
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
    let Some(factory) = redis_factory().await else {
        return;
    };
    let load = simba_backends::testkit::history::Load {
        calls: 60,
        lease: std::time::Duration::from_millis(300),
        seed: 6,
        queueing: false,
    };
    factory_history_check("redis", &factory, load).await;
    delete_keys(REDIS_URL, &factory.tag).await;
}

/// A renewal lists the owned leases only when they changed since the
/// caller's last renewal (issue 10); every change a live session can see —
/// a win or a release, here also by another client sharing the session —
/// must show on the next renewal, and an unchanged list must come back whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewal_lists_every_change_to_the_owned_leases() {
    use simba_backends::Backend;
    let Some(factory) = redis_factory().await else {
        return;
    };
    let a = factory.connect("v").await.unwrap();
    let b = factory.connect("v").await.unwrap();
    let s = session(&a, std::time::Duration::from_secs(30)).await;
    let n1 = LeaseName::new("v.one").unwrap();
    let n2 = LeaseName::new("v.two").unwrap();
    let names = |r: &simba_core::Renewal| {
        r.owned
            .iter()
            .map(|(n, t)| (n.as_str().to_owned(), *t))
            .collect::<Vec<_>>()
    };
    assert!(a.renew(s).await.unwrap().owned.is_empty());
    let AcquireOutcome::Won { token: t1, .. } = a.acquire(s, &n1).await.unwrap() else {
        panic!("free name not won")
    };
    let first = a.renew(s).await.unwrap();
    assert_eq!(names(&first), vec![("v.one".to_owned(), t1)]);
    // Unchanged: the same list, twice.
    for _ in 0..2 {
        assert_eq!(names(&a.renew(s).await.unwrap()), names(&first));
    }
    // A change made through another client, on the same session.
    let AcquireOutcome::Won { token: t2, .. } = b.acquire(s, &n2).await.unwrap() else {
        panic!("free name not won")
    };
    assert_eq!(
        names(&a.renew(s).await.unwrap()),
        vec![("v.one".to_owned(), t1), ("v.two".to_owned(), t2)]
    );
    b.release(s, &n1, t1).await.unwrap();
    assert_eq!(
        names(&a.renew(s).await.unwrap()),
        vec![("v.two".to_owned(), t2)]
    );
    a.release(s, &n2, t2).await.unwrap();
    assert!(a.renew(s).await.unwrap().owned.is_empty());
    assert!(b.renew(s).await.unwrap().owned.is_empty());
    a.close_session(s).await.unwrap();
    assert!(matches!(
        a.renew(s).await,
        Err(simba_core::RenewError::Expired)
    ));
    delete_keys(REDIS_URL, &factory.tag).await;
}
