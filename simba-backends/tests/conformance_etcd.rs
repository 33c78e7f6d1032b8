//! The conformance suite against etcd at 127.0.0.1:2379 (required when
//! `CI=true`; `scripts/test.sh` starts one), from tokio and from async-std.
//! Every run uses its own key prefix and deletes it afterwards.
#![cfg(all(feature = "testkit", feature = "etcd"))]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::*;
use simba_backends::testkit::{run_all, run_selected};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_passes_the_conformance_suite() {
    if !etcd_available().await {
        return;
    }
    let factory = EtcdFactory { tag: tag() };
    assert_suite_passed(run_all(&factory).await, factory.cleanup()).await;
}

/// S10.5 on etcd: a join is announced by its group's name (a watch of the
/// member keys: a put that created its key).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_announces_a_join() {
    use simba_backends::testkit::Factory;
    if !etcd_available().await {
        return;
    }
    let factory = EtcdFactory { tag: tag() };
    let (a, b) = (
        factory.connect("ann").await.unwrap(),
        factory.connect("ann").await.unwrap(),
    );
    check_join_announced(&a, &b).await;
    factory.cleanup().await;
}

/// S4.2 on etcd: a waiter's withdraw is no release to a node that never
/// read the name's queue (the watch saw the places put).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_does_not_announce_a_withdraw() {
    use simba_backends::testkit::Factory;
    if !etcd_available().await {
        return;
    }
    let factory = EtcdFactory { tag: tag() };
    let (a, b, c) = (
        factory.connect("echo").await.unwrap(),
        factory.connect("echo").await.unwrap(),
        factory.connect("echo").await.unwrap(),
    );
    check_withdraw_not_announced(&a, &b, &c).await;
    factory.cleanup().await;
}

/// Outside tokio the backend runs its calls on a runtime thread of its own;
/// the release stream is polled by async-std.
#[test]
fn etcd_passes_the_conformance_suite_on_async_std() {
    async_std::task::block_on(async {
        if !etcd_available().await {
            return;
        }
        let factory = EtcdFactory { tag: tag() };
        assert_suite_passed(
            run_selected(&factory, |c| {
                c.contains("notification")
                    || c.contains("sixteen")
                    || c.contains("contention")
                    || c.contains("s1_open_renew")
                    || c.contains("inspect")
            })
            .await,
            factory.cleanup(),
        )
        .await;
    });
}

/// The history check (issue 9) on etcd: four clients, random calls on one
/// name with 2 s leases (etcd's minimum TTL here); the history must
/// linearize (S1.2, S3.2), allowing etcd's declared lazy expiry on the late
/// side only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_history_linearizes() {
    if !etcd_available().await {
        return;
    }
    let factory = EtcdFactory { tag: tag() };
    let load = simba_backends::testkit::history::Load {
        calls: 30,
        lease: std::time::Duration::from_secs(2),
        seed: 8,
        queueing: true,
    };
    factory_history_check("etcd", &factory, load).await;
    factory.cleanup().await;
}

/// A waiter's place outlives a lease with no acquire (a candidate parked for
/// an acquire slot, S4.6): only a win, a withdraw or the session's end
/// removes it (S4.5).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_a_waiter_keeps_its_turn_without_acquiring() {
    if !etcd_available().await {
        return;
    }
    let factory = EtcdFactory { tag: tag() };
    let result = factory_waiter_keeps_its_turn(&factory, std::time::Duration::from_secs(2)).await;
    factory.cleanup().await;
    result.unwrap();
}
