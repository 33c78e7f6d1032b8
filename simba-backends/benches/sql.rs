//! Backend cost against two floors measured on the same pool in the same run:
//! `SELECT 1` (a round trip) and a durable one-row write in its own
//! transaction (medians, interleaved). Then renewing a session that holds 1,
//! 100 and 10,000 leases (medians).
//!
//! `cargo bench -p simba-backends --all-features --bench sql`
//! (env `SIMBA_BENCH_PG`, `SIMBA_BENCH_MYSQL` override the server URLs;
//! `SIMBA_BENCH_ITERS` the iteration count, default 1000).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod common;

use simba_backends::{Backend, BackendConfig};
use simba_core::LeaseName;
use std::time::{Duration, Instant};

fn iters() -> u32 {
    common::iters()
}

fn tag() -> String {
    let id = simba_backends::random_session_id().unwrap();
    format!("b{}", &id.to_string()[..8])
}

/// The median time of `f` over `n` runs, after a warm-up.
async fn time<F, Fut>(n: u32, mut f: F) -> Duration
where
    F: FnMut(u32) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    for i in 0..(n / 10).max(5) {
        f(i).await;
    }
    let mut v = Vec::with_capacity(n as usize);
    for i in 0..n {
        let t = Instant::now();
        f(i).await;
        v.push(t.elapsed());
    }
    median(v)
}

use common::{median, us};

/// What differs per database: the floors and the bulk setup.
trait Db {
    async fn select1(&self);
    async fn write(&self);
    async fn setup_floor(&self, table: &str);
    async fn bulk_leases(&self, leases: &str, session: &[u8], prefix: &str, n: u32);
}

macro_rules! db_impl {
    ($ty:ty, $write:expr, $create:expr, $ph:expr) => {
        impl Db for ($ty, String) {
            async fn select1(&self) {
                let _: i32 = sqlx::query_scalar("SELECT 1")
                    .fetch_one(&self.0)
                    .await
                    .unwrap();
            }
            async fn write(&self) {
                sqlx::query(&format!($write, t = self.1))
                    .execute(&self.0)
                    .await
                    .unwrap();
            }
            async fn setup_floor(&self, _table: &str) {
                sqlx::query(&format!($create, t = self.1))
                    .execute(&self.0)
                    .await
                    .unwrap();
                sqlx::query(&format!("INSERT INTO {} (id, v) VALUES (1, 0)", self.1))
                    .execute(&self.0)
                    .await
                    .unwrap();
            }
            async fn bulk_leases(&self, leases: &str, session: &[u8], prefix: &str, n: u32) {
                let mut i = 0;
                while i < n {
                    let batch = (n - i).min(500);
                    let mut sql = format!("INSERT INTO {leases} (name, session, token) VALUES ");
                    for k in 0..batch {
                        if k > 0 {
                            sql.push(',');
                        }
                        sql.push_str(&$ph(k));
                    }
                    let mut q = sqlx::query(&sql);
                    for k in 0..batch {
                        q = q.bind(format!("{prefix}{}", i + k)).bind(session.to_vec());
                    }
                    q.execute(&self.0).await.unwrap();
                    i += batch;
                }
            }
        }
    };
}

db_impl!(
    sqlx::PgPool,
    "UPDATE {t} SET v = v + 1 WHERE id = 1 RETURNING v",
    "CREATE TABLE {t} (id int PRIMARY KEY, v bigint NOT NULL)",
    |k: u32| format!("(${}, ${}, 1)", 2 * k + 1, 2 * k + 2)
);
db_impl!(
    sqlx::MySqlPool,
    "UPDATE {t} SET v = v + 1 WHERE id = 1",
    "CREATE TABLE {t} (id INT PRIMARY KEY, v BIGINT NOT NULL) ENGINE=InnoDB",
    |_k: u32| "(?, ?, 1)".to_owned()
);
db_impl!(
    sqlx::SqlitePool,
    "UPDATE {t} SET v = v + 1 WHERE id = 1 RETURNING v",
    "CREATE TABLE {t} (id INTEGER PRIMARY KEY, v INTEGER NOT NULL)",
    |_k: u32| "(?, ?, 1)".to_owned()
);

async fn bench<B: Backend, D: Db>(label: &str, backend: &B, db: &D, leases_table: &str) {
    let n = iters();
    db.setup_floor("").await;
    let s = common::session(backend, Duration::from_secs(3600)).await;
    let name = LeaseName::new("bench.cycle").unwrap();
    // Interleave the three measurements one iteration at a time and compare
    // medians, so a noisy neighbour (shared disk, other builds) hits them
    // alike and bursts do not skew the figures.
    let (mut sel, mut wr, mut cyc) = (Vec::new(), Vec::new(), Vec::new());
    let (mut acq, mut rel) = (Vec::new(), Vec::new());
    for i in 0..(n + n / 10) {
        let t0 = Instant::now();
        db.select1().await;
        let t1 = Instant::now();
        db.write().await;
        let t2 = Instant::now();
        let token = match backend.acquire(s, &name).await.unwrap() {
            simba_core::AcquireOutcome::Won { token, .. } => token,
            other => panic!("{other:?}"),
        };
        let ta = Instant::now();
        backend.release(s, &name, token).await.unwrap();
        let t3 = Instant::now();
        if i >= n / 10 {
            // (the first tenth warms up connections and statement caches)
            sel.push(t1 - t0);
            wr.push(t2 - t1);
            cyc.push(t3 - t2);
            acq.push(ta - t2);
            rel.push(t3 - ta);
        }
    }
    let (sel, wr, cyc) = (median(sel), median(wr), median(cyc));
    let (acq, rel) = (median(acq), median(rel));
    println!(
        "{label:9} SELECT 1 {:8.1} us | write floor {:8.1} us | acquire+release {:8.1} us \
         (acquire {:8.1} + release {:8.1}) | cycle/SELECT1 = {:5.2}x | cycle/write = {:5.2}x",
        us(sel),
        us(wr),
        us(cyc),
        us(acq),
        us(rel),
        cyc.as_secs_f64() / sel.as_secs_f64(),
        cyc.as_secs_f64() / wr.as_secs_f64()
    );
    let mut line = format!("{label:9} renew:");
    for count in [1u32, 100, 10_000] {
        let s = common::session(backend, Duration::from_secs(3600)).await;
        db.bulk_leases(leases_table, &s.to_bytes(), &format!("r{count}."), count)
            .await;
        let r = backend.renew(s).await.unwrap();
        assert_eq!(r.owned.len(), count as usize);
        let k = if count >= 10_000 { 30 } else { 300 };
        let t = time(k, |_| async {
            backend.renew(s).await.unwrap();
        })
        .await;
        line.push_str(&format!(" {count} leases {:9.1} us |", us(t)));
    }
    println!("{line}");
}

/// Benchmarks the SQL server backend `$backend` (labelled `$label`) on the
/// URL in `$env`, else `$default`, with tables prefixed `<$t>_` and two
/// connections, then drops the run's tables; a server that does not answer
/// is reported missing (`$what`).
macro_rules! bench_server {
    ($label:literal, $what:literal, $env:literal, $default:literal, $backend:ty, $t:expr) => {{
        let t: &str = $t;
        let url = std::env::var($env).unwrap_or_else(|_| $default.into());
        match <$backend>::connect(
            &BackendConfig::parse(&url)
                .unwrap()
                .with_table_prefix(&format!("{t}_"))
                .unwrap()
                .with_max_connections(2),
        )
        .await
        {
            Ok(b) => {
                let db = (b.pool().clone(), format!("{t}_floor"));
                bench($label, &b, &db, &format!("{t}_leases")).await;
                for x in ["floor", "leases", "sessions"] {
                    let _ = sqlx::query(&format!("DROP TABLE {t}_{x}"))
                        .execute(b.pool())
                        .await;
                }
            }
            Err(e) => missing($label, $what, &e),
        }
    }};
}

fn main() {
    // `cargo test --benches` runs bench targets with `--bench`-less args; only
    // measure under `cargo bench`.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        println!("iterations per measurement: {}", iters());
        let t = tag();
        bench_server!(
            "postgres",
            "PostgreSQL",
            "SIMBA_BENCH_PG",
            "postgres://postgres@127.0.0.1:5432/test",
            simba_backends::postgres::PgBackend,
            &t
        );
        bench_server!(
            "mysql",
            "MySQL/MariaDB",
            "SIMBA_BENCH_MYSQL",
            "mysql://root@127.0.0.1:3306/test",
            simba_backends::mysql::MysqlBackend,
            &t
        );
        let path = std::env::temp_dir().join(format!("simba-bench-{t}.db"));
        let b = simba_backends::sqlite::SqliteBackend::connect(
            &BackendConfig::parse(&format!("sqlite://{}", path.display())).unwrap(),
        )
        .await
        .unwrap();
        let db = (b.pool().clone(), "bench_floor".to_owned());
        bench("sqlite", &b, &db, "simba_leases").await;
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
    });
}

/// A server the bench needs is unreachable: exit with an error unless the
/// run opted out of it (`SIMBA_TEST_SKIP_SERVERS`), then say so loudly.
fn missing(kind: &str, what: &str, e: &dyn std::fmt::Display) {
    if simba_backends::test_servers::server_skipped(kind) {
        println!(
            "{kind}: SKIPPED ({what} unreachable: {e}; SIMBA_TEST_SKIP_SERVERS lists `{kind}`)"
        );
    } else {
        eprintln!(
            "error: {what} is unreachable ({e}); start it (scripts/test.sh does) \
             or opt out with SIMBA_TEST_SKIP_SERVERS={kind}"
        );
        std::process::exit(1);
    }
}
