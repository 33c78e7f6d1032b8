//! Fail-over and hand-over at the floor (issue 15), measured in one run and
//! printed as median / p99:
//!
//! 1. PostgreSQL: an uncontended acquire + release (backend calls) against
//!    the durable one-row write floor, interleaved on one pool; MariaDB the
//!    same way;
//! 2. graceful hand-over at library level: two clients on two backends
//!    (PostgreSQL: LISTEN/NOTIFY; SQLite: two pools on one file, woken by
//!    the release hint file), leader `stop()` → the other's `on_elected`;
//! 3. crash fail-over at library level, as a ratio to `lease_duration`: the
//!    leader's backend goes silent (every call hangs: a crashed process
//!    neither renews nor releases) at a random moment of its renewal cycle;
//!    the time until the other client's `on_elected` is measured.
//!
//! ```text
//! cargo run --release -p simba-tokio --features postgres,mysql --example floors [-- --quick]
//! ```
//!
//! Servers: PostgreSQL on 127.0.0.1:5432 and MariaDB on 127.0.0.1:3306 as in
//! the test set-up (`SIMBA_BENCH_PG`, `SIMBA_BENCH_MYSQL` override the URLs);
//! a section whose server is missing is reported and skipped.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::FutureExt;
use simba_backends::{Backend, BackendConfig, Inspection};
use simba_core::{
    AcquireOutcome, BackendError, Fraction, LeaseName, RenewError, Renewal, SessionGrant,
    SessionId, Token,
};
use simba_tokio::{ElectionListener, SimbaConfig, Term};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

fn pg_url() -> String {
    std::env::var("SIMBA_BENCH_PG")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

fn mysql_url() -> String {
    std::env::var("SIMBA_BENCH_MYSQL").unwrap_or_else(|_| "mysql://root@127.0.0.1:3306/test".into())
}

fn tag() -> String {
    let id = simba_backends::random_session_id().unwrap();
    format!("fl{}", &id.to_string()[..8])
}

fn config(url: &str, prefix: &str) -> Res<BackendConfig> {
    Ok(BackendConfig::parse(url)?.with_table_prefix(prefix)?)
}

/// Median and p99 of a sample, in the unit `unit` (µs or ms).
struct Stats {
    median: Duration,
    p99: Duration,
    n: usize,
}

fn stats(mut v: Vec<Duration>) -> Stats {
    v.sort();
    let n = v.len();
    let at = |q: f64| v[((n as f64 - 1.0) * q).round() as usize];
    Stats {
        median: if n == 0 { Duration::ZERO } else { at(0.5) },
        p99: if n == 0 { Duration::ZERO } else { at(0.99) },
        n,
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

// ---------------------------------------------------------------- 1. floors

async fn pg_floor(n: usize) -> Res<()> {
    use simba_backends::postgres::PgBackend;
    let t = tag();
    let b = match PgBackend::connect(&config(&pg_url(), &format!("{t}_"))?).await {
        Ok(b) => b,
        Err(e) => {
            println!("PostgreSQL: skipped ({e})");
            return Ok(());
        }
    };
    let pool = b.pool().clone();
    sqlx::query(&format!(
        "CREATE TABLE {t}_floor (id int PRIMARY KEY, v bigint)"
    ))
    .execute(&pool)
    .await?;
    sqlx::query(&format!("INSERT INTO {t}_floor VALUES (1, 0)"))
        .execute(&pool)
        .await?;
    let write = format!("UPDATE {t}_floor SET v = v + 1 WHERE id = 1");
    let s = b.open_session(Duration::from_secs(60)).await?.session;
    let name = LeaseName::new("floor.pg")?;
    let (mut floor, mut cycle, mut acq, mut rel) = (vec![], vec![], vec![], vec![]);
    for i in 0..n + n / 10 {
        let t0 = Instant::now();
        sqlx::query(&write).execute(&pool).await?;
        let t1 = Instant::now();
        let token = match b.acquire(s, &name).await? {
            AcquireOutcome::Won { token, .. } => token,
            other => return Err(format!("acquire: {other:?}").into()),
        };
        let t2 = Instant::now();
        b.release(s, &name, token).await?;
        let t3 = Instant::now();
        if i >= n / 10 {
            floor.push(t1 - t0);
            cycle.push(t3 - t1);
            acq.push(t2 - t1);
            rel.push(t3 - t2);
        }
    }
    let (f, c, a, r) = (stats(floor), stats(cycle), stats(acq), stats(rel));
    println!(
        "PostgreSQL ({} iterations, interleaved): durable write floor {:.3} ms (p99 {:.3}); \
         acquire + release {:.3} ms (p99 {:.3}) = {:.2}x the floor [goal <= 1.4x]; \
         acquire {:.3} ms, release {:.3} ms (asynchronous commit)",
        c.n,
        ms(f.median),
        ms(f.p99),
        ms(c.median),
        ms(c.p99),
        ms(c.median) / ms(f.median),
        ms(a.median),
        ms(r.median),
    );
    b.close_session(s).await?;
    for tbl in ["floor", "leases", "sessions"] {
        sqlx::query(&format!("DROP TABLE IF EXISTS {t}_{tbl}"))
            .execute(&pool)
            .await?;
    }
    Ok(())
}

async fn mysql_floor(n: usize) -> Res<()> {
    use simba_backends::mysql::MysqlBackend;
    let t = tag();
    let b = match MysqlBackend::connect(&config(&mysql_url(), &format!("{t}_"))?).await {
        Ok(b) => b,
        Err(e) => {
            println!("MariaDB: skipped ({e})");
            return Ok(());
        }
    };
    let pool = b.pool().clone();
    sqlx::query(&format!(
        "CREATE TABLE {t}_floor (id int PRIMARY KEY, v bigint) ENGINE=InnoDB"
    ))
    .execute(&pool)
    .await?;
    sqlx::query(&format!("INSERT INTO {t}_floor VALUES (1, 0)"))
        .execute(&pool)
        .await?;
    let write = format!("UPDATE {t}_floor SET v = v + 1 WHERE id = 1");
    let s = b.open_session(Duration::from_secs(60)).await?.session;
    let name = LeaseName::new("floor.my")?;
    let (mut floor, mut cycle) = (vec![], vec![]);
    for i in 0..n + n / 10 {
        let t0 = Instant::now();
        sqlx::query(&write).execute(&pool).await?;
        let t1 = Instant::now();
        let token = match b.acquire(s, &name).await? {
            AcquireOutcome::Won { token, .. } => token,
            other => return Err(format!("acquire: {other:?}").into()),
        };
        b.release(s, &name, token).await?;
        let t2 = Instant::now();
        if i >= n / 10 {
            floor.push(t1 - t0);
            cycle.push(t2 - t1);
        }
    }
    let (f, c) = (stats(floor), stats(cycle));
    println!(
        "MariaDB ({} iterations, interleaved): durable write floor {:.3} ms (p99 {:.3}); \
         acquire + release {:.3} ms (p99 {:.3}) = {:.2}x the floor (both durable)",
        c.n,
        ms(f.median),
        ms(f.p99),
        ms(c.median),
        ms(c.p99),
        ms(c.median) / ms(f.median),
    );
    b.close_session(s).await?;
    for tbl in ["floor", "leases", "sessions"] {
        sqlx::query(&format!("DROP TABLE IF EXISTS {t}_{tbl}"))
            .execute(&pool)
            .await?;
    }
    Ok(())
}

// ------------------------------------------------------- 2. graceful hand-over

/// Sends the instant of every `on_elected`.
struct Notify(tokio::sync::mpsc::UnboundedSender<Instant>);

impl ElectionListener for Notify {
    fn on_elected(&self, _term: &Term) {
        let _ = self.0.send(Instant::now());
    }
}

/// Two clients on two backends take turns: the leader's `stop()` is timed
/// to the other's `on_elected`. The lease is long (15 s: retries every
/// 2.5–5 s), so only the release broadcast can explain a fast hand-over.
async fn handover(what: &str, a: Arc<dyn Backend>, b: Arc<dyn Backend>, n: usize) -> Res<()> {
    let cfg = SimbaConfig::builder()
        .lease_duration(Duration::from_secs(15))
        .build()?;
    let clients = [
        simba_tokio::builder_dyn(a).config(cfg.clone()).build()?,
        simba_tokio::builder_dyn(b).config(cfg).build()?,
    ];
    let name = "floors.handover";
    let (tx0, mut rx0) = tokio::sync::mpsc::unbounded_channel();
    let (tx1, mut rx1) = tokio::sync::mpsc::unbounded_channel();
    let mut elections = [
        Some(clients[0].election(name).start(Notify(tx0.clone())).await?),
        None,
    ];
    tokio::time::timeout(Duration::from_secs(10), rx0.recv())
        .await?
        .ok_or("no first leader")?;
    elections[1] = Some(clients[1].election(name).start(Notify(tx1.clone())).await?);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut leader = 0usize;
    let mut times = Vec::new();
    for _ in 0..n {
        let other = 1 - leader;
        let t0 = Instant::now();
        if let Some(e) = elections[leader].take() {
            e.stop().await;
        }
        let rx = if other == 0 { &mut rx0 } else { &mut rx1 };
        let at = tokio::time::timeout(Duration::from_secs(20), rx.recv())
            .await?
            .ok_or("no hand-over")?;
        times.push(at.saturating_duration_since(t0));
        // The old leader competes again, as a candidate.
        let tx = if leader == 0 {
            tx0.clone()
        } else {
            tx1.clone()
        };
        elections[leader] = Some(clients[leader].election(name).start(Notify(tx)).await?);
        tokio::time::sleep(Duration::from_millis(20)).await;
        leader = other;
    }
    let s = stats(times);
    println!(
        "{what}: graceful hand-over, stop() -> other's on_elected: median {:.2} ms, p99 {:.2} ms ({} hand-overs)",
        ms(s.median),
        ms(s.p99),
        s.n
    );
    for c in &clients {
        c.close().await;
    }
    Ok(())
}

// --------------------------------------------------------- 3. crash fail-over

/// A backend whose process "crashes" on demand: from then on every call
/// hangs for ever (no renewal, no release, no close reaches the backend).
struct Crashable {
    inner: Arc<dyn Backend>,
    crashed: AtomicBool,
}

impl Crashable {
    fn gate<'a, T: Send + 'a>(&'a self, f: BoxFuture<'a, T>) -> BoxFuture<'a, T> {
        if self.crashed.load(Ordering::SeqCst) {
            futures::future::pending().boxed()
        } else {
            f
        }
    }
}

impl Backend for Crashable {
    fn open_session(&self, d: Duration) -> BoxFuture<'_, Result<SessionGrant, BackendError>> {
        self.gate(self.inner.open_session(d))
    }
    fn renew(&self, s: SessionId) -> BoxFuture<'_, Result<Renewal, RenewError>> {
        self.gate(self.inner.renew(s))
    }
    fn acquire<'a>(
        &'a self,
        s: SessionId,
        n: &'a LeaseName,
    ) -> BoxFuture<'a, Result<AcquireOutcome, BackendError>> {
        self.gate(self.inner.acquire(s, n))
    }
    fn release<'a>(
        &'a self,
        s: SessionId,
        n: &'a LeaseName,
        t: Token,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        self.gate(self.inner.release(s, n, t))
    }
    fn close_session(&self, s: SessionId) -> BoxFuture<'_, Result<(), BackendError>> {
        self.gate(self.inner.close_session(s))
    }
    fn inspect<'a>(
        &'a self,
        p: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Inspection, BackendError>> {
        self.inner.inspect(p)
    }
    fn subscribe_releases(
        &self,
    ) -> BoxFuture<'_, Result<Option<BoxStream<'static, LeaseName>>, BackendError>> {
        self.inner.subscribe_releases()
    }
    fn broadcasts_releases(&self) -> bool {
        self.inner.broadcasts_releases()
    }
    fn renewal_proves(&self) -> Fraction {
        self.inner.renewal_proves()
    }
    fn name(&self) -> &'static str {
        self.inner.name()
    }
}

/// `n` crashes of a leader; the survivor is a client on `b`. The crash comes
/// at a uniformly random moment in `[2, 3)` renewal intervals after the
/// leader was elected, so its phase in the renewal cycle is random.
async fn failover(
    what: &str,
    connect: impl Fn() -> BoxFuture<'static, Res<Arc<dyn Backend>>>,
    lease: Duration,
    n: usize,
) -> Res<()> {
    let cfg = SimbaConfig::builder().lease_duration(lease).build()?;
    let renew = cfg.renew_interval();
    let survivor = simba_tokio::builder_dyn(connect().await?)
        .config(cfg.clone())
        .build()?;
    let name = "floors.failover";
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut ratios = Vec::new();
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    let mut uniform = move || {
        // xorshift64*: a fixed sequence of phases in [0, 1).
        seed ^= seed >> 12;
        seed ^= seed << 25;
        seed ^= seed >> 27;
        (seed.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    };
    for _ in 0..n {
        let crashable = Arc::new(Crashable {
            inner: connect().await?,
            crashed: AtomicBool::new(false),
        });
        let victim = simba_tokio::builder_dyn(crashable.clone() as Arc<dyn Backend>)
            .config(cfg.clone())
            .build()?;
        let (vtx, mut vrx) = tokio::sync::mpsc::unbounded_channel();
        let _ve = victim.election(name).start(Notify(vtx)).await?;
        tokio::time::timeout(lease * 3, vrx.recv())
            .await?
            .ok_or("the victim never led")?;
        let se = survivor.election(name).start(Notify(tx.clone())).await?;
        let wait = renew * 2 + renew.mul_f64(uniform());
        tokio::time::sleep(wait).await;
        crashable.crashed.store(true, Ordering::SeqCst);
        let t0 = Instant::now();
        let at = tokio::time::timeout(lease * 4, rx.recv())
            .await?
            .ok_or("no fail-over")?;
        ratios.push(at.saturating_duration_since(t0));
        se.stop().await;
        drop(victim);
    }
    let s = stats(ratios);
    let l = lease.as_secs_f64() * 1e3;
    println!(
        "{what}: crash fail-over at lease {lease:?}: median {:.0} ms = {:.3}x lease, p99 {:.0} ms = {:.3}x lease \
         ({} crashes) [goal: median <= 0.85x, p99 <= 1.0x]",
        ms(s.median),
        ms(s.median) / l,
        ms(s.p99),
        ms(s.p99) / l,
        s.n
    );
    survivor.close().await;
    Ok(())
}

fn main() -> Res<()> {
    let quick = std::env::args().any(|a| a == "--quick");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async {
        let (n_floor, n_hand, n_crash) = if quick { (100, 30, 8) } else { (500, 100, 24) };
        pg_floor(n_floor).await?;
        mysql_floor(n_floor).await?;

        // SQLite: two pools on one file (two "processes" to SQLite).
        let dir = std::env::temp_dir();
        let file = dir.join(format!("{}.db", tag()));
        let url = format!("sqlite://{}", file.display());
        let sq = || {
            let url = url.clone();
            async move {
                let b = simba_backends::sqlite::SqliteBackend::connect(&config(&url, "simba_")?)
                    .await?;
                Ok::<Arc<dyn Backend>, Box<dyn std::error::Error + Send + Sync>>(Arc::new(b))
            }
            .boxed()
        };
        handover(
            "SQLite (two pools, one file)",
            sq().await?,
            sq().await?,
            n_hand,
        )
        .await?;

        let pg = || {
            async move {
                let b = simba_backends::postgres::PgBackend::connect(&config(
                    &pg_url(),
                    "simba_floors_",
                )?)
                .await?;
                Ok::<Arc<dyn Backend>, Box<dyn std::error::Error + Send + Sync>>(Arc::new(b))
            }
            .boxed()
        };
        match pg().await {
            Ok(a) => handover("PostgreSQL (LISTEN/NOTIFY)", a, pg().await?, n_hand).await?,
            Err(e) => println!("PostgreSQL hand-over: skipped ({e})"),
        }

        let lease = Duration::from_secs(2);
        let mem = simba_backends::MemoryBackend::new();
        failover(
            "memory",
            move || {
                let m = mem.clone();
                async move {
                    Ok::<Arc<dyn Backend>, Box<dyn std::error::Error + Send + Sync>>(Arc::new(m))
                }
                .boxed()
            },
            lease,
            n_crash,
        )
        .await?;
        failover("SQLite", sq, lease, n_crash).await?;
        if pg().await.is_ok() {
            failover("PostgreSQL", pg, lease, n_crash).await?;
        }
        let my = || {
            async move {
                let b = simba_backends::mysql::MysqlBackend::connect(&config(
                    &mysql_url(),
                    "simba_floors_",
                )?)
                .await?;
                Ok::<Arc<dyn Backend>, Box<dyn std::error::Error + Send + Sync>>(Arc::new(b))
            }
            .boxed()
        };
        if my().await.is_ok() {
            failover("MariaDB", my, lease, n_crash).await?;
        }
        for suffix in ["", "-wal", "-shm", "-simba_released"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", file.display()));
        }
        Ok(())
    })
}
