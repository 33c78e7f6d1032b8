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

/// Creates the table `<tag>_ledger` holding the one row (1, 0) on `pool`
/// (the same SQL on PostgreSQL and MySQL).
macro_rules! create_ledger {
    ($pool:expr, $tag:expr) => {{
        sqlx::query(&format!(
            "CREATE TABLE {}_ledger (id INT PRIMARY KEY, writer BIGINT)",
            $tag
        ))
        .execute($pool)
        .await
        .unwrap();
        sqlx::query(&format!("INSERT INTO {}_ledger VALUES (1, 0)", $tag))
            .execute($pool)
            .await
            .unwrap();
    }};
}

/// The token of the last write that landed in `<tag>_ledger`.
macro_rules! ledger_writer {
    ($pool:expr, $tag:expr) => {{
        let writer: i64 = sqlx::query_scalar(&format!("SELECT writer FROM {}_ledger", $tag))
            .fetch_one($pool)
            .await
            .unwrap();
        writer
    }};
}

/// The MySQL fence table of `MYSQL_PATTERN`.
fn mysql_fence_table_sql(table: &str) -> String {
    format!("CREATE TABLE {table} (resource VARCHAR(255) PRIMARY KEY, token BIGINT NOT NULL)")
}

/// The upsert of `MYSQL_PATTERN`: the fence keeps the highest token.
fn mysql_upsert_sql(table: &str) -> String {
    format!(
        "INSERT INTO {table} (resource, token) VALUES (?, ?) \
         ON DUPLICATE KEY UPDATE token = GREATEST(token, VALUES(token))"
    )
}

#[cfg(feature = "postgres")]
#[tokio::test]
async fn s9_postgres_fence_refuses_a_stale_token() {
    use simba_backends::fencing::PgFence;
    if !pg_available().await {
        return;
    }
    let tag = tag();
    let pool = sqlx::PgPool::connect(PG_URL).await.unwrap();
    create_ledger!(&pool, tag);
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
    let writer = ledger_writer!(&pool, tag);
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
    if !mysql_available().await {
        return;
    }
    let tag = tag();
    let pool = sqlx::MySqlPool::connect(MYSQL_URL).await.unwrap();
    let table = format!("{tag}_fence");
    sqlx::query(&mysql_fence_table_sql(&table))
        .execute(&pool)
        .await
        .unwrap();
    let admit = |token: Token| {
        let pool = pool.clone();
        let table = table.clone();
        async move {
            let mut tx = pool.begin().await.unwrap();
            sqlx::query(&mysql_upsert_sql(&table))
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
    if !mysql_available().await {
        return;
    }
    let tag = tag();
    let table = format!("{tag}_fence");
    let mut setup = sqlx::MySqlConnection::connect(MYSQL_URL).await.unwrap();
    setup
        .execute(mysql_fence_table_sql(&table).as_str())
        .await
        .unwrap();
    let upsert = mysql_upsert_sql(&table);
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

/// S9: `MysqlFence` (the pattern as calls) admits the same and later
/// tokens, refuses a stale one, and its error converts into sqlx's.
#[cfg(feature = "mysql")]
#[tokio::test]
async fn s9_mysql_fence_refuses_a_stale_token() {
    use simba_backends::fencing::{AsToken, FenceError, MysqlFence};
    if !mysql_available().await {
        return;
    }
    let tag = tag();
    let pool = sqlx::MySqlPool::connect(MYSQL_URL).await.unwrap();
    create_ledger!(&pool, tag);
    let fence = MysqlFence::create(pool.clone(), &format!("{tag}_fence"))
        .await
        .unwrap();
    // The application's own function: `?` turns the fence's error into sqlx's.
    async fn write(
        pool: &sqlx::MySqlPool,
        fence: &MysqlFence,
        tag: &str,
        token: Token,
    ) -> Result<bool, sqlx::Error> {
        let mut tx = pool.begin().await?;
        if !fence.admit_in(&mut tx, "ledger", token).await? {
            return Ok(false);
        }
        sqlx::query(&format!("UPDATE {tag}_ledger SET writer = ? WHERE id = 1"))
            .bind(token.token_i64())
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(true)
    }
    assert!(write(&pool, &fence, &tag, t(3)).await.unwrap());
    assert!(
        write(&pool, &fence, &tag, t(3)).await.unwrap(),
        "the same term again"
    );
    assert!(write(&pool, &fence, &tag, t(9)).await.unwrap());
    assert!(
        !write(&pool, &fence, &tag, t(8)).await.unwrap(),
        "a stale token is refused"
    );
    assert!(!fence.admit("ledger", t(2)).await.unwrap());
    assert!(
        fence.admit("other", t(2)).await.unwrap(),
        "resources are independent"
    );
    let writer = ledger_writer!(&pool, tag);
    assert_eq!(writer, 9, "the stale write never landed");
    assert!(matches!(
        MysqlFence::create(pool.clone(), "Bad Name").await,
        Err(FenceError::InvalidTable(_))
    ));
    assert!(matches!(
        fence.admit("ledger", 0u64).await,
        Err(FenceError::InvalidToken(0))
    ));
    drop_mysql_tables(&tag).await;
}

/// S9: `SqliteFence` admits the same and later tokens and refuses a stale one.
#[cfg(feature = "sqlite")]
#[tokio::test]
async fn s9_sqlite_fence_refuses_a_stale_token() {
    use simba_backends::fencing::SqliteFence;
    let (factory, path) = SqliteFactory::new();
    let pool = sqlx::SqlitePool::connect(&format!("{}?mode=rwc", factory.url))
        .await
        .unwrap();
    let fence = SqliteFence::create(pool.clone(), "fence").await.unwrap();
    let write = |token: Token| {
        let (pool, fence) = (pool.clone(), fence.clone());
        async move {
            let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
            let ok = fence.admit_in(&mut tx, "ledger", token).await?;
            tx.commit().await?;
            Ok::<bool, Box<dyn std::error::Error>>(ok)
        }
    };
    assert!(write(t(3)).await.unwrap());
    assert!(write(t(3)).await.unwrap());
    assert!(write(t(4)).await.unwrap());
    assert!(!write(t(2)).await.unwrap(), "a stale token is refused");
    assert!(fence.admit("other", t(1)).await.unwrap());
    pool.close().await;
    remove_db(&path);
}

/// S9: a fence error converts into `sqlx::Error` (the driver's own error
/// unchanged), `BackendError` and `Box<dyn Error>`.
#[cfg(feature = "postgres")]
#[test]
fn s9_fence_errors_compose() {
    use simba_backends::fencing::FenceError;
    let e: sqlx::Error = FenceError::Database(sqlx::Error::RowNotFound).into();
    assert!(matches!(e, sqlx::Error::RowNotFound));
    let e: sqlx::Error = FenceError::InvalidToken(0).into();
    assert!(matches!(e, sqlx::Error::Encode(_)), "{e}");
    let e: simba_core::BackendError = FenceError::InvalidTable("X".into()).into();
    assert_eq!(e.kind, simba_core::BackendErrorKind::Rejected);
    let e: Box<dyn std::error::Error + Send + Sync> = FenceError::InvalidToken(0).into();
    assert!(e.to_string().contains("not a fencing token"));
}

/// S9 on Redis: `REDIS_FENCED_SET` writes only with a token at least the
/// highest seen, comparing 64-bit tokens exactly; without the script (a
/// plain SET) the stale write lands (the check can fail).
#[cfg(feature = "redis")]
#[tokio::test]
async fn s9_redis_recipe_refuses_a_stale_token() {
    use simba_backends::fencing::REDIS_FENCED_SET;
    let url = "redis://127.0.0.1:6379/0";
    let probe = simba_backends::connect(url).await.map(|_| ());
    if !server_available("Redis at 127.0.0.1:6379", probe) {
        return;
    }
    let tag = tag();
    let (fence, key) = (format!("{{{tag}}}:fence"), format!("{{{tag}}}:value"));
    let mut conn = redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let script = redis::Script::new(REDIS_FENCED_SET);
    let set = |token: u64, value: &'static str| {
        let mut inv = script.prepare_invoke();
        inv.key(&fence).key(&key).arg(token).arg(value);
        let mut conn = conn.clone();
        async move { inv.invoke_async::<i64>(&mut conn).await.unwrap() == 1 }
    };
    assert!(set(9, "a").await, "the first writer");
    assert!(set(9, "b").await, "the same term again");
    assert!(set(10, "c").await, "a later term (more digits)");
    assert!(!set(9, "stale").await, "a stale token is refused");
    assert!(set(u64::MAX - 1, "d").await);
    assert!(!set(u64::MAX - 2, "stale").await, "exact beyond 2^53");
    let value: String = redis::cmd("GET")
        .arg(&key)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(value, "d");
    // Unfenced, the stale write lands: what the script prevents.
    let () = redis::cmd("SET")
        .arg(&key)
        .arg("stale")
        .query_async(&mut conn)
        .await
        .unwrap();
    let value: String = redis::cmd("GET")
        .arg(&key)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(value, "stale");
    let () = redis::cmd("DEL")
        .arg(&fence)
        .arg(&key)
        .query_async(&mut conn)
        .await
        .unwrap();
}

/// S9 on etcd: the `ETCD_RECIPE` transaction writes only with a token at
/// least the highest seen (the first writer included, on a missing fence).
#[cfg(feature = "etcd")]
#[tokio::test]
async fn s9_etcd_recipe_refuses_a_stale_token() {
    use etcd_client::{Compare, CompareOp, Txn, TxnOp};
    use simba_backends::fencing::etcd_token;
    if !etcd_available().await {
        return;
    }
    let tag = tag();
    let (fence, key) = (
        format!("/simba-test/{tag}/fence"),
        format!("/simba-test/{tag}/ledger"),
    );
    let mut client = etcd_client::Client::connect(["127.0.0.1:2379"], None)
        .await
        .unwrap();
    let write = |token: u64, value: &'static str| {
        let mine = etcd_token(token);
        let txn = Txn::new()
            .when([Compare::value(
                fence.as_str(),
                CompareOp::Greater,
                mine.as_str(),
            )])
            .or_else([
                TxnOp::put(fence.as_str(), mine.as_str(), None),
                TxnOp::put(key.as_str(), value, None),
            ]);
        let mut client = client.clone();
        async move { !client.txn(txn).await.unwrap().succeeded() }
    };
    assert!(write(9, "a").await, "the first writer (no fence yet)");
    assert!(write(9, "b").await, "the same term again");
    assert!(write(10, "c").await, "a later term");
    assert!(!write(9, "stale").await, "a stale token is refused");
    let got = client.get(key.as_str(), None).await.unwrap();
    assert_eq!(got.kvs()[0].value(), b"c");
    client
        .delete(
            format!("/simba-test/{tag}/"),
            Some(etcd_client::DeleteOptions::new().with_prefix()),
        )
        .await
        .unwrap();
}

/// S9 on ZooKeeper: the `ZOOKEEPER_RECIPE` multi-op writes only with a
/// token at least the highest seen; a concurrent change of the fence makes
/// it read and decide again.
#[cfg(feature = "zookeeper")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s9_zookeeper_recipe_refuses_a_stale_token() {
    use zookeeper_client as zk;
    let connecting = zk::Client::connector()
        .with_session_timeout(std::time::Duration::from_secs(6))
        .with_connection_timeout(std::time::Duration::from_secs(3))
        .with_fail_eagerly()
        .connect("127.0.0.1:2181")
        .await;
    let client = match connecting {
        Ok(c) => c,
        Err(e) => {
            let e = simba_core::BackendError::new(
                simba_core::BackendErrorKind::Unavailable,
                e.to_string(),
            );
            if !server_available("ZooKeeper at 127.0.0.1:2181", Err(e)) {
                return;
            }
            unreachable!("server_available returns false on an error")
        }
    };
    let tag = tag();
    let (fence, key) = (format!("/{tag}-fence"), format!("/{tag}-ledger"));
    let persistent = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    client.create(&key, b"", &persistent).await.unwrap();
    // The recipe, as an application would write it.
    let write = |token: u64, value: &'static str| {
        let (client, fence, key) = (client.clone(), fence.clone(), key.clone());
        let persistent = persistent.clone();
        async move {
            let mine = token.to_string();
            loop {
                let seen = match client.get_data(&fence).await {
                    Ok((data, stat)) => {
                        let seen: u64 = std::str::from_utf8(&data).unwrap().parse().unwrap();
                        Some((seen, stat.version))
                    }
                    Err(zk::Error::NoNode) => None,
                    Err(e) => panic!("{e}"),
                };
                let mut multi = client.new_multi_writer();
                match seen {
                    Some((seen, _)) if seen > token => return false,
                    Some((_, version)) => {
                        multi
                            .add_set_data(&fence, mine.as_bytes(), Some(version))
                            .unwrap();
                    }
                    None => multi
                        .add_create(&fence, mine.as_bytes(), &persistent)
                        .unwrap(),
                }
                multi.add_set_data(&key, value.as_bytes(), None).unwrap();
                match multi.commit().await {
                    Ok(_) => return true,
                    Err(zk::MultiWriteError::OperationFailed {
                        source: zk::Error::BadVersion | zk::Error::NodeExists,
                        ..
                    }) => continue,
                    Err(e) => panic!("{e}"),
                }
            }
        }
    };
    assert!(write(9, "a").await, "the first writer (no fence yet)");
    assert!(write(9, "b").await, "the same term again");
    assert!(write(10, "c").await, "a later term");
    assert!(!write(9, "stale").await, "a stale token is refused");
    let (value, _) = client.get_data(&key).await.unwrap();
    assert_eq!(value, b"c");
    client.delete(&fence, None).await.unwrap();
    client.delete(&key, None).await.unwrap();
}
