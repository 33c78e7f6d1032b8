//! ZooKeeper through the tokio client (S8.4, S8.5): a private server whose
//! `maxSessionTimeout` (4 s) is below the configured lease (15 s). The
//! backend grants 4 s, one renewal proves 5/12 of it, so the engine renews
//! every third of that validity and publishes one `SessionLeaseShortened`.
//! Needs Debian `zookeeperd` (port 2183); required unless
//! `SIMBA_TEST_SKIP_SERVERS` lists `zookeeper`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use futures::StreamExt;
use simba_backends::zookeeper::{TestServer, ZkBackend};
use simba_backends::{Backend, BackendConfig};
use simba_tokio::{ClientEvent, SimbaConfig};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capped_session_timeout_shortens_the_lease_once_and_renews_every_third() {
    let server = match TestServer::start(2183, &["maxSessionTimeout=4000"]).await {
        Ok(s) => s,
        Err(e) => {
            // A missing ZooKeeper fails the test unless the run opted out of
            // `zookeeper` (SIMBA_TEST_SKIP_SERVERS), not only under `CI=true`.
            simba_backends::test_servers::missing_server(
                "zookeeper",
                "a private ZooKeeper (Debian zookeeperd)",
                "a_capped_session_timeout_shortens_the_lease_once_and_renews_every_third",
                &e,
            );
            return;
        }
    };
    let config = BackendConfig::parse(&server.url("/shortened")).unwrap();
    let backend = ZkBackend::connect(&config).await.unwrap();
    assert_eq!(
        backend.renewal_proves(),
        simba_core::Fraction::new(5, 12).unwrap()
    );
    let lease = Duration::from_secs(15);
    let settings = SimbaConfig::builder()
        .lease_duration(lease)
        .renew_interval(Duration::from_secs(5))
        .build()
        .unwrap();
    let simba = simba_tokio::builder(backend)
        .config(settings)
        .build()
        .unwrap();
    let mut events = simba.events();
    let election = simba
        .election("zk.shortened")
        .start(simba_tokio::NoListener)
        .await
        .unwrap();
    let mut seen = Vec::new();
    // Hold for 12 s: three times the granted timeout, nine times the proven
    // validity. Without the shortened period (5 s) every term would end.
    let watch = async {
        while let Some(e) = events.next().await {
            seen.push(e);
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(12), watch).await;
    let shortened: Vec<_> = seen
        .iter()
        .filter_map(|e| match e {
            ClientEvent::SessionLeaseShortened {
                validity,
                renew_period,
            } => Some((*validity, *renew_period)),
            _ => None,
        })
        .collect();
    assert_eq!(shortened.len(), 1, "one SessionLeaseShortened: {seen:?}");
    let (validity, period) = shortened[0];
    // 5/12 of the granted 4 s, less drift and margin.
    assert!(
        validity <= Duration::from_millis(4000 * 5 / 12),
        "{validity:?}"
    );
    assert!(
        period <= validity / 3 + Duration::from_millis(1),
        "renew period {period:?} for validity {validity:?}"
    );
    assert!(
        seen.iter()
            .any(|e| matches!(e, ClientEvent::Elected { .. })),
        "{seen:?}"
    );
    assert!(
        !seen
            .iter()
            .any(|e| matches!(e, ClientEvent::Revoked { .. })),
        "the term ended although renewals fit: {seen:?}"
    );
    println!("validity {validity:?}, renew period {period:?}; events: {seen:?}");
    election.stop().await;
    simba.close().await;
    drop(server);
}
