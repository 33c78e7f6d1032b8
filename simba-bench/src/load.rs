//! Many nodes on one database (issue 18): `simba-bench load`.
//!
//! N nodes, each a Simba client with its own backend (its own pool, its own
//! session), all in this process, contend for one name or for many names
//! (each name contended by `per_name` nodes). The run reports the
//! connections the server holds, the server-side calls per second, the
//! client CPU per node and the latency of the backend's acquire and renew
//! calls, and it checks three things: the connection budget (a node holds
//! at most one connection for calls, plus the PostgreSQL release listener),
//! one renewal per node per renewal period (however many leases it holds or
//! waits for), and no double grant (sampled every 50 ms from the nodes'
//! valid terms, from every grant's token, and at the end against what the
//! backend reports).

use crate::counters::Counter;
use crate::sys;
use futures::future::BoxFuture;
use futures::FutureExt;
use simba_backends::{Backend, BackendConfig, BackendKind, Call, Layer, Layered, Reply};
use simba_core::RenewError;
use simba_tokio::{Election, ElectionListener, Simba, SimbaConfig, Term};
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The database every load run uses on PostgreSQL and MariaDB (created if
/// missing), so that its connections and calls are told apart from other
/// clients of the server.
pub const LOAD_DB: &str = "simba_load";

/// How long a run waits for an earlier run's server connections to end
/// before it starts counting its own: a MySQL/MariaDB release waker's
/// `SELECT SLEEP` lasts 10 s, and a server notices a dropped connection
/// within that and a few seconds more.
const LEFTOVER_WAIT: Duration = Duration::from_secs(15);

/// What to run.
#[derive(Clone, Debug)]
pub struct LoadOpts {
    /// `sqlite`, `postgres` or `mysql`.
    pub backend: String,
    /// The nodes' URL [default: the test server's `simba_load` database].
    pub url: Option<String>,
    /// An administrator URL on the same server, for the counters
    /// [default: the test server's].
    pub admin: Option<String>,
    /// Nodes (clients).
    pub nodes: usize,
    /// Names contended for.
    pub names: usize,
    /// Nodes contending for each name (at most `nodes`).
    pub per_name: usize,
    /// How long the load is measured (after every node started).
    pub duration: Duration,
    /// Every client's lease duration (the renewal period is a third of it).
    pub lease: Duration,
    /// Nodes whose connecting fails are counted and left out instead of
    /// failing the run (to find how many nodes a server carries).
    pub tolerate_connect_errors: bool,
}

/// Latency figures of one kind of backend call, in milliseconds.
#[derive(Clone, Debug, Default)]
pub struct Latency {
    /// Calls timed.
    pub count: usize,
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Slowest.
    pub max: f64,
}

/// What a load run saw.
#[derive(Clone, Debug, Default)]
pub struct LoadReport {
    /// What ran, one line.
    pub title: String,
    /// Nodes started (connected).
    pub nodes: usize,
    /// Nodes whose connecting failed (with `tolerate_connect_errors`).
    pub connect_errors: usize,
    /// The first connect error, if any.
    pub first_connect_error: Option<String>,
    /// Connections per node allowed by the budget.
    pub budget_per_node: usize,
    /// Server connections of the run's database, most seen in one sample.
    pub connections_max: Option<usize>,
    /// The same at the end of the measured window.
    pub connections_end: Option<usize>,
    /// Connections of the run's database user still open from an earlier
    /// run when this one started (after waiting for them to go), not
    /// counted in `connections_max`/`connections_end`.
    pub connections_before: usize,
    /// Server-side calls per second during the window, and their unit.
    pub calls_per_sec: Option<(f64, &'static str)>,
    /// Client CPU per node, in milliseconds per second.
    pub cpu_ms_per_node_sec: Option<f64>,
    /// Backend acquire calls.
    pub acquire: Latency,
    /// Backend renew calls.
    pub renew: Latency,
    /// Renewals per node in the window: least, most, and the most one
    /// renewal per period allows.
    pub renewals: (u64, u64, u64),
    /// Renewals the backend confirmed per node in the window: the least,
    /// and the least one per period asks for.
    pub renewals_confirmed: (u64, u64),
    /// Sessions lost over the whole run (a renewal answered `Expired`, or
    /// a session opened again).
    pub sessions_lost: u64,
    /// The renewal period.
    pub renew_interval: Duration,
    /// Grants (terms won) over the whole run.
    pub grants: usize,
    /// Double-grant samples taken.
    pub samples: usize,
    /// Backend call errors (text, first few) and their count.
    pub call_errors: (u64, Vec<String>),
    /// Broken checks of safety and budget (a name granted twice, a token
    /// the backend disagrees with, connections over the budget, renewals
    /// more often than one per period); empty if the run passed.
    pub failures: Vec<String>,
    /// Liveness figures that fell short (a node that never renewed in the
    /// window, an end-of-run inspection that could not be made). They
    /// depend on how loaded the machine and the server are, so the CI
    /// short form prints them and the `load` command fails on them.
    pub shortfalls: Vec<String>,
}

impl fmt::Display for LoadReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let opt = |v: Option<usize>| v.map_or("n/a".to_owned(), |v| v.to_string());
        writeln!(f, "== {}", self.title)?;
        writeln!(
            f,
            "nodes started            {} ({} failed to connect{})",
            self.nodes,
            self.connect_errors,
            self.first_connect_error
                .as_ref()
                .map_or(String::new(), |e| format!(": {e}"))
        )?;
        writeln!(
            f,
            "server connections       max {} / end {} (budget {} per node = {}){}",
            opt(self.connections_max),
            opt(self.connections_end),
            self.budget_per_node,
            self.budget_per_node * self.nodes,
            if self.connections_before > 0 {
                format!(
                    "; {} of an earlier run still open at the start, not counted",
                    self.connections_before
                )
            } else {
                String::new()
            }
        )?;
        match self.calls_per_sec {
            Some((v, unit)) => writeln!(
                f,
                "server calls             {v:.1}/s ({:.3}/s per node; {unit})",
                v / self.nodes.max(1) as f64
            )?,
            None => writeln!(f, "server calls             n/a")?,
        }
        match self.cpu_ms_per_node_sec {
            Some(c) => writeln!(
                f,
                "client CPU per node      {c:.3} ms per second ({:.4} % of a core)",
                c / 10.0
            )?,
            None => writeln!(f, "client CPU per node      n/a")?,
        }
        for (what, l) in [("acquire", &self.acquire), ("renew", &self.renew)] {
            writeln!(
                f,
                "{what:<8} call latency    p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms ({} calls)",
                l.p50, l.p99, l.max, l.count
            )?;
        }
        writeln!(
            f,
            "renewals per node        {}..{} (at most {} allowed: one per {:?})",
            self.renewals.0, self.renewals.1, self.renewals.2, self.renew_interval
        )?;
        writeln!(
            f,
            "renewals confirmed       least {} per node (at least {} expected)",
            self.renewals_confirmed.0, self.renewals_confirmed.1
        )?;
        writeln!(f, "sessions lost            {}", self.sessions_lost)?;
        writeln!(
            f,
            "grants                   {} (double-grant samples: {})",
            self.grants, self.samples
        )?;
        writeln!(
            f,
            "backend call errors      {}{}",
            self.call_errors.0,
            if self.call_errors.1.is_empty() {
                String::new()
            } else {
                format!(" (first: {})", self.call_errors.1.join(" | "))
            }
        )?;
        for x in &self.shortfalls {
            writeln!(f, "SHORT                    {x}")?;
        }
        if self.failures.is_empty() {
            writeln!(f, "checks                   passed")
        } else {
            for x in &self.failures {
                writeln!(f, "FAILED                   {x}")?;
            }
            Ok(())
        }
    }
}

/// Per-node call figures, kept by [`Timed`].
#[derive(Default)]
struct CallStats {
    acquire_us: Mutex<Vec<u64>>,
    renew_us: Mutex<Vec<u64>>,
    renews: AtomicU64,
    /// Renewals the backend confirmed (the session was still live).
    renews_ok: AtomicU64,
    /// Renewals answered `Expired`: the session was gone (S1.2).
    expired: AtomicU64,
    /// Sessions opened; more than one means a session was lost.
    opened: AtomicU64,
    errors: AtomicU64,
    first_errors: Mutex<Vec<String>>,
}

impl CallStats {
    fn error(&self, e: &dyn fmt::Display) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut v) = self.first_errors.lock() {
            if v.len() < 3 {
                v.push(simba_backends::redact(&e.to_string()));
            }
        }
    }
}

fn push(v: &Mutex<Vec<u64>>, since: Instant) {
    let us = u64::try_from(since.elapsed().as_micros()).unwrap_or(u64::MAX);
    if let Ok(mut v) = v.lock() {
        v.push(us);
    }
}

/// A layer that times its acquire and renew calls and counts errors.
struct Timed {
    inner: Arc<dyn Backend>,
    stats: Arc<CallStats>,
}

impl Layer for Timed {
    fn inner(&self) -> &dyn Backend {
        &*self.inner
    }
    fn call<'a>(&'a self, call: Call<'a>) -> BoxFuture<'a, Reply> {
        if !matches!(
            call,
            Call::OpenSession { .. } | Call::Renew { .. } | Call::Acquire { .. }
        ) {
            return call.run(&*self.inner);
        }
        async move {
            let t = Instant::now();
            let r = call.run(&*self.inner).await;
            let stats = &self.stats;
            match &r {
                Reply::Opened(Ok(_)) => {
                    stats.opened.fetch_add(1, Ordering::Relaxed);
                }
                Reply::Renewed(result) => {
                    push(&stats.renew_us, t);
                    stats.renews.fetch_add(1, Ordering::Relaxed);
                    match result {
                        Ok(_) => {
                            stats.renews_ok.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(RenewError::Expired) => {
                            stats.expired.fetch_add(1, Ordering::Relaxed);
                            stats.error(&RenewError::Expired);
                        }
                        Err(e) => stats.error(e),
                    }
                }
                Reply::Acquired(result) => {
                    push(&stats.acquire_us, t);
                    if let Err(e) = result {
                        stats.error(e);
                    }
                }
                other => {
                    if let Some(e) = other.error() {
                        stats.error(&e.to_string());
                    }
                }
            }
            r
        }
        .boxed()
    }
}

/// Every grant: (name index, token) → node.
type Grants = Arc<Mutex<Vec<(usize, u64, usize)>>>;

struct Record {
    name: usize,
    node: usize,
    grants: Grants,
}

impl ElectionListener for Record {
    fn on_elected(&self, term: &Term) {
        if let Ok(mut g) = self.grants.lock() {
            g.push((self.name, term.token(), self.node));
        }
    }
}

struct Node {
    simba: Simba,
    elections: Vec<(usize, Election)>,
    stats: Arc<CallStats>,
}

/// Where the run's servers are and how they are counted.
struct Setup {
    url: String,
    /// Server connections of the run's database, right now.
    conns: Option<ConnCount>,
    counter: Option<Counter>,
    budget: usize,
    cleanup: Cleanup,
    /// MariaDB's `userstat` to put back at the end (admin URL, old value).
    restore_userstat: Option<(String, String)>,
}

#[derive(Clone)]
enum ConnCount {
    /// By `application_name` (this run's own), or behind a pooler by
    /// database (the pooler's server connections).
    Pg {
        admin: String,
        db: String,
        app: Option<String>,
    },
    Mysql {
        admin: String,
        user: String,
    },
}

enum Cleanup {
    None,
    File(std::path::PathBuf),
}

impl ConnCount {
    async fn read(&self) -> Result<usize, String> {
        use sqlx::Connection;
        let n: i64 = match self {
            ConnCount::Pg { admin, db, app } => {
                let mut c = sqlx::PgConnection::connect(admin)
                    .await
                    .map_err(|e| e.to_string())?;
                let n = sqlx::query_scalar(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = $1 \
                     AND ($2::text IS NULL OR application_name = $2) AND pid <> pg_backend_pid()",
                )
                .bind(db)
                .bind(app)
                .fetch_one(&mut c)
                .await
                .map_err(|e| e.to_string())?;
                let _ = c.close().await;
                n
            }
            ConnCount::Mysql { admin, user } => {
                let mut c = sqlx::MySqlConnection::connect(admin)
                    .await
                    .map_err(|e| e.to_string())?;
                let n = sqlx::query_scalar(
                    "SELECT CAST(COUNT(*) AS SIGNED) FROM information_schema.PROCESSLIST WHERE USER = ?",
                )
                .bind(user)
                .fetch_one(&mut c)
                .await
                .map_err(|e| e.to_string())?;
                let _ = c.close().await;
                n
            }
        };
        Ok(usize::try_from(n).unwrap_or(0))
    }
}

fn with_params(url: &str, params: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}{params}")
}

fn db_name(url: &str) -> Option<String> {
    let path = url.split_once("://")?.1.split('?').next()?;
    let db = path.split_once('/')?.1;
    (!db.is_empty()).then(|| db.to_owned())
}

async fn setup(o: &LoadOpts, tag: &str) -> Result<Setup, String> {
    use sqlx::Connection;
    let prefix = format!("simba_table_prefix=l{tag}_");
    match o.backend.as_str() {
        "sqlite" => {
            let path = std::env::temp_dir().join(format!("simba-load-{tag}.db"));
            Ok(Setup {
                url: with_params(
                    o.url
                        .as_deref()
                        .unwrap_or(&format!("sqlite://{}?mode=rwc", path.display())),
                    &prefix,
                ),
                conns: None,
                counter: None,
                budget: 1,
                cleanup: Cleanup::File(path),
                restore_userstat: None,
            })
        }
        "postgres" => {
            let admin = o
                .admin
                .clone()
                .unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/postgres".into());
            let url = o
                .url
                .clone()
                .unwrap_or_else(|| format!("postgres://postgres@127.0.0.1:5432/{LOAD_DB}"));
            let db = db_name(&url).unwrap_or_else(|| LOAD_DB.into());
            let mut c = sqlx::PgConnection::connect(&admin)
                .await
                .map_err(|e| format!("admin connection: {e}"))?;
            let exists: Option<i32> =
                sqlx::query_scalar("SELECT 1 FROM pg_database WHERE datname = $1")
                    .bind(&db)
                    .fetch_optional(&mut c)
                    .await
                    .map_err(|e| e.to_string())?;
            if exists.is_none() {
                // Another run may create it at the same moment.
                let _ = sqlx::query(&format!("CREATE DATABASE {db}"))
                    .execute(&mut c)
                    .await;
            }
            let _ = c.close().await;
            let config = BackendConfig::parse(&url).map_err(|e| e.to_string())?;
            let budget = 1 + usize::from(config.listen());
            let app = format!("simba-load-{tag}");
            Ok(Setup {
                url: with_params(&url, &format!("{prefix}&application_name={app}")),
                conns: Some(ConnCount::Pg {
                    admin: admin.clone(),
                    db: db.clone(),
                    app: (!config.transaction_pooling()).then_some(app),
                }),
                counter: Some(Counter::PgDatabase { admin, db }),
                budget,
                cleanup: Cleanup::None,
                restore_userstat: None,
            })
        }
        "mysql" => {
            let admin = o
                .admin
                .clone()
                .unwrap_or_else(|| "mysql://root@127.0.0.1:3306/mysql".into());
            let mut c = sqlx::MySqlConnection::connect(&admin)
                .await
                .map_err(|e| format!("admin connection: {e}"))?;
            for stmt in [
                format!("CREATE DATABASE IF NOT EXISTS {LOAD_DB}"),
                format!("CREATE USER IF NOT EXISTS '{LOAD_DB}'@'%'"),
                format!("CREATE USER IF NOT EXISTS '{LOAD_DB}'@'localhost'"),
                format!("GRANT ALL ON {LOAD_DB}.* TO '{LOAD_DB}'@'%'"),
                format!("GRANT ALL ON {LOAD_DB}.* TO '{LOAD_DB}'@'localhost'"),
            ] {
                sqlx::raw_sql(&stmt)
                    .execute(&mut c)
                    .await
                    .map_err(|e| format!("{stmt}: {e}"))?;
            }
            let userstat: Option<String> = sqlx::query_scalar("SELECT CAST(@@userstat AS CHAR)")
                .fetch_one(&mut c)
                .await
                .ok();
            let mut restore_userstat = None;
            let per_user = userstat.as_deref() == Some("1")
                || match sqlx::raw_sql("SET GLOBAL userstat = 1")
                    .execute(&mut c)
                    .await
                {
                    Ok(_) => {
                        restore_userstat = userstat.map(|old| (admin.clone(), old));
                        true
                    }
                    Err(_) => false,
                };
            let _ = c.close().await;
            let url = o
                .url
                .clone()
                .unwrap_or_else(|| format!("mysql://{LOAD_DB}@127.0.0.1:3306/{LOAD_DB}"));
            Ok(Setup {
                url: with_params(&url, &prefix),
                conns: Some(ConnCount::Mysql {
                    admin: admin.clone(),
                    user: LOAD_DB.into(),
                }),
                counter: Some(if per_user {
                    Counter::MysqlUser {
                        admin,
                        user: LOAD_DB.into(),
                    }
                } else {
                    Counter::MysqlGlobal { admin }
                }),
                // Calls, and with the waker on, the waker and its second
                // connection, which wakes the other nodes after a burst of
                // releases (docs/BACKENDS.md, "Connection budget").
                budget: 1 + 2 * usize::from(
                    BackendConfig::parse(&url)
                        .map_err(|e| e.to_string())?
                        .listen(),
                ),
                cleanup: Cleanup::None,
                restore_userstat,
            })
        }
        other => Err(format!(
            "unknown backend {other:?}: expected sqlite, postgres or mysql"
        )),
    }
}

fn latency(mut us: Vec<u64>) -> Latency {
    us.sort_unstable();
    let at = |q: f64| {
        us.get(((us.len() as f64 - 1.0) * q).round() as usize)
            .map_or(0.0, |v| *v as f64 / 1000.0)
    };
    Latency {
        count: us.len(),
        p50: at(0.5),
        p99: at(0.99),
        max: at(1.0),
    }
}

/// The names node `node` contends for: name `j` goes to nodes `j`,
/// `j + 1`, … `j + per_name - 1` (modulo the node count).
fn names_of(node: usize, o: &LoadOpts, nodes: usize) -> Vec<usize> {
    let per = o.per_name.clamp(1, nodes.max(1));
    (0..o.names)
        .filter(|j| (0..per).any(|k| (j + k) % nodes == node))
        .collect()
}

/// Runs one load run and reports what it saw; the checks that broke are in
/// [`LoadReport::failures`].
///
/// ```no_run
/// # async fn demo() -> Result<(), String> {
/// use simba_bench::load::{run, LoadOpts};
/// use std::time::Duration;
/// let report = run(&LoadOpts {
///     backend: "sqlite".into(),
///     url: None,
///     admin: None,
///     nodes: 20,
///     names: 1000,
///     per_name: 2,
///     duration: Duration::from_secs(10),
///     lease: Duration::from_secs(3),
///     tolerate_connect_errors: false,
/// })
/// .await?;
/// println!("{report}");
/// assert!(report.failures.is_empty());
/// # Ok(()) }
/// ```
///
/// # Errors
/// Setting up (the servers, the first node) failed.
pub async fn run(o: &LoadOpts) -> Result<LoadReport, String> {
    let tag = crate::tag();
    let s = setup(o, &tag).await?;
    let config = SimbaConfig::builder()
        .lease_duration(o.lease)
        .build()
        .map_err(|e| e.to_string())?;
    let interval = config.renew_interval();
    let mut report = LoadReport {
        title: format!(
            "{}: {} nodes, {} name(s) x {} contenders, lease {:?}, {:?}",
            o.backend,
            o.nodes,
            o.names,
            o.per_name.min(o.nodes),
            o.lease,
            o.duration
        ),
        budget_per_node: s.budget,
        renew_interval: interval,
        ..LoadReport::default()
    };
    // Connections an earlier run left (MySQL counts by database user, which
    // every run shares) are let go first: a closed node's server threads
    // may take a moment to end. What is left after that is not this run's.
    if let Some(cc) = &s.conns {
        let waited = Instant::now();
        loop {
            match cc.read().await {
                Ok(0) | Err(_) => break,
                Ok(c) if waited.elapsed() >= LEFTOVER_WAIT => {
                    report.connections_before = c;
                    break;
                }
                Ok(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }
    let grants: Grants = Arc::new(Mutex::new(Vec::new()));
    let base = format!("load.{tag}.");
    let lease_names: Vec<String> = (0..o.names).map(|j| format!("{base}{j}")).collect();

    // Connect every node (one at a time: a server refusing connections
    // shows here), then start its elections.
    let mut backends = Vec::with_capacity(o.nodes);
    for i in 0..o.nodes {
        let connected = match BackendConfig::parse(&s.url) {
            Ok(c) => c.connect().await.map(Arc::<dyn Backend>::from),
            Err(e) => return Err(e.to_string()),
        };
        match connected {
            Ok(b) => backends.push(b),
            Err(e) if o.tolerate_connect_errors && i > 0 => {
                report.connect_errors += 1;
                report
                    .first_connect_error
                    .get_or_insert_with(|| simba_backends::redact(&e.to_string()));
                // The server is full: each further try would only wait for
                // the connect timeout again.
                if report.connect_errors >= 3 {
                    report.connect_errors += o.nodes - i - 1;
                    break;
                }
            }
            Err(e) => {
                return Err(format!(
                    "node {i} cannot connect: {}",
                    simba_backends::redact(&e.to_string())
                ))
            }
        }
    }
    let n = backends.len();
    report.nodes = n;
    let any_connected = !backends.is_empty();
    let mut nodes = Vec::with_capacity(n);
    for (i, b) in backends.into_iter().enumerate() {
        let stats = Arc::new(CallStats::default());
        let timed = Layered(Timed {
            inner: b,
            stats: stats.clone(),
        });
        let simba = simba_tokio::builder(timed)
            .config(config.clone())
            .build()
            .map_err(|e| e.to_string())?;
        let mut elections = Vec::new();
        for j in names_of(i, o, n) {
            let listener = Record {
                name: j,
                node: i,
                grants: grants.clone(),
            };
            let e = simba
                .election(&lease_names[j])
                .start(listener)
                .await
                .map_err(|e| format!("node {i}: election {j}: {e}"))?;
            elections.push((j, e));
        }
        nodes.push(Node {
            simba,
            elections,
            stats,
        });
    }

    // Wait until every name has a leader (or one lease period).
    let started = Instant::now();
    while started.elapsed() < o.lease * 2 {
        let led = leaders(&nodes, o.names);
        if led.iter().all(|l| !l.is_empty()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // The measured window: counters, CPU and renewals from here.
    let renews0: Vec<u64> = nodes
        .iter()
        .map(|x| x.stats.renews.load(Ordering::Relaxed))
        .collect();
    let renews_ok0: Vec<u64> = nodes
        .iter()
        .map(|x| x.stats.renews_ok.load(Ordering::Relaxed))
        .collect();
    for x in &nodes {
        for v in [&x.stats.acquire_us, &x.stats.renew_us] {
            if let Ok(mut v) = v.lock() {
                v.clear();
            }
        }
    }
    let calls0 = match &s.counter {
        Some(c) => c.read().await.ok(),
        None => None,
    };
    let cpu0 = sys::cpu_secs();
    let window = Instant::now();
    let mut next_conn = Instant::now();
    let mut conns_max: Option<usize> = None;
    while window.elapsed() < o.duration {
        report.samples += 1;
        for (j, holders) in leaders(&nodes, o.names).iter().enumerate() {
            if holders.len() > 1 {
                report.failures.push(format!(
                    "double grant: name {j} has valid terms on nodes {holders:?}"
                ));
            }
        }
        if let Some(cc) = &s.conns {
            if Instant::now() >= next_conn {
                next_conn = Instant::now() + Duration::from_secs(1);
                if let Ok(c) = cc.read().await {
                    let c = c.saturating_sub(report.connections_before);
                    conns_max = Some(conns_max.map_or(c, |m| m.max(c)));
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let secs = window.elapsed().as_secs_f64();
    let cpu1 = sys::cpu_secs();
    let calls1 = match &s.counter {
        Some(c) => c.read().await.ok(),
        None => None,
    };
    if let (Some(a), Some(b), Some(c)) = (calls0, calls1, &s.counter) {
        report.calls_per_sec = Some(((b - a) / secs, c.unit()));
    }
    if let (Some(a), Some(b)) = (cpu0, cpu1) {
        report.cpu_ms_per_node_sec = Some((b - a) * 1000.0 / secs / n.max(1) as f64);
    }
    if let Some(cc) = &s.conns {
        report.connections_end = cc
            .read()
            .await
            .ok()
            .map(|c| c.saturating_sub(report.connections_before));
        report.connections_max = match (conns_max, report.connections_end) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
    }
    let renews: Vec<u64> = nodes
        .iter()
        .zip(&renews0)
        .map(|(x, r0)| x.stats.renews.load(Ordering::Relaxed) - r0)
        .collect();
    // One renewal per period; a renewal in flight at each end of the window
    // and one early renewal after a won acquire are allowed for.
    let allowed = (secs / interval.as_secs_f64()).ceil() as u64 + 2;
    report.renewals = (
        renews.iter().copied().min().unwrap_or(0),
        renews.iter().copied().max().unwrap_or(0),
        allowed,
    );
    if report.renewals.1 > allowed {
        report.failures.push(format!(
            "a node renewed {} times in {secs:.1} s: more than one renewal per {interval:?}",
            report.renewals.1
        ));
    }
    // Liveness: every node renews every period (a renewal in flight at each
    // end of the window is allowed for), no session is lost, and renewals
    // take less than a period (S2.4: a slower one is cancelled).
    let confirmed = nodes
        .iter()
        .zip(&renews_ok0)
        .map(|(x, r0)| x.stats.renews_ok.load(Ordering::Relaxed) - r0)
        .min()
        .unwrap_or(0);
    let expected = ((secs / interval.as_secs_f64()).floor() as u64).saturating_sub(1);
    report.renewals_confirmed = (confirmed, expected);
    report.sessions_lost = nodes
        .iter()
        .map(|x| {
            let reopened = x.stats.opened.load(Ordering::Relaxed).saturating_sub(1);
            reopened.max(x.stats.expired.load(Ordering::Relaxed))
        })
        .sum();
    if confirmed < expected {
        report.shortfalls.push(format!(
            "a node had only {confirmed} renewals confirmed in {secs:.1} s: \
             at least {expected} expected (one per {interval:?})"
        ));
    }
    if report.sessions_lost > 0 {
        report.shortfalls.push(format!(
            "{} session(s) lost (answered Expired or opened again)",
            report.sessions_lost
        ));
    }
    if secs >= 3.0 * interval.as_secs_f64() && report.renewals.0 == 0 {
        report.shortfalls.push(format!(
            "a node never renewed during the window (a renewal slower than its call \
             timeout, {interval:?}, is cancelled: the server or this machine was too slow)"
        ));
    }
    if let Some(c) = report.connections_max {
        if c > s.budget * n {
            report.failures.push(format!(
                "{c} server connections for {n} nodes: over the budget of {} per node",
                s.budget
            ));
        }
    }
    report.acquire = latency(
        nodes
            .iter()
            .flat_map(|x| {
                x.stats
                    .acquire_us
                    .lock()
                    .map(|v| v.clone())
                    .unwrap_or_default()
            })
            .collect(),
    );
    report.renew = latency(
        nodes
            .iter()
            .flat_map(|x| {
                x.stats
                    .renew_us
                    .lock()
                    .map(|v| v.clone())
                    .unwrap_or_default()
            })
            .collect(),
    );
    if report.renew.count > 0 && report.renew.p99 >= interval.as_secs_f64() * 1000.0 {
        report.shortfalls.push(format!(
            "renewal p99 {:.1} ms is not below the renewal period {interval:?}",
            report.renew.p99
        ));
    }
    for x in &nodes {
        report.call_errors.0 += x.stats.errors.load(Ordering::Relaxed);
        if let Ok(v) = x.stats.first_errors.lock() {
            for e in v.iter() {
                if report.call_errors.1.len() < 3 {
                    report.call_errors.1.push(e.clone());
                }
            }
        }
    }

    // The end: tokens unique per name; the backend's holders agree with the
    // nodes' valid terms.
    if let Ok(g) = grants.lock() {
        report.grants = g.len();
        let mut seen: HashMap<(usize, u64), usize> = HashMap::new();
        for &(j, token, node) in g.iter() {
            if let Some(other) = seen.insert((j, token), node) {
                report.failures.push(format!(
                    "double grant: name {j} token {token} granted to nodes {other} and {node}"
                ));
            }
        }
    }
    // Inspected through a connection of its own: the nodes' connections
    // may all be busy.
    let inspector = if any_connected {
        match BackendConfig::parse(&s.url) {
            Ok(c) => c.connect().await.map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        }
    } else {
        Err("no node connected".to_owned())
    };
    // The terms held, well inside their lease, just before the inspection:
    // a term that began after it started may be missing from what it read.
    let before: HashMap<(usize, usize), u64> = nodes
        .iter()
        .enumerate()
        .flat_map(|(i, x)| {
            x.elections.iter().filter_map(move |(j, e)| {
                let term = e.term()?;
                (term.is_valid() && term.remaining() >= interval).then(|| ((i, *j), term.token()))
            })
        })
        .collect();
    match &inspector {
        Err(e) => report
            .shortfalls
            .push(format!("no connection to inspect at the end: {e}")),
        Ok(b) => match b.inspect(Some(&base)).await {
            Ok(ins) => {
                let backend_tokens: BTreeMap<String, Option<u64>> = ins
                    .leases
                    .iter()
                    .filter(|l| l.holder.is_some())
                    .map(|l| (l.name.as_str().to_owned(), l.token.map(|t| t.get())))
                    .collect();
                for (i, x) in nodes.iter().enumerate() {
                    for (j, e) in &x.elections {
                        let Some(term) = e.term() else { continue };
                        // Judged: the terms that spanned the whole
                        // inspection, well inside their lease (a term about
                        // to end may already be gone on the backend; one
                        // won during the inspection may not be in it yet).
                        if !term.is_valid()
                            || term.remaining() < interval
                            || before.get(&(i, *j)) != Some(&term.token())
                        {
                            continue;
                        }
                        let held = backend_tokens.get(&lease_names[*j]).copied().flatten();
                        if held != Some(term.token()) {
                            report.failures.push(format!(
                                "name {j}: a node holds token {} but the backend says {held:?}",
                                term.token()
                            ));
                        }
                    }
                }
            }
            Err(e) => report
                .shortfalls
                .push(format!("inspect at the end failed: {e}")),
        },
    }
    drop(inspector);
    report.failures.truncate(20);

    for x in &nodes {
        x.simba.close().await;
    }
    drop(nodes);
    if let Some((admin, old)) = &s.restore_userstat {
        use sqlx::Connection;
        if let Ok(mut c) = sqlx::MySqlConnection::connect(admin).await {
            if old.chars().all(|ch| ch.is_ascii_alphanumeric()) {
                let _ = sqlx::raw_sql(&format!("SET GLOBAL userstat = {old}"))
                    .execute(&mut c)
                    .await;
            }
            let _ = c.close().await;
        }
    }
    match s.cleanup {
        Cleanup::File(path) => {
            for suffix in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
            }
            if let (Some(dir), Some(file)) = (path.parent(), path.file_name()) {
                let stem = format!("{}-", file.to_string_lossy());
                for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                    let name = entry.file_name().to_string_lossy().into_owned();
                    if name.starts_with(&stem) {
                        let _ = std::fs::remove_file(entry.path());
                    }
                }
            }
        }
        Cleanup::None => {
            if o.backend != "sqlite" {
                drop_tables(&s.url, &tag).await;
            }
        }
    }
    Ok(report)
}

/// Drops the run's tables (best effort).
async fn drop_tables(url: &str, tag: &str) {
    use sqlx::Connection;
    let Ok(config) = BackendConfig::parse(url) else {
        return;
    };
    let tables = ["sessions", "leases", "members", "slots"];
    match config.kind() {
        BackendKind::Postgres => {
            // Straight to the server even behind a pooler: DDL only.
            if let Ok(mut c) = sqlx::PgConnection::connect(config.url()).await {
                for t in tables {
                    let _ = sqlx::raw_sql(&format!("DROP TABLE IF EXISTS l{tag}_{t}"))
                        .execute(&mut c)
                        .await;
                }
                let _ = c.close().await;
            }
        }
        BackendKind::Mysql => {
            if let Ok(mut c) = sqlx::MySqlConnection::connect(config.url()).await {
                for t in tables {
                    let _ = sqlx::raw_sql(&format!("DROP TABLE IF EXISTS l{tag}_{t}"))
                        .execute(&mut c)
                        .await;
                }
                let _ = c.close().await;
            }
        }
        _ => {}
    }
}

/// For each name, the nodes holding a valid term for it right now.
fn leaders(nodes: &[Node], names: usize) -> Vec<Vec<usize>> {
    let mut out = vec![Vec::new(); names];
    for (i, x) in nodes.iter().enumerate() {
        for (j, e) in &x.elections {
            if e.term().is_some_and(|t| t.is_valid()) {
                if let Some(v) = out.get_mut(*j) {
                    v.push(i);
                }
            }
        }
    }
    out
}
