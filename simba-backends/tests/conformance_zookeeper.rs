//! The conformance suite against ZooKeeper on 127.0.0.1:2181 (started by
//! `scripts/test.sh`; required when `CI=true`), on tokio and on async-std.
//! Every run works under a root of its own (`/simba-test-<tag>/<case>`) and
//! deletes it afterwards.
#![cfg(all(feature = "testkit", feature = "zookeeper"))]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::*;
use futures::future::{BoxFuture, FutureExt};
use simba_backends::testkit::{run_all, Capability, Factory};
use simba_backends::zookeeper::ZkBackend;
use simba_backends::BackendConfig;
use simba_core::BackendError;
use std::time::Duration;

const ZK: &str = "zk://127.0.0.1:2181";

struct ZkFactory {
    root: String,
}

impl ZkFactory {
    fn new() -> ZkFactory {
        ZkFactory {
            root: format!("/simba-test-{}", tag()),
        }
    }
}

impl Factory for ZkFactory {
    type Backend = ZkBackend;
    fn connect<'a>(&'a self, ns: &'a str) -> BoxFuture<'a, Result<ZkBackend, BackendError>> {
        let url = format!("{ZK}{}/{ns}", self.root);
        async move {
            let c = BackendConfig::parse(&url)?.with_connect_timeout(Duration::from_secs(5));
            ZkBackend::connect(&c).await
        }
        .boxed()
    }
    fn lacks(&self) -> Vec<Capability> {
        // Every call is one ZooKeeper request (a multi-op where it checks and
        // writes), applied in zxid order by the leader: no call waits inside
        // another (docs/BACKENDS.md). Connection loss is covered by
        // tests/zookeeper_failures.rs instead of a mid-call kill.
        // A ZooKeeper session belongs to the connection that opened it.
        vec![
            Capability::LockHold,
            Capability::KillConnectionMidCall,
            Capability::SharedSession,
        ]
    }
}

async fn zk_probe() -> Result<(), BackendError> {
    let c = BackendConfig::parse(&format!("{ZK}/simba-probe"))?
        .with_connect_timeout(Duration::from_secs(3));
    let b = ZkBackend::connect(&c).await?;
    b.remove_tree().await
}

async fn cleanup(factory: &ZkFactory) {
    let c = BackendConfig::parse(&format!("{ZK}{}", factory.root)).unwrap();
    ZkBackend::connect(&c)
        .await
        .unwrap()
        .remove_tree()
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_passes_the_conformance_suite() {
    if !server_available("ZooKeeper at 127.0.0.1:2181", zk_probe().await) {
        return;
    }
    let factory = ZkFactory::new();
    assert_suite_passed(run_all(&factory).await, cleanup(&factory)).await;
}

/// S10.5 on ZooKeeper: a join is announced by its group's name (the
/// backend's persistent recursive watch of `<root>/groups` sees the member
/// znode created).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_announces_a_join() {
    if !server_available("ZooKeeper at 127.0.0.1:2181", zk_probe().await) {
        return;
    }
    let factory = ZkFactory::new();
    let (a, b) = (
        factory.connect("ann").await.unwrap(),
        factory.connect("ann").await.unwrap(),
    );
    check_join_announced(&a, &b).await;
    cleanup(&factory).await;
}

/// S4.2 on ZooKeeper: a waiter's withdraw is no release to a node that
/// never read the name's queue (the watch saw the places created).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_does_not_announce_a_withdraw() {
    if !server_available("ZooKeeper at 127.0.0.1:2181", zk_probe().await) {
        return;
    }
    let factory = ZkFactory::new();
    let (a, b, c) = (
        factory.connect("echo").await.unwrap(),
        factory.connect("echo").await.unwrap(),
        factory.connect("echo").await.unwrap(),
    );
    check_withdraw_not_announced(&a, &b, &c).await;
    cleanup(&factory).await;
}

/// The same backend on async-std (zookeeper-client's async-global-executor).
#[cfg(feature = "runtime-async-std")]
#[test]
fn zookeeper_passes_the_conformance_suite_on_async_std() {
    async_std::task::block_on(async {
        if !server_available("ZooKeeper at 127.0.0.1:2181", zk_probe().await) {
            return;
        }
        let factory = ZkFactory::new();
        assert_suite_passed(
            simba_backends::testkit::run_selected(&factory, |_| true).await,
            cleanup(&factory),
        )
        .await;
    });
}

/// The history check (issue 9) on ZooKeeper: four clients, random calls on
/// one name with 1 s sessions (the test server's minimum); the history must
/// linearize (S1.2, S3.2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_history_linearizes() {
    if !server_available("ZooKeeper at 127.0.0.1:2181", zk_probe().await) {
        return;
    }
    let factory = ZkFactory::new();
    let load = simba_backends::testkit::history::Load {
        calls: 30,
        lease: Duration::from_secs(1),
        seed: 7,
        queueing: true,
    };
    factory_history_check("zookeeper", &factory, load).await;
    cleanup(&factory).await;
}

/// A waiter's place outlives a lease with no acquire (a candidate parked for
/// an acquire slot, S4.6): only a win, a withdraw or the session's end
/// removes it (S4.5).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_a_waiter_keeps_its_turn_without_acquiring() {
    if !server_available("ZooKeeper at 127.0.0.1:2181", zk_probe().await) {
        return;
    }
    let factory = ZkFactory::new();
    let result = factory_waiter_keeps_its_turn(&factory, Duration::from_secs(2)).await;
    cleanup(&factory).await;
    result.unwrap();
}
