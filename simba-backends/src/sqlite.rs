//! The SQLite backend (feature `sqlite`): the embedded default, for the
//! processes of one host sharing one database file.
//!
//! Every decision is one SQL statement (a schedule slot's claim, S11.1, is
//! one `BEGIN IMMEDIATE` transaction). SQLite runs a writing statement
//! inside a write transaction that takes the database's single write lock
//! before it reads anything (WAL mode, `busy_timeout` to wait for it), so
//! each statement sees and changes the database alone: writers are fully
//! serialized across every process on the host. Times are microseconds of
//! SQLite's clock (`unixepoch('subsec')`, fixed within one statement), which
//! on one host is the clock all processes share. See `docs/BACKENDS.md`.
//!
//! Release hints (S4.2): SQLite has no broadcast of its own, so every
//! release or close that freed a lease appends the freed names, one per
//! line, to a small file beside the database (`<database>-<prefix>released`),
//! and [`Backend::subscribe_releases`] watches that file for changes
//! (inotify on Linux, through the `notify` crate) and yields the names
//! appended since. Renewals never touch it, so a quiet election costs no
//! wake-up and no call; a lost hint only leaves the candidate to its retry.

use crate::sql::{
    held_outcome, map_err, micros, pool_call, prefixed, token_from, ClaimSql, Skeleton, Statements,
    Tables, TABLES,
};
use crate::{Backend, BackendConfig, PoolOptions};
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::FutureExt;
use simba_core::{
    AcquireOutcome, BackendError, LeaseName, RenewError, Renewal, SessionId, SlotClaim, Token,
};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::Row;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

const NAME: &str = "sqlite";
/// Now, in microseconds since the epoch, on SQLite's clock.
const NOW: &str = "CAST(unixepoch('subsec') * 1000000 AS INTEGER)";

/// The SQLite backend. Cheap to clone (a pool handle).
#[derive(Clone, Debug)]
pub struct SqliteBackend {
    pool: SqlitePool,
    sql: Sql,
    /// The release hint file; `None` for an in-memory database.
    hint: Option<Arc<PathBuf>>,
}

/// The hint file is emptied once it grows past this (a reader that misses
/// names in that instant falls back to its retry).
const HINT_MAX_BYTES: u64 = 64 * 1024;

/// The release hint file of the database `filename` under `prefix`, or
/// `None` for an in-memory database.
fn hint_path(filename: &Path, prefix: &str, in_memory: bool) -> Option<Arc<PathBuf>> {
    let f = filename.to_string_lossy();
    if in_memory || f == ":memory:" || f.starts_with("file:") || f.is_empty() {
        return None;
    }
    Some(Arc::new(PathBuf::from(format!("{f}-{prefix}released"))))
}

/// Appends `names` to the hint file (best effort: a failure only loses the
/// hint, S4.2).
fn announce(path: &Path, names: &[String]) {
    if names.is_empty() {
        return;
    }
    let mut text = String::new();
    for n in names {
        text.push_str(n);
        text.push('\n');
    }
    let written = (|| -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        if f.metadata()?.len() > HINT_MAX_BYTES {
            f.set_len(0)?;
        }
        f.write_all(text.as_bytes())
    })();
    if let Err(e) = written {
        tracing::debug!(backend = NAME, error = %e, path = %path.display(), "release hint not written");
    }
}

/// Reads what was appended to the hint file since the last read.
struct HintReader {
    path: Arc<PathBuf>,
    offset: u64,
    partial: String,
}

impl HintReader {
    fn read_new(&mut self) -> Vec<LeaseName> {
        let mut out = Vec::new();
        let Ok(mut f) = std::fs::File::open(&*self.path) else {
            return out;
        };
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        if len < self.offset {
            // Emptied by a writer: start over.
            self.offset = 0;
            self.partial.clear();
        }
        if len == self.offset || f.seek(SeekFrom::Start(self.offset)).is_err() {
            return out;
        }
        let mut buf = Vec::new();
        let Ok(read) = f.take(len - self.offset).read_to_end(&mut buf) else {
            return out;
        };
        self.offset += read as u64;
        self.partial.push_str(&String::from_utf8_lossy(&buf));
        // Complete lines only; a line still being written waits.
        if let Some(end) = self.partial.rfind('\n') {
            let rest = self.partial.split_off(end + 1);
            for line in self.partial.lines() {
                if let Ok(name) = LeaseName::new(line) {
                    out.push(name);
                }
            }
            self.partial = rest;
        }
        out
    }
}

#[derive(Clone, Debug)]
struct Sql {
    sk: Skeleton<sqlx::Sqlite>,
    acquire: String,
    acquire_lost: String,
    claim: String,
    last_slot: String,
}

impl Sql {
    fn new(prefix: &str) -> Sql {
        let t = Tables::new(prefix);
        let (s, l, m, c) = (&t.sessions, &t.leases, &t.members, &t.slots);
        let sk = Statements {
            columns: "SELECT name FROM pragma_table_info(?1)",
            open: format!(
                "INSERT INTO {s} (id, lease_us, expires_us, metadata) VALUES (?1, ?2, {NOW} + ?3, ?4)"
            ),
            gc: vec![
                format!(
                    "DELETE FROM {m} WHERE session IN (SELECT id FROM {s} WHERE expires_us <= {NOW})"
                ),
                format!("DELETE FROM {s} WHERE expires_us <= {NOW}"),
            ],
            // The live members of every group the session joined ride on the
            // renewal (S10.1): one statement, however many groups.
            renew: format!(
                "UPDATE {s} SET expires_us = {NOW} + lease_us \
                 WHERE id = ?1 AND expires_us > {NOW} \
                 RETURNING lease_us, \
                 (SELECT group_concat(name || '=' || token, ',') FROM {l} WHERE session = ?1), \
                 (SELECT group_concat(gm.name || '=' || hex(gm.session), ',') FROM {m} gm \
                  JOIN {s} h ON h.id = gm.session AND h.expires_us > {NOW} \
                  WHERE gm.name IN (SELECT name FROM {m} WHERE session = ?1))"
            ),
            release: format!(
                "UPDATE {l} SET session = NULL, acquired_us = NULL \
                 WHERE name = ?2 AND session = ?1 AND token = ?3"
            ),
            close: format!(
                "DELETE FROM {s} WHERE id = ?1 \
                 RETURNING (SELECT group_concat(name, ',') FROM {l} WHERE session = ?1)"
            ),
            close_tidy: Some(format!("DELETE FROM {m} WHERE session = ?1")),
            channel: None,
            join: format!(
                "INSERT INTO {m} (name, session) \
                 SELECT ?1, ?2 FROM {s} WHERE id = ?2 AND expires_us > {NOW} \
                 ON CONFLICT (name, session) DO NOTHING"
            ),
            leave: format!("DELETE FROM {m} WHERE name = ?1 AND session = ?2"),
            holds: format!(
                "SELECT 1 FROM {l} l JOIN {s} h ON h.id = l.session \
                 WHERE l.name = ?1 AND l.session = ?2 AND l.token = ?3 AND h.expires_us > {NOW}"
            ),
            inspect_sessions: format!(
                "SELECT id, lease_us, expires_us - {NOW}, metadata FROM {s} WHERE expires_us > {NOW}"
            ),
            inspect_leases: format!(
                "SELECT l.name, l.token, h.id, h.expires_us - {NOW} FROM {l} l \
                 LEFT JOIN {s} h ON h.id = l.session AND h.expires_us > {NOW} \
                 WHERE substr(l.name, 1, ?1) = ?2"
            ),
            // A test hold's `BEGIN IMMEDIATE` write lock covers every row.
            lock: None,
        };
        Sql {
            acquire: format!(
                "INSERT INTO {l} (name, session, token, acquired_us) \
                 SELECT ?2, ?1, 1, {NOW} FROM {s} WHERE id = ?1 AND expires_us > {NOW} \
                 ON CONFLICT (name) DO UPDATE SET \
                   token = CASE WHEN {l}.session = excluded.session THEN {l}.token ELSE {l}.token + 1 END, \
                   acquired_us = CASE WHEN {l}.session = excluded.session THEN {l}.acquired_us ELSE excluded.acquired_us END, \
                   session = excluded.session \
                 WHERE {l}.session IS NULL OR {l}.session = excluded.session \
                   OR NOT EXISTS (SELECT 1 FROM {s} h WHERE h.id = {l}.session AND h.expires_us > {NOW}) \
                 RETURNING token, (SELECT expires_us FROM {s} WHERE id = ?1) - {NOW}"
            ),
            acquire_lost: format!(
                "SELECT (SELECT expires_us - {NOW} FROM {s} WHERE id = ?1 AND expires_us > {NOW}), \
                        l.session, l.token, \
                        (SELECT h.expires_us - {NOW} FROM {s} h WHERE h.id = l.session AND h.expires_us > {NOW}) \
                 FROM (SELECT 1) LEFT JOIN {l} l ON l.name = ?2"
            ),
            claim: format!(
                "INSERT INTO {c} (name, slot) VALUES (?1, ?2) \
                 ON CONFLICT (name) DO UPDATE SET slot = excluded.slot \
                 WHERE {c}.slot < excluded.slot RETURNING slot"
            ),
            last_slot: format!("SELECT slot FROM {c} WHERE name = ?1"),
            sk: Skeleton::new(NAME, true, t, sk),
        }
    }
}

impl SqliteBackend {
    crate::sql::sql_backend_inherent!(
        Sqlite,
        sqlite,
        SqliteBackend,
        SqlitePool,
        "sqlite://simba.db"
    );

    /// Opens the database file that `config` names (creating it only with
    /// [`BackendConfig::create_schema`], the default; never its directory), in WAL mode with a 5 s
    /// busy timeout, and checks or creates the tables.
    ///
    /// # Errors
    /// `Rejected` for a bad URL, an unwritable file or a foreign table of the
    /// same name; `Unavailable`/`Timeout` if the file cannot be opened.
    pub async fn connect(config: &BackendConfig) -> Result<SqliteBackend, BackendError> {
        let opts = SqliteConnectOptions::from_str(config.url())
            .map_err(|e| map_err(NAME, "URL", e))?
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(Duration::from_secs(5));
        let in_memory = config.url().contains(":memory:") || config.url().contains("mode=memory");
        let mut pool = SqlitePoolOptions::new().acquire_timeout(config.pool_acquire_timeout());
        pool = if in_memory {
            // One private database per connection: keep exactly one, forever.
            pool.max_connections(1)
                .min_connections(1)
                .idle_timeout(None)
                .max_lifetime(None)
        } else {
            // No reaper unless asked for (BackendConfig::pool_idle_timeout).
            let (idle, life) = config.sqlx_lifetimes();
            pool.max_connections(config.max_connections())
                .idle_timeout(idle)
                .max_lifetime(life)
        };
        if !in_memory && !config.create_schema() && !opts.get_filename().exists() {
            // Without create_schema nothing is created, not even the file:
            // a reader (`simba status`) must not leave an empty database
            // behind at a mistyped path.
            return Err(BackendError::new(
                simba_core::BackendErrorKind::Rejected,
                format!(
                    "{NAME}: no database file at {} (tables missing; create_schema is off)",
                    opts.get_filename().display()
                ),
            ));
        }
        let opts = opts.create_if_missing(config.create_schema() || in_memory);
        let hint = hint_path(opts.get_filename(), config.table_prefix(), in_memory);
        let pool = pool
            .connect_with(opts)
            .await
            .map_err(|e| map_err(NAME, &format!("open {}", config.redacted_url()), e))?;
        let backend = SqliteBackend {
            pool,
            sql: Sql::new(config.table_prefix()),
            hint,
        };
        backend.prepare_schema(config.create_schema()).await?;
        Ok(backend)
    }

    /// Creates the tables if they are missing; refuses (without changing
    /// anything) tables of the same names that Simba did not create.
    ///
    /// # Errors
    /// `Rejected` naming a foreign table, or the driver's error.
    pub async fn migrate(&self) -> Result<(), BackendError> {
        let sk = &self.sql.sk;
        if sk.check_tables(&self.pool).await? < TABLES {
            let ddl = Self::schema_sql(&sk.t.prefix);
            sqlx::raw_sql(&ddl)
                .execute(&self.pool)
                .await
                .map_err(|e| map_err(NAME, "create tables", e))?;
        }
        Ok(())
    }

    /// With `create`, [`SqliteBackend::migrate`]; without, refuses to start
    /// unless every table exists.
    async fn prepare_schema(&self, create: bool) -> Result<(), BackendError> {
        let sk = &self.sql.sk;
        sk.prepare_schema(&self.pool, create, self.migrate(), async { Ok(()) })
            .await
    }

    /// A session became a member of `group`: its name is announced on the
    /// hint file, if there is one (S10.5), so the members renew at once.
    fn joined(&self, group: &LeaseName) {
        self.freed(&[group.as_str().to_owned()]);
    }

    /// The names a release or a close freed: appended to the hint file,
    /// if there is one (S4.2).
    fn freed(&self, names: &[String]) {
        if let Some(hint) = &self.hint {
            announce(hint, names);
        }
    }

    /// The DDL that creates Simba's tables under `table_prefix`: what
    /// [`SqliteBackend::migrate`] runs, the files of
    /// `simba-backends/migrations/sqlite/` concatenated, with `simba_`
    /// replaced by `table_prefix`.
    pub fn schema_sql(table_prefix: &str) -> String {
        prefixed(&MIGRATIONS.concat(), table_prefix)
    }

    /// A backend on the application's own pool. Open it as
    /// [`SqliteBackend::connect`] does, for safe sharing between processes:
    /// WAL journal, `synchronous = FULL` and a busy timeout of a few
    /// seconds; an in-memory database needs exactly one connection, kept
    /// for ever.
    ///
    /// # Errors
    /// With [`PoolOptions::create_schema`] `false`, `Rejected` if the tables
    /// are missing; otherwise as [`SqliteBackend::migrate`].
    pub async fn from_pool(
        pool: SqlitePool,
        options: &PoolOptions,
    ) -> Result<SqliteBackend, BackendError> {
        let hint = hint_path(
            pool.connect_options().get_filename(),
            options.get_table_prefix(),
            false,
        );
        let backend = SqliteBackend {
            pool,
            sql: Sql::new(options.get_table_prefix()),
            hint,
        };
        backend.prepare_schema(options.get_create_schema()).await?;
        Ok(backend)
    }
}

/// Simba's migration files for SQLite, in order (see
/// [`SqliteBackend::schema_sql`]).
const MIGRATIONS: [&str; 2] = [
    include_str!("../migrations/sqlite/0001_simba.sql"),
    include_str!("../migrations/sqlite/0002_groups_slots.sql"),
];

/// A connection: the pool's, or a test hold's open transaction.
type Conn = sqlx::SqliteConnection;

async fn renew_on(sql: &Sql, c: &mut Conn, session: SessionId) -> Result<Renewal, RenewError> {
    sql.sk.renew_lists(c, session).await
}

async fn acquire_on(
    sql: &Sql,
    c: &mut Conn,
    session: SessionId,
    name: &LeaseName,
) -> Result<AcquireOutcome, BackendError> {
    let get = |e| map_err(NAME, "acquire", e);
    let id = session.to_bytes();
    let won = sqlx::query(&sql.acquire)
        .bind(&id[..])
        .bind(name.as_str())
        .fetch_optional(&mut *c)
        .await
        .map_err(get)?;
    if let Some(row) = won {
        let token: i64 = row.try_get(0).map_err(get)?;
        let rem: Option<i64> = row.try_get(1).map_err(get)?;
        return Ok(AcquireOutcome::Won {
            token: token_from(NAME, name.as_str(), token)?,
            remaining: micros(rem.unwrap_or(0)),
        });
    }
    // Not won. The decision is made; this read only says why.
    let row = sqlx::query(&sql.acquire_lost)
        .bind(&id[..])
        .bind(name.as_str())
        .fetch_one(&mut *c)
        .await
        .map_err(get)?;
    let mine: Option<i64> = row.try_get(0).map_err(get)?;
    let holder: Option<Vec<u8>> = row.try_get(1).map_err(get)?;
    let token: Option<i64> = row.try_get(2).map_err(get)?;
    let holder_us: Option<i64> = row.try_get(3).map_err(get)?;
    held_outcome(NAME, session, name, mine, holder, token, holder_us)
}

/// Claim a schedule slot (S11.1): one `BEGIN IMMEDIATE` transaction, whose
/// write lock from the first statement lets the holder check, the
/// conditional upsert and the read of the last slot see and change the
/// database alone.
async fn claim_on(
    sql: &Sql,
    c: &mut Conn,
    session: SessionId,
    name: &LeaseName,
    token: Token,
    slot: u64,
) -> Result<SlotClaim, BackendError> {
    let steps = ClaimSql {
        begin: Some("BEGIN IMMEDIATE"),
        claim: &sql.claim,
        last_slot: &sql.last_slot,
    };
    sql.sk.claim(c, &steps, session, name, token, slot).await
}

// Up to 64 calls, on the same machine: a batch of them costs about one
// commit. The write lock at once: a batch never fails half-way to upgrade it.
crate::sql::batch_calls!(sqlx::Sqlite, 64, "BEGIN IMMEDIATE", |_sql, _c| async {
    Ok(())
});

impl Backend for SqliteBackend {
    crate::sql::sql_backend_common!(pool_call, pool_call);
    crate::sql::sql_backend_calls!(pool_call, pool_call);

    fn subscribe_releases(
        &self,
    ) -> BoxFuture<'_, Result<Option<BoxStream<'static, LeaseName>>, BackendError>> {
        let subscribed = match &self.hint {
            None => Ok(None),
            Some(path) => watch_hints(Arc::clone(path)).map(Some),
        };
        futures::future::ready(subscribed).boxed()
    }

    fn broadcasts_releases(&self) -> bool {
        self.hint.is_some()
    }
}

/// Watches the hint file `path` (created if missing) and yields the names
/// appended to it from now on.
fn watch_hints(path: Arc<PathBuf>) -> Result<BoxStream<'static, LeaseName>, BackendError> {
    use futures::StreamExt;
    use notify::Watcher;
    let fail = |what: &str, e: &dyn std::fmt::Display| {
        BackendError::new(
            simba_core::BackendErrorKind::Unavailable,
            format!(
                "{NAME}: release hints: {what} {}: {e}",
                path.as_path().display()
            ),
        )
    };
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&*path)
        .map_err(|e| fail("cannot open", &e))?;
    let offset = file.metadata().map(|m| m.len()).unwrap_or(0);
    let (tx, rx) = futures::channel::mpsc::unbounded::<LeaseName>();
    let mut reader = HintReader {
        path: Arc::clone(&path),
        offset,
        partial: String::new(),
    };
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        let Ok(event) = event else { return };
        if matches!(
            event.kind,
            notify::EventKind::Modify(_) | notify::EventKind::Create(_) | notify::EventKind::Any
        ) {
            for name in reader.read_new() {
                let _ = tx.unbounded_send(name);
            }
        }
    })
    .map_err(|e| fail("cannot watch", &e))?;
    watcher
        .watch(&path, notify::RecursiveMode::NonRecursive)
        .map_err(|e| fail("cannot watch", &e))?;
    // The watcher lives as long as the stream.
    let stream = futures::stream::unfold((rx, watcher), |(mut rx, watcher)| async move {
        let name = rx.next().await?;
        Some((name, (rx, watcher)))
    });
    Ok(stream.boxed())
}

#[cfg(feature = "testkit")]
pub use hold::SqliteHold;

#[cfg(feature = "testkit")]
mod hold {
    use super::{acquire_on, renew_on, Sql, SqliteBackend};
    use crate::testkit::{Hold, WaitSeen};
    use futures::future::{BoxFuture, FutureExt};
    use simba_core::{BackendError, LeaseName, SessionId, Token};
    use sqlx::sqlite::SqlitePool;

    /// The conformance suite's interleaving hook on SQLite
    /// ([`crate::testkit::Hold`]): a `BEGIN IMMEDIATE` transaction on a
    /// connection of its own, holding the database's one write lock (SQLite
    /// locks the whole database, so every lease and session is held). SQLite
    /// has no lock-wait view: [`Hold::waiters`] answers
    /// [`WaitSeen::Unobservable`]. A waiting call gives up after the
    /// backend's 5 s `busy_timeout`.
    pub struct SqliteHold {
        tx: sqlx::Transaction<'static, sqlx::Sqlite>,
        pool: SqlitePool,
        sql: Sql,
    }

    impl SqliteBackend {
        /// Opens a [`SqliteHold`] on this backend's database (feature
        /// `testkit`).
        ///
        /// # Errors
        /// A [`BackendError`] if the connection or `BEGIN IMMEDIATE` failed.
        pub async fn hold(&self) -> Result<SqliteHold, BackendError> {
            let sk = &self.sql.sk;
            let (pool, tx) = sk.hold(&self.pool, 1, Some("BEGIN IMMEDIATE")).await?;
            Ok(SqliteHold {
                tx,
                pool,
                sql: self.sql.clone(),
            })
        }
    }

    impl Hold for SqliteHold {
        crate::sql::hold_calls!();
        fn waiters(&mut self, _n: usize) -> BoxFuture<'_, Result<WaitSeen, BackendError>> {
            futures::future::ready(Ok(WaitSeen::Unobservable)).boxed()
        }
    }
}

#[cfg(all(test, feature = "runtime-tokio"))]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    /// A file database's pool runs no reaper unless one is asked for
    /// (`BackendConfig::pool_idle_timeout`): sqlx 0.8's reaper can spin for
    /// good and hang the runtime; a test of three members hung so.
    #[tokio::test]
    async fn a_file_pool_runs_no_reaper_unless_asked() {
        let path = std::env::temp_dir().join(format!("simba-reaper-{}.db", std::process::id()));
        let url = format!("sqlite://{}", path.display());
        let lifetimes = |b: &SqliteBackend| {
            let o = b.pool.options();
            (o.get_idle_timeout(), o.get_max_lifetime())
        };
        let b = SqliteBackend::connect(&BackendConfig::parse(&url).unwrap())
            .await
            .unwrap();
        assert_eq!(lifetimes(&b), (None, None));
        b.pool.close().await;
        let asked =
            format!("{url}?simba_pool_idle_timeout_ms=1500&simba_pool_max_lifetime_ms=9000");
        let b = SqliteBackend::connect(&BackendConfig::parse(&asked).unwrap())
            .await
            .unwrap();
        assert_eq!(
            lifetimes(&b),
            (
                Some(Duration::from_millis(1500)),
                Some(Duration::from_secs(9))
            )
        );
        b.pool.close().await;
        let _ = std::fs::remove_file(&path);
    }
}
