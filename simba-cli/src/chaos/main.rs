//! # `simba-chaos`: Simba under faults, with real processes
//!
//! `simba-chaos run --backend sqlite|postgres|mysql --duration 60s --seed N`
//! starts 3-5 **nodes**, each a real `simba run` process contending for one
//! lease name; each leader's child (`simba-chaos work`) logs an unfenced
//! *tick* every 50 ms on `CLOCK_MONOTONIC` (one clock for every process of
//! the host) and makes a **fenced** write (SPEC S9) to a table on the same
//! database. A nemesis meanwhile, at random (seeded):
//!
//! | fault | what it does |
//! |---|---|
//! | `pause-simba` | SIGSTOPs the `simba` process alone, for longer than the lease |
//! | `pause-node` | SIGSTOPs the whole node (simba, its guard and the child) likewise |
//! | `kill` | SIGKILLs the `simba` process, restarts the node |
//! | `term` | SIGTERMs the `simba` process (a graceful handover), restarts the node |
//! | `restart-db` | runs `--restart-db CMD` (restarts a private database server) |
//!
//! Then the checker reads the logs and the written table and reports terms,
//! faults by kind and stale unfenced activity per fault kind (ticks of a
//! term after a later term's first tick). It **fails** on any stale fenced
//! write accepted, any token decrease, or two valid terms overlapping: stale
//! unfenced activity is tolerated only after a whole-node pause, where no
//! local mechanism can help and fencing is what protects the resource.
//!
//! `--unfenced` is the control: the child writes without the fence and no
//! overlap is tolerated; under whole-node pauses the checker fires.
//!
//! `simba-chaos work` is the child's side (started by `simba run`).

#[cfg(not(unix))]
compile_error!("simba-cli (the `simba` and `simba-chaos` commands) is Unix-only: it runs each command in a process group, stops it with SIGTERM/SIGKILL, handles SIGINT/SIGTERM and guards the child on CLOCK_BOOTTIME (tokio::signal::unix, rustix). On this platform build the library crates alone, e.g. `cargo build --workspace --exclude simba-cli`.");

/// Never built: the `compile_error!` above stops a non-Unix build first.
#[cfg(not(unix))]
fn main() {}

#[cfg(unix)]
mod check;
#[cfg(unix)]
mod nemesis;
#[cfg(unix)]
mod work;

#[cfg(unix)]
use clap::{Parser, Subcommand};
#[cfg(unix)]
use std::process::ExitCode;

#[cfg(unix)]
/// Chaos runs of Simba with real processes.
#[derive(Debug, Parser)]
#[command(name = "simba-chaos")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[cfg(unix)]
#[derive(Debug, Subcommand)]
enum Cmd {
    /// Start the nodes, inject faults, check the history.
    Run(nemesis::RunArgs),
    /// The leader's child: ticks and fenced writes (started by `simba run`).
    Work(work::WorkArgs),
}

#[cfg(unix)]
fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("simba-chaos: cannot start the runtime: {e}");
            return ExitCode::from(70);
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Cmd::Run(args) => nemesis::run(args).await,
            Cmd::Work(args) => work::work(args).await.map(|()| true),
        }
    });
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("simba-chaos: {e}");
            ExitCode::from(70)
        }
    }
}

#[cfg(unix)]
/// `CLOCK_MONOTONIC` in nanoseconds: the one clock every process of the
/// run stamps its events with (same host, so comparable).
pub fn mono_ns() -> u64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    u64::try_from(ts.tv_sec)
        .unwrap_or(0)
        .saturating_mul(1_000_000_000)
        .saturating_add(u64::try_from(ts.tv_nsec).unwrap_or(0))
}

#[cfg(unix)]
/// The database side shared by the worker and the checker.
pub mod db {
    use simba_core::Token;
    use sqlx::Connection;

    /// One connection to the run's database.
    pub enum Db {
        /// SQLite.
        Sqlite(sqlx::SqliteConnection),
        /// PostgreSQL.
        Postgres(sqlx::PgConnection),
        /// MySQL / MariaDB.
        Mysql(sqlx::MySqlConnection),
    }

    /// The outcome of one write.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Write {
        /// Committed.
        Accepted,
        /// Refused by the fence (a later term has written).
        Refused,
    }

    type R<T> = Result<T, sqlx::Error>;

    /// Records the write `($t, $node, $at)` with the insert `$sql` on
    /// `$conn`, whichever database it is.
    macro_rules! record_write {
        ($sql:expr, $conn:expr, $t:expr, $node:expr, $at:expr) => {
            sqlx::query($sql)
                .bind($t)
                .bind($node)
                .bind($at)
                .execute($conn)
                .await
        };
    }

    impl Db {
        /// Connects to `url` (sqlite://, postgres://, mysql://).
        pub async fn connect(url: &str) -> R<Db> {
            if url.starts_with("sqlite:") {
                let opts: sqlx::sqlite::SqliteConnectOptions = url.parse()?;
                let opts = opts
                    .create_if_missing(true)
                    .busy_timeout(std::time::Duration::from_secs(5));
                Ok(Db::Sqlite(
                    sqlx::SqliteConnection::connect_with(&opts).await?,
                ))
            } else if url.starts_with("postgres") {
                Ok(Db::Postgres(sqlx::PgConnection::connect(url).await?))
            } else {
                Ok(Db::Mysql(sqlx::MySqlConnection::connect(url).await?))
            }
        }

        /// Creates the fence and writes tables `{p}fence`, `{p}writes`.
        pub async fn setup(&mut self, p: &str) -> R<()> {
            let stmts: Vec<String> = match self {
                Db::Sqlite(_) => vec![
                    format!("CREATE TABLE IF NOT EXISTS {p}fence (resource TEXT PRIMARY KEY, token INTEGER NOT NULL)"),
                    format!("CREATE TABLE IF NOT EXISTS {p}writes (id INTEGER PRIMARY KEY AUTOINCREMENT, token INTEGER NOT NULL, node INTEGER NOT NULL, at INTEGER NOT NULL)"),
                ],
                Db::Postgres(_) => vec![
                    format!("CREATE TABLE IF NOT EXISTS {p}fence (resource text PRIMARY KEY, token bigint NOT NULL)"),
                    format!("CREATE TABLE IF NOT EXISTS {p}writes (id bigserial PRIMARY KEY, token bigint NOT NULL, node bigint NOT NULL, at bigint NOT NULL)"),
                ],
                Db::Mysql(_) => vec![
                    format!("CREATE TABLE IF NOT EXISTS {p}fence (resource VARCHAR(64) PRIMARY KEY, token BIGINT NOT NULL) ENGINE=InnoDB"),
                    format!("CREATE TABLE IF NOT EXISTS {p}writes (id BIGINT AUTO_INCREMENT PRIMARY KEY, token BIGINT NOT NULL, node BIGINT NOT NULL, at BIGINT NOT NULL) ENGINE=InnoDB"),
                ],
            };
            for s in stmts {
                self.exec(&s).await?;
            }
            Ok(())
        }

        /// Drops the run's tables.
        pub async fn teardown(&mut self, p: &str) -> R<()> {
            self.exec(&format!("DROP TABLE IF EXISTS {p}fence")).await?;
            self.exec(&format!("DROP TABLE IF EXISTS {p}writes"))
                .await?;
            Ok(())
        }

        async fn exec(&mut self, sql: &str) -> R<u64> {
            Ok(match self {
                Db::Sqlite(c) => sqlx::query(sql).execute(&mut *c).await?.rows_affected(),
                Db::Postgres(c) => sqlx::query(sql).execute(&mut *c).await?.rows_affected(),
                Db::Mysql(c) => sqlx::query(sql).execute(&mut *c).await?.rows_affected(),
            })
        }

        /// One write of `(token, node, at)` to `{p}writes`: behind the fence
        /// (SPEC S9, the check and the write commit together), or without
        /// it if `fenced` is false (the control).
        pub async fn write(
            &mut self,
            p: &str,
            token: Token,
            node: u32,
            at: u64,
            fenced: bool,
        ) -> R<Write> {
            let t = i64::try_from(token.get()).unwrap_or(i64::MAX);
            let at = i64::try_from(at).unwrap_or(i64::MAX);
            let node = i64::from(node);
            let insert = format!("INSERT INTO {p}writes (token, node, at) VALUES ");
            match self {
                Db::Sqlite(c) => {
                    sqlx::query("BEGIN IMMEDIATE").execute(&mut *c).await?;
                    let admitted = if !fenced {
                        Ok(true)
                    } else {
                        sqlx::query(&format!(
                            "INSERT INTO {p}fence (resource, token) VALUES ('chaos', ?1) \
                             ON CONFLICT (resource) DO UPDATE SET token = excluded.token \
                             WHERE excluded.token >= {p}fence.token"
                        ))
                        .bind(t)
                        .execute(&mut *c)
                        .await
                        .map(|r| r.rows_affected() == 1)
                    };
                    let outcome = async {
                        if !admitted? {
                            return Ok(Write::Refused);
                        }
                        record_write!(&format!("{insert}(?1, ?2, ?3)"), &mut *c, t, node, at)?;
                        Ok(Write::Accepted)
                    }
                    .await;
                    let end = match outcome {
                        Ok(Write::Accepted) => "COMMIT",
                        _ => "ROLLBACK",
                    };
                    sqlx::query(end).execute(&mut *c).await?;
                    outcome
                }
                Db::Postgres(c) => {
                    let mut tx = c.begin().await?;
                    if fenced {
                        let row: Option<i64> = sqlx::query_scalar(&format!(
                            "INSERT INTO {p}fence AS f (resource, token) VALUES ('chaos', $1) \
                             ON CONFLICT (resource) DO UPDATE SET token = EXCLUDED.token \
                             WHERE f.token <= EXCLUDED.token RETURNING token"
                        ))
                        .bind(t)
                        .fetch_optional(&mut *tx)
                        .await?;
                        if row.is_none() {
                            return Ok(Write::Refused);
                        }
                    }
                    record_write!(&format!("{insert}($1, $2, $3)"), &mut *tx, t, node, at)?;
                    tx.commit().await?;
                    Ok(Write::Accepted)
                }
                Db::Mysql(c) => {
                    let mut tx = c.begin().await?;
                    if fenced {
                        sqlx::query(&format!(
                            "INSERT INTO {p}fence (resource, token) VALUES ('chaos', ?) \
                             ON DUPLICATE KEY UPDATE token = GREATEST(token, VALUES(token))"
                        ))
                        .bind(t)
                        .execute(&mut *tx)
                        .await?;
                        // A locking read: it sees the latest committed row (S10).
                        let seen: i64 = sqlx::query_scalar(&format!(
                            "SELECT token FROM {p}fence WHERE resource = 'chaos' FOR UPDATE"
                        ))
                        .fetch_one(&mut *tx)
                        .await?;
                        if seen != t {
                            return Ok(Write::Refused);
                        }
                    }
                    record_write!(&format!("{insert}(?, ?, ?)"), &mut *tx, t, node, at)?;
                    tx.commit().await?;
                    Ok(Write::Accepted)
                }
            }
        }

        /// Drops every table whose name starts with `p` (the lease tables
        /// of the run, on a shared server).
        pub async fn drop_prefixed(&mut self, p: &str) -> R<()> {
            let pattern = format!("{}%", p.replace('_', "\\_"));
            let names: Vec<String> = match self {
                Db::Sqlite(_) => Vec::new(),
                Db::Postgres(c) => {
                    sqlx::query_scalar(
                        "SELECT tablename::text FROM pg_tables WHERE schemaname = current_schema() AND tablename LIKE $1",
                    )
                    .bind(&pattern)
                    .fetch_all(&mut *c)
                    .await?
                }
                Db::Mysql(c) => {
                    sqlx::query_scalar(
                        "SELECT CAST(table_name AS CHAR) FROM information_schema.tables \
                         WHERE table_schema = DATABASE() AND table_name LIKE ?",
                    )
                    .bind(&pattern)
                    .fetch_all(&mut *c)
                    .await?
                }
            };
            for n in names {
                self.exec(&format!("DROP TABLE IF EXISTS {n}")).await?;
            }
            Ok(())
        }

        /// The tokens of `{p}writes` in the order they were written (id).
        pub async fn written_tokens(&mut self, p: &str) -> R<Vec<i64>> {
            let sql = format!("SELECT token FROM {p}writes ORDER BY id");
            Ok(match self {
                Db::Sqlite(c) => sqlx::query_scalar(&sql).fetch_all(&mut *c).await?,
                Db::Postgres(c) => sqlx::query_scalar(&sql).fetch_all(&mut *c).await?,
                Db::Mysql(c) => sqlx::query_scalar(&sql).fetch_all(&mut *c).await?,
            })
        }
    }
}
