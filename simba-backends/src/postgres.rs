//! The PostgreSQL backend (feature `postgres`), with release broadcasts over
//! LISTEN/NOTIFY.
//!
//! Every operation but acquire is one statement, run in its own transaction
//! at PostgreSQL's default isolation, READ COMMITTED. Acquire is one
//! transaction of two statements: lock the lease row; then, in a *new*
//! statement (its snapshot is taken after the lock was granted, so it sees
//! whoever wrote the row, and it share-locks both session rows, waiting for
//! a renewal or close in flight), judge the caller's and the holder's
//! liveness, take the lease if it is free and read the outcome. A single statement that waited for the
//! lease row's lock would judge the holder on a snapshot older than the row
//! (issue 9). A schedule slot's claim (S11.1) is one transaction too: a
//! holder check that share-locks exactly the rows it judges, then a
//! conditional upsert of the slot. Times are microseconds of `clock_timestamp()`, read once per
//! statement. See `docs/BACKENDS.md` for the argument in full.

use crate::sql::{
    acquire_version, malformed, map_err, prefixed, AcquireRoutine, ClaimSql, Skeleton, Statements,
    Tables, ACQUIRE_MARK, TABLES,
};
use crate::{Backend, BackendConfig, PoolOptions, SessionAttrs};
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use simba_core::{
    AcquireOutcome, BackendError, BackendErrorKind, Command, Input, LeaseName, RenewError, Renewal,
    SessionId, SlotClaim, Token,
};
use sqlx::postgres::{PgConnectOptions, PgListener, PgPool, PgPoolOptions};
use sqlx::Connection;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const NAME: &str = "postgres";
/// Now, in microseconds since the epoch, on the server's clock.
const NOW: &str = "(extract(epoch from clock_timestamp()) * 1000000)::bigint";
/// Turns `synchronous_commit` off for the statement's own (implicit)
/// transaction: its commit returns before the WAL reaches the disk. Used by
/// release and close only, whose loss in a server crash delays a takeover
/// but never lets two sessions hold a lease (`docs/BACKENDS.md`, "Durability").
/// Acquire, open and renew stay synchronous: a lost renewal could let the
/// server expire a session earlier than its holder believes.
const ASYNC_COMMIT: &str = "SELECT set_config('synchronous_commit', 'off', true)";

/// The PostgreSQL backend. Cheap to clone (a pool handle).
#[derive(Clone, Debug)]
pub struct PgBackend {
    pool: PgPool,
    sql: Sql,
    /// Where the release listener connects (`None`: no listener).
    listen: Option<PgConnectOptions>,
    /// Failed `recv`s of release listeners (see [`PgBackend::listener_errors`]).
    listener_errors: Arc<AtomicU64>,
    /// A host list's fail-over (`None`: one host, or a pool of the
    /// application's).
    failover: Option<Arc<Failover>>,
    /// The release listener follows the fail-over (no listen URL of its
    /// own).
    listen_follows: bool,
}

/// A failing release listener logs at most once per this period.
const LISTENER_LOG_EVERY: Duration = Duration::from_secs(30);

#[derive(Clone, Debug)]
struct Sql {
    /// The shared calls and statements (prepared under a name and cached
    /// per connection unless behind a transaction-pooling proxy).
    sk: Skeleton<sqlx::Postgres>,
    /// The acquire function's name (`<prefix>acquire_lease`).
    acquire_fn: String,
    claim: String,
    last_slot: String,
    /// Whether each single-statement call runs inside an explicit
    /// transaction, so that its parse and its execution (two protocol
    /// round trips, each ending in `Sync`) reach one server connection
    /// behind a transaction-pooling proxy.
    wrap: bool,
}

impl Sql {
    fn new(prefix: &str, transaction_pooling: bool) -> Sql {
        let t = Tables::new(prefix);
        let (s, l, m, c) = (&t.sessions, &t.leases, &t.members, &t.slots);
        let sk = Statements {
            columns: "SELECT column_name::text FROM information_schema.columns \
                      WHERE table_schema = current_schema() AND table_name = $1",
            open: format!(
                "WITH now AS (SELECT {NOW} AS t), \
                 gc AS (DELETE FROM {s} WHERE id IN (SELECT x.id FROM {s} x, now \
                        WHERE x.expires_us <= now.t LIMIT 100 FOR UPDATE OF x SKIP LOCKED) \
                        RETURNING id), \
                 gm AS (DELETE FROM {m} WHERE session IN (SELECT id FROM gc)) \
                 INSERT INTO {s} (id, lease_us, expires_us, metadata) SELECT $1, $2, now.t + $3, $4 FROM now"
            ),
            // Expired sessions are collected by `open` itself.
            gc: Vec::new(),
            // The live members of every group the session joined ride on the
            // renewal (S10.1): one statement, however many groups. Members
            // are judged on the statement's snapshot: a renewal committed
            // since only extends an expiry, so no member expired by `now` is
            // listed.
            renew: format!(
                "WITH now AS (SELECT {NOW} AS t), \
                 r AS (UPDATE {s} SET expires_us = now.t + lease_us FROM now \
                       WHERE id = $1 AND expires_us > now.t RETURNING lease_us) \
                 SELECT r.lease_us, \
                   (SELECT string_agg(name || '=' || token, ',') FROM {l} WHERE session = $1), \
                   (SELECT string_agg(gm.name || '=' || encode(gm.session, 'hex'), ',') \
                    FROM {m} gm JOIN {s} h ON h.id = gm.session, now \
                    WHERE h.expires_us > now.t \
                      AND gm.name IN (SELECT name FROM {m} WHERE session = $1)) \
                 FROM r"
            ),
            // Asynchronous commit (see `ASYNC_COMMIT`): only a release or
            // a close may lose its commit in a server crash.
            release: format!(
                "WITH a AS ({ASYNC_COMMIT}), \
                 r AS (UPDATE {l} SET session = NULL, acquired_us = NULL \
                   WHERE name = $2 AND session = $1 AND token = $3 RETURNING name) \
                 SELECT pg_notify($4, r.name) FROM r, a"
            ),
            close: format!(
                "WITH a AS ({ASYNC_COMMIT}), \
                 d AS (DELETE FROM {s} WHERE id = $1 RETURNING id), \
                 dm AS (DELETE FROM {m} WHERE session = $1) \
                 SELECT pg_notify($2, l.name) FROM a, {l} l, d WHERE l.session = d.id"
            ),
            close_tidy: None,
            channel: Some(format!("{prefix}released")),
            // A new membership is announced on the release channel by the
            // group's name (S10.5): the members renew at once and hand the
            // joiner its partitions, instead of at their next renewal.
            join: format!(
                "WITH now AS (SELECT {NOW} AS t), \
                 j AS (INSERT INTO {m} (name, session) \
                   SELECT $1, $2 FROM {s}, now WHERE id = $2 AND expires_us > now.t \
                   ON CONFLICT (name, session) DO NOTHING RETURNING name) \
                 SELECT pg_notify('{prefix}released', j.name) FROM j"
            ),
            leave: format!("DELETE FROM {m} WHERE name = $1 AND session = $2"),
            holds: format!(
                "WITH now AS (SELECT {NOW} AS t) \
                 SELECT 1 FROM {l} l JOIN {s} h ON h.id = l.session, now \
                 WHERE l.name = $1 AND l.session = $2 AND l.token = $3 \
                   AND h.expires_us > now.t \
                 FOR SHARE OF l, h"
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
                 WHERE left(l.name, $1::int) = $2"
            ),
            lock: Some(format!(
                "INSERT INTO {l} AS l (name, session, token, acquired_us) \
                 VALUES ($1, NULL, 0, NULL) \
                 ON CONFLICT (name) DO UPDATE SET token = l.token \
                 RETURNING l.session, l.token"
            )),
        };
        Sql {
            claim: format!(
                "INSERT INTO {c} AS c (name, slot) VALUES ($1, $2) \
                 ON CONFLICT (name) DO UPDATE SET slot = excluded.slot \
                 WHERE c.slot < excluded.slot RETURNING c.slot"
            ),
            last_slot: format!("SELECT slot FROM {c} WHERE name = $1"),
            acquire_fn: format!("{prefix}acquire_lease"),
            sk: Skeleton::new(NAME, !transaction_pooling, t, sk),
            wrap: transaction_pooling,
        }
    }
}

impl PgBackend {
    crate::sql::sql_backend_inherent!(
        Postgres,
        postgres,
        PgBackend,
        PgPool,
        "postgres://app@db/app"
    );

    /// Connects to the server that `config` names and checks (by default
    /// creates) the tables.
    ///
    /// # Errors
    /// `Rejected` for a bad URL, missing privileges or a foreign table of the
    /// same name; `Unavailable`/`Timeout` if the server cannot be reached.
    pub async fn connect(config: &BackendConfig) -> Result<PgBackend, BackendError> {
        crate::ensure_rustls_provider();
        let mut opts =
            PgConnectOptions::from_str(config.url()).map_err(|e| map_err(NAME, "URL", e))?;
        // `simba` unless the URL names one (`application_name=`), so an
        // operator can tell deployments apart in `pg_stat_activity`.
        if !config.url().contains("application_name=") {
            opts = opts.application_name("simba");
        }
        let pooling = config.transaction_pooling();
        if pooling {
            // No named statements (see `Sql::persistent`), and no startup
            // parameter PgBouncer refuses unless told to ignore it.
            opts = opts.statement_cache_capacity(0).extra_float_digits(None);
        }
        let listen = if !config.listen() {
            None
        } else if let Some(url) = config.listen_url() {
            let mut l =
                PgConnectOptions::from_str(url).map_err(|e| map_err(NAME, "listen URL", e))?;
            if !url.contains("application_name=") {
                l = l.application_name("simba");
            }
            Some(l)
        } else {
            Some(opts.clone())
        };
        // A host list, or one host that must be a primary: find the host
        // first (libpq's order), then the pool connects there.
        let hosts = config.postgres_hosts();
        let failover = if hosts.len() > 1 || config.session_attrs() != SessionAttrs::Any {
            let f = Failover {
                hosts: hosts
                    .iter()
                    .map(|(h, p)| opts.clone().host(h).port(*p))
                    .collect(),
                labels: hosts.iter().map(|(h, p)| format!("{h}:{p}")).collect(),
                attrs: config.session_attrs(),
                connect_timeout: config.connect_timeout(),
                current: AtomicUsize::new(0),
                suspect: AtomicBool::new(false),
                locating: futures::lock::Mutex::new(()),
                switches: AtomicU64::new(0),
            };
            let first = f.locate(0).await?;
            f.current.store(first, Ordering::Relaxed);
            opts = f.hosts[first].clone();
            Some(Arc::new(f))
        } else {
            None
        };
        let listen = match (listen, &failover) {
            // The listener follows the calls' host (unless it has a URL
            // of its own).
            (Some(_), Some(f)) if config.listen_url().is_none() => Some(f.options()),
            (l, _) => l,
        };
        // At most `max_connections` (default 1) for calls; the release
        // listener has a connection of its own (`subscribe_releases`).
        let pool = config.sqlx_pool::<sqlx::Postgres>().connect_lazy_with(opts);
        let what = format!("connect to {}", config.redacted_url());
        crate::sql::first_connection(NAME, &what, &pool, config.connect_timeout()).await?;
        let backend = PgBackend {
            pool,
            sql: Sql::new(config.table_prefix(), pooling),
            listen,
            listener_errors: Arc::new(AtomicU64::new(0)),
            listen_follows: failover.is_some() && config.listen_url().is_none(),
            failover,
        };
        // Behind a pooler the server's view is of the pooler's connection,
        // not of ours: nothing to say then.
        if !pooling {
            let mode = crate::sql::tls_mode(config.url(), "sslmode");
            if matches!(mode.as_deref(), None | Some("prefer")) {
                let tls = backend.uses_tls().await?;
                crate::sql::log_plain_fallback(NAME, &config.redacted_url(), mode.as_deref(), tls);
            }
        }
        backend.prepare_schema(config.create_schema()).await?;
        Ok(backend)
    }

    /// Creates the tables and the acquire function if they are missing, and
    /// replaces an older Simba's acquire function (a newer one is kept);
    /// refuses (without changing anything) tables of the same names, or a
    /// function of the same name and arguments, that Simba did not create.
    ///
    /// # Errors
    /// `Rejected` naming a foreign table or a missing privilege.
    pub async fn migrate(&self) -> Result<(), BackendError> {
        let state = self.acquire_fn_state().await?;
        let sk = &self.sql.sk;
        let Some(state) = sk
            .routine_to_migrate(&self.pool, state, &self.routine())
            .await?
        else {
            return Ok(());
        };
        if state == AcquireRoutine::Newer {
            // Only the tables: a newer Simba's function stays.
            let ddl = Self::tables_sql(&self.sql.sk.t.prefix);
            if let Err(e) = sqlx::raw_sql(&ddl).execute(&self.pool).await {
                if self.sql.sk.check_tables(&self.pool).await? < TABLES {
                    return Err(map_err(NAME, "create tables", e));
                }
            }
            return Ok(());
        }
        // Creates what is missing and replaces an older Simba's acquire
        // function (a node of that version still running keeps working:
        // the arguments and the answer's columns are the same).
        let ddl = Self::schema_sql(&self.sql.sk.t.prefix);
        if let Err(e) = sqlx::raw_sql(&ddl).execute(&self.pool).await {
            // Another process may have created them at the same moment.
            if self.sql.sk.check_tables(&self.pool).await? < TABLES
                || !self.acquire_fn_state().await?.usable()
            {
                return Err(map_err(NAME, "create tables", e));
            }
        }
        Ok(())
    }

    /// With `create`, [`PgBackend::migrate`]; without, refuses to start
    /// unless every table and this version's acquire function exist.
    async fn prepare_schema(&self, create: bool) -> Result<(), BackendError> {
        let routine = async { self.acquire_fn_state().await?.check(NAME, &self.routine()) };
        let sk = &self.sql.sk;
        sk.prepare_schema(&self.pool, create, self.migrate(), routine)
            .await
    }

    /// Whether the acquire function in the current schema is this
    /// version's, an older Simba's, someone else's, or missing.
    async fn acquire_fn_state(&self) -> Result<AcquireRoutine, BackendError> {
        let get = |e| map_err(NAME, "read schema", e);
        let mut tx = self.pool.begin().await.map_err(get)?;
        let found: Vec<String> = sqlx::query_scalar(
            "SELECT p.prosrc FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace \
             WHERE n.nspname = current_schema() AND p.proname = $1 \
               AND pg_get_function_identity_arguments(p.oid) = $2",
        )
        .persistent(self.sql.sk.persistent)
        .bind(&self.sql.acquire_fn)
        .bind(ACQUIRE_ARGS)
        .fetch_all(&mut *tx)
        .await
        .map_err(get)?;
        tx.commit().await.map_err(get)?;
        let want = acquire_fn_body(&self.sql.sk.t.prefix);
        Ok(match found.first() {
            None => AcquireRoutine::Missing,
            Some(src) if *src == want => AcquireRoutine::Current,
            Some(src) => {
                AcquireRoutine::of_version(acquire_version(src, ACQUIRE_MARK), ACQUIRE_VERSION)
            }
        })
    }

    /// The acquire function, as its errors name it.
    fn routine(&self) -> String {
        format!("function `{}({ACQUIRE_ARGS})`", self.sql.acquire_fn)
    }

    /// The DDL that creates Simba's tables and acquire function under
    /// `table_prefix`: what [`PgBackend::migrate`] runs, the files of
    /// `simba-backends/migrations/postgres/` (for sqlx-migrate, Flyway and
    /// the like) concatenated, with `simba_` replaced by `table_prefix`.
    pub fn schema_sql(table_prefix: &str) -> String {
        prefixed(&MIGRATIONS.concat(), table_prefix)
    }

    /// `0001_simba.sql` and `0002_groups_slots.sql`: the tables alone.
    fn tables_sql(table_prefix: &str) -> String {
        prefixed(&MIGRATIONS[..2].concat(), table_prefix)
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
        let listen = options
            .get_listen()
            .then(|| (*pool.connect_options()).clone());
        let backend = PgBackend {
            pool,
            sql: Sql::new(
                options.get_table_prefix(),
                options.get_transaction_pooling(),
            ),
            listen,
            listener_errors: Arc::new(AtomicU64::new(0)),
            failover: None,
            listen_follows: false,
        };
        backend.prepare_schema(options.get_create_schema()).await?;
        Ok(backend)
    }

    /// Drops Simba's four tables of this backend's table prefix, with every
    /// session, lease and token in them: for tests and for uninstalling.
    /// Never call it while a node may still use them (their tokens would
    /// start again at 1, S3.2).
    ///
    /// # Errors
    /// As any call, or `Rejected` without the privilege to drop.
    pub async fn drop_tables(&self) -> Result<(), BackendError> {
        let sk = &self.sql.sk;
        let ddl = format!(
            "{}; DROP FUNCTION IF EXISTS {}({ACQUIRE_ARGS})",
            sk.t.drop_sql(),
            self.sql.acquire_fn
        );
        sk.drop_tables(&self.pool, &[ddl]).await
    }

    /// Whether this backend's connection to the server is encrypted (TLS),
    /// as the server sees it (`pg_stat_ssl`). The URL's `sslmode` decides:
    /// `disable`, `prefer` (the default: TLS if the server offers it, else
    /// plain text, logged at connect), `require`, `verify-ca` and
    /// `verify-full` (the server's certificate checked against
    /// `sslrootcert`, or the public roots, and for `verify-full` its name).
    /// Through a transaction pooler the answer is about the pooler's own
    /// connection to the server.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), simba_core::BackendError> {
    /// use simba_backends::postgres::PgBackend;
    /// let b = PgBackend::connect_url(
    ///     "postgres://app@db.example:5432/app?sslmode=verify-full&sslrootcert=/etc/ssl/db-ca.pem",
    /// )
    /// .await?;
    /// assert!(b.uses_tls().await?);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As any call: `Unavailable`/`Timeout` if the server cannot be reached.
    pub async fn uses_tls(&self) -> Result<bool, BackendError> {
        sqlx::query_scalar(
            "SELECT COALESCE((SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()), false)",
        )
        .fetch_one(&self.pool)
        .await
        .map_err(|e| map_err(NAME, "TLS status", e))
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
        self.sql.sk.s.channel.as_deref().unwrap_or_default()
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
            self.sql.sk.t.leases
        ))
        .bind(name.as_str())
        .execute(&mut blocker)
        .await
        .map_err(err)?;
        // Polled from a connection of its own: inside the blocker's
        // transaction, pg_stat_activity would show one cached snapshot.
        let mut watcher = sqlx::PgConnection::connect_with(&opts).await.map_err(err)?;
        let pattern = format!("%{}%", self.sql.acquire_fn);
        let killer = crate::sql::kill_waiting(&mut watcher, move |watcher| {
            let pattern = pattern.clone();
            async move {
                let pids: Vec<i32> = sqlx::query_scalar(
                    "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' \
                     AND query LIKE $1 AND pid <> pg_backend_pid()",
                )
                .bind(&pattern)
                .fetch_all(&mut *watcher)
                .await
                .map_err(err)?;
                let Some(pid) = pids.first() else {
                    return Ok(false);
                };
                sqlx::query("SELECT pg_terminate_backend($1)")
                    .bind(pid)
                    .execute(&mut *watcher)
                    .await
                    .map_err(err)?;
                Ok(true)
            }
            .boxed()
        });
        let (result, killed) = futures::join!(self.acquire(session, name), killer);
        blocker.execute("ROLLBACK").await.map_err(err)?;
        let _ = blocker.close().await;
        let _ = watcher.close().await;
        killed?;
        Ok(result)
    }
}

/// The acquire function's parameters, as `pg_get_function_identity_arguments`
/// prints them.
const ACQUIRE_ARGS: &str = "p_session bytea, p_name text";
/// This Simba's version of the acquire function.
const ACQUIRE_VERSION: u32 = 1;

/// Simba's migration files for PostgreSQL, in order (see
/// [`PgBackend::schema_sql`]).
const MIGRATIONS: [&str; 3] = [
    include_str!("../migrations/postgres/0001_simba.sql"),
    include_str!("../migrations/postgres/0002_groups_slots.sql"),
    include_str!("../migrations/postgres/0003_acquire.sql"),
];

/// The acquire function's body (PL/pgSQL), two statements (see the module
/// docs and `docs/BACKENDS.md`, "PostgreSQL"):
/// 1. Lock the lease row (inserting it free if new): an upsert always locks
///    the row's latest committed version, waiting for any transaction that
///    holds it.
/// 2. A new statement (a VOLATILE function's statements each take a new
///    snapshot at READ COMMITTED), so a snapshot taken after the lock was
///    granted: whoever wrote the holder into the row committed before it,
///    so the holder's session row is visible (the issue-9 takeover cannot
///    happen), and the row cannot change until this transaction ends. Both
///    session rows are share-locked, selected by id alone (a row filtered
///    out by an expiry test on the snapshot would never be locked): a
///    renewal or close in flight commits first and its latest version is
///    read (`j`). The lease is taken with the next token if the caller is
///    live and the lease free, expired or held by a session that is not
///    live (`u`). The answer is the row as `u` wrote it, or else as the
///    snapshot shows it, with both sessions' remaining time on the clock
///    reading that judged them.
///
/// A function, not the same two statements sent as one simple query: its
/// plans are kept per connection, where a simple query is parsed and
/// planned on every call, which cost more than the round trip.
///
/// It is the text between the `$simba$` quotes of `0003_acquire.sql`, as
/// `pg_proc.prosrc` shows it.
fn acquire_fn_body(prefix: &str) -> String {
    prefixed(MIGRATIONS[2], prefix)
        .split("$simba$")
        .nth(1)
        .unwrap_or_default()
        .to_owned()
}

/// A connection: the pool's, or a test hold's open transaction.
type Conn = sqlx::PgConnection;

async fn renew_on(sql: &Sql, c: &mut Conn, session: SessionId) -> Result<Renewal, RenewError> {
    sql.sk.renew_lists(c, session).await
}

/// Acquire: one call of the acquire function (`acquire_fn_body`), whose two
/// statements lock the lease row, then judge liveness, take it and read the
/// outcome with a *new* snapshot, taken after the lock was granted.
async fn acquire_on(
    sql: &Sql,
    c: &mut Conn,
    session: SessionId,
    name: &LeaseName,
) -> Result<AcquireOutcome, BackendError> {
    // One round trip: the acquire function's two statements run in one
    // transaction (or inside the caller's, for a test hold), each with a
    // snapshot of its own (READ COMMITTED; see `acquire_fn_body`). The call
    // goes out as a simple query, one message: behind a transaction-pooling
    // proxy it needs no explicit transaction around it, and the function
    // keeps its plans either way. The values are literals: the session id
    // as hex, the name from its checked character set ([A-Za-z0-9._:-],
    // S3.1, no quote can occur).
    let call = format!(
        "SELECT * FROM {}({}, '{}')",
        sql.acquire_fn,
        bytea(session),
        name.as_str()
    );
    let rows = sqlx::Executor::fetch_all(&mut *c, call.as_str())
        .await
        .map_err(sql.sk.err("acquire"))?;
    sql.sk.decide_rows(session, name, &rows)
}

/// Claim a schedule slot (S11.1): one READ COMMITTED transaction of two or
/// three statements (see `docs/BACKENDS.md`).
/// 1. Judge the holder and share-lock the lease row and the caller's
///    session row. A row changed by a transaction that commits after the
///    statement's snapshot is re-read at its latest version before it is
///    locked, so the judgement rests on data no older than the locks:
///    an acquire taking the lease over, a release, a renewal or a close in
///    flight commits first and is seen. From then on none of them can
///    commit until this transaction ends.
/// 2. Upsert the slot only if it is later: the slot row is locked and its
///    latest version compared, so concurrent claims of one name serialize.
/// 3. If it was not later, read the last slot.
async fn claim_on(
    sql: &Sql,
    c: &mut Conn,
    session: SessionId,
    name: &LeaseName,
    token: Token,
    slot: u64,
) -> Result<SlotClaim, BackendError> {
    let steps = ClaimSql {
        begin: None,
        claim: &sql.claim,
        last_slot: &sql.last_slot,
    };
    sql.sk.claim(c, &steps, session, name, token, slot).await
}

/// Runs `$body` (a future using the connection `$c`) on a pooled
/// connection; behind a transaction-pooling proxy (`Sql::wrap`) inside an
/// explicit transaction, committed if the body succeeded and rolled back
/// (when dropped) otherwise.
macro_rules! call {
    ($self:ident, $what:expr, |$c:ident| $body:expr) => {{
        let mut conn = $self.conn($what).await?;
        let r = if $self.sql.wrap {
            let mut tx = conn.begin().await.map_err(|e| map_err(NAME, $what, e))?;
            let $c: &mut Conn = &mut tx;
            let r = $body.await;
            if r.is_ok() {
                tx.commit().await.map_err(|e| map_err(NAME, $what, e))?;
            }
            r
        } else {
            let $c: &mut Conn = &mut conn;
            $body.await
        };
        conn.settle(&r);
        r
    }};
}

/// Runs `$body` (a future using the connection `$c`) on a pooled
/// connection, never inside an explicit transaction (one simple query, or
/// a body that runs its own transaction).
macro_rules! unwrapped {
    ($self:ident, $what:expr, |$c:ident| $body:expr) => {{
        let mut conn = $self.conn($what).await?;
        let r = {
            let $c: &mut Conn = &mut conn;
            $body.await
        };
        conn.settle(&r);
        r
    }};
}

impl PgBackend {
    /// The names a release or a close freed: already broadcast by the
    /// statement's own NOTIFY (S4.2), nothing more to do.
    fn freed(&self, _names: &[String]) {}

    /// A session became a member of a group: already announced by the join
    /// statement's own NOTIFY (S10.5), nothing more to do.
    fn joined(&self, _group: &LeaseName) {}

    /// A pooled connection, watched for a server failure (see
    /// [`Watched`]); with a host list, the host is found again first if
    /// the last call failed as a dead server makes it fail.
    async fn conn(&self, what: &str) -> Result<Watched<'_>, BackendError> {
        let failover = self.failover.as_deref();
        // Marks the host suspect if dropped before the connection is
        // handed over (the call cancelled, or no connection).
        let mut pending = Pending(failover);
        if let Some(f) = failover {
            if f.suspect.load(Ordering::Relaxed) {
                f.relocate(&self.pool, self.listen.is_some()).await?;
            }
        }
        let acquire = self.pool.acquire();
        let conn = match failover {
            // sqlx retries a refused connection until the acquire timeout
            // (60 s by default): with a host list a call waits for a
            // connection at most the connect timeout, after which the next
            // call looks for the host again. (The client makes at most as
            // many calls at once as the pool has connections,
            // `max_concurrent_calls`, so a call seldom queues.)
            Some(f) => {
                futures::pin_mut!(acquire);
                let timeout = futures_timer::Delay::new(f.connect_timeout);
                match futures::future::select(acquire, timeout).await {
                    futures::future::Either::Left((r, _)) => r,
                    futures::future::Either::Right(_) => {
                        return Err(BackendError::new(
                            BackendErrorKind::Unavailable,
                            format!(
                                "{NAME}: {what}: no connection to {} within {:?}",
                                f.label(),
                                f.connect_timeout
                            ),
                        ))
                    }
                }
            }
            _ => acquire.await,
        }
        .map_err(|e| map_err(NAME, what, e))?;
        pending.0 = None;
        Ok(Watched { failover, conn })
    }

    /// With a host list (`postgres://h1,h2/db`): the host the backend
    /// uses now (`host:port`), and how many times it moved to another
    /// (`None` for a single host). For the operator's metrics and the
    /// fail-over tests.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), simba_core::BackendError> {
    /// use simba_backends::postgres::PgBackend;
    /// let b = PgBackend::connect_url(
    ///     "postgres://app@db1:5432,db2:5432/app?target_session_attrs=read-write",
    /// )
    /// .await?;
    /// if let Some((host, switches)) = b.current_host() {
    ///     println!("on {host} after {switches} switches");
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn current_host(&self) -> Option<(String, u64)> {
        self.failover.as_ref().map(|f| {
            let i = f.current.load(Ordering::Relaxed);
            (
                f.labels.get(i).cloned().unwrap_or_default(),
                f.switches.load(Ordering::Relaxed),
            )
        })
    }
}

/// A host list's fail-over (`docs/BACKENDS.md`, "Replicated deployments"):
/// sqlx connects to one host, so the backend picks it. At start the first
/// host (in the URL's order) that accepts a connection and suits
/// `target_session_attrs`; after a call that fails as a lost server makes
/// it fail (the connection breaks, the server refuses writes as a
/// standby, or the call is cancelled by its timeout), the next call first
/// looks again, starting from the host after the one in use, and points
/// the pool (and the release listener's reconnections) there.
#[derive(Debug)]
struct Failover {
    /// The connect options of each host, in the URL's order.
    hosts: Vec<PgConnectOptions>,
    /// `host:port` of each, for messages.
    labels: Vec<String>,
    attrs: SessionAttrs,
    /// Bound on each host's connection and check.
    connect_timeout: Duration,
    /// The host in use.
    current: AtomicUsize,
    /// The last call failed as a lost server makes it fail.
    suspect: AtomicBool,
    /// One search at a time.
    locating: futures::lock::Mutex<()>,
    /// Moves to another host since start.
    switches: AtomicU64,
}

impl Failover {
    /// `host:port` of the host in use.
    fn label(&self) -> &str {
        let i = self.current.load(Ordering::Relaxed);
        self.labels.get(i).map_or("", String::as_str)
    }

    /// The connect options of the host in use.
    fn options(&self) -> PgConnectOptions {
        let i = self.current.load(Ordering::Relaxed);
        self.hosts
            .get(i)
            .or(self.hosts.first())
            .cloned()
            .unwrap_or_default()
    }

    /// The first host from `start` on (round the list) that accepts a
    /// connection within the connect timeout and suits the session
    /// attributes.
    async fn locate(&self, start: usize) -> Result<usize, BackendError> {
        let n = self.hosts.len();
        let mut why = Vec::new();
        for k in 0..n {
            let i = (start + k) % n;
            let probe = async {
                let mut c = sqlx::PgConnection::connect_with(&self.hosts[i])
                    .await
                    .map_err(|e| map_err(NAME, "connect", e).message)?;
                let ok = match self.attrs {
                    SessionAttrs::Any => true,
                    SessionAttrs::ReadWrite => {
                        let ro: String = sqlx::query_scalar("SHOW transaction_read_only")
                            .persistent(false)
                            .fetch_one(&mut c)
                            .await
                            .map_err(|e| map_err(NAME, "check", e).message)?;
                        ro == "off"
                    }
                    SessionAttrs::Primary => {
                        let standby: bool = sqlx::query_scalar("SELECT pg_is_in_recovery()")
                            .persistent(false)
                            .fetch_one(&mut c)
                            .await
                            .map_err(|e| map_err(NAME, "check", e).message)?;
                        !standby
                    }
                };
                // Closing politely is best effort.
                let _ = c.close().await;
                if ok {
                    Ok(())
                } else {
                    Err("a standby (read-only)".to_owned())
                }
            };
            let timeout = futures_timer::Delay::new(self.connect_timeout);
            futures::pin_mut!(probe);
            match futures::future::select(probe, timeout).await {
                futures::future::Either::Left((Ok(()), _)) => return Ok(i),
                futures::future::Either::Left((Err(e), _)) => {
                    why.push(format!("{}: {e}", self.labels[i]));
                }
                futures::future::Either::Right(_) => why.push(format!(
                    "{}: no answer within {:?}",
                    self.labels[i], self.connect_timeout
                )),
            }
        }
        Err(BackendError::new(
            BackendErrorKind::Unavailable,
            crate::redact(&format!(
                "{NAME}: no host of {n} is usable ({:?}): {}",
                self.attrs,
                why.join("; ")
            )),
        ))
    }

    /// After a failed call: finds the host again (from the one after the
    /// host in use) and points `pool` there. One search at a time; a call
    /// that waited for another's search uses its result.
    async fn relocate(&self, pool: &PgPool, listening: bool) -> Result<(), BackendError> {
        let _one = self.locating.lock().await;
        if !self.suspect.load(Ordering::Relaxed) {
            return Ok(());
        }
        let old = self.current.load(Ordering::Relaxed);
        let i = self.locate(old + 1).await?;
        pool.set_connect_options(self.hosts[i].clone());
        self.current.store(i, Ordering::Relaxed);
        self.suspect.store(false, Ordering::Relaxed);
        if i != old {
            self.switches.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(
                backend = NAME,
                from = %self.labels[old],
                to = %self.labels[i],
                listener = listening,
                "the server in use failed; moved to the next usable host of the list"
            );
        }
        Ok(())
    }
}

/// A pooled connection during one call. If the call fails as a lost
/// server makes it fail, or is dropped unfinished (cancelled by its
/// timeout, S2.4), and the backend has a host list, the connection is
/// closed rather than pooled again and the next call looks for the host
/// anew ([`Failover`]).
struct Watched<'a> {
    failover: Option<&'a Failover>,
    conn: sqlx::pool::PoolConnection<sqlx::Postgres>,
}

impl Watched<'_> {
    /// The call ended with `r`: a failure of the server (`Unavailable`,
    /// which a broken connection and a standby's refusal to write are)
    /// marks the host suspect; anything else clears the watch.
    fn settle<T, E: ServerFailed>(&mut self, r: &Result<T, E>) {
        let lost = r.as_ref().err().is_some_and(ServerFailed::server_failed);
        if !lost {
            self.failover = None;
        }
    }
}

impl Drop for Watched<'_> {
    fn drop(&mut self) {
        // Still watched: dropped unfinished, or settled with a failure.
        if let Some(f) = self.failover {
            f.suspect.store(true, Ordering::Relaxed);
            self.conn.close_on_drop();
        }
    }
}

impl std::ops::Deref for Watched<'_> {
    type Target = sqlx::PgConnection;
    fn deref(&self) -> &sqlx::PgConnection {
        &self.conn
    }
}

impl std::ops::DerefMut for Watched<'_> {
    fn deref_mut(&mut self) -> &mut sqlx::PgConnection {
        &mut self.conn
    }
}

/// [`Watched`] before its connection: dropped while still set (the call
/// cancelled while it waited, or no connection), it marks the host
/// suspect.
struct Pending<'a>(Option<&'a Failover>);

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if let Some(f) = self.0 {
            f.suspect.store(true, Ordering::Relaxed);
        }
    }
}

/// Whether a call's error is one a lost server causes.
trait ServerFailed {
    fn server_failed(&self) -> bool;
}

impl ServerFailed for BackendError {
    fn server_failed(&self) -> bool {
        self.kind == BackendErrorKind::Unavailable
    }
}

impl ServerFailed for RenewError {
    fn server_failed(&self) -> bool {
        matches!(self, RenewError::Backend(e) if e.server_failed())
    }
}

// A batch goes out as one simple query (`batch_query`): one round trip
// however many calls it carries, in one transaction that takes its rows'
// locks in name order, so batches never wait on each other in a cycle; a
// wait on anything else is bounded (`lock_timeout`), and the batch then
// runs call by call (`batch_on`). Up to 64 calls: its locks are held until
// the last call has run on the server.
crate::sql::batch_calls!(sqlx::Postgres, 64, transaction = batch_in_one_query);

/// The session id as a `bytea` literal.
fn bytea(session: SessionId) -> String {
    let hex: String = session
        .to_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("'\\x{hex}'::bytea")
}

/// What each statement of a batch's query answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// A setting (no reply of a call).
    Setting,
    /// The acquire of the batch's call at this index.
    Acquire(usize),
    /// The release of the batch's call at this index.
    Release(usize),
}

impl Sql {
    /// A batch (S4.7) as one simple query: its statements and what each
    /// answers. The values are literals, as in `acquire_on`: session ids
    /// as hex, names from their checked character set (S3.1), tokens as
    /// numbers, the channel and tables from the checked prefix.
    ///
    /// - Each lock wait is bounded (`lock_timeout`, 200 ms).
    /// - The calls run in name order.
    /// - Releases alone commit asynchronously, as a release does alone. A
    ///   batch with an acquire commits synchronously, as an acquire does
    ///   alone: an acquire lost in a server crash would hand its token out
    ///   again (docs/BACKENDS.md, "Durability").
    /// - A withdraw has nothing to run (S4.5).
    fn batch_query(&self, calls: &[Command]) -> Result<(String, Vec<Step>), BackendError> {
        let mut order: Vec<usize> = (0..calls.len()).collect();
        order.sort_by(|&i, &j| crate::sql::name_of(&calls[i]).cmp(crate::sql::name_of(&calls[j])));
        let mut query = String::from("SELECT set_config('lock_timeout', '200ms', true)");
        let mut steps = vec![Step::Setting];
        let acquires = calls.iter().any(|c| matches!(c, Command::Acquire { .. }));
        if !acquires && calls.iter().any(|c| matches!(c, Command::Release { .. })) {
            query.push_str("; ");
            query.push_str(ASYNC_COMMIT);
            steps.push(Step::Setting);
        }
        let leases = &self.sk.t.leases;
        let channel = self.sk.s.channel.as_deref().unwrap_or_default();
        for i in order {
            match &calls[i] {
                Command::Acquire { session, name, .. } => {
                    query.push_str(&format!(
                        "; SELECT * FROM {}({}, '{}')",
                        self.acquire_fn,
                        bytea(*session),
                        name.as_str()
                    ));
                    steps.push(Step::Acquire(i));
                }
                Command::Release {
                    session,
                    name,
                    token,
                    ..
                } => {
                    let token = crate::sql::token_column(NAME, *token)?;
                    query.push_str(&format!(
                        "; WITH r AS (UPDATE {leases} SET session = NULL, acquired_us = NULL \
                           WHERE name = '{}' AND session = {} AND token = {token} RETURNING name) \
                         SELECT pg_notify('{channel}', r.name) FROM r",
                        name.as_str(),
                        bytea(*session),
                    ));
                    steps.push(Step::Release(i));
                }
                Command::Withdraw { .. } => {}
                other => return Err(crate::sql::not_in_batch(NAME, other)),
            }
        }
        Ok((query, steps))
    }
}

/// A batch's calls in one simple query (`Sql::batch_query`): one round
/// trip, one transaction (the server's implicit one, or the caller's).
/// Answered as `crate::sql::batch_tx` answers: a statement that failed
/// rolled the whole query back, so its calls may run again one by one
/// (`Err`); a connection that failed on the way leaves the outcome unknown
/// (`Ok(Err(_))`).
async fn batch_in_one_query(sql: &Sql, c: &mut Conn, calls: &[Command]) -> crate::sql::Batched {
    let (query, steps) = sql.batch_query(calls)?;
    let mut results: Vec<Vec<sqlx::postgres::PgRow>> = Vec::with_capacity(steps.len());
    let mut rows = Vec::new();
    {
        let mut stream = sqlx::Executor::fetch_many(&mut *c, query.as_str());
        while let Some(item) = stream.next().await {
            match item {
                Ok(sqlx::Either::Left(_)) => results.push(std::mem::take(&mut rows)),
                Ok(sqlx::Either::Right(row)) => rows.push(row),
                // Reported by the server: the query's transaction is
                // rolled back (or, inside a caller's, aborted).
                Err(e @ sqlx::Error::Database(_)) => return Err(sql.sk.err("batch")(e)),
                Err(e) => return Ok(Err(sql.sk.err("batch")(e))),
            }
        }
    }
    if results.len() != steps.len() {
        return Ok(Err(malformed(
            NAME,
            format!(
                "a batch of {} statements answered {} results",
                steps.len(),
                results.len()
            ),
        )));
    }
    let mut replies: Vec<Option<Input>> = vec![None; calls.len()];
    let mut freed = Vec::new();
    for (step, rows) in steps.into_iter().zip(results) {
        match (step, &calls.get(step_call(step).unwrap_or(usize::MAX))) {
            (Step::Acquire(i), Some(Command::Acquire { op, session, name })) => {
                replies[i] = Some(Input::AcquireReplied {
                    op: *op,
                    result: sql.sk.decide_rows(*session, name, &rows),
                });
            }
            (Step::Release(i), Some(Command::Release { op, name, .. })) => {
                if !rows.is_empty() {
                    freed.push(name.as_str().to_owned());
                }
                replies[i] = Some(Input::ReleaseReplied {
                    op: *op,
                    result: Ok(()),
                });
            }
            _ => {}
        }
    }
    // A SQL backend keeps nothing for a `Held` acquire (S4.5).
    let replies = calls
        .iter()
        .zip(replies)
        .map(|(call, reply)| match (call, reply) {
            (_, Some(reply)) => reply,
            (Command::Withdraw { op, .. }, None) => Input::WithdrawReplied {
                op: *op,
                result: Ok(()),
            },
            (call, None) => Input::failed(
                call,
                malformed(
                    NAME,
                    format!("a batch left its {} unanswered", call.label()),
                ),
            ),
        })
        .collect();
    Ok(Ok((replies, freed)))
}

/// The call a step answers.
fn step_call(step: Step) -> Option<usize> {
    match step {
        Step::Setting => None,
        Step::Acquire(i) | Step::Release(i) => Some(i),
    }
}

impl Backend for PgBackend {
    crate::sql::sql_backend_common!(call, unwrapped);
    crate::sql::sql_backend_calls!(call, unwrapped);

    fn subscribe_releases(
        &self,
    ) -> BoxFuture<'_, Result<Option<BoxStream<'static, LeaseName>>, BackendError>> {
        async move {
            let get = |e| map_err(NAME, "listen", e);
            // Off (`simba_listen=false`, or behind a transaction-pooling
            // proxy without `simba_listen_url`): waiters retry instead.
            let Some(mut listen_opts) = self.listen.clone() else {
                return Ok(None);
            };
            // With a host list the listener connects where the calls do,
            // and after a failure reconnects to the host the calls found
            // meanwhile (a host that is down is given up on after the
            // connect timeout, not the pool's acquire timeout).
            let follow = self.failover.clone().filter(|_| self.listen_follows);
            let mut acquire_timeout = self.pool.options().get_acquire_timeout();
            if let Some(f) = &follow {
                listen_opts = f.options();
                acquire_timeout = f.connect_timeout;
            }
            // One connection of its own, outside the calls' pool, so that a
            // pool of one is never held by the listener; reconnects reuse it.
            let listen_pool = PgPoolOptions::new()
                .max_connections(1)
                .acquire_timeout(acquire_timeout)
                .idle_timeout(None)
                .max_lifetime(None)
                .connect_lazy_with(listen_opts);
            let mut listener = PgListener::connect_with(&listen_pool).await.map_err(get)?;
            listener.listen(self.channel()).await.map_err(get)?;
            let errors = Arc::clone(&self.listener_errors);
            let state = (listener, errors, None::<(Instant, u64)>);
            let stream =
                futures::stream::unfold(state, move |(mut listener, errors, mut logged)| {
                    let (follow, listen_pool) = (follow.clone(), listen_pool.clone());
                    async move {
                        loop {
                            match listener.recv().await {
                                Ok(n) => match LeaseName::new(n.payload()) {
                                    Ok(name) => return Some((name, (listener, errors, logged))),
                                    Err(_) => continue, // not ours: ignore
                                },
                                // The listener reconnects on the next recv; notifications
                                // sent meanwhile are lost (the engine's retry covers it).
                                Err(e) => {
                                    if let Some(f) = &follow {
                                        listen_pool.set_connect_options(f.options());
                                    }
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
                    }
                });
            Ok(Some(stream.boxed()))
        }
        .boxed()
    }

    fn broadcasts_releases(&self) -> bool {
        self.listen.is_some()
    }
}

#[cfg(feature = "testkit")]
pub use hold::PgHold;

#[cfg(feature = "testkit")]
mod hold {
    use super::{acquire_on, map_err, renew_on, PgBackend, Sql, NAME};
    use crate::sql::await_waiters;
    use crate::testkit::{Hold, WaitSeen};
    use futures::future::{BoxFuture, FutureExt};
    use simba_core::{BackendError, BackendErrorKind, LeaseName, SessionId, Token};
    use sqlx::postgres::PgPool;

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
            let (pool, mut tx) = self.sql.sk.hold(&self.pool, 2, None).await?;
            let pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
                .persistent(false)
                .fetch_one(&mut *tx)
                .await
                .map_err(|e| map_err(NAME, "test hold", e))?;
            Ok(PgHold {
                tx,
                pool,
                pid,
                sql: self.sql.clone(),
            })
        }
    }

    impl PgHold {
        /// `synchronous_commit` as the hold's transaction sees it now: after
        /// a release or a close run through the hold, `off` (their commit
        /// is asynchronous, see `docs/BACKENDS.md`); after an acquire, open
        /// or renewal alone, the server's setting.
        ///
        /// # Errors
        /// A [`BackendError`] if the query failed.
        pub async fn synchronous_commit(&mut self) -> Result<String, BackendError> {
            sqlx::query_scalar("SELECT current_setting('synchronous_commit')")
                .persistent(false)
                .fetch_one(&mut *self.tx)
                .await
                .map_err(|e| map_err(NAME, "test hold", e))
        }

        /// Runs the calls of a batch (S4.7) in the hold's transaction, as
        /// the backend sends a batch: one query.
        ///
        /// # Errors
        /// A [`BackendError`] if the query failed.
        pub async fn batch(
            &mut self,
            calls: &[simba_core::Command],
        ) -> Result<Vec<simba_core::Input>, BackendError> {
            match super::batch_in_one_query(&self.sql, &mut self.tx, calls).await {
                Ok(Ok((replies, _))) => Ok(replies),
                Ok(Err(e)) | Err(e) => Err(e),
            }
        }

        /// Rolls the hold's transaction back (nothing it did is kept).
        ///
        /// # Errors
        /// A [`BackendError`] if the rollback failed.
        pub async fn rollback(self) -> Result<(), BackendError> {
            let PgHold { tx, pool, .. } = self;
            tx.rollback()
                .await
                .map_err(|e| map_err(NAME, "test hold", e))?;
            pool.close().await;
            Ok(())
        }
    }

    impl Hold for PgHold {
        crate::sql::hold_calls!();
        fn waiters(&mut self, n: usize) -> BoxFuture<'_, Result<WaitSeen, BackendError>> {
            let (pool, sk, pid) = (&self.pool, &self.sql.sk, self.pid);
            async move {
                let err = |e| map_err(NAME, "test hold", e);
                // From the pool's second connection: the hold's own
                // transaction would see one cached snapshot of the view. (A
                // transaction of its own per look: it also works behind a
                // transaction-pooling proxy.)
                let seen = await_waiters(n, || async move {
                    let mut look = pool.begin().await.map_err(err)?;
                    let waiting = sqlx::query_scalar(
                        "SELECT count(*) FROM pg_stat_activity \
                         WHERE $1 = ANY(pg_blocking_pids(pid))",
                    )
                    .persistent(sk.persistent)
                    .bind(pid)
                    .fetch_one(&mut *look)
                    .await
                    .map_err(err)?;
                    look.commit().await.map_err(err)?;
                    Ok(waiting)
                });
                if seen.await? {
                    return Ok(WaitSeen::Seen);
                }
                Err(BackendError::new(
                    BackendErrorKind::Other,
                    format!("no {n} call(s) waited behind the hold within 10 s"),
                ))
            }
            .boxed()
        }
    }
}
