//! Metrics through the `metrics` facade and the client's event stream.
//! One test in this binary: it installs the global metrics recorder.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use futures::StreamExt;
use metrics_exporter_prometheus::PrometheusBuilder;
use simba_tokio::{ClientEvent, MemoryBackend, RevokeReason, SessionState, SimbaConfig};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_and_events_cover_terms_sessions_and_handovers() {
    let recorder = PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    metrics::set_global_recorder(recorder).unwrap();

    let config = SimbaConfig::builder()
        .lease_duration(Duration::from_millis(900))
        .renew_interval(Duration::from_millis(300))
        .build()
        .unwrap();
    let simba = simba_tokio::builder(MemoryBackend::new())
        .config(config)
        .build()
        .unwrap();
    let mut events = simba.events();
    let election = simba
        .election("obs.one")
        .start(simba_tokio::NoListener)
        .await
        .unwrap();
    let mut seen = Vec::new();
    while !seen
        .iter()
        .any(|e| matches!(e, ClientEvent::Elected { .. }))
    {
        let e = tokio::time::timeout(Duration::from_secs(10), events.next())
            .await
            .unwrap()
            .unwrap();
        seen.push(e);
    }
    assert!(seen.contains(&ClientEvent::SessionState {
        state: SessionState::Live
    }));
    tokio::time::sleep(Duration::from_millis(700)).await; // a renewal or two
    election.step_down(Duration::from_secs(60)).await.unwrap();
    let revoked = loop {
        match events.next().await.unwrap() {
            ClientEvent::Revoked { reason, name, .. } => break (name, reason),
            _ => continue,
        }
    };
    assert_eq!(revoked, ("obs.one".to_owned(), RevokeReason::SteppedDown));
    election.stop().await;
    simba.close().await;
    let closed = events.any(|e| async move { e == ClientEvent::Closed });
    assert!(tokio::time::timeout(Duration::from_secs(10), closed)
        .await
        .unwrap());

    let text = handle.render();
    for needle in [
        "simba_renewals_total",
        "simba_terms_started_total{name=\"obs.one\"} 1",
        "simba_terms_ended_total{name=\"obs.one\",reason=\"stepped_down\"} 1",
        "simba_is_leader{name=\"obs.one\"} 0",
        "simba_handover_seconds",
        "simba_leader_seconds",
        "simba_session_live 0",
    ] {
        assert!(text.contains(needle), "missing {needle} in:\n{text}");
    }
    assert!(!text.contains("session="), "no session ids as labels");
}
