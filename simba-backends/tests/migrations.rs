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
    let names: &[&str] = if db == "postgres" {
        &[
            "0001_simba.sql",
            "0002_groups_slots.sql",
            "0003_acquire.sql",
        ]
    } else {
        &["0001_simba.sql", "0002_groups_slots.sql"]
    };
    names
        .iter()
        .map(|f| file(&format!("migrations/{db}/{f}")))
        .collect()
}

#[test]
fn migration_files_equal_what_the_backends_create() {
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
}

#[test]
fn the_schema_follows_the_prefix() {
    let ddl = PgBackend::schema_sql("jobs_");
    assert!(ddl.contains("jobs_sessions") && ddl.contains("jobs_leases_session"));
    assert!(ddl.contains("jobs_members_session") && ddl.contains("jobs_slots"));
    assert!(!ddl.contains("simba_"));
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
    if common::server_available("PostgreSQL", common::pg_probe().await) {
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
    if common::server_available("MariaDB", common::mysql_probe().await) {
        let tag = common::tag();
        let prefix = format!("{tag}_byo_");
        let pool = sqlx::MySqlPool::connect(common::MYSQL_URL).await.unwrap();
        let no_ddl = PoolOptions::new()
            .table_prefix(&prefix)
            .unwrap()
            .create_schema(false);
        let refused = MysqlBackend::from_pool(pool.clone(), &no_ddl).await;
        assert!(refused.err().unwrap().to_string().contains("missing"));
        for ddl in MysqlBackend::schema_sql(&prefix)
            .split(";\n")
            .filter(|d| !d.trim().is_empty())
        {
            sqlx::raw_sql(ddl).execute(&pool).await.unwrap();
        }
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

/// PostgreSQL's acquire function (`0003_acquire.sql`): without DDL, a
/// missing or older function is refused by name; with DDL an older Simba's
/// is replaced; a newer Simba's is used and kept; a function of that name
/// Simba did not write is never replaced, with or without DDL.
#[tokio::test]
async fn postgres_acquire_function_is_checked_and_replaced_only_if_simbas() {
    if !common::server_available("PostgreSQL", common::pg_probe().await) {
        return;
    }
    let tag = common::tag();
    let prefix = format!("{tag}_fn_");
    let f = format!("{prefix}acquire_lease");
    let pool = sqlx::PgPool::connect(common::PG_URL).await.unwrap();
    let no_ddl = PoolOptions::new()
        .table_prefix(&prefix)
        .unwrap()
        .create_schema(false);
    let ddl = PoolOptions::new().table_prefix(&prefix).unwrap();
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
    let older = format!(
        "CREATE FUNCTION {f}(p_session bytea, p_name text) \
         RETURNS TABLE (holder bytea, token bigint, mine_us bigint, holder_us bigint) \
         LANGUAGE plpgsql AS $$\n-- Simba's acquire, version 0\nBEGIN RETURN; END $$"
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
    let newer = format!(
        "CREATE OR REPLACE FUNCTION {f}(p_session bytea, p_name text) \
         RETURNS TABLE (holder bytea, token bigint, mine_us bigint, holder_us bigint) \
         LANGUAGE plpgsql AS $${newer_body}$$"
    );
    sqlx::raw_sql(&newer).execute(&pool).await.unwrap();
    for options in [&ddl, &no_ddl] {
        PgBackend::from_pool(pool.clone(), options).await.unwrap();
    }
    let src = prosrc(&pool, &f).await;
    assert_eq!(src, newer_body, "a newer function was replaced");
    // Someone else's function of that name and arguments: refused, kept.
    let foreign = format!(
        "CREATE OR REPLACE FUNCTION {f}(p_session bytea, p_name text) \
         RETURNS TABLE (holder bytea, token bigint, mine_us bigint, holder_us bigint) \
         LANGUAGE plpgsql AS $$\nBEGIN RETURN; END $$"
    );
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
