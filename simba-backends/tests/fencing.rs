//! Fencing (S9): a resource refuses a write carrying a token lower than
//! the highest it has seen — the PostgreSQL helper and the documented SQL
//! patterns for SQLite and MySQL.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// Which imports are used depends on the enabled backends.
#![allow(unused_imports, dead_code)]

mod common;

#[allow(unused_imports)]
use common::*;
use simba_core::Token;

fn t(v: u64) -> Token {
    Token::new(v).unwrap()
}

#[cfg(feature = "postgres")]
#[tokio::test]
async fn s9_postgres_fence_refuses_a_stale_token() {
    use simba_backends::fencing::PgFence;
    if !server_available("PostgreSQL at 127.0.0.1:5432", pg_probe().await) {
        return;
    }
    let tag = tag();
    let pool = sqlx::PgPool::connect(PG_URL).await.unwrap();
    sqlx::query(&format!(
        "CREATE TABLE {tag}_ledger (id int PRIMARY KEY, writer bigint)"
    ))
    .execute(&pool)
    .await
    .unwrap();
    sqlx::query(&format!("INSERT INTO {tag}_ledger VALUES (1, 0)"))
        .execute(&pool)
        .await
        .unwrap();
    let fence = PgFence::create(pool.clone(), &format!("{tag}_fence"))
        .await
        .unwrap();
    // A guarded write: the check and the write commit together.
    let write = |token: Token| {
        let pool = pool.clone();
        let fence = fence.clone();
        let tag = tag.clone();
        async move {
            let mut tx = pool.begin().await.unwrap();
            if !fence.admit_in(&mut tx, "ledger", token).await.unwrap() {
                return false;
            }
            sqlx::query(&format!("UPDATE {tag}_ledger SET writer = $1 WHERE id = 1"))
                .bind(token.get() as i64)
                .execute(&mut *tx)
                .await
                .unwrap();
            tx.commit().await.unwrap();
            true
        }
    };
    assert!(write(t(5)).await, "first writer admitted");
    assert!(write(t(5)).await, "the same term may write again");
    assert!(write(t(7)).await, "a later term is admitted");
    assert!(!write(t(6)).await, "a stale token is refused");
    assert!(!fence.admit("ledger", t(1)).await.unwrap());
    assert!(
        fence.admit("other", t(1)).await.unwrap(),
        "resources are independent"
    );
    let writer: i64 = sqlx::query_scalar(&format!("SELECT writer FROM {tag}_ledger"))
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(writer, 7, "the stale write never landed");
    assert!(PgFence::create(pool.clone(), "Bad Name").await.is_err());
    drop_pg_tables(&tag).await;
}

#[cfg(feature = "sqlite")]
#[tokio::test]
async fn s9_sqlite_pattern_refuses_a_stale_token() {
    let (factory, path) = SqliteFactory::new();
    let pool = sqlx::SqlitePool::connect(&format!("{}?mode=rwc", factory.url))
        .await
        .unwrap();
    sqlx::query(
        "CREATE TABLE IF NOT EXISTS fence (resource TEXT PRIMARY KEY, token INTEGER NOT NULL)",
    )
    .execute(&pool)
    .await
    .unwrap();
    let admit = |token: Token| {
        let pool = pool.clone();
        async move {
            let mut tx = pool.begin_with("BEGIN IMMEDIATE").await.unwrap();
            let done = sqlx::query(
                "INSERT INTO fence (resource, token) VALUES (?1, ?2) \
                 ON CONFLICT (resource) DO UPDATE SET token = excluded.token \
                 WHERE excluded.token >= fence.token",
            )
            .bind("ledger")
            .bind(token.get() as i64)
            .execute(&mut *tx)
            .await
            .unwrap();
            let ok = done.rows_affected() == 1;
            tx.commit().await.unwrap();
            ok
        }
    };
    assert!(admit(t(3)).await);
    assert!(admit(t(3)).await);
    assert!(admit(t(4)).await);
    assert!(!admit(t(2)).await, "a stale token is refused");
    pool.close().await;
    remove_db(&path);
}

#[cfg(feature = "mysql")]
#[tokio::test]
async fn s9_mysql_pattern_refuses_a_stale_token() {
    if !server_available("MariaDB/MySQL at 127.0.0.1:3306", mysql_probe().await) {
        return;
    }
    let tag = tag();
    let pool = sqlx::MySqlPool::connect(MYSQL_URL).await.unwrap();
    let table = format!("{tag}_fence");
    sqlx::query(&format!(
        "CREATE TABLE {table} (resource VARCHAR(255) PRIMARY KEY, token BIGINT NOT NULL)"
    ))
    .execute(&pool)
    .await
    .unwrap();
    let admit = |token: Token| {
        let pool = pool.clone();
        let table = table.clone();
        async move {
            let mut tx = pool.begin().await.unwrap();
            sqlx::query(&format!(
                "INSERT INTO {table} (resource, token) VALUES (?, ?) \
                 ON DUPLICATE KEY UPDATE token = GREATEST(token, VALUES(token))"
            ))
            .bind("ledger")
            .bind(token.get() as i64)
            .execute(&mut *tx)
            .await
            .unwrap();
            let seen: i64 =
                sqlx::query_scalar(&format!("SELECT token FROM {table} WHERE resource = ?"))
                    .bind("ledger")
                    .fetch_one(&mut *tx)
                    .await
                    .unwrap();
            let ok = seen == token.get() as i64;
            if ok {
                tx.commit().await.unwrap();
            } else {
                tx.rollback().await.unwrap();
            }
            ok
        }
    };
    assert!(admit(t(3)).await);
    assert!(admit(t(3)).await);
    assert!(admit(t(9)).await);
    assert!(!admit(t(8)).await, "a stale token is refused");
    drop_mysql_tables(&tag).await;
}

/// S9 on MySQL / MariaDB: the admission read of `MYSQL_PATTERN` is a locking
/// read. A stale writer (token 5) that read something earlier in its
/// REPEATABLE READ transaction must still be refused after a newer writer
/// (token 6) committed; the same run with a plain `SELECT` admits it (the
/// check can fail).
#[cfg(feature = "mysql")]
#[tokio::test]
async fn s9_mysql_admission_is_a_locking_read() {
    use sqlx::{Connection, Executor};
    if !server_available("MariaDB/MySQL at 127.0.0.1:3306", mysql_probe().await) {
        return;
    }
    let tag = tag();
    let table = format!("{tag}_fence");
    let mut setup = sqlx::MySqlConnection::connect(MYSQL_URL).await.unwrap();
    setup
        .execute(
            format!(
                "CREATE TABLE {table} (resource VARCHAR(255) PRIMARY KEY, token BIGINT NOT NULL)"
            )
            .as_str(),
        )
        .await
        .unwrap();
    let upsert = format!(
        "INSERT INTO {table} (resource, token) VALUES (?, ?) \
         ON DUPLICATE KEY UPDATE token = GREATEST(token, VALUES(token))"
    );
    // Runs the pattern for a stale token after an earlier read; `admit` is
    // the admission read. Returns whether the stale token was admitted.
    let stale_admitted = |admit: String, resource: &'static str| {
        let upsert = upsert.clone();
        let table = table.clone();
        async move {
            let mut stale = sqlx::MySqlConnection::connect(MYSQL_URL).await.unwrap();
            let mut newer = sqlx::MySqlConnection::connect(MYSQL_URL).await.unwrap();
            sqlx::query(&upsert)
                .bind(resource)
                .bind(5_i64)
                .execute(&mut newer)
                .await
                .unwrap();
            stale
                .execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                .await
                .unwrap();
            stale.execute("START TRANSACTION").await.unwrap();
            // An earlier plain read fixes the transaction's read view.
            let _: i64 = sqlx::query_scalar(&format!("SELECT COUNT(*) FROM {table}"))
                .fetch_one(&mut stale)
                .await
                .unwrap();
            // The next term's writer is admitted and commits.
            sqlx::query(&upsert)
                .bind(resource)
                .bind(6_i64)
                .execute(&mut newer)
                .await
                .unwrap();
            // The stale writer runs the pattern with token 5.
            sqlx::query(&upsert)
                .bind(resource)
                .bind(5_i64)
                .execute(&mut stale)
                .await
                .unwrap();
            let seen: i64 = sqlx::query_scalar(&admit)
                .bind(resource)
                .fetch_one(&mut stale)
                .await
                .unwrap();
            stale.execute("ROLLBACK").await.unwrap();
            seen == 5
        }
    };
    let locking = format!("SELECT token FROM {table} WHERE resource = ? FOR UPDATE");
    assert!(
        simba_backends::fencing::MYSQL_PATTERN.contains("WHERE resource = ? FOR UPDATE"),
        "the documented pattern uses a locking read"
    );
    assert!(
        !stale_admitted(locking, "locking").await,
        "the locking admission read admitted a stale token"
    );
    let plain = format!("SELECT token FROM {table} WHERE resource = ?");
    assert!(
        stale_admitted(plain, "plain").await,
        "the plain read should have admitted the stale token (this test could not fail)"
    );
    drop_mysql_tables(&tag).await;
}
