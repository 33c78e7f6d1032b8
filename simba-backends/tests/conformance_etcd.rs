//! The conformance suite against etcd at 127.0.0.1:2379 (required when
//! `CI=true`; `scripts/test.sh` starts one), from tokio and from async-std.
//! Every run uses its own key prefix and deletes it afterwards.
#![cfg(all(feature = "testkit", feature = "etcd"))]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::*;
use simba_backends::testkit::{run_all, run_selected};

/// Open defects of this backend found by the lying-backend cases (issue 16);
/// see `docs/BACKENDS.md`. Each failure is printed loudly, never hidden.
const ETCD_KNOWN_GAPS: &[(&str, &str)] = &[
    ("s2_1_live_until_the_reported_remaining_time_then_gone", "etcd expires leases lazily (its lessor checks about every 500 ms), so a key can outlive the TTL it reported; late, never early"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_passes_the_conformance_suite() {
    if !server_available("etcd at 127.0.0.1:2379", etcd_probe().await) {
        return;
    }
    let factory = EtcdFactory { tag: tag() };
    let report = run_all(&factory).await;
    println!("{report}");
    factory.cleanup().await;
    assert_passed_except_known_gaps(report, ETCD_KNOWN_GAPS);
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
        assert_passed_except_known_gaps(report, ETCD_KNOWN_GAPS);
    });
}
