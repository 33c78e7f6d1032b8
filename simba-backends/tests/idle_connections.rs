//! What Simba's SQL pool does with a connection that broke while idle
//! (`docs/BACKENDS.md`, "Connections: when Simba's pool checks one"): it
//! pings only a connection idle for `PING_IDLE_AFTER` or longer, so one that
//! broke more recently fails the one call it is next used for, with a typed
//! error, and the call after it works on a new connection; one idle for
//! longer is replaced before the call, which succeeds.
#![cfg(feature = "postgres")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use simba_backends::postgres::PgBackend;
use simba_backends::{Backend, BackendConfig, PING_IDLE_AFTER};
use simba_core::{BackendErrorKind, RenewError};
use std::time::Duration;

/// Terminates every server process of `app` (the backend's pool connection;
/// its release listener is off). Returns how many it terminated.
async fn kill_connections_of(app: &str) -> usize {
    let pool = sqlx::PgPool::connect(common::PG_URL).await.unwrap();
    let killed: Vec<bool> = sqlx::query_scalar(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
    )
    .bind(app)
    .fetch_all(&pool)
    .await
    .unwrap();
    pool.close().await;
    killed.len()
}

#[tokio::test]
async fn a_connection_broken_while_idle_fails_one_call_or_is_replaced_after_the_ping_time() {
    if !common::pg_available().await {
        return;
    }
    let tag = common::tag();
    let app = format!("simba_idle_{tag}");
    let url = format!(
        "{}?simba_table_prefix={tag}_&simba_listen=false&application_name={app}",
        common::PG_URL
    );
    let backend = PgBackend::connect(&BackendConfig::parse(&url).unwrap())
        .await
        .unwrap();
    let session = common::session(&backend, Duration::from_secs(60)).await;
    backend.renew(session).await.unwrap();

    // Broken, then used again at once: that one call fails, typed. (The
    // pause lets sqlx's own ping of the returned connection finish first.)
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(kill_connections_of(&app).await, 1);
    match backend.renew(session).await {
        Err(RenewError::Backend(e)) => assert!(
            matches!(e.kind, BackendErrorKind::Unavailable),
            "a renewal on a terminated connection gave {e:?}"
        ),
        other => panic!("a renewal on a terminated connection gave {other:?}"),
    }
    // The next call opens a new connection and works; the session lives.
    backend.renew(session).await.unwrap();

    // Broken, then idle for the ping time: replaced before the call.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(kill_connections_of(&app).await, 1);
    tokio::time::sleep(PING_IDLE_AFTER + Duration::from_millis(300)).await;
    backend.renew(session).await.unwrap();

    backend.close_session(session).await.unwrap();
    backend.drop_tables().await.unwrap();
    common::drop_pg_tables(&tag).await;
}
