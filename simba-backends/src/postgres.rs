//! The PostgreSQL backend (feature `postgres`), with release broadcasts over
//! LISTEN/NOTIFY.
//!
//! Every operation but acquire is one statement, run in its own transaction
//! at PostgreSQL's default isolation, READ COMMITTED. Acquire is one
//! transaction of three statements: lock the lease row; judge the caller's
//! and the holder's liveness in a *new* statement (its snapshot is taken
//! after the lock was granted, so it sees whoever wrote the row, and it
//! share-locks both session rows, waiting for a renewal or close in flight);
//! then take the lease if it is free. A single statement that waited for the
//! lease row's lock would judge the holder on a snapshot older than the row
//! (issue 9). Times are microseconds of `clock_timestamp()`, read once per
//! statement. See `docs/BACKENDS.md` for the argument in full.

use crate::metadata::NO_METADATA;
use crate::sql::{
    add_metadata_sql, check_shape, decide, inspection_from_rows, is_legacy_sessions, malformed,
    map_err, micros, parse_owned, token_from, Decision, Judged, LEASE_COLUMNS, SESSION_COLUMNS,
};
use crate::{
    check_lease_duration, check_prefix, random_session_id, Backend, BackendConfig, Inspection,
    PoolOptions, SessionMetadata,
};
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use simba_core::{
    AcquireOutcome, BackendError, BackendErrorKind, LeaseName, RenewError, Renewal, SessionGrant,
    SessionId, Token,
};
use sqlx::postgres::{PgConnectOptions, PgListener, PgPool, PgPoolOptions};
use sqlx::Connection;
use sqlx::Row;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const NAME: &str = "postgres";
/// Now, in microseconds since the epoch, on the server's clock.
const NOW: &str = "(extract(epoch from clock_timestamp()) * 1000000)::bigint";

/// The PostgreSQL backend. Cheap to clone (a pool handle).
#[derive(Clone, Debug)]
pub struct PgBackend {
    pool: PgPool,
    sql: Sql,
    /// Failed `recv`s of release listeners (see [`PgBackend::listener_errors`]).
    listener_errors: Arc<AtomicU64>,
}

/// A failing release listener logs at most once per this period.
const LISTENER_LOG_EVERY: Duration = Duration::from_secs(30);

#[derive(Clone, Debug)]
struct Sql {
    prefix: String,
    sessions: String,
    leases: String,
    channel: String,
    open: String,
    renew: String,
    judge: String,
    take: String,
    release: String,
    close: String,
    /// Locks a lease row (inserting it free if missing) without changing it.
    lock: String,
    inspect_sessions: String,
    inspect_leases: String,
}

impl Sql {
    fn new(prefix: &str) -> Sql {
        let s = format!("{prefix}sessions");
        let l = format!("{prefix}leases");
        Sql {
            open: format!(
                "WITH now AS (SELECT {NOW} AS t), \
                 gc AS (DELETE FROM {s} WHERE id IN (SELECT x.id FROM {s} x, now \
                        WHERE x.expires_us <= now.t LIMIT 100 FOR UPDATE OF x SKIP LOCKED)) \
                 INSERT INTO {s} (id, lease_us, expires_us, metadata) SELECT $1, $2, now.t + $2, $3 FROM now"
            ),
            renew: format!(
                "WITH now AS (SELECT {NOW} AS t), \
                 r AS (UPDATE {s} SET expires_us = now.t + lease_us FROM now \
                       WHERE id = $1 AND expires_us > now.t RETURNING lease_us) \
                 SELECT r.lease_us, \
                   (SELECT string_agg(name || '=' || token, ',') FROM {l} WHERE session = $1) \
                 FROM r"
            ),
            judge: format!(
                "WITH now AS (SELECT {NOW} AS t) \
                 SELECT (SELECT me.expires_us - now.t FROM {s} me, now \
                         WHERE me.id = $1 FOR SHARE OF me), \
                        (SELECT h.expires_us > now.t FROM {s} h, now \
                         WHERE h.id = $2 FOR SHARE OF h)"
            ),
            take: format!(
                "UPDATE {l} SET session = $1, token = token + 1, acquired_us = {NOW} \
                 WHERE name = $2 RETURNING token"
            ),
            release: format!(
                "WITH r AS (UPDATE {l} SET session = NULL, acquired_us = NULL \
                   WHERE name = $2 AND session = $1 AND token = $3 RETURNING name) \
                 SELECT pg_notify($4, name) FROM r"
            ),
            lock: format!(
                "INSERT INTO {l} AS l (name, session, token, acquired_us) \
                 VALUES ($1, NULL, 0, NULL) \
                 ON CONFLICT (name) DO UPDATE SET token = l.token \
                 RETURNING l.session, l.token"
            ),
            close: format!(
                "WITH d AS (DELETE FROM {s} WHERE id = $1 RETURNING id) \
                 SELECT pg_notify($2, l.name) FROM {l} l, d WHERE l.session = d.id"
            ),
            inspect_sessions: format!(
                "WITH now AS (SELECT {NOW} AS t) \
                 SELECT id, lease_us, expires_us - now.t, metadata FROM {s}, now WHERE expires_us > now.t"
            ),
            inspect_leases: format!(
                "WITH now AS (SELECT {NOW} AS t) \
                 SELECT l.name, l.token, h.id, h.expires_us - now.t \
                 FROM now, {l} l LEFT JOIN {s} h ON h.id = l.session \
                   AND h.expires_us > (SELECT t FROM now) \
                 WHERE left(l.name, $1) = $2"
            ),
            channel: format!("{prefix}released"),
            prefix: prefix.to_owned(),
            sessions: s,
            leases: l,
        }
    }
}

impl PgBackend {
    /// Connects to `url` with the default options (Simba's URL parameters
    /// apply, see [`BackendConfig`]).
    ///
    /// # Errors
    /// `Rejected` if `url` names another kind of backend or is malformed;
    /// otherwise as [`PgBackend::connect`].
    pub async fn connect_url(url: &str) -> Result<PgBackend, BackendError> {
        let config = BackendConfig::parse(url)?;
        if config.kind() != crate::BackendKind::Postgres {
            return Err(BackendError::new(
                simba_core::BackendErrorKind::Rejected,
                format!("{NAME}: `{}` is not a {NAME} URL", config.redacted_url()),
            ));
        }
        Self::connect(&config).await
    }

    /// Connects to the server that `config` names and checks (by default
    /// creates) the tables.
    ///
    /// # Errors
    /// `Rejected` for a bad URL, missing privileges or a foreign table of the
    /// same name; `Unavailable`/`Timeout` if the server cannot be reached.
    pub async fn connect(config: &BackendConfig) -> Result<PgBackend, BackendError> {
        let mut opts =
            PgConnectOptions::from_str(config.url()).map_err(|e| map_err(NAME, "URL", e))?;
        // `simba` unless the URL names one (`application_name=`), so an
        // operator can tell deployments apart in `pg_stat_activity`.
        if !config.url().contains("application_name=") {
            opts = opts.application_name("simba");
        }
        // At most `max_connections` (default 1) for calls; the release
        // listener has a connection of its own (`subscribe_releases`).
        let pool = config.sqlx_pool::<sqlx::Postgres>().connect_lazy_with(opts);
        let what = format!("connect to {}", config.redacted_url());
        crate::sql::first_connection(NAME, &what, &pool, config.connect_timeout()).await?;
        let backend = PgBackend {
            pool,
            sql: Sql::new(config.table_prefix()),
            listener_errors: Arc::new(AtomicU64::new(0)),
        };
        if config.create_schema() {
            backend.migrate().await?;
        } else if backend.check_tables().await? < 2 {
            return Err(BackendError::new(
                BackendErrorKind::Rejected,
                format!(
                    "postgres: tables `{}` / `{}` are missing; run migrate()",
                    backend.sql.sessions, backend.sql.leases
                ),
            ));
        }
        Ok(backend)
    }

    /// Creates the tables if they are missing; refuses (without changing
    /// anything) tables of the same names that Simba did not create.
    ///
    /// # Errors
    /// `Rejected` naming a foreign table or a missing privilege.
    pub async fn migrate(&self) -> Result<(), BackendError> {
        self.upgrade_sessions().await?;
        if self.check_tables().await? == 2 {
            return Ok(());
        }
        let ddl = Self::schema_sql(&self.sql.prefix);
        if let Err(e) = sqlx::raw_sql(&ddl).execute(&self.pool).await {
            // Another process may have created them at the same moment.
            if self.check_tables().await? < 2 {
                return Err(map_err(NAME, "create tables", e));
            }
        }
        Ok(())
    }

    /// Adds the `metadata` column to a sessions table of an older Simba.
    async fn upgrade_sessions(&self) -> Result<(), BackendError> {
        let found: Vec<String> = sqlx::query_scalar(
            "SELECT column_name::text FROM information_schema.columns \
             WHERE table_schema = current_schema() AND table_name = $1",
        )
        .bind(&self.sql.sessions)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| map_err(NAME, "read schema", e))?;
        if is_legacy_sessions(&found) {
            // Another process may add it at the same moment: check_tables judges.
            let _ = sqlx::raw_sql(&add_metadata_sql(&self.sql.sessions))
                .execute(&self.pool)
                .await;
        }
        Ok(())
    }

    async fn check_tables(&self) -> Result<usize, BackendError> {
        let mut present = 0;
        for (table, cols) in [
            (&self.sql.sessions, SESSION_COLUMNS),
            (&self.sql.leases, LEASE_COLUMNS),
        ] {
            let found: Vec<String> = sqlx::query_scalar(
                "SELECT column_name::text FROM information_schema.columns \
                 WHERE table_schema = current_schema() AND table_name = $1",
            )
            .bind(table)
            .fetch_all(&self.pool)
            .await
            .map_err(|e| map_err(NAME, "read schema", e))?;
            if !found.is_empty() {
                check_shape(NAME, table, &found, cols)?;
                present += 1;
            }
        }
        Ok(present)
    }

    /// The DDL that creates Simba's tables under `table_prefix`: exactly what
    /// [`PgBackend::migrate`] runs. `simba-backends/migrations/postgres/`
    /// holds it for the default prefix, for sqlx-migrate, Flyway and the like.
    pub fn schema_sql(table_prefix: &str) -> String {
        let s = format!("{table_prefix}sessions");
        let l = format!("{table_prefix}leases");
        format!(
            "CREATE TABLE IF NOT EXISTS {s} (\n\
             \x20   id bytea PRIMARY KEY,\n\
             \x20   lease_us bigint NOT NULL,\n\
             \x20   expires_us bigint NOT NULL,\n\
             \x20   metadata text\n\
             );\n\
             CREATE TABLE IF NOT EXISTS {l} (\n\
             \x20   name varchar(128) PRIMARY KEY,\n\
             \x20   session bytea,\n\
             \x20   token bigint NOT NULL CHECK (token >= 0),\n\
             \x20   acquired_us bigint\n\
             );\n\
             CREATE INDEX IF NOT EXISTS {l}_session ON {l} (session);\n"
        )
    }

    /// A backend on the application's own pool, so Simba shares its
    /// connections, TLS settings and credentials. The pool must allow one
    /// connection more than the application needs at its busiest, since
    /// Simba's calls wait for a free connection (and time out after one
    /// renewal period, S2.4). Release broadcasts (S4.2) open one extra
    /// connection with the pool's options.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use simba_backends::{postgres::PgBackend, PoolOptions};
    /// let pool = sqlx::PgPool::connect("postgres://app@db/app").await?;
    /// let backend = PgBackend::from_pool(pool.clone(), &PoolOptions::new()).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// With [`PoolOptions::create_schema`] `false`, `Rejected` if the tables
    /// are missing; otherwise as [`PgBackend::migrate`].
    pub async fn from_pool(pool: PgPool, options: &PoolOptions) -> Result<PgBackend, BackendError> {
        let backend = PgBackend {
            pool,
            sql: Sql::new(options.get_table_prefix()),
            listener_errors: Arc::new(AtomicU64::new(0)),
        };
        if options.get_create_schema() {
            backend.migrate().await?;
        } else if backend.check_tables().await? < 2 {
            return Err(BackendError::new(
                BackendErrorKind::Rejected,
                format!(
                    "postgres: tables `{}` / `{}` are missing: create them (migrations/postgres/*.sql) or allow create_schema",
                    backend.sql.sessions, backend.sql.leases
                ),
            ));
        }
        Ok(backend)
    }

    /// The underlying pool (e.g. for [`crate::fencing::PgFence`]).
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// How many times a release listener of this backend (and its clones)
    /// failed to receive and had to reconnect; a metric for the operator. A
    /// listener retries every 250 ms and logs (`tracing`, level `warn`) the
    /// first failure and then at most one line per 30 s with the count, so a
    /// permanent error (a revoked privilege, a dropped database) is seen
    /// without flooding the log.
    pub fn listener_errors(&self) -> u64 {
        self.listener_errors.load(Ordering::Relaxed)
    }

    /// The NOTIFY channel releases are broadcast on (`<prefix>released`).
    pub fn channel(&self) -> &str {
        &self.sql.channel
    }

    /// For the conformance suite: runs `acquire(session, name)` while another
    /// connection holds the lease row locked, then terminates the server
    /// process serving the acquire while it waits, and returns what the
    /// acquire returned.
    ///
    /// # Errors
    /// A [`BackendError`] if the helper connection failed.
    #[cfg(feature = "testkit")]
    pub async fn acquire_while_killed(
        &self,
        session: SessionId,
        name: &LeaseName,
    ) -> Result<Result<AcquireOutcome, BackendError>, BackendError> {
        use sqlx::{Connection, Executor};
        let opts = self.pool.connect_options();
        let mut blocker = sqlx::PgConnection::connect_with(&opts)
            .await
            .map_err(|e| map_err(NAME, "test helper", e))?;
        let err = |e| map_err(NAME, "test helper", e);
        blocker.execute("BEGIN").await.map_err(err)?;
        // Hold the lease row (inserting it if new) in an open transaction.
        sqlx::query(&format!(
            "INSERT INTO {} AS l (name, session, token) VALUES ($1, NULL, 0) \
             ON CONFLICT (name) DO UPDATE SET token = l.token",
            self.sql.leases
        ))
        .bind(name.as_str())
        .execute(&mut blocker)
        .await
        .map_err(err)?;
        // Polled from a connection of its own: inside the blocker's
        // transaction, pg_stat_activity would show one cached snapshot.
        let mut watcher = sqlx::PgConnection::connect_with(&opts).await.map_err(err)?;
        let pattern = format!("%{}leases%", self.sql.prefix);
        let killer = async {
            for _ in 0..250 {
                let pids: Vec<i32> = sqlx::query_scalar(
                    "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' \
                     AND query LIKE $1 AND pid <> pg_backend_pid()",
                )
                .bind(&pattern)
                .fetch_all(&mut watcher)
                .await
                .map_err(err)?;
                if let Some(pid) = pids.first() {
                    sqlx::query("SELECT pg_terminate_backend($1)")
                        .bind(pid)
                        .execute(&mut watcher)
                        .await
                        .map_err(err)?;
                    return Ok(());
                }
                futures_timer::Delay::new(Duration::from_millis(20)).await;
            }
            Err(BackendError::new(
                BackendErrorKind::Other,
                "test helper: the acquire never waited on the lock",
            ))
        };
        let (result, killed) = futures::join!(self.acquire(session, name), killer);
        blocker.execute("ROLLBACK").await.map_err(err)?;
        let _ = blocker.close().await;
        let _ = watcher.close().await;
        killed?;
        Ok(result)
    }
}

/// A connection: the pool's, or a test hold's open transaction.
type Conn = sqlx::PgConnection;

async fn open_on(
    sql: &Sql,
    c: &mut Conn,
    lease_duration: Duration,
    metadata: &SessionMetadata,
) -> Result<SessionGrant, BackendError> {
    let lease_us = check_lease_duration(lease_duration)?;
    let session = random_session_id()?;
    sqlx::query(&sql.open)
        .bind(&session.to_bytes()[..])
        .bind(lease_us)
        .bind((!metadata.is_empty()).then(|| metadata.encode()))
        .execute(&mut *c)
        .await
        .map_err(|e| map_err(NAME, "open session", e))?;
    Ok(SessionGrant {
        session,
        remaining: lease_duration,
    })
}

async fn renew_on(sql: &Sql, c: &mut Conn, session: SessionId) -> Result<Renewal, RenewError> {
    let get = |e| map_err(NAME, "renew", e);
    let row = sqlx::query(&sql.renew)
        .bind(&session.to_bytes()[..])
        .fetch_optional(&mut *c)
        .await
        .map_err(get)?;
    let Some(row) = row else {
        return Err(RenewError::Expired);
    };
    let lease_us: i64 = row.try_get(0).map_err(get)?;
    let owned: Option<String> = row.try_get(1).map_err(get)?;
    Ok(Renewal {
        groups: Vec::new(),
        remaining: micros(lease_us),
        owned: parse_owned(NAME, owned.as_deref())?,
    })
}

/// Acquire, in one transaction of three statements (see the module docs and
/// `docs/BACKENDS.md`): lock the lease row, then judge liveness in a *new*
/// statement (a snapshot taken after the lock was granted), then take it.
async fn acquire_on(
    sql: &Sql,
    c: &mut Conn,
    session: SessionId,
    name: &LeaseName,
) -> Result<AcquireOutcome, BackendError> {
    let get = |e| map_err(NAME, "acquire", e);
    let id = session.to_bytes();
    let mut tx = c.begin().await.map_err(get)?;
    // 1. Lock the lease row (inserting it free if new). An upsert always
    //    locks and returns the row's latest committed version, waiting for
    //    any transaction that holds it.
    let row = sqlx::query(&sql.lock)
        .bind(name.as_str())
        .fetch_one(&mut *tx)
        .await
        .map_err(get)?;
    let holder: Option<Vec<u8>> = row.try_get(0).map_err(get)?;
    let token: i64 = row.try_get(1).map_err(get)?;
    // 2. A new statement takes a new snapshot, after the lock was granted:
    //    whoever wrote the holder into the row committed before it, so the
    //    holder's session row is visible. Both session rows are share-locked
    //    (a renewal or close in flight commits first; the latest version is
    //    read).
    let row = sqlx::query(&sql.judge)
        .bind(&id[..])
        .bind(holder.as_deref())
        .fetch_one(&mut *tx)
        .await
        .map_err(get)?;
    let live: Option<bool> = row.try_get(1).map_err(get)?;
    let judged = Judged {
        mine_us: row.try_get(0).map_err(get)?,
        holder,
        token,
        holder_live: live == Some(true),
    };
    match decide(NAME, session, name, judged)? {
        Decision::Answer(outcome) => {
            tx.rollback().await.map_err(get)?;
            Ok(outcome)
        }
        // 3. Take it with the next token.
        Decision::Take { next, remaining } => {
            let taken: i64 = sqlx::query_scalar(&sql.take)
                .bind(&id[..])
                .bind(name.as_str())
                .fetch_one(&mut *tx)
                .await
                .map_err(get)?;
            tx.commit().await.map_err(get)?;
            if taken != next {
                return Err(malformed(
                    NAME,
                    format!("lease `{name}` taken with token {taken}, expected {next}"),
                ));
            }
            Ok(AcquireOutcome::Won {
                token: token_from(NAME, name.as_str(), taken)?,
                remaining,
            })
        }
    }
}

async fn release_on(
    sql: &Sql,
    c: &mut Conn,
    session: SessionId,
    name: &LeaseName,
    token: Token,
) -> Result<(), BackendError> {
    let token = i64::try_from(token.get())
        .map_err(|_| malformed(NAME, format!("token {token} out of range")))?;
    sqlx::query(&sql.release)
        .bind(&session.to_bytes()[..])
        .bind(name.as_str())
        .bind(token)
        .bind(&sql.channel)
        .execute(&mut *c)
        .await
        .map_err(|e| map_err(NAME, "release", e))?;
    Ok(())
}

async fn close_on(sql: &Sql, c: &mut Conn, session: SessionId) -> Result<(), BackendError> {
    sqlx::query(&sql.close)
        .bind(&session.to_bytes()[..])
        .bind(&sql.channel)
        .execute(&mut *c)
        .await
        .map_err(|e| map_err(NAME, "close session", e))?;
    Ok(())
}

impl PgBackend {
    async fn conn(
        &self,
        what: &str,
    ) -> Result<sqlx::pool::PoolConnection<sqlx::Postgres>, BackendError> {
        self.pool
            .acquire()
            .await
            .map_err(|e| map_err(NAME, what, e))
    }
}

impl Backend for PgBackend {
    fn open_session(
        &self,
        lease_duration: Duration,
    ) -> BoxFuture<'_, Result<SessionGrant, BackendError>> {
        self.open_session_with(lease_duration, &NO_METADATA)
    }

    fn open_session_with<'a>(
        &'a self,
        lease_duration: Duration,
        metadata: &'a SessionMetadata,
    ) -> BoxFuture<'a, Result<SessionGrant, BackendError>> {
        async move {
            let mut c = self.conn("open session").await?;
            open_on(&self.sql, &mut c, lease_duration, metadata).await
        }
        .boxed()
    }

    fn renew(&self, session: SessionId) -> BoxFuture<'_, Result<Renewal, RenewError>> {
        async move {
            let mut c = self.conn("renew").await?;
            renew_on(&self.sql, &mut c, session).await
        }
        .boxed()
    }

    fn acquire<'a>(
        &'a self,
        session: SessionId,
        name: &'a LeaseName,
    ) -> BoxFuture<'a, Result<AcquireOutcome, BackendError>> {
        async move {
            let mut c = self.conn("acquire").await?;
            acquire_on(&self.sql, &mut c, session, name).await
        }
        .boxed()
    }

    fn release<'a>(
        &'a self,
        session: SessionId,
        name: &'a LeaseName,
        token: Token,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        async move {
            let mut c = self.conn("release").await?;
            release_on(&self.sql, &mut c, session, name, token).await
        }
        .boxed()
    }

    fn close_session(&self, session: SessionId) -> BoxFuture<'_, Result<(), BackendError>> {
        async move {
            let mut c = self.conn("close session").await?;
            close_on(&self.sql, &mut c, session).await
        }
        .boxed()
    }

    fn inspect<'a>(
        &'a self,
        prefix: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Inspection, BackendError>> {
        async move {
            let prefix = prefix.unwrap_or("");
            check_prefix(prefix)?;
            let get = |e| map_err(NAME, "inspect", e);
            let mut tx = self.pool.begin().await.map_err(get)?;
            let srows = sqlx::query(&self.sql.inspect_sessions)
                .fetch_all(&mut *tx)
                .await
                .map_err(get)?;
            let lrows = sqlx::query(&self.sql.inspect_leases)
                .bind(i32::try_from(prefix.len()).unwrap_or(0))
                .bind(prefix)
                .fetch_all(&mut *tx)
                .await
                .map_err(get)?;
            tx.commit().await.map_err(get)?;
            inspection_from_rows(NAME, srows, lrows, get)
        }
        .boxed()
    }

    fn subscribe_releases(
        &self,
    ) -> BoxFuture<'_, Result<Option<BoxStream<'static, LeaseName>>, BackendError>> {
        async move {
            let get = |e| map_err(NAME, "listen", e);
            // One connection of its own, outside the calls' pool, so that a
            // pool of one is never held by the listener; reconnects reuse it.
            let listen_pool = PgPoolOptions::new()
                .max_connections(1)
                .acquire_timeout(self.pool.options().get_acquire_timeout())
                .idle_timeout(None)
                .max_lifetime(None)
                .connect_lazy_with((*self.pool.connect_options()).clone());
            let mut listener = PgListener::connect_with(&listen_pool).await.map_err(get)?;
            listener.listen(&self.sql.channel).await.map_err(get)?;
            let errors = Arc::clone(&self.listener_errors);
            let state = (listener, errors, None::<(Instant, u64)>);
            let stream =
                futures::stream::unfold(state, |(mut listener, errors, mut logged)| async move {
                    loop {
                        match listener.recv().await {
                            Ok(n) => match LeaseName::new(n.payload()) {
                                Ok(name) => return Some((name, (listener, errors, logged))),
                                Err(_) => continue, // not ours: ignore
                            },
                            // The listener reconnects on the next recv; notifications
                            // sent meanwhile are lost (the engine's retry covers it).
                            Err(e) => {
                                let count = errors.fetch_add(1, Ordering::Relaxed) + 1;
                                let now = Instant::now();
                                if logged.is_none_or(|(at, _)| {
                                    now.duration_since(at) >= LISTENER_LOG_EVERY
                                }) {
                                    let since = logged.map_or(count, |(_, c)| count - c);
                                    tracing::warn!(
                                        backend = NAME,
                                        failures = count,
                                        since_last_log = since,
                                        error = %crate::redact(&e.to_string()),
                                        "release listener failed; retrying every 250 ms \
                                         (release broadcasts are lost until it recovers)"
                                    );
                                    logged = Some((now, count));
                                }
                                futures_timer::Delay::new(Duration::from_millis(250)).await;
                            }
                        }
                    }
                });
            Ok(Some(stream.boxed()))
        }
        .boxed()
    }

    fn broadcasts_releases(&self) -> bool {
        true
    }

    fn name(&self) -> &'static str {
        NAME
    }
}

#[cfg(feature = "testkit")]
pub use hold::PgHold;

#[cfg(feature = "testkit")]
mod hold {
    use super::{
        acquire_on, close_on, map_err, open_on, release_on, renew_on, PgBackend, Sql, NAME,
        NO_METADATA,
    };
    use crate::testkit::{Hold, WaitSeen};
    use futures::future::{BoxFuture, FutureExt};
    use simba_core::{
        AcquireOutcome, BackendError, BackendErrorKind, LeaseName, RenewError, Renewal,
        SessionGrant, SessionId, Token,
    };
    use sqlx::postgres::{PgPool, PgPoolOptions};
    use std::time::Duration;

    /// The conformance suite's interleaving hook on PostgreSQL
    /// ([`crate::testkit::Hold`]): a blocker transaction on a connection of
    /// its own; waits behind it are read from `pg_blocking_pids`.
    pub struct PgHold {
        tx: sqlx::Transaction<'static, sqlx::Postgres>,
        pool: PgPool,
        pid: i32,
        sql: Sql,
    }

    impl PgBackend {
        /// Opens a [`PgHold`] on this backend's tables (feature `testkit`).
        ///
        /// # Errors
        /// A [`BackendError`] if the connection or `BEGIN` failed.
        pub async fn hold(&self) -> Result<PgHold, BackendError> {
            let err = |e| map_err(NAME, "test hold", e);
            let opts = (*self.pool.connect_options()).clone();
            let pool = PgPoolOptions::new()
                .max_connections(2)
                .connect_with(opts)
                .await
                .map_err(err)?;
            let mut tx = pool.begin().await.map_err(err)?;
            let pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
                .fetch_one(&mut *tx)
                .await
                .map_err(err)?;
            Ok(PgHold {
                tx,
                pool,
                pid,
                sql: self.sql.clone(),
            })
        }
    }

    impl Hold for PgHold {
        fn lock_lease<'a>(
            &'a mut self,
            name: &'a LeaseName,
        ) -> BoxFuture<'a, Result<(), BackendError>> {
            async move {
                sqlx::query(&self.sql.lock)
                    .bind(name.as_str())
                    .execute(&mut *self.tx)
                    .await
                    .map_err(|e| map_err(NAME, "test hold", e))?;
                Ok(())
            }
            .boxed()
        }
        fn open_session(
            &mut self,
            lease_duration: Duration,
        ) -> BoxFuture<'_, Result<SessionGrant, BackendError>> {
            async move { open_on(&self.sql, &mut self.tx, lease_duration, &NO_METADATA).await }
                .boxed()
        }
        fn renew(&mut self, session: SessionId) -> BoxFuture<'_, Result<Renewal, RenewError>> {
            async move { renew_on(&self.sql, &mut self.tx, session).await }.boxed()
        }
        fn acquire<'a>(
            &'a mut self,
            session: SessionId,
            name: &'a LeaseName,
        ) -> BoxFuture<'a, Result<AcquireOutcome, BackendError>> {
            async move { acquire_on(&self.sql, &mut self.tx, session, name).await }.boxed()
        }
        fn release<'a>(
            &'a mut self,
            session: SessionId,
            name: &'a LeaseName,
            token: Token,
        ) -> BoxFuture<'a, Result<(), BackendError>> {
            async move { release_on(&self.sql, &mut self.tx, session, name, token).await }.boxed()
        }
        fn close_session(&mut self, session: SessionId) -> BoxFuture<'_, Result<(), BackendError>> {
            async move { close_on(&self.sql, &mut self.tx, session).await }.boxed()
        }
        fn waiters(&mut self, n: usize) -> BoxFuture<'_, Result<WaitSeen, BackendError>> {
            async move {
                let err = |e| map_err(NAME, "test hold", e);
                for _ in 0..500 {
                    // From the pool's second connection: the hold's own
                    // transaction would see one cached snapshot of the view.
                    let waiting: i64 = sqlx::query_scalar(
                        "SELECT count(*) FROM pg_stat_activity \
                         WHERE $1 = ANY(pg_blocking_pids(pid))",
                    )
                    .bind(self.pid)
                    .fetch_one(&self.pool)
                    .await
                    .map_err(err)?;
                    if usize::try_from(waiting).unwrap_or(0) >= n {
                        return Ok(WaitSeen::Seen);
                    }
                    futures_timer::Delay::new(Duration::from_millis(20)).await;
                }
                Err(BackendError::new(
                    BackendErrorKind::Other,
                    format!("no {n} call(s) waited behind the hold within 10 s"),
                ))
            }
            .boxed()
        }
        fn commit(self: Box<Self>) -> BoxFuture<'static, Result<(), BackendError>> {
            async move {
                let PgHold { tx, pool, .. } = *self;
                tx.commit()
                    .await
                    .map_err(|e| map_err(NAME, "test hold", e))?;
                pool.close().await;
                Ok(())
            }
            .boxed()
        }
    }
}
