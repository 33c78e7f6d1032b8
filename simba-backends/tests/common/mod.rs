//! Factories and server checks shared by the integration tests.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, dead_code)]

#[cfg(feature = "testkit")]
use futures::future::{BoxFuture, FutureExt};
#[cfg(feature = "testkit")]
use simba_backends::testkit::{Capability, Factory, Hold, HoldError, Report};
use simba_backends::BackendConfig;
#[cfg(feature = "testkit")]
use simba_backends::MemoryBackend;
use simba_core::BackendError;
#[cfg(feature = "testkit")]
use simba_core::{AcquireOutcome, LeaseName, SessionId};
#[cfg(feature = "testkit")]
use std::collections::HashMap;
#[cfg(feature = "testkit")]
use std::sync::Mutex;

pub const PG_URL: &str = "postgres://postgres@127.0.0.1:5432/test";
pub const MYSQL_URL: &str = "mysql://root@127.0.0.1:3306/test";

/// A short random tag so that parallel and repeated runs never share tables.
pub fn tag() -> String {
    let id = simba_backends::random_session_id().unwrap();
    format!("t{}", &id.to_string()[..8])
}

/// Whether a test that needs `what` may run. A missing server FAILS the
/// test, unless `SIMBA_TEST_SKIP_SERVERS` lists its kind (`postgres`,
/// `pgbouncer`, `mysql`, `redis`, `zookeeper`, `etcd`, `tls`): then the skip is written to stderr past the harness's capture,
/// and the test returns.
pub fn server_available(what: &str, probe: Result<(), BackendError>) -> bool {
    match probe {
        Ok(()) => true,
        Err(e) => {
            let kind = server_kind(what);
            let thread = std::thread::current();
            let test = thread.name().unwrap_or("a test");
            simba_backends::test_servers::missing_server(kind, what, test, &e);
            false
        }
    }
}

/// The `SIMBA_TEST_SKIP_SERVERS` kind of a server described as `what`.
pub fn server_kind(what: &str) -> &'static str {
    let w = what.to_ascii_lowercase();
    if w.contains("tls") {
        "tls"
    } else if w.contains("pgbouncer") {
        "pgbouncer"
    } else if w.contains("postgres") {
        "postgres"
    } else if w.contains("redis") {
        "redis"
    } else if w.contains("zookeeper") {
        "zookeeper"
    } else if w.contains("etcd") {
        "etcd"
    } else {
        "mysql"
    }
}

/// Prints a conformance report: in full to stdout (captured unless
/// `--nocapture`), and its summary line (passed, skipped, declared lacks)
/// straight to stderr, past the harness's capture.
#[cfg(feature = "testkit")]
pub fn show(report: &Report) {
    use std::io::Write;
    let text = report.to_string();
    println!("{text}");
    if let Some(last) = text.lines().last() {
        let _ = std::io::stderr().write_all(format!("{last}\n").as_bytes());
    }
}

/// A backend's own hold (`hold`, its future), boxed as [`Factory::hold`]
/// returns it.
#[cfg(feature = "testkit")]
pub fn boxed_hold<'a, H, E>(
    hold: impl std::future::Future<Output = Result<H, E>> + Send + 'a,
) -> BoxFuture<'a, Result<Box<dyn Hold>, HoldError>>
where
    H: Hold + 'static,
    HoldError: From<E>,
{
    async move { Ok(Box::new(hold.await?) as Box<dyn Hold>) }.boxed()
}

/// Shows a conformance `report` ([`show`]), runs `cleanup`, then asserts
/// that every case passed.
#[cfg(feature = "testkit")]
pub async fn assert_suite_passed(report: Report, cleanup: impl std::future::Future<Output = ()>) {
    show(&report);
    cleanup.await;
    report.assert_passed();
}

/// In-memory clients, one shared state per namespace; a "killed" call is an
/// injected connection failure. With a flaw, every namespace's backend has it.
#[cfg(feature = "testkit")]
#[derive(Default)]
pub struct MemoryFactory(
    pub Mutex<HashMap<String, MemoryBackend>>,
    pub Option<simba_backends::Flaw>,
);

#[cfg(feature = "testkit")]
impl MemoryFactory {
    /// A factory of deliberately broken backends.
    pub fn flawed(flaw: simba_backends::Flaw) -> MemoryFactory {
        MemoryFactory(Mutex::default(), Some(flaw))
    }
}

#[cfg(feature = "testkit")]
impl Factory for MemoryFactory {
    type Backend = MemoryBackend;
    fn connect<'a>(&'a self, ns: &'a str) -> BoxFuture<'a, Result<MemoryBackend, BackendError>> {
        let b = self
            .0
            .lock()
            .unwrap()
            .entry(ns.to_owned())
            .or_insert_with(|| match self.1 {
                Some(flaw) => MemoryBackend::with_flaw(flaw),
                None => MemoryBackend::new(),
            })
            .clone();
        async move { Ok(b) }.boxed()
    }
    fn lacks(&self) -> Vec<Capability> {
        // One process-wide lock: no call ever waits inside another.
        vec![Capability::LockHold]
    }
    fn acquire_while_killed<'a>(
        &'a self,
        backend: &'a MemoryBackend,
        session: SessionId,
        name: &'a LeaseName,
    ) -> Option<BoxFuture<'a, Result<AcquireOutcome, BackendError>>> {
        use simba_backends::Backend;
        backend.fail_next_calls(1);
        Some(backend.acquire(session, name))
    }
    fn hold<'a>(
        &'a self,
        _backend: &'a MemoryBackend,
    ) -> BoxFuture<'a, Result<Box<dyn Hold>, HoldError>> {
        futures::future::ready(Err(HoldError::NotApplicable(
            "every memory call is one critical section under one mutex: \
             no call can wait inside another"
                .into(),
        )))
        .boxed()
    }
}

/// Whether the PostgreSQL test server answers (without creating anything).
#[cfg(feature = "postgres")]
pub async fn pg_probe() -> Result<(), BackendError> {
    use sqlx::Connection;
    sqlx::PgConnection::connect(PG_URL)
        .await
        .map(|_| ())
        .map_err(|e| BackendError::new(simba_core::BackendErrorKind::Unavailable, e.to_string()))
}

/// Whether the MariaDB/MySQL test server answers (without creating anything).
#[cfg(feature = "mysql")]
pub async fn mysql_probe() -> Result<(), BackendError> {
    use sqlx::Connection;
    sqlx::MySqlConnection::connect(MYSQL_URL)
        .await
        .map(|_| ())
        .map_err(|e| BackendError::new(simba_core::BackendErrorKind::Unavailable, e.to_string()))
}

/// The PostgreSQL test server, as [`server_available`] names it.
pub const PG_AT: &str = "PostgreSQL at 127.0.0.1:5432";
/// The MariaDB/MySQL test server, as [`server_available`] names it.
pub const MYSQL_AT: &str = "MariaDB/MySQL at 127.0.0.1:3306";

/// Whether a test that needs the PostgreSQL test server may run (see
/// [`server_available`]: a missing server fails the test unless skipped).
#[cfg(feature = "postgres")]
pub async fn pg_available() -> bool {
    server_available(PG_AT, pg_probe().await)
}

/// Whether a test that needs the MariaDB/MySQL test server may run (see
/// [`server_available`]: a missing server fails the test unless skipped).
#[cfg(feature = "mysql")]
pub async fn mysql_available() -> bool {
    server_available(MYSQL_AT, mysql_probe().await)
}

/// A PostgreSQL backend for namespace `ns` under run tag `tag`, small pools.
#[cfg(feature = "postgres")]
pub async fn pg_backend(tag: &str, ns: &str) -> simba_backends::postgres::PgBackend {
    simba_backends::postgres::PgBackend::connect(&config(PG_URL, tag, ns))
        .await
        .unwrap()
}

/// A MariaDB/MySQL backend for namespace `ns` under run tag `tag`, small pools.
#[cfg(feature = "mysql")]
pub async fn mysql_backend(tag: &str, ns: &str) -> simba_backends::mysql::MysqlBackend {
    simba_backends::mysql::MysqlBackend::connect(&config(MYSQL_URL, tag, ns))
        .await
        .unwrap()
}

/// An SQLite backend on `factory`'s file for namespace `ns`, small pools.
#[cfg(feature = "sqlite")]
pub async fn sqlite_backend(
    factory: &SqliteFactory,
    ns: &str,
) -> simba_backends::sqlite::SqliteBackend {
    simba_backends::sqlite::SqliteBackend::connect(&config(&factory.url, &factory.tag, ns))
        .await
        .unwrap()
}

/// Whether an error of `kind` says the server could not be reached (or
/// did not answer in time).
pub fn is_unreachable(kind: simba_core::BackendErrorKind) -> bool {
    matches!(
        kind,
        simba_core::BackendErrorKind::Unavailable | simba_core::BackendErrorKind::Timeout
    )
}

/// Kills a private server's process (SIGKILL: nothing is saved), if it
/// runs, and waits for it to exit.
pub fn kill_child(child: &mut Option<std::process::Child>) {
    if let Some(mut c) = child.take() {
        let _ = c.kill();
        let _ = c.wait();
    }
}

/// Opens a session with a lease of `lease` on `b`.
pub async fn session<B: simba_backends::Backend + ?Sized>(
    b: &B,
    lease: std::time::Duration,
) -> simba_core::SessionId {
    b.open_session(lease).await.unwrap().session
}

/// A config for namespace `ns` under run tag `tag`, small pools.
pub fn config(url: &str, tag: &str, ns: &str) -> BackendConfig {
    BackendConfig::parse(url)
        .unwrap()
        .with_table_prefix(&format!("{tag}_{ns}_"))
        .unwrap()
        .with_max_connections(4)
}

/// Removes an SQLite database file, its WAL and shared-memory files, and
/// its release hint files (`<file>-<prefix>released`).
pub fn remove_db(path: &std::path::Path) {
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    let (Some(dir), Some(file)) = (path.parent(), path.file_name()) else {
        return;
    };
    let stem = format!("{}-", file.to_string_lossy());
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let n = entry.file_name().to_string_lossy().into_owned();
        if n.starts_with(&stem) && n.ends_with("released") {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

#[cfg(feature = "sqlite")]
pub struct SqliteFactory {
    pub url: String,
    pub tag: String,
}

#[cfg(feature = "sqlite")]
impl SqliteFactory {
    pub fn new() -> (SqliteFactory, std::path::PathBuf) {
        let tag = tag();
        let path = std::env::temp_dir().join(format!("simba-{tag}.db"));
        (
            SqliteFactory {
                url: format!("sqlite://{}", path.display()),
                tag,
            },
            path,
        )
    }
}

#[cfg(all(feature = "sqlite", feature = "testkit"))]
impl Factory for SqliteFactory {
    type Backend = simba_backends::sqlite::SqliteBackend;
    fn connect<'a>(&'a self, ns: &'a str) -> BoxFuture<'a, Result<Self::Backend, BackendError>> {
        let c = config(&self.url, &self.tag, ns);
        async move { simba_backends::sqlite::SqliteBackend::connect(&c).await }.boxed()
    }
    fn hold<'a>(
        &'a self,
        backend: &'a Self::Backend,
    ) -> BoxFuture<'a, Result<Box<dyn Hold>, HoldError>> {
        boxed_hold(backend.hold())
    }
    fn lacks(&self) -> Vec<Capability> {
        // One file, no server: no connection to kill. Releases are hinted
        // through a file beside the database (S4.2).
        vec![Capability::KillConnectionMidCall]
    }
}

/// Declares a factory of SQL clients on a test server (`$url`) under run
/// tag `tag`, behind the cargo feature `$feature`: it can kill a
/// connection mid-call and hold a lock.
macro_rules! sql_server_factory {
    ($(#[$doc:meta])* $factory:ident, $feature:literal, $url:expr, $backend:ty) => {
        $(#[$doc])*
        #[cfg(feature = $feature)]
        pub struct $factory {
            pub tag: String,
        }

        #[cfg(all(feature = $feature, feature = "testkit"))]
        impl Factory for $factory {
            type Backend = $backend;
            fn connect<'a>(
                &'a self,
                ns: &'a str,
            ) -> BoxFuture<'a, Result<Self::Backend, BackendError>> {
                let c = config($url, &self.tag, ns);
                async move { <$backend>::connect(&c).await }.boxed()
            }
            fn acquire_while_killed<'a>(
                &'a self,
                backend: &'a Self::Backend,
                session: SessionId,
                name: &'a LeaseName,
            ) -> Option<BoxFuture<'a, Result<AcquireOutcome, BackendError>>> {
                Some(async move { backend.acquire_while_killed(session, name).await? }.boxed())
            }
            fn hold<'a>(
                &'a self,
                backend: &'a Self::Backend,
            ) -> BoxFuture<'a, Result<Box<dyn Hold>, HoldError>> {
                boxed_hold(backend.hold())
            }
        }
    };
}

sql_server_factory!(
    /// PostgreSQL clients under the table prefix `<tag>_<ns>_`.
    PgFactory,
    "postgres",
    PG_URL,
    simba_backends::postgres::PgBackend
);
sql_server_factory!(
    /// MariaDB/MySQL clients under the table prefix `<tag>_<ns>_`.
    MysqlFactory,
    "mysql",
    MYSQL_URL,
    simba_backends::mysql::MysqlBackend
);

/// Drops every table whose name starts with `tag` (PostgreSQL).
#[cfg(feature = "postgres")]
pub async fn drop_pg_tables(tag: &str) {
    let pool = sqlx::PgPool::connect(PG_URL).await.unwrap();
    // The tables, then the acquire functions, of those prefixes.
    let drops: Vec<String> = sqlx::query_scalar(
        "SELECT 'DROP TABLE IF EXISTS ' || table_name FROM information_schema.tables \
         WHERE table_schema = current_schema() AND table_name LIKE $1 \
         UNION ALL \
         SELECT 'DROP FUNCTION IF EXISTS ' || p.oid::regprocedure::text \
         FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace \
         WHERE n.nspname = current_schema() AND p.proname LIKE $1",
    )
    .bind(format!("{tag}%"))
    .fetch_all(&pool)
    .await
    .unwrap();
    for d in drops {
        sqlx::query(&d).execute(&pool).await.unwrap();
    }
}

/// Drops every table and procedure whose name starts with `tag` (MySQL).
#[cfg(feature = "mysql")]
pub async fn drop_mysql_tables(tag: &str) {
    let pool = sqlx::MySqlPool::connect(MYSQL_URL).await.unwrap();
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT CAST(table_name AS CHAR) FROM information_schema.tables \
         WHERE table_schema = DATABASE() AND table_name LIKE ?",
    )
    .bind(format!("{tag}%"))
    .fetch_all(&pool)
    .await
    .unwrap();
    for t in tables {
        sqlx::query(&format!("DROP TABLE IF EXISTS {t}"))
            .execute(&pool)
            .await
            .unwrap();
    }
    // And the acquire procedures of those prefixes.
    let procs: Vec<String> = sqlx::query_scalar(
        "SELECT CAST(ROUTINE_NAME AS CHAR) FROM information_schema.ROUTINES \
         WHERE ROUTINE_SCHEMA = DATABASE() AND ROUTINE_TYPE = 'PROCEDURE' AND ROUTINE_NAME LIKE ?",
    )
    .bind(format!("{tag}%"))
    .fetch_all(&pool)
    .await
    .unwrap();
    for p in procs {
        sqlx::raw_sql(&format!("DROP PROCEDURE IF EXISTS {p}"))
            .execute(&pool)
            .await
            .unwrap();
    }
}

/// Creates the MySQL user `user` (no password) from any host and from
/// localhost, with every privilege on the test database, and each grant of
/// `extra_grants` (`"PROCESS ON *.*"`) from any host.
#[cfg(feature = "mysql")]
pub async fn create_mysql_user(admin: &sqlx::MySqlPool, user: &str, extra_grants: &[&str]) {
    let mut stmts = vec![
        format!("CREATE USER '{user}'@'%'"),
        format!("CREATE USER '{user}'@'localhost'"),
        format!("GRANT ALL ON test.* TO '{user}'@'%'"),
        format!("GRANT ALL ON test.* TO '{user}'@'localhost'"),
    ];
    stmts.extend(
        extra_grants
            .iter()
            .map(|g| format!("GRANT {g} TO '{user}'@'%'")),
    );
    for stmt in stmts {
        sqlx::query(&stmt).execute(admin).await.unwrap();
    }
}

/// Drops the MySQL user made by [`create_mysql_user`].
#[cfg(feature = "mysql")]
pub async fn drop_mysql_user(admin: &sqlx::MySqlPool, user: &str) {
    for host in ["%", "localhost"] {
        sqlx::query(&format!("DROP USER '{user}'@'{host}'"))
            .execute(admin)
            .await
            .unwrap();
    }
}

pub const ETCD_URL: &str = "etcd://127.0.0.1:2379";

/// Whether the etcd test server answers (connecting reads once).
#[cfg(feature = "etcd")]
pub async fn etcd_probe() -> Result<(), BackendError> {
    let opts = simba_backends::etcd::EtcdOptions::parse(ETCD_URL)?
        .with_timeout(std::time::Duration::from_secs(3));
    simba_backends::etcd::EtcdBackend::connect_with(opts)
        .await
        .map(|_| ())
}

/// Whether a test that needs the etcd test server may run (see
/// [`server_available`]: a missing server fails the test unless skipped).
#[cfg(feature = "etcd")]
pub async fn etcd_available() -> bool {
    server_available("etcd at 127.0.0.1:2379", etcd_probe().await)
}

/// etcd clients under the key prefix `/simba-test/<tag>/<ns>`.
#[cfg(feature = "etcd")]
pub struct EtcdFactory {
    pub tag: String,
}

#[cfg(feature = "etcd")]
impl EtcdFactory {
    /// Deletes every key of this run.
    pub async fn cleanup(&self) {
        let b = simba_backends::etcd::EtcdBackend::connect_url(&format!(
            "{ETCD_URL}/simba-test/{}",
            self.tag
        ))
        .await
        .unwrap();
        b.delete_all().await.unwrap();
    }
}

#[cfg(all(feature = "etcd", feature = "testkit"))]
impl Factory for EtcdFactory {
    type Backend = simba_backends::etcd::EtcdBackend;
    fn connect<'a>(&'a self, ns: &'a str) -> BoxFuture<'a, Result<Self::Backend, BackendError>> {
        let url = format!("{ETCD_URL}/simba-test/{}/{ns}", self.tag);
        async move { simba_backends::etcd::EtcdBackend::connect_url(&url).await }.boxed()
    }
    fn lacks(&self) -> Vec<Capability> {
        // Every call is one serializable etcd transaction (no call waits inside
        // another: docs/BACKENDS.md); killing a connection is covered by
        // tests/etcd_failures.rs instead.
        vec![Capability::LockHold, Capability::KillConnectionMidCall]
    }
    fn expiry_lateness(&self) -> std::time::Duration {
        // etcd's lessor looks for expired leases every 500 ms and revokes
        // them through a Raft commit: a lease key can outlive its TTL by up
        // to about that (late, never early; docs/BACKENDS.md).
        std::time::Duration::from_millis(1000)
    }
}

/// The history check (issue 9) on `clients` of one backend: random calls on
/// one lease name with short leases, then the linearizability search and the
/// direct invariants (S3.2, S1.2). `late` is the backend's declared lazy
/// expiry ([`Factory::expiry_lateness`]).
#[cfg(feature = "testkit")]
pub async fn history_check<B: simba_backends::Backend>(
    label: &str,
    clients: &[B],
    load: simba_backends::testkit::history::Load,
    late: std::time::Duration,
) {
    let h = simba_backends::testkit::history::record(
        clients,
        &LeaseName::new("history").unwrap(),
        &load,
    )
    .await;
    verify_history(label, &h, late);
}

/// The checks of [`history_check`] on a recorded history `h`: it
/// linearizes, keeps the direct invariants, and holds at least two terms.
#[cfg(feature = "testkit")]
pub fn verify_history(
    label: &str,
    h: &simba_backends::testkit::history::History,
    late: std::time::Duration,
) {
    use simba_backends::testkit::history::{check, Check};
    let v = check(
        h,
        &Check {
            late,
            ..Check::default()
        },
    );
    println!("[{label}] {v}");
    assert!(v.ok(), "[{label}] history check failed: {v}");
    assert!(
        v.terms >= 2,
        "[{label}] too few terms to mean anything: {v}"
    );
}

/// `n` clients of `factory`, all in namespace `ns`.
#[cfg(feature = "testkit")]
pub async fn clients_of<F: Factory>(factory: &F, ns: &str, n: usize) -> Vec<F::Backend> {
    let mut v = Vec::new();
    for _ in 0..n {
        v.push(factory.connect(ns).await.unwrap());
    }
    v
}

/// [`history_check`] on four clients of `factory` (namespace "h"), with
/// the factory's declared lazy expiry; the clients are closed (dropped)
/// when it returns.
#[cfg(feature = "testkit")]
pub async fn factory_history_check<F: Factory>(
    label: &str,
    factory: &F,
    load: simba_backends::testkit::history::Load,
) {
    let clients = clients_of(factory, "h", 4).await;
    history_check(label, &clients, load, factory.expiry_lateness()).await;
}

/// [`waiter_keeps_its_turn`] on a client of `factory` (namespace "turn"),
/// dropped before it returns.
#[cfg(feature = "testkit")]
pub async fn factory_waiter_keeps_its_turn<F: Factory>(
    factory: &F,
    lease: std::time::Duration,
) -> Result<(), String> {
    let b = factory.connect("turn").await.unwrap();
    waiter_keeps_its_turn(&b, lease).await
}

/// A queueing backend keeps a waiter's turn however long it goes without
/// an acquire (S4.5, S4.6): `a` holds `name`; `w`, then `c`, are answered
/// `Held`; both sessions (leases of `lease`) are only renewed for 1.5
/// leases; after `a` releases, `c` is still `Held` behind `w`, and `w` wins.
/// A backend that dropped `w`'s place as unconfirmed would hand `c` the
/// lease instead.
#[cfg(feature = "testkit")]
pub async fn waiter_keeps_its_turn<B: simba_backends::Backend>(
    b: &B,
    lease: std::time::Duration,
) -> Result<(), String> {
    let e = |what: &str, err: &dyn std::fmt::Display| format!("{what}: {err}");
    let name = LeaseName::new("turn").map_err(|x| e("name", &x))?;
    let a = b
        .open_session(std::time::Duration::from_secs(30))
        .await
        .map_err(|x| e("open a", &x))?
        .session;
    let w = b
        .open_session(lease)
        .await
        .map_err(|x| e("open w", &x))?
        .session;
    let c = b
        .open_session(lease)
        .await
        .map_err(|x| e("open c", &x))?
        .session;
    let t = match b.acquire(a, &name).await.map_err(|x| e("acquire a", &x))? {
        AcquireOutcome::Won { token, .. } => token,
        other => return Err(format!("a's uncontended acquire: {other:?}")),
    };
    for s in [w, c] {
        match b.acquire(s, &name).await.map_err(|x| e("acquire", &x))? {
            AcquireOutcome::Held { .. } => {}
            other => return Err(format!("a waiter's acquire: {other:?}")),
        }
    }
    let end = std::time::Instant::now() + lease.mul_f64(1.5);
    while std::time::Instant::now() < end {
        tokio::time::sleep(lease / 5).await;
        for s in [w, c] {
            b.renew(s).await.map_err(|x| e("renew", &x))?;
        }
    }
    b.release(a, &name, t).await.map_err(|x| e("release", &x))?;
    match b.acquire(c, &name).await.map_err(|x| e("acquire c", &x))? {
        AcquireOutcome::Held { .. } => {}
        other => {
            return Err(format!(
                "the later waiter got {other:?}: the first waiter lost its turn"
            ))
        }
    }
    match b.acquire(w, &name).await.map_err(|x| e("acquire w", &x))? {
        AcquireOutcome::Won { token, .. } if token > t => Ok(()),
        other => Err(format!("the first waiter got {other:?} after the release")),
    }
}

/// S10.5 on a backend that announces joins: a new membership of `a`'s
/// session is broadcast by the group's name to `b`'s subscription (another
/// instance, as another process has), so the members renew at once and
/// hand the joiner its partitions; joining again, already a member,
/// announces nothing (the next hint is a release's name).
pub async fn check_join_announced<B: simba_backends::Backend>(a: &B, b: &B) {
    let mut hints = b
        .subscribe_releases()
        .await
        .unwrap()
        .expect("the backend broadcasts");
    let s = session(a, std::time::Duration::from_secs(30)).await;
    let group = simba_core::LeaseName::new("announced").unwrap();
    a.join_group(s, &group).await.unwrap();
    assert_eq!(
        next_hint(&mut hints).await,
        group,
        "the join was not announced"
    );
    a.join_group(s, &group).await.unwrap();
    let probe = simba_core::LeaseName::new("probe").unwrap();
    let simba_core::AcquireOutcome::Won { token, .. } = a.acquire(s, &probe).await.unwrap() else {
        panic!("{probe} is not free");
    };
    a.release(s, &probe, token).await.unwrap();
    assert_eq!(
        next_hint(&mut hints).await,
        probe,
        "a join of a member was announced again"
    );
    a.close_session(s).await.unwrap();
}

/// S4.2 on the backends with waiting places (ZooKeeper, etcd): a waiter
/// that withdraws deletes its place, which frees nothing, and a node that
/// never read the name's queue (`c`, another instance, as another process
/// has) does not hear it as a release: the next name its subscription
/// yields is a release made after the withdraw. Before, such echoes reached
/// every member that had not read a partition's holder, and the members
/// split a leave's releases differently (S10.2; issue 30).
pub async fn check_withdraw_not_announced<B: simba_backends::Backend>(a: &B, b: &B, c: &B) {
    use simba_core::{AcquireOutcome, LeaseName};
    let mut hints = c
        .subscribe_releases()
        .await
        .unwrap()
        .expect("the backend broadcasts");
    let lease = std::time::Duration::from_secs(30);
    let (sa, sb) = (session(a, lease).await, session(b, lease).await);
    let (n, after) = (
        LeaseName::new("echoed").unwrap(),
        LeaseName::new("after").unwrap(),
    );
    let AcquireOutcome::Won { token, .. } = a.acquire(sa, &n).await.unwrap() else {
        panic!("{n} is not free");
    };
    let AcquireOutcome::Won { token: t2, .. } = a.acquire(sa, &after).await.unwrap() else {
        panic!("{after} is not free");
    };
    assert!(matches!(
        b.acquire(sb, &n).await.unwrap(),
        AcquireOutcome::Held { .. }
    ));
    b.withdraw(sb, &n).await.unwrap();
    a.release(sa, &after, t2).await.unwrap();
    assert_eq!(
        next_hint(&mut hints).await,
        after,
        "a waiter's withdraw was announced as a release"
    );
    a.release(sa, &n, token).await.unwrap();
    assert_eq!(next_hint(&mut hints).await, n, "the holder's release");
    a.close_session(sa).await.unwrap();
    b.close_session(sb).await.unwrap();
}

/// The next name a subscription yields, within 10 s.
pub async fn next_hint(
    hints: &mut futures::stream::BoxStream<'static, simba_core::LeaseName>,
) -> simba_core::LeaseName {
    use futures::StreamExt;
    tokio::time::timeout(std::time::Duration::from_secs(10), hints.next())
        .await
        .expect("a hint within 10 s")
        .expect("the hint stream ended")
}
