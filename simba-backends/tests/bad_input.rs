//! Bad input: wrong URLs, unreachable servers, missing privileges, foreign
//! tables and out-of-range rows give typed errors naming the problem; nothing
//! panics and nothing is half-written.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// Which imports are used depends on the enabled backends.
#![allow(unused_imports, dead_code)]

mod common;

use common::*;
use simba_backends::{Backend, BackendConfig};
use simba_core::{BackendErrorKind, RenewError};
use std::time::Duration;

#[tokio::test]
async fn wrong_urls_are_rejected_without_showing_credentials() {
    for url in [
        "mongodb://u:s3cret@h/0",
        "postgres://u:s3cret@h/db?simba_table_prefix=DROP TABLE",
        "not a url",
        "",
    ] {
        let e = simba_backends::connect(url).await.err().unwrap();
        assert_eq!(e.kind, BackendErrorKind::Rejected, "{url}: {e}");
        assert!(!e.to_string().contains("s3cret"), "{e}");
    }
}

/// Connects to `url`, where nothing listens: `Unavailable` or `Timeout`
/// within the 2 s connect timeout, the password (`s3cret`) never shown.
async fn unreachable(url: &str) -> simba_core::BackendError {
    let c = BackendConfig::parse(url)
        .unwrap()
        .with_connect_timeout(Duration::from_secs(2));
    let e = c.connect().await.err().unwrap();
    assert!(is_unreachable(e.kind), "{e}");
    assert!(!e.to_string().contains("s3cret"), "{e}");
    e
}

#[cfg(feature = "postgres")]
#[tokio::test]
async fn unreachable_postgres_is_unavailable_and_redacted() {
    let e = unreachable("postgres://u:s3cret@127.0.0.1:1/db").await;
    assert!(
        e.to_string().contains("127.0.0.1:1"),
        "names the server: {e}"
    );
}

#[cfg(feature = "mysql")]
#[tokio::test]
async fn unreachable_mysql_is_unavailable_and_redacted() {
    unreachable("mysql://u:s3cret@127.0.0.1:1/db").await;
}

#[cfg(feature = "sqlite")]
#[tokio::test]
async fn sqlite_in_a_missing_directory_is_a_typed_error() {
    let e = simba_backends::connect("sqlite:///nonexistent-dir-for-simba/x.db")
        .await
        .err()
        .unwrap();
    assert!(e.message.contains("sqlite"), "{e}");
}

#[cfg(feature = "sqlite")]
#[tokio::test]
async fn sqlite_foreign_table_is_reported_and_left_alone() {
    let (factory, path) = SqliteFactory::new();
    let pool = sqlx::SqlitePool::connect(&format!("{}?mode=rwc", factory.url))
        .await
        .unwrap();
    let prefix = format!("{}_f_", factory.tag);
    sqlx::query(&format!(
        "CREATE TABLE {prefix}sessions (id INTEGER, owner TEXT)"
    ))
    .execute(&pool)
    .await
    .unwrap();
    sqlx::query(&format!(
        "INSERT INTO {prefix}sessions VALUES (1, 'theirs')"
    ))
    .execute(&pool)
    .await
    .unwrap();
    let e = config(&factory.url, &factory.tag, "f")
        .connect()
        .await
        .err()
        .unwrap();
    assert_eq!(e.kind, BackendErrorKind::Rejected, "{e}");
    assert!(e.message.contains(&format!("{prefix}sessions")), "{e}");
    assert!(e.message.contains("not a Simba table"), "{e}");
    let owner: String = sqlx::query_scalar(&format!("SELECT owner FROM {prefix}sessions"))
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(owner, "theirs");
    let leases: i64 = sqlx::query_scalar("SELECT count(*) FROM sqlite_master WHERE name = ?1")
        .bind(format!("{prefix}leases"))
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(leases, 0, "nothing half-created");
    pool.close().await;
    remove_db(&path);
}

#[cfg(feature = "sqlite")]
#[tokio::test]
async fn sqlite_out_of_range_values_are_malformed_not_panics() {
    let (factory, path) = SqliteFactory::new();
    let b = sqlite_backend(&factory, "r").await;
    let s = session(&b, Duration::from_secs(30)).await;
    let l = format!("{}_r_leases", factory.tag);
    sqlx::query(&format!(
        "INSERT INTO {l} (name, session, token) VALUES ('neg', ?1, -5)"
    ))
    .bind(&s.to_bytes()[..])
    .execute(b.pool())
    .await
    .unwrap();
    match b.renew(s).await {
        Err(RenewError::Backend(e)) => {
            assert_eq!(e.kind, BackendErrorKind::Malformed, "{e}");
            assert!(e.message.contains("token -5"), "{e}");
        }
        other => panic!("renew gave {other:?}"),
    }
    sqlx::query(&format!(
        "UPDATE {l} SET token = 3, session = x'0102' WHERE name = 'neg'"
    ))
    .execute(b.pool())
    .await
    .unwrap();
    let e = b.inspect(None).await.err();
    // The bad session id belongs to no live session, so it is shown as free;
    // a bad *name* is reported.
    assert!(e.is_none(), "{e:?}");
    sqlx::query(&format!(
        "UPDATE {l} SET name = 'bad name' WHERE name = 'neg'"
    ))
    .execute(b.pool())
    .await
    .unwrap();
    let e = b.inspect(None).await.err().unwrap();
    assert_eq!(e.kind, BackendErrorKind::Malformed, "{e}");
    remove_db(&path);
}

#[cfg(feature = "postgres")]
#[tokio::test]
async fn postgres_without_create_privilege_is_rejected_by_name() {
    if !pg_available().await {
        return;
    }
    let admin = sqlx::PgPool::connect(PG_URL).await.unwrap();
    // A role that may connect but not create tables (the default for the
    // public schema since PostgreSQL 15).
    let _ = sqlx::query("CREATE ROLE simba_noddl LOGIN")
        .execute(&admin)
        .await;
    let tag = tag();
    let url = "postgres://simba_noddl:pw@127.0.0.1:5432/test";
    let e = config(url, &tag, "p").connect().await.err().unwrap();
    assert_eq!(e.kind, BackendErrorKind::Rejected, "{e}");
    assert!(e.message.contains("permission denied"), "{e}");
    assert!(!e.message.contains(":pw@"), "{e}");
    // With create_schema(false) the missing table itself is named.
    let e = config(url, &tag, "p")
        .with_create_schema(false)
        .connect()
        .await
        .err()
        .unwrap();
    assert_eq!(e.kind, BackendErrorKind::Rejected, "{e}");
    assert!(e.message.contains("missing"), "{e}");
    // The suite leaves no role behind.
    sqlx::query("DROP ROLE IF EXISTS simba_noddl")
        .execute(&admin)
        .await
        .unwrap();
}

#[cfg(feature = "postgres")]
#[tokio::test]
async fn postgres_foreign_table_and_bad_rows_are_typed_errors() {
    if !pg_available().await {
        return;
    }
    let tag = tag();
    let admin = sqlx::PgPool::connect(PG_URL).await.unwrap();
    sqlx::query(&format!(
        "CREATE TABLE {tag}_f_leases (name text, value int)"
    ))
    .execute(&admin)
    .await
    .unwrap();
    let e = config(PG_URL, &tag, "f").connect().await.err().unwrap();
    assert_eq!(e.kind, BackendErrorKind::Rejected, "{e}");
    assert!(e.message.contains(&format!("{tag}_f_leases")), "{e}");

    let b = pg_backend(&tag, "r").await;
    let s = session(&b, Duration::from_secs(30)).await;
    sqlx::query(&format!(
        "INSERT INTO {tag}_r_leases (name, session, token) VALUES ('zero', $1, 0)"
    ))
    .bind(&s.to_bytes()[..])
    .execute(b.pool())
    .await
    .unwrap();
    match b.renew(s).await {
        Err(RenewError::Backend(e)) => assert_eq!(e.kind, BackendErrorKind::Malformed, "{e}"),
        other => panic!("renew gave {other:?}"),
    }
    drop_pg_tables(&tag).await;
}

#[cfg(feature = "mysql")]
#[tokio::test]
async fn mysql_without_create_privilege_and_foreign_tables_are_rejected() {
    if !mysql_available().await {
        return;
    }
    let admin = sqlx::MySqlPool::connect(MYSQL_URL).await.unwrap();
    let _ = sqlx::query("CREATE USER IF NOT EXISTS 'simba_noddl'@'%'")
        .execute(&admin)
        .await;
    let _ = sqlx::query("CREATE USER IF NOT EXISTS 'simba_noddl'@'localhost'")
        .execute(&admin)
        .await;
    let _ = sqlx::query("GRANT SELECT ON test.* TO 'simba_noddl'@'%'")
        .execute(&admin)
        .await;
    let _ = sqlx::query("GRANT SELECT ON test.* TO 'simba_noddl'@'localhost'")
        .execute(&admin)
        .await;
    let tag = tag();
    let e = config("mysql://simba_noddl@127.0.0.1:3306/test", &tag, "p")
        .connect()
        .await
        .err()
        .unwrap();
    assert_eq!(e.kind, BackendErrorKind::Rejected, "{e}");
    assert!(e.message.to_lowercase().contains("denied"), "{e}");

    sqlx::query(&format!("CREATE TABLE {tag}_f_sessions (id INT)"))
        .execute(&admin)
        .await
        .unwrap();
    let e = config(MYSQL_URL, &tag, "f").connect().await.err().unwrap();
    assert_eq!(e.kind, BackendErrorKind::Rejected, "{e}");
    assert!(e.message.contains(&format!("{tag}_f_sessions")), "{e}");
    drop_mysql_tables(&tag).await;
    // The suite leaves no user behind.
    for host in ["%", "localhost"] {
        sqlx::query(&format!("DROP USER IF EXISTS 'simba_noddl'@'{host}'"))
            .execute(&admin)
            .await
            .unwrap();
    }
}

#[cfg(feature = "sqlite")]
#[tokio::test]
async fn a_backend_refuses_another_backends_url() {
    let e = simba_backends::sqlite::SqliteBackend::connect_url("postgres://u:s3cret@h/db")
        .await
        .err()
        .unwrap();
    assert_eq!(e.kind, BackendErrorKind::Rejected, "{e}");
    assert!(!e.message.contains("s3cret"), "{e}");
}
