//! The conformance suite against every backend: memory, an SQLite file,
//! PostgreSQL and MariaDB/MySQL (servers on 127.0.0.1; required when `CI=true`).
#![cfg(feature = "testkit")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::*;
use simba_backends::testkit::run_all;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_backend_passes_the_conformance_suite() {
    let report = run_all(&MemoryFactory::default()).await;
    println!("{report}");
    report.assert_passed();
}

#[cfg(feature = "sqlite")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_file_passes_the_conformance_suite() {
    let (factory, path) = SqliteFactory::new();
    let report = run_all(&factory).await;
    println!("{report}");
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    report.assert_passed();
}

#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_passes_the_conformance_suite() {
    let probe = pg_probe().await;
    if !server_available("PostgreSQL at 127.0.0.1:5432", probe) {
        return;
    }
    let factory = PgFactory { tag: tag() };
    let report = run_all(&factory).await;
    println!("{report}");
    drop_pg_tables(&factory.tag).await;
    report.assert_passed();
}

#[cfg(feature = "mysql")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_passes_the_conformance_suite() {
    let probe = mysql_probe().await;
    if !server_available("MariaDB/MySQL at 127.0.0.1:3306", probe) {
        return;
    }
    let factory = MysqlFactory { tag: tag() };
    let report = run_all(&factory).await;
    println!("{report}");
    drop_mysql_tables(&factory.tag).await;
    report.assert_passed();
}

/// The same backends work on async-std (sqlx's `runtime-async-std`).
#[cfg(all(feature = "sqlite", feature = "runtime-async-std"))]
#[test]
fn sqlite_passes_core_cases_on_async_std() {
    async_std::task::block_on(async {
        let (factory, path) = SqliteFactory::new();
        let report = simba_backends::testkit::run_selected(&factory, |c| {
            !c.contains("sixteen") && !c.contains("expir")
        })
        .await;
        println!("{report}");
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
        report.assert_passed();
    });
}

/// PostgreSQL, LISTEN/NOTIFY included, on async-std.
#[cfg(all(feature = "postgres", feature = "runtime-async-std"))]
#[test]
fn postgres_passes_core_cases_on_async_std() {
    async_std::task::block_on(async {
        if !server_available("PostgreSQL at 127.0.0.1:5432", pg_probe().await) {
            return;
        }
        let factory = PgFactory { tag: tag() };
        let report = simba_backends::testkit::run_selected(&factory, |c| {
            c.contains("notification") || c.contains("sixteen") || c.contains("killed")
        })
        .await;
        println!("{report}");
        drop_pg_tables(&factory.tag).await;
        report.assert_passed();
    });
}
