//! The short form of `simba-bench load` (issue 18), run by CI: 20 nodes on
//! SQLite, PostgreSQL and MariaDB, contending for one name for 5 s and then
//! for 1,000 names (two nodes each) for 5 s. Each run checks the connection
//! budget, at most one renewal per node per period and that no name was
//! granted twice (sampled during the run and checked at the end); timing
//! figures are printed, never asserted. Liveness shortfalls (a node whose
//! renewals were all slower than their call timeout on a loaded machine,
//! an end-of-run inspection that could not be made) are printed as `SHORT`
//! lines, not asserted: they measure the machine, not Simba's safety. PostgreSQL (127.0.0.1:5432) and MariaDB
//! (127.0.0.1:3306) are required unless `SIMBA_TEST_SKIP_SERVERS` lists
//! them. The long form is `cargo run -p simba-bench --release -- load
//! --backend postgres --nodes 200` (see docs/BACKENDS.md, "Many nodes on one
//! database").
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use simba_bench::load::{run, LoadOpts, LOAD_DB};
use std::time::Duration;

fn opts(backend: &str, names: usize, per_name: usize) -> LoadOpts {
    LoadOpts {
        backend: backend.into(),
        url: None,
        admin: None,
        nodes: 20,
        names,
        per_name,
        duration: Duration::from_secs(5),
        lease: Duration::from_secs(3),
        tolerate_connect_errors: false,
    }
}

/// Runs one name, then 1,000 names; returns without checking if the
/// server is missing and the run opted out of it.
async fn short_form(backend: &str, kind: &str, what: &str) {
    for o in [opts(backend, 1, 20), opts(backend, 1000, 2)] {
        let report = match run(&o).await {
            Ok(r) => r,
            Err(e) if e.starts_with("admin connection") => {
                let thread = std::thread::current();
                let test = thread.name().unwrap_or("a test");
                simba_backends::test_servers::missing_server(kind, what, test, &e);
                return;
            }
            Err(e) => panic!("{e}"),
        };
        // Figures to stdout (shown with --nocapture), the verdict asserted.
        println!("{report}");
        if !report.shortfalls.is_empty() {
            eprintln!("load short form on {what}: liveness shortfalls\n{report}");
        }
        assert!(report.failures.is_empty(), "{report}");
        assert_eq!(report.nodes, 20, "{report}");
        assert!(report.grants >= o.names, "every name was granted: {report}");
        if let Some(c) = report.connections_max {
            assert!(c <= report.budget_per_node * 20, "{report}");
        }
    }
}

#[cfg(feature = "sqlite")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_short_form_on_sqlite() {
    short_form("sqlite", "sqlite", "SQLite").await;
}

#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_short_form_on_postgres() {
    short_form("postgres", "postgres", "PostgreSQL at 127.0.0.1:5432").await;
    // The suite leaves nothing behind: the run's database goes too.
    use sqlx::Connection;
    if let Ok(mut c) =
        sqlx::PgConnection::connect("postgres://postgres@127.0.0.1:5432/postgres").await
    {
        let drop = format!("DROP DATABASE IF EXISTS {LOAD_DB} WITH (FORCE)");
        sqlx::raw_sql(&drop).execute(&mut c).await.unwrap();
        let _ = c.close().await;
    }
}

#[cfg(feature = "mysql")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_short_form_on_mariadb() {
    short_form("mysql", "mysql", "MariaDB/MySQL at 127.0.0.1:3306").await;
    // The suite leaves nothing behind: the run's database and user go too.
    use sqlx::Connection;
    if let Ok(mut c) = sqlx::MySqlConnection::connect("mysql://root@127.0.0.1:3306/mysql").await {
        for stmt in [
            format!("DROP DATABASE IF EXISTS {LOAD_DB}"),
            format!("DROP USER IF EXISTS '{LOAD_DB}'@'%', '{LOAD_DB}'@'localhost'"),
        ] {
            sqlx::raw_sql(&stmt).execute(&mut c).await.unwrap();
        }
        let _ = c.close().await;
    }
}
