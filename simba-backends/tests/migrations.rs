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
    ["0001_simba.sql", "0002_groups_slots.sql"]
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
