//! The conformance suite against etcd at 127.0.0.1:2379 (required when
//! `CI=true`; `scripts/test.sh` starts one), from tokio and from async-std.
//! Every run uses its own key prefix and deletes it afterwards.
#![cfg(all(feature = "testkit", feature = "etcd"))]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::*;
use simba_backends::testkit::{run_all, run_selected, Factory};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_passes_the_conformance_suite() {
    if !server_available("etcd at 127.0.0.1:2379", etcd_probe().await) {
        return;
    }
    let factory = EtcdFactory { tag: tag() };
    let report = run_all(&factory).await;
    println!("{report}");
    factory.cleanup().await;
    report.assert_passed();
}

/// Outside tokio the backend runs its calls on a runtime thread of its own;
/// the release stream is polled by async-std.
#[test]
fn etcd_passes_the_conformance_suite_on_async_std() {
    async_std::task::block_on(async {
        if !server_available("etcd at 127.0.0.1:2379", etcd_probe().await) {
            return;
        }
        let factory = EtcdFactory { tag: tag() };
        let report = run_selected(&factory, |c| {
            c.contains("notification")
                || c.contains("sixteen")
                || c.contains("contention")
                || c.contains("s1_open_renew")
                || c.contains("inspect")
        })
        .await;
        println!("{report}");
        factory.cleanup().await;
        report.assert_passed();
    });
}

/// The history check (issue 9) on etcd: four clients, random calls on one
/// name with 2 s leases (etcd's minimum TTL here); the history must
/// linearize (S1.2, S3.2), allowing etcd's declared lazy expiry on the late
/// side only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_history_linearizes() {
    if !server_available("etcd at 127.0.0.1:2379", etcd_probe().await) {
        return;
    }
    let factory = EtcdFactory { tag: tag() };
    let mut clients = Vec::new();
    for _ in 0..4 {
        clients.push(factory.connect("h").await.unwrap());
    }
    let load = simba_backends::testkit::history::Load {
        calls: 30,
        lease: std::time::Duration::from_secs(2),
        seed: 8,
        queueing: true,
    };
    history_check("etcd", &clients, load, factory.expiry_lateness()).await;
    drop(clients);
    factory.cleanup().await;
}

/// A waiter's place outlives a lease with no acquire (a candidate parked for
/// an acquire slot, S4.6): only a win, a withdraw or the session's end
/// removes it (S4.5).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_a_waiter_keeps_its_turn_without_acquiring() {
    if !server_available("etcd at 127.0.0.1:2379", etcd_probe().await) {
        return;
    }
    let factory = EtcdFactory { tag: tag() };
    let b = factory.connect("turn").await.unwrap();
    let result = waiter_keeps_its_turn(&b, std::time::Duration::from_secs(2)).await;
    drop(b);
    factory.cleanup().await;
    result.unwrap();
}

/// Upgrading from a Simba that held a name with one key `P/l/NAME` on its
/// session's lease: while such a key exists, a new client's acquire is
/// `Held` by that holder and writes no place; once it is gone, the new
/// client wins with a greater token, and the fence it leaves at `P/l/NAME`
/// makes the older client's acquire (create `P/l/NAME` if absent) fail for
/// good: the two never hold a name at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_an_older_clients_holder_key_and_the_fence_keep_both_apart() {
    use etcd_client::{Compare, CompareOp, GetOptions, PutOptions, Txn, TxnOp};
    use simba_backends::Backend;
    use simba_core::{AcquireOutcome, LeaseName, SessionId};
    if !server_available("etcd at 127.0.0.1:2379", etcd_probe().await) {
        return;
    }
    let factory = EtcdFactory { tag: tag() };
    let b = factory.connect("up").await.unwrap();
    let p = b.prefix().to_owned();
    let mut raw = b.client();
    let s = b
        .open_session(std::time::Duration::from_secs(30))
        .await
        .unwrap()
        .session;
    let n = LeaseName::new("upgraded").unwrap();
    // An older client's session and term, written as it wrote them.
    let lease = raw.lease_grant(30, None).await.unwrap().id();
    let old = SessionId::from_u128((0xabcd_u128 << 64) | lease as u128);
    let on_lease = || Some(PutOptions::new().with_lease(lease));
    raw.put(format!("{p}/s/{lease:016x}"), old.to_string(), on_lease())
        .await
        .unwrap();
    raw.put(format!("{p}/l/{n}"), old.to_string(), on_lease())
        .await
        .unwrap();
    let old_token = raw.get(format!("{p}/l/{n}"), None).await.unwrap().kvs()[0].create_revision();
    match b.acquire(s, &n).await.unwrap() {
        AcquireOutcome::Held { holder, token, .. } => {
            assert_eq!(holder, Some(old));
            assert_eq!(token.map(|t| t.get()), Some(old_token as u64));
        }
        other => panic!("acquire beside an older holder gave {other:?}"),
    }
    let places = raw
        .get(format!("{p}/q/"), Some(GetOptions::new().with_prefix()))
        .await
        .unwrap();
    assert!(
        places.kvs().is_empty(),
        "a place was written beside an older holder"
    );
    // The older client releases (its release deletes its key).
    raw.delete(format!("{p}/l/{n}"), None).await.unwrap();
    let AcquireOutcome::Won { token, .. } = b.acquire(s, &n).await.unwrap() else {
        panic!("acquire after the older holder released did not win");
    };
    assert!(token.get() > old_token as u64);
    // The older client's acquire: create `P/l/NAME` if it does not exist.
    let older_acquire = Txn::new()
        .when([
            Compare::value(
                format!("{p}/s/{lease:016x}"),
                CompareOp::Equal,
                old.to_string(),
            ),
            Compare::create_revision(format!("{p}/l/{n}"), CompareOp::Equal, 0),
        ])
        .and_then([TxnOp::put(
            format!("{p}/l/{n}"),
            old.to_string(),
            on_lease(),
        )]);
    assert!(
        !raw.txn(older_acquire).await.unwrap().succeeded(),
        "an older client acquired a name a new client holds"
    );
    raw.lease_revoke(lease).await.unwrap();
    factory.cleanup().await;
}
