//! Issue 15's backend parts: PostgreSQL commits a release or a close
//! asynchronously and everything else durably; SQLite hints releases to the
//! other processes of the host through a file beside the database (S4.2),
//! and renewals never wake them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// Which imports are used depends on the enabled backends.
#![allow(unused_imports, dead_code)]

mod common;

use common::*;
use simba_backends::Backend;
use simba_core::{AcquireOutcome, LeaseName, Token};
use std::time::{Duration, Instant};

/// The next hint, within 5 s.
async fn next(hints: &mut futures::stream::BoxStream<'static, LeaseName>) -> LeaseName {
    use futures::StreamExt;
    tokio::time::timeout(Duration::from_secs(5), hints.next())
        .await
        .expect("a hint within 5 s")
        .expect("the hint stream ended")
}

fn won(o: AcquireOutcome) -> Token {
    match o {
        AcquireOutcome::Won { token, .. } => token,
        other => panic!("expected Won, got {other:?}"),
    }
}

/// Release and close turn `synchronous_commit` off for their own
/// transaction only; open, acquire and renew leave it as the server has it
/// (`on`), so they stay durable (docs/BACKENDS.md, "Durability").
#[cfg(all(feature = "postgres", feature = "testkit"))]
#[tokio::test]
async fn postgres_release_and_close_commit_asynchronously_and_nothing_else() {
    use simba_backends::testkit::Hold;
    if !pg_available().await {
        return;
    }
    let tag = tag();
    let b = pg_backend(&tag, "dur").await;
    let n = LeaseName::new("durable").unwrap();

    // Open, acquire, renew: durable.
    let mut h = b.hold().await.unwrap();
    let s = h
        .open_session(Duration::from_secs(30))
        .await
        .unwrap()
        .session;
    let t = won(h.acquire(s, &n).await.unwrap());
    h.renew(s).await.unwrap();
    assert_eq!(h.synchronous_commit().await.unwrap(), "on");
    // Release: asynchronous.
    h.release(s, &n, t).await.unwrap();
    assert_eq!(h.synchronous_commit().await.unwrap(), "off");
    h.rollback().await.unwrap();

    // Close: asynchronous (with and without leases to free).
    let s = session(&b, Duration::from_secs(30)).await;
    won(b.acquire(s, &n).await.unwrap());
    let mut h = b.hold().await.unwrap();
    h.close_session(s).await.unwrap();
    assert_eq!(h.synchronous_commit().await.unwrap(), "off");
    h.rollback().await.unwrap();

    // Outside those transactions the connection's setting is untouched.
    let setting: String = sqlx::query_scalar("SELECT current_setting('synchronous_commit')")
        .fetch_one(b.pool())
        .await
        .unwrap();
    assert_eq!(setting, "on");
    b.close_session(s).await.unwrap();
    drop_pg_tables(&tag).await;
}

/// A batch (S4.7) commits as its calls would alone: releases alone
/// asynchronously, but a batch with an acquire synchronously, even with a
/// release in it (a release's `synchronous_commit = off` lasts to the end of
/// its transaction, and a batch is one: an acquire lost in a server crash
/// would hand its token out again).
#[cfg(all(feature = "postgres", feature = "testkit"))]
#[tokio::test]
async fn postgres_a_batch_with_an_acquire_commits_synchronously() {
    use simba_core::{Command, Input, OpId};
    if !pg_available().await {
        return;
    }
    let tag = tag();
    let b = pg_backend(&tag, "bdur").await;
    let (held, wanted) = (
        LeaseName::new("held").unwrap(),
        LeaseName::new("wanted").unwrap(),
    );
    let s = session(&b, Duration::from_secs(30)).await;
    let t = won(b.acquire(s, &held).await.unwrap());
    let release = Command::Release {
        op: OpId(1),
        session: s,
        name: held.clone(),
        token: t,
    };
    let acquire = Command::Acquire {
        op: OpId(2),
        session: s,
        name: wanted.clone(),
    };

    // A release and an acquire (the release first in name order): durable.
    let mut h = b.hold().await.unwrap();
    let replies = h.batch(&[acquire.clone(), release.clone()]).await.unwrap();
    assert!(
        matches!(
            replies.as_slice(),
            [
                Input::AcquireReplied {
                    result: Ok(AcquireOutcome::Won { .. }),
                    ..
                },
                Input::ReleaseReplied { result: Ok(()), .. },
            ]
        ),
        "{replies:?}"
    );
    assert_eq!(h.synchronous_commit().await.unwrap(), "on");
    h.rollback().await.unwrap();

    // Releases alone: asynchronous, as a release alone.
    let mut h = b.hold().await.unwrap();
    let replies = h.batch(&[release]).await.unwrap();
    assert!(
        matches!(
            replies.as_slice(),
            [Input::ReleaseReplied { result: Ok(()), .. }]
        ),
        "{replies:?}"
    );
    assert_eq!(h.synchronous_commit().await.unwrap(), "off");
    h.rollback().await.unwrap();
    b.close_session(s).await.unwrap();
    drop_pg_tables(&tag).await;
}

/// S10.5 on PostgreSQL: a join is announced on the release channel.
#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_announces_a_join() {
    if !pg_available().await {
        return;
    }
    let tag = tag();
    let (a, b) = (pg_backend(&tag, "ann").await, pg_backend(&tag, "ann").await);
    check_join_announced(&a, &b).await;
    drop_pg_tables(&tag).await;
}

/// S10.5 on SQLite: a join is announced on the hint file, to another
/// instance on the same database file.
#[cfg(feature = "sqlite")]
#[tokio::test]
async fn sqlite_announces_a_join() {
    use simba_backends::sqlite::SqliteBackend;
    let (factory, path) = SqliteFactory::new();
    let c = config(&factory.url, &factory.tag, "ann");
    let a = SqliteBackend::connect(&c).await.unwrap();
    let b = SqliteBackend::connect(&c).await.unwrap();
    check_join_announced(&a, &b).await;
    remove_db(&path);
}

/// S4.2 on SQLite: two backend instances (two pools, as two processes
/// would have) on one file. B's subscription yields what A releases or
/// frees by closing; renewals and acquires yield nothing.
#[cfg(feature = "sqlite")]
#[tokio::test]
async fn sqlite_release_hints_reach_another_instance_and_renewals_stay_quiet() {
    use futures::StreamExt;
    use simba_backends::sqlite::SqliteBackend;
    let (factory, path) = SqliteFactory::new();
    let c = config(&factory.url, &factory.tag, "hint");
    let a = SqliteBackend::connect(&c).await.unwrap();
    let b = SqliteBackend::connect(&c).await.unwrap();
    assert!(b.broadcasts_releases());
    let mut hints = b
        .subscribe_releases()
        .await
        .unwrap()
        .expect("a hint stream");

    let s = session(&a, Duration::from_secs(30)).await;
    let n = LeaseName::new("hinted").unwrap();
    let t = won(a.acquire(s, &n).await.unwrap());
    // Renewals and acquires are not releases: nothing to hear.
    for _ in 0..5 {
        a.renew(s).await.unwrap();
    }
    assert!(
        tokio::time::timeout(Duration::from_millis(300), hints.next())
            .await
            .is_err(),
        "a renewal or an acquire woke the subscriber"
    );
    let t0 = Instant::now();
    a.release(s, &n, t).await.unwrap();
    assert_eq!(next(&mut hints).await, n);
    println!("release hint after {:?}", t0.elapsed());
    // A stale release frees nothing and says nothing.
    a.release(s, &n, t).await.unwrap();
    won(a.acquire(s, &n).await.unwrap());
    let m = LeaseName::new("hinted.too").unwrap();
    won(a.acquire(s, &m).await.unwrap());
    a.close_session(s).await.unwrap();
    let mut got = vec![next(&mut hints).await, next(&mut hints).await];
    got.sort();
    assert_eq!(got, vec![n.clone(), m]);
    assert!(
        tokio::time::timeout(Duration::from_millis(200), hints.next())
            .await
            .is_err(),
        "a hint nobody sent"
    );
    drop(hints);
    remove_db(&path);
}
