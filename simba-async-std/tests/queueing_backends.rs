//! Elections on ZooKeeper (127.0.0.1:2181) and etcd (127.0.0.1:2379) through
//! the async-std client, as `scripts/test.sh` starts them: the second
//! client is elected by the first one's release broadcast (S4.2), with the
//! token above the first term's (S3.2), long before the first client's
//! lease could have run out. A missing server fails the test unless
//! `SIMBA_TEST_SKIP_SERVERS` lists it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![cfg(any(feature = "zookeeper", feature = "etcd"))]

use futures::channel::mpsc;
use futures::StreamExt;
use simba_async_std::{ElectionListener, SimbaConfig, Term};
use std::time::{Duration, Instant};

struct Elected(mpsc::UnboundedSender<u64>);

impl ElectionListener for Elected {
    fn on_elected(&self, term: &Term) {
        let _ = self.0.unbounded_send(term.token());
    }
}

/// `a` wins, `b` waits; `a` stops; `b` is elected within 2 s (the lease is
/// 20 s) with a greater token.
async fn hand_over(kind: &str, url: &str) {
    let settings = || {
        SimbaConfig::builder()
            .lease_duration(Duration::from_secs(20))
            .build()
            .unwrap()
    };
    let connect = || async {
        simba_backends::connect(url)
            .await
            .map(|b| simba_async_std::builder_dyn(b.into()))
    };
    let a = match connect().await {
        Ok(b) => b.config(settings()).build().unwrap(),
        Err(e) => {
            simba_backends::test_servers::missing_server(
                kind,
                url,
                &format!("{kind}: a release hands over on async-std"),
                &e,
            );
            return;
        }
    };
    let b = connect().await.unwrap().config(settings()).build().unwrap();
    let (tx_a, mut rx_a) = mpsc::unbounded();
    let (tx_b, mut rx_b) = mpsc::unbounded();
    let name = format!("async-std.{}", std::process::id());
    let ea = a.election(&name).start(Elected(tx_a)).await.unwrap();
    let first = async_std::future::timeout(Duration::from_secs(10), rx_a.next())
        .await
        .expect("a was not elected within 10 s")
        .unwrap();
    let eb = b.election(&name).start(Elected(tx_b)).await.unwrap();
    // Let b's attempt reach the backend and wait there.
    async_std::task::sleep(Duration::from_millis(500)).await;
    let stopped = Instant::now();
    ea.stop().await;
    let second = async_std::future::timeout(Duration::from_secs(10), rx_b.next())
        .await
        .expect("b was not elected within 10 s")
        .unwrap();
    let took = stopped.elapsed();
    assert!(second > first, "{kind}: token {second} after {first}");
    assert!(
        took < Duration::from_secs(2),
        "{kind}: b elected {took:?} after a stopped: not by the release broadcast"
    );
    eb.stop().await;
    a.close().await;
    b.close().await;
}

#[cfg(feature = "zookeeper")]
#[test]
fn zookeeper_a_release_hands_over_on_async_std_s4_2() {
    async_std::task::block_on(hand_over(
        "zookeeper",
        &format!("zk://127.0.0.1:2181/simba-async-std-{}", std::process::id()),
    ));
}

#[cfg(feature = "etcd")]
#[test]
fn etcd_a_release_hands_over_on_async_std_s4_2() {
    async_std::task::block_on(hand_over(
        "etcd",
        &format!(
            "etcd://127.0.0.1:2379/simba-async-std-{}",
            std::process::id()
        ),
    ));
}
