//! The PostgreSQL backend through PgBouncer in transaction pooling mode
//! (issue 18): PgBouncer on 127.0.0.1:6432 in front of the PostgreSQL test
//! server, as `scripts/servers.d/pgbouncer.sh` starts it. Required unless
//! `SIMBA_TEST_SKIP_SERVERS` lists `pgbouncer` (or `postgres`).
//!
//! With `simba_transaction_pooling=true` no statement is prepared under a
//! name and every call runs in one explicit transaction, so the whole
//! conformance suite passes through the proxy; LISTEN/NOTIFY does not pass
//! it, so release broadcasts are off (waiters take a freed lease at their
//! next retry) unless `simba_listen_url` sends the listener straight to
//! PostgreSQL.
#![cfg(all(feature = "postgres", feature = "testkit"))]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::*;
use futures::future::{BoxFuture, FutureExt};
use simba_backends::postgres::PgBackend;
use simba_backends::testkit::{run_all, run_selected, Capability, Factory, Hold, HoldError};
use simba_core::BackendError;

const PGBOUNCER_URL: &str =
    "postgres://postgres@127.0.0.1:6432/test?simba_transaction_pooling=true";
/// The listener's own URL, straight to PostgreSQL (percent-encoded `PG_URL`).
const DIRECT_LISTEN: &str = "simba_listen_url=postgres%3A%2F%2Fpostgres%40127.0.0.1%3A5432%2Ftest";

/// Whether PgBouncer answers; a run that skips PostgreSQL skips it too.
async fn pgbouncer_available() -> bool {
    use sqlx::Connection;
    let probe = sqlx::PgConnection::connect("postgres://postgres@127.0.0.1:6432/test")
        .await
        .map(|_| ())
        .map_err(|e| BackendError::new(simba_core::BackendErrorKind::Unavailable, e.to_string()));
    if probe.is_err() && simba_backends::test_servers::server_skipped("postgres") {
        return server_available("PostgreSQL (through PgBouncer at 127.0.0.1:6432)", probe);
    }
    server_available("PgBouncer at 127.0.0.1:6432", probe)
}

struct PgBouncerFactory {
    tag: String,
    url: String,
    broadcasts: bool,
}

impl Factory for PgBouncerFactory {
    type Backend = PgBackend;
    fn connect<'a>(&'a self, ns: &'a str) -> BoxFuture<'a, Result<Self::Backend, BackendError>> {
        let c = config(&self.url, &self.tag, ns);
        async move { PgBackend::connect(&c).await }.boxed()
    }
    fn hold<'a>(
        &'a self,
        backend: &'a Self::Backend,
    ) -> BoxFuture<'a, Result<Box<dyn Hold>, HoldError>> {
        boxed_hold(backend.hold())
    }
    fn lacks(&self) -> Vec<Capability> {
        // Terminating the server process behind the proxy is not the
        // client's connection dying (PgBouncer answers for it).
        let mut lacks = vec![Capability::KillConnectionMidCall];
        if !self.broadcasts {
            lacks.push(Capability::ReleaseBroadcast);
        }
        lacks
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_through_pgbouncer_passes_the_conformance_suite() {
    if !pgbouncer_available().await {
        return;
    }
    let factory = PgBouncerFactory {
        tag: tag(),
        url: PGBOUNCER_URL.to_owned(),
        broadcasts: false,
    };
    assert_suite_passed(run_all(&factory).await, drop_pg_tables(&factory.tag)).await;
}

/// The release listener straight to PostgreSQL, the calls through PgBouncer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pgbouncer_calls_with_a_direct_listener_broadcast_releases() {
    if !pgbouncer_available().await {
        return;
    }
    let factory = PgBouncerFactory {
        tag: tag(),
        url: format!("{PGBOUNCER_URL}&{DIRECT_LISTEN}"),
        broadcasts: true,
    };
    let report = run_selected(&factory, |c| {
        c == "s4_2_release_notifications_arrive" || c.starts_with("s3_5")
    })
    .await;
    show(&report);
    drop_pg_tables(&factory.tag).await;
    report.assert_passed();
    assert!(report
        .to_string()
        .contains("s4_2_release_notifications_arrive"));
}
