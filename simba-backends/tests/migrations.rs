//! The plain SQL files of `migrations/` are exactly the DDL each backend
//! runs at start (for the default prefix), so an application may create the
//! tables with its own migration tool and start Simba with `create_schema(false)`.
#![cfg(all(feature = "sqlite", feature = "postgres", feature = "mysql"))]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use simba_backends::mysql::MysqlBackend;
use simba_backends::postgres::PgBackend;
use simba_backends::sqlite::SqliteBackend;
use simba_backends::{Backend, PoolOptions, DEFAULT_TABLE_PREFIX};

fn file(path: &str) -> String {
    let full = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{}: {e}", full.display()))
}

/// Every migration file of one database, in order, concatenated.
fn files(db: &str) -> String {
    let names: &[&str] = if db == "sqlite" {
        &["0001_simba.sql", "0002_groups_slots.sql"]
    } else {
        &[
            "0001_simba.sql",
            "0002_groups_slots.sql",
            "0003_acquire.sql",
            "0004_releases.sql",
        ]
    };
    names
        .iter()
        .filter(|f| db == "mysql" || **f != "0004_releases.sql")
        .map(|f| file(&format!("migrations/{db}/{f}")))
        .collect()
}

#[test]
fn the_schema_follows_the_prefix() {
    // The files are the DDL: the default prefix gives them back as they are.
    assert_eq!(
        files("postgres"),
        PgBackend::schema_sql(DEFAULT_TABLE_PREFIX)
    );
    assert_eq!(
        files("mysql"),
        MysqlBackend::schema_sql(DEFAULT_TABLE_PREFIX)
    );
    assert_eq!(
        files("sqlite"),
        SqliteBackend::schema_sql(DEFAULT_TABLE_PREFIX)
    );
    for ddl in [
        PgBackend::schema_sql("jobs_"),
        MysqlBackend::schema_sql("jobs_"),
        SqliteBackend::schema_sql("jobs_"),
    ] {
        assert!(ddl.contains("jobs_sessions") && ddl.contains("jobs_leases_session"));
        assert!(ddl.contains("jobs_members_session") && ddl.contains("jobs_slots"));
        assert!(!ddl.contains("simba_"));
    }
}

/// The migration file applied by hand is accepted with DDL turned off, and
/// without the tables `from_pool` refuses to start instead of creating them.
#[tokio::test]
async fn sqlite_file_migration_then_start_without_ddl() {
    let pool = sqlx::sqlite::SqlitePoolOptions::new()
        .max_connections(1)
        .connect("sqlite::memory:")
        .await
        .unwrap();
    let no_ddl = PoolOptions::new().create_schema(false);
    let err = SqliteBackend::from_pool(pool.clone(), &no_ddl)
        .await
        .expect_err("missing tables are an error without DDL");
    assert!(err.to_string().contains("missing"), "{err}");
    sqlx::raw_sql(&file("migrations/sqlite/0001_simba.sql"))
        .execute(&pool)
        .await
        .unwrap();
    // Only the first file: the group and slot tables are missing.
    let err = SqliteBackend::from_pool(pool.clone(), &no_ddl)
        .await
        .expect_err("the second migration is required too");
    assert!(err.to_string().contains("simba_members"), "{err}");
    sqlx::raw_sql(&file("migrations/sqlite/0002_groups_slots.sql"))
        .execute(&pool)
        .await
        .unwrap();
    let backend = SqliteBackend::from_pool(pool, &no_ddl).await.unwrap();
    let grant = backend
        .open_session(std::time::Duration::from_secs(5))
        .await
        .unwrap();
    let name = simba_core::LeaseName::new("migrated").unwrap();
    let won = backend.acquire(grant.session, &name).await.unwrap();
    assert!(
        matches!(won, simba_core::AcquireOutcome::Won { .. }),
        "{won:?}"
    );
}

/// Bring your own pool, on each server: without DDL a missing schema is
/// refused; after applying `schema_sql` (the migration file's text, under a
/// test prefix) the backend starts on the application's pool and works; with
/// DDL allowed it creates the tables itself.
#[tokio::test]
async fn postgres_and_mysql_from_the_applications_pool() {
    if common::pg_available().await {
        let tag = common::tag();
        let prefix = format!("{tag}_byo_");
        let pool = sqlx::PgPool::connect(common::PG_URL).await.unwrap();
        let no_ddl = PoolOptions::new()
            .table_prefix(&prefix)
            .unwrap()
            .create_schema(false);
        let refused = PgBackend::from_pool(pool.clone(), &no_ddl).await;
        assert!(refused.err().unwrap().to_string().contains("missing"));
        sqlx::raw_sql(&PgBackend::schema_sql(&prefix))
            .execute(&pool)
            .await
            .unwrap();
        let backend = PgBackend::from_pool(pool.clone(), &no_ddl).await.unwrap();
        exercise(&backend).await;
        let other = PoolOptions::new()
            .table_prefix(&format!("{tag}_own_"))
            .unwrap();
        exercise(&PgBackend::from_pool(pool, &other).await.unwrap()).await;
        common::drop_pg_tables(&tag).await;
    }
    if common::mysql_available().await {
        let tag = common::tag();
        let prefix = format!("{tag}_byo_");
        let pool = sqlx::MySqlPool::connect(common::MYSQL_URL).await.unwrap();
        let no_ddl = PoolOptions::new()
            .table_prefix(&prefix)
            .unwrap()
            .create_schema(false);
        let refused = MysqlBackend::from_pool(pool.clone(), &no_ddl).await;
        assert!(refused.err().unwrap().to_string().contains("missing"));
        // One multi-statement query, as sqlx-migrate sends a file (the
        // procedure's body has `;` in it).
        sqlx::raw_sql(&MysqlBackend::schema_sql(&prefix))
            .execute(&pool)
            .await
            .unwrap();
        let backend = MysqlBackend::from_pool(pool.clone(), &no_ddl)
            .await
            .unwrap();
        exercise(&backend).await;
        let other = PoolOptions::new()
            .table_prefix(&format!("{tag}_own_"))
            .unwrap();
        exercise(&MysqlBackend::from_pool(pool, &other).await.unwrap()).await;
        common::drop_mysql_tables(&tag).await;
    }
}

async fn exercise(backend: &dyn Backend) {
    let grant = backend
        .open_session(std::time::Duration::from_secs(5))
        .await
        .unwrap();
    let name = simba_core::LeaseName::new("byo").unwrap();
    let won = backend.acquire(grant.session, &name).await.unwrap();
    assert!(
        matches!(won, simba_core::AcquireOutcome::Won { .. }),
        "{won:?}"
    );
    backend.close_session(grant.session).await.unwrap();
}

/// Pool options with the table prefix `prefix`: creating the schema (DDL),
/// and not.
fn ddl_and_no_ddl(prefix: &str) -> (PoolOptions, PoolOptions) {
    let ddl = PoolOptions::new().table_prefix(prefix).unwrap();
    (ddl.clone(), ddl.create_schema(false))
}

/// PostgreSQL's acquire function (`0003_acquire.sql`): without DDL, a
/// missing or older function is refused by name; with DDL an older Simba's
/// is replaced; a newer Simba's is used and kept; a function of that name
/// Simba did not write is never replaced, with or without DDL.
#[tokio::test]
async fn postgres_acquire_function_is_checked_and_replaced_only_if_simbas() {
    if !common::pg_available().await {
        return;
    }
    let tag = common::tag();
    let prefix = format!("{tag}_fn_");
    let f = format!("{prefix}acquire_lease");
    let pool = sqlx::PgPool::connect(common::PG_URL).await.unwrap();
    let (ddl, no_ddl) = ddl_and_no_ddl(&prefix);
    // The tables alone (files 0001 and 0002): the function is missing.
    let tables_only = PgBackend::schema_sql(&prefix);
    let tables_only = &tables_only[..tables_only.find("CREATE OR REPLACE FUNCTION").unwrap()];
    sqlx::raw_sql(tables_only).execute(&pool).await.unwrap();
    let err = PgBackend::from_pool(pool.clone(), &no_ddl)
        .await
        .expect_err("a missing function is refused without DDL");
    assert!(
        err.to_string().contains(&f) && err.to_string().contains("is missing"),
        "{err}"
    );
    assert!(err.to_string().contains("0003_acquire.sql"), "{err}");
    // An older Simba's function (its first line, another body).
    // `create` a function of that name and arguments with `body`.
    let function = |create: &str, body: &str| {
        format!(
            "{create} {f}(p_session bytea, p_name text) \
             RETURNS TABLE (holder bytea, token bigint, mine_us bigint, holder_us bigint) \
             LANGUAGE plpgsql AS $${body}$$"
        )
    };
    let older = function(
        "CREATE FUNCTION",
        "\n-- Simba's acquire, version 0\nBEGIN RETURN; END ",
    );
    sqlx::raw_sql(&older).execute(&pool).await.unwrap();
    let err = PgBackend::from_pool(pool.clone(), &no_ddl)
        .await
        .expect_err("an older function is refused without DDL");
    assert!(err.to_string().contains("older Simba"), "{err}");
    // With DDL it is replaced, and acquiring works.
    exercise(&PgBackend::from_pool(pool.clone(), &ddl).await.unwrap()).await;
    exercise(&PgBackend::from_pool(pool.clone(), &no_ddl).await.unwrap()).await;
    // A newer Simba's (a higher version, as in a rolling upgrade): used
    // as it is, with or without DDL, and never replaced.
    let newer_body = "\n-- Simba's acquire, version 999\nBEGIN RETURN; END ";
    let newer = function("CREATE OR REPLACE FUNCTION", newer_body);
    sqlx::raw_sql(&newer).execute(&pool).await.unwrap();
    for options in [&ddl, &no_ddl] {
        PgBackend::from_pool(pool.clone(), options).await.unwrap();
    }
    let src = prosrc(&pool, &f).await;
    assert_eq!(src, newer_body, "a newer function was replaced");
    // Someone else's function of that name and arguments: refused, kept.
    let foreign = function("CREATE OR REPLACE FUNCTION", "\nBEGIN RETURN; END ");
    sqlx::raw_sql(&foreign).execute(&pool).await.unwrap();
    for options in [&ddl, &no_ddl] {
        let err = PgBackend::from_pool(pool.clone(), options)
            .await
            .expect_err("a foreign function is refused");
        assert!(err.to_string().contains("not created by Simba"), "{err}");
    }
    let src = prosrc(&pool, &f).await;
    assert_eq!(
        src, "\nBEGIN RETURN; END ",
        "the foreign function was replaced"
    );
    common::drop_pg_tables(&tag).await;
}

/// The body of the function named `f`.
async fn prosrc(pool: &sqlx::PgPool, f: &str) -> String {
    sqlx::query_scalar("SELECT prosrc FROM pg_proc WHERE proname = $1")
        .bind(f)
        .fetch_one(pool)
        .await
        .unwrap()
}

/// MySQL's acquire procedure (`0003_acquire.sql`): without DDL, a missing or
/// older procedure is refused by name; with DDL an older Simba's is
/// replaced; a newer Simba's is used and kept; a procedure of that name
/// Simba did not write is never replaced, with or without DDL.
#[tokio::test]
async fn mysql_acquire_procedure_is_checked_and_replaced_only_if_simbas() {
    if !common::mysql_available().await {
        return;
    }
    let tag = common::tag();
    let prefix = format!("{tag}_fn_");
    let p = format!("{prefix}acquire_lease");
    let pool = sqlx::MySqlPool::connect(common::MYSQL_URL).await.unwrap();
    let (ddl, no_ddl) = ddl_and_no_ddl(&prefix);
    // The tables alone (files 0001, 0002 and 0004): the procedure is
    // missing.
    let schema = MysqlBackend::schema_sql(&prefix);
    let log = schema
        .find(&format!("CREATE TABLE IF NOT EXISTS {prefix}releases"))
        .unwrap();
    let tables_only = format!(
        "{}{}",
        &schema[..schema.find("DROP PROCEDURE").unwrap()],
        &schema[log..]
    );
    sqlx::raw_sql(&tables_only).execute(&pool).await.unwrap();
    let err = MysqlBackend::from_pool(pool.clone(), &no_ddl)
        .await
        .expect_err("a missing procedure is refused without DDL");
    assert!(
        err.to_string().contains(&p) && err.to_string().contains("is missing"),
        "{err}"
    );
    assert!(err.to_string().contains("0003_acquire.sql"), "{err}");
    // An older Simba's procedure (its first line, another body).
    let create = |body: &str| {
        format!(
            "DROP PROCEDURE IF EXISTS {p};\nCREATE PROCEDURE {p}(p_session BINARY(16), \
             p_name VARCHAR(128)) {body}"
        )
    };
    let older = "BEGIN\n  -- Simba's acquire, version 0\n  SELECT 1;\nEND";
    sqlx::raw_sql(&create(older)).execute(&pool).await.unwrap();
    let err = MysqlBackend::from_pool(pool.clone(), &no_ddl)
        .await
        .expect_err("an older procedure is refused without DDL");
    assert!(err.to_string().contains("older Simba"), "{err}");
    // With DDL it is replaced, and acquiring works.
    exercise(&MysqlBackend::from_pool(pool.clone(), &ddl).await.unwrap()).await;
    exercise(
        &MysqlBackend::from_pool(pool.clone(), &no_ddl)
            .await
            .unwrap(),
    )
    .await;
    assert_ne!(routine_body(&pool, &p).await, older);
    // A newer Simba's (a higher version, as in a rolling upgrade): used as
    // it is, with or without DDL, and never replaced.
    let newer = "BEGIN\n  -- Simba's acquire, version 999\n  SELECT NULL, 0, 0, 0;\nEND";
    sqlx::raw_sql(&create(newer)).execute(&pool).await.unwrap();
    for options in [&ddl, &no_ddl] {
        MysqlBackend::from_pool(pool.clone(), options)
            .await
            .unwrap();
    }
    assert_eq!(
        routine_body(&pool, &p).await,
        newer,
        "a newer procedure was replaced"
    );
    // Someone else's procedure of that name: refused, kept.
    let foreign = "BEGIN\n  SELECT 1;\nEND";
    sqlx::raw_sql(&create(foreign))
        .execute(&pool)
        .await
        .unwrap();
    for options in [&ddl, &no_ddl] {
        let err = MysqlBackend::from_pool(pool.clone(), options)
            .await
            .expect_err("a foreign procedure is refused");
        assert!(
            err.to_string().contains("not created by Simba") && err.to_string().contains(&p),
            "{err}"
        );
    }
    assert_eq!(
        routine_body(&pool, &p).await,
        foreign,
        "the foreign procedure was replaced"
    );
    // drop_tables drops the procedure too.
    sqlx::raw_sql(&create(older)).execute(&pool).await.unwrap();
    let backend = MysqlBackend::from_pool(pool.clone(), &ddl).await.unwrap();
    backend.drop_tables().await.unwrap();
    let left: Vec<String> = sqlx::query_scalar(
        "SELECT CAST(ROUTINE_NAME AS CHAR) FROM information_schema.ROUTINES \
         WHERE ROUTINE_SCHEMA = DATABASE() AND ROUTINE_NAME = ?",
    )
    .bind(&p)
    .fetch_all(&pool)
    .await
    .unwrap();
    assert!(left.is_empty(), "drop_tables left {left:?}");
    common::drop_mysql_tables(&tag).await;
}

/// An error inside MySQL's acquire procedure (here a lock wait timeout
/// behind another transaction) reaches the caller with its own code, and
/// leaves no transaction open on the connection: the procedure's handler
/// rolled it back.
#[tokio::test]
async fn mysql_acquire_procedure_error_leaves_no_transaction_open() {
    use sqlx::{Connection, Executor};
    if !common::mysql_available().await {
        return;
    }
    let tag = common::tag();
    let prefix = format!("{tag}_err_");
    let pool = sqlx::MySqlPool::connect(common::MYSQL_URL).await.unwrap();
    let options = PoolOptions::new().table_prefix(&prefix).unwrap();
    let backend = MysqlBackend::from_pool(pool.clone(), &options)
        .await
        .unwrap();
    let me = common::session(&backend, std::time::Duration::from_secs(30)).await;
    let name = simba_core::LeaseName::new("err").unwrap();
    let mut blocker = pool.acquire().await.unwrap();
    blocker.execute("BEGIN").await.unwrap();
    sqlx::query(&format!(
        "INSERT INTO {prefix}leases (name, session, token) VALUES ('err', NULL, 0)"
    ))
    .execute(&mut *blocker)
    .await
    .unwrap();
    let mut c = sqlx::MySqlConnection::connect(common::MYSQL_URL)
        .await
        .unwrap();
    c.execute("SET innodb_lock_wait_timeout = 1").await.unwrap();
    let err = sqlx::query(&format!("CALL {prefix}acquire_lease(?, ?)"))
        .bind(&me.to_bytes()[..])
        .bind(name.as_str())
        .fetch_all(&mut c)
        .await
        .expect_err("the call waits behind the blocker and times out");
    assert!(err.to_string().contains("1205"), "{err}");
    let open: i64 = sqlx::query_scalar("SELECT CAST(@@in_transaction AS SIGNED)")
        .fetch_one(&mut c)
        .await
        .unwrap();
    assert_eq!(open, 0, "a transaction stayed open after the error");
    blocker.execute("ROLLBACK").await.unwrap();
    drop(blocker);
    // The backend acquires as usual once the blocker is gone.
    let won = backend.acquire(me, &name).await.unwrap();
    assert!(
        matches!(won, simba_core::AcquireOutcome::Won { .. }),
        "{won:?}"
    );
    let _ = c.close().await;
    common::drop_mysql_tables(&tag).await;
}

/// The body of the procedure named `p`, as the server keeps it.
async fn routine_body(pool: &sqlx::MySqlPool, p: &str) -> String {
    sqlx::query_scalar(
        "SELECT CAST(ROUTINE_DEFINITION AS CHAR) FROM information_schema.ROUTINES \
         WHERE ROUTINE_SCHEMA = DATABASE() AND ROUTINE_NAME = ?",
    )
    .bind(p)
    .fetch_one(pool)
    .await
    .unwrap()
}
