//! Simba's own figures: floors and acquire+release (interleaved), graceful
//! hand-over (library and `simba run`), crash fail-over (SIGKILL of a helper
//! process) and, in helper processes, the cost of holding many leases.

use crate::counters::Counter;
use crate::report::{ratio, Figure, Row};
use crate::stats::{fmt_bytes, fmt_num, Stat};
use crate::{Kind, Plan, Target, Tools};
use futures::future::BoxFuture;
use simba_backends::{Backend, BackendConfig};
use simba_core::{AcquireOutcome, LeaseName};
use simba_tokio::{ElectionListener, Simba, SimbaConfig, Term};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

/// One timed operation.
pub type Op = Box<dyn FnMut() -> BoxFuture<'static, Result<(), String>> + Send>;

/// Simba's configuration for every client of the bench: the plan's lease,
/// the other settings at their defaults (S8).
///
/// # Errors
/// The configuration error, as text.
pub fn config(plan: &Plan) -> Result<SimbaConfig, String> {
    SimbaConfig::builder()
        .lease_duration(plan.lease)
        .build()
        .map_err(|e| e.to_string())
}

/// Connects a backend.
///
/// # Errors
/// The connection error, as text.
pub async fn connect(url: &str) -> Result<Arc<dyn Backend>, String> {
    let c = BackendConfig::parse(url).map_err(|e| e.to_string())?;
    c.connect()
        .await
        .map(Arc::from)
        .map_err(|e| simba_backends::redact(&e.to_string()))
}

/// A client on its own backend connection (its own session).
///
/// # Errors
/// Connecting or building failed.
pub async fn client(url: &str, plan: &Plan) -> Result<(Simba, Arc<dyn Backend>), String> {
    let backend = connect(url).await?;
    let simba = simba_tokio::builder_dyn(backend.clone())
        .config(config(plan)?)
        .build()
        .map_err(|e| e.to_string())?;
    Ok((simba, backend))
}

/// Sends the time of every `on_elected`.
pub struct Notify(pub mpsc::UnboundedSender<(Instant, u64)>);

impl ElectionListener for Notify {
    fn on_elected(&self, term: &Term) {
        let _ = self.0.send((Instant::now(), term.token()));
    }
}

fn name(s: &str) -> Result<LeaseName, String> {
    LeaseName::new(s).map_err(|e| e.to_string())
}

async fn recv_within<T>(rx: &mut mpsc::UnboundedReceiver<T>, limit: Duration) -> Result<T, String> {
    match tokio::time::timeout(limit, rx.recv()).await {
        Ok(Some(v)) => Ok(v),
        Ok(None) => Err("the channel closed".into()),
        Err(_) => Err(format!("nothing within {limit:?}")),
    }
}

/// The floors of `kind` on the same connection as Simba's calls: a round
/// trip and, where the backend has one, a durable write.
struct Floors {
    round_trip: (&'static str, Op),
    write: Option<(&'static str, Op)>,
    /// Acquire+release is compared with the write (SQL: the goal
    /// is a multiple of it) rather than with the round trip (Redis,
    /// ZooKeeper, etcd: their goals are multiples of a read).
    versus_write: bool,
    backend: Arc<dyn Backend>,
}

/// The floors of a SQL database, on the backend's own pool: `SELECT 1`, and
/// a durable one-row UPDATE of `table` (made with `create`, its row put in
/// with `seed`), named `write`.
#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
macro_rules! sql_floors {
    ($backend:expr, $table:expr, $create:expr, $seed:expr, $write:expr) => {{
        let b = $backend;
        let pool = b.pool().clone();
        let err = |e: sqlx::Error| simba_backends::redact(&e.to_string());
        sqlx::query(&$create).execute(&pool).await.map_err(err)?;
        sqlx::query(&$seed).execute(&pool).await.map_err(err)?;
        let p1 = pool.clone();
        let p2 = pool;
        let sql = format!("UPDATE {} SET v = v + 1 WHERE id = 1", $table);
        Ok(Floors {
            round_trip: (
                "SELECT 1",
                Box::new(move || {
                    let p = p1.clone();
                    Box::pin(async move {
                        sqlx::query("SELECT 1")
                            .execute(&p)
                            .await
                            .map(|_| ())
                            .map_err(|e| e.to_string())
                    })
                }),
            ),
            write: Some((
                $write,
                Box::new(move || {
                    let (p, sql) = (p2.clone(), sql.clone());
                    Box::pin(async move {
                        sqlx::query(&sql)
                            .execute(&p)
                            .await
                            .map(|_| ())
                            .map_err(|e| e.to_string())
                    })
                }),
            )),
            versus_write: true,
            backend: Arc::new(b),
        })
    }};
}

#[allow(unused_variables)]
async fn floors(t: &Target) -> Result<Floors, String> {
    let config = BackendConfig::parse(&t.url).map_err(|e| e.to_string())?;
    let floor_table = format!("{}floor", config.table_prefix());
    let err = |e: &dyn std::fmt::Display| simba_backends::redact(&e.to_string());
    match t.kind {
        #[cfg(feature = "postgres")]
        Kind::Postgres => sql_floors!(
            simba_backends::postgres::PgBackend::connect(&config)
                .await
                .map_err(|e| err(&e))?,
            floor_table,
            format!("CREATE TABLE IF NOT EXISTS {floor_table} (id int PRIMARY KEY, v bigint NOT NULL)"),
            format!("INSERT INTO {floor_table} VALUES (1, 0) ON CONFLICT DO NOTHING"),
            "durable one-row UPDATE (synchronous_commit on)"
        ),
        #[cfg(feature = "mysql")]
        Kind::Mysql => sql_floors!(
            simba_backends::mysql::MysqlBackend::connect(&config)
                .await
                .map_err(|e| err(&e))?,
            floor_table,
            format!("CREATE TABLE IF NOT EXISTS {floor_table} (id INT PRIMARY KEY, v BIGINT NOT NULL) ENGINE=InnoDB"),
            format!("INSERT IGNORE INTO {floor_table} VALUES (1, 0)"),
            "durable one-row UPDATE (InnoDB, autocommit)"
        ),
        #[cfg(feature = "sqlite")]
        Kind::Sqlite => sql_floors!(
            simba_backends::sqlite::SqliteBackend::connect(&config)
                .await
                .map_err(|e| err(&e))?,
            floor_table,
            format!("CREATE TABLE IF NOT EXISTS {floor_table} (id INTEGER PRIMARY KEY, v INTEGER NOT NULL)"),
            format!("INSERT OR IGNORE INTO {floor_table} VALUES (1, 0)"),
            "durable one-row UPDATE (Simba's own pool and pragmas)"
        ),
        #[cfg(feature = "redis")]
        Kind::Redis => {
            let b = Arc::new(
                simba_backends::redis::RedisBackend::connect(&config)
                    .await
                    .map_err(|e| err(&e))?,
            );
            let b1 = b.clone();
            Ok(Floors {
                round_trip: (
                    "PING",
                    Box::new(move || {
                        let b = b1.clone();
                        Box::pin(async move { b.ping().await.map_err(|e| e.to_string()) })
                    }),
                ),
                write: None,
                versus_write: false,
                backend: b,
            })
        }
        #[cfg(feature = "zookeeper")]
        Kind::Zookeeper => {
            let b = Arc::new(
                simba_backends::zookeeper::ZkBackend::connect(&config)
                    .await
                    .map_err(|e| err(&e))?,
            );
            let s = b
                .open_session(Duration::from_secs(30))
                .await
                .map_err(|e| err(&e))?
                .session;
            let raw = b
                .zk_client(s)
                .ok_or("the ZooKeeper backend has no client for its session")?;
            let b2 = b.clone();
            Ok(Floors {
                round_trip: (
                    "exists (check_stat /)",
                    Box::new(move || {
                        let c = raw.clone();
                        Box::pin(async move {
                            c.check_stat("/")
                                .await
                                .map(|_| ())
                                .map_err(|e| e.to_string())
                        })
                    }),
                ),
                write: Some((
                    "durable write (setData of one znode, forceSync=yes)",
                    Box::new(move || {
                        let b = b2.clone();
                        Box::pin(async move { b.raw_write(s).await.map_err(|e| e.to_string()) })
                    }),
                )),
                versus_write: false,
                backend: b,
            })
        }
        #[cfg(feature = "etcd")]
        Kind::Etcd => {
            let b = Arc::new(
                simba_backends::etcd::EtcdBackend::connect(&config)
                    .await
                    .map_err(|e| err(&e))?,
            );
            let b1 = b.clone();
            let key = format!("{}/floor", b.prefix());
            let (b2, key2) = (b.clone(), key.clone());
            Ok(Floors {
                round_trip: (
                    "get (one key)",
                    Box::new(move || {
                        let (b, key) = (b1.clone(), key.clone());
                        Box::pin(async move {
                            b.raw_get(&key).await.map(|_| ()).map_err(|e| e.to_string())
                        })
                    }),
                ),
                write: Some((
                    "durable write (put of one key)",
                    Box::new(move || {
                        let (b, key) = (b2.clone(), key2.clone());
                        Box::pin(async move { b.raw_put(&key).await.map_err(|e| e.to_string()) })
                    }),
                )),
                versus_write: false,
                backend: b,
            })
        }
        #[allow(unreachable_patterns)]
        _ => Err("not built in".into()),
    }
}

async fn timed(op: &mut Op) -> Result<Duration, String> {
    let t = Instant::now();
    op().await?;
    Ok(t.elapsed())
}

/// Floors, acquire+release through the backend and through a client lock,
/// and `peer` (its name, its acquire+release), interleaved one iteration at
/// a time so that load on the shared machine hits them alike.
///
/// # Errors
/// The first failure, as text.
pub async fn latency(
    t: &Target,
    plan: &Plan,
    mut peer: Option<(String, Op)>,
) -> Result<Vec<Row>, String> {
    let mut f = floors(t).await?;
    let backend = f.backend.clone();
    let s = backend
        .open_session(plan.lease * 30)
        .await
        .map_err(|e| e.to_string())?
        .session;
    let direct = name("bench.cycle")?;
    let (simba, _) = client(&t.url, plan).await?;
    let lock = simba.lock("bench.lock");
    let warm = (plan.iters / 10).max(5);
    let mut v: [Vec<Duration>; 6] = Default::default();
    for i in 0..plan.iters + warm {
        let a = timed(&mut f.round_trip.1).await?;
        let b = match &mut f.write {
            Some((_, op)) => Some(timed(op).await?),
            None => None,
        };
        let t0 = Instant::now();
        let token = match backend
            .acquire(s, &direct)
            .await
            .map_err(|e| e.to_string())?
        {
            AcquireOutcome::Won { token, .. } => token,
            other => return Err(format!("an uncontended acquire answered {other:?}")),
        };
        backend
            .release(s, &direct, token)
            .await
            .map_err(|e| e.to_string())?;
        let c = t0.elapsed();
        let t0 = Instant::now();
        let term = lock.try_acquire().await.map_err(|e| e.to_string())?;
        term.release().await;
        let d = t0.elapsed();
        let e = match &mut peer {
            Some((_, op)) => Some(timed(op).await?),
            None => None,
        };
        let t0 = Instant::now();
        backend.renew(s).await.map_err(|e| e.to_string())?;
        let r = t0.elapsed();
        if i >= warm {
            v[5].push(r);
            v[0].push(a);
            if let Some(b) = b {
                v[1].push(b);
            }
            v[2].push(c);
            v[3].push(d);
            if let Some(e) = e {
                v[4].push(e);
            }
        }
    }
    let _ = backend.close_session(s).await;
    simba.close().await;
    let fig = |v: &[Duration]| match Stat::of_durations(v) {
        Some(s) => Figure::Time(s),
        None => Figure::Missing("no samples".into()),
    };
    let k = t.kind.name();
    let rt = fig(&v[0]);
    let mut rows = vec![Row::new(
        k,
        &format!("floor: {}", f.round_trip.0),
        rt.clone(),
    )];
    // Against a round-trip floor, also the least any durable acquire and
    // release cost: two writes (a create and a delete), one after the other.
    let mut two_writes = None;
    let floor = match &f.write {
        Some((label, _)) => {
            let w = fig(&v[1]);
            rows.push(Row::new(k, &format!("floor: {label}"), w.clone()));
            if f.versus_write {
                (w, "write floor")
            } else {
                two_writes = w.median_secs();
                (rt, "round-trip floor")
            }
        }
        None => (rt, "round-trip floor"),
    };
    let direct = fig(&v[2]);
    let mut relative = format!("{} {}", ratio(&direct, &floor.0), floor.1);
    if let (Some(d), Some(w)) = (direct.median_secs(), two_writes) {
        if w > 0.0 {
            relative.push_str(&format!(
                "; {:.2}× two durable writes (2 × the write floor, {:.2}× the round trip: the least a create and a delete cost)",
                d / (2.0 * w),
                match floor.0.median_secs() {
                    Some(r) if r > 0.0 => 2.0 * w / r,
                    _ => f64::NAN,
                }
            ));
        }
    }
    let mut row = Row::new(
        k,
        "acquire+release: Backend::acquire + release (one session)",
        direct.clone(),
    )
    .relative(relative);
    if let Some((pname, _)) = &peer {
        row = row.peer(pname, fig(&v[4]));
    }
    match t.kind {
        Kind::Postgres => row = row.goal("≤ 1.4× the durable-write floor (issue 15)"),
        Kind::Zookeeper => row = row.goal("≤ 2.5× the exists round trip (issue 11)"),
        Kind::Etcd => row = row.goal("≤ 2.5× the get round trip (issue 12)"),
        _ => {}
    }
    rows.push(row);
    let locked = fig(&v[3]);
    let mut row = Row::new(
        k,
        "acquire+release: Simba::lock try_acquire + release (client)",
        locked.clone(),
    )
    .relative(format!("{} {}", ratio(&locked, &floor.0), floor.1));
    if let Some((pname, _)) = &peer {
        row = row.peer(pname, fig(&v[4]));
    }
    rows.push(row);
    let renew = fig(&v[5]);
    let mut row = Row::new(k, "renewal: Backend::renew (one session)", renew.clone())
        .relative(format!("{} {}", ratio(&renew, &floor.0), floor.1));
    if t.kind == Kind::Mysql {
        row = row.goal("one round trip and one durable write (issue 32)");
    }
    rows.push(row);
    Ok(rows)
}

/// The idle pause before each library hand-over sample (the hand-over
/// floors and the etcd Lock RPC hand-over use the same): 50 ms and up to
/// 30 ms more with a release broadcast; without one, 50 ms and up to a
/// renewal interval more. Idle CPUs of the host may halt in it, as they do
/// between hand-overs in production.
pub fn pause(plan: &Plan, broadcasts: bool) -> Duration {
    // With a broadcast the candidate is woken whatever its retry phase; without
    // one, stop the leader at a uniformly random point of the candidate's
    // retry period (S4.1: renew/2 + jitter up to renew/2).
    let spread = if broadcasts {
        Duration::from_millis(30)
    } else {
        plan.renew_interval()
    };
    Duration::from_millis(50) + spread.mul_f64(fastrand::f64())
}

/// Graceful hand-over at library level: two clients (two sessions) in this
/// process; the leader's `stop()` → the candidate's `on_elected`.
///
/// # Errors
/// The first failure, as text.
pub async fn handover(t: &Target, plan: &Plan) -> Result<(Figure, Option<String>), String> {
    let logs = [crate::trace::Log::default(), crate::trace::Log::default()];
    let traced = |b: Arc<dyn Backend>, log: &crate::trace::Log| -> Arc<dyn Backend> {
        Arc::new(simba_backends::Layered(crate::trace::Traced {
            inner: b,
            log: Arc::clone(log),
        }))
    };
    let backend = traced(connect(&t.url).await?, &logs[0]);
    let a = simba_tokio::builder_dyn(backend.clone())
        .config(config(plan)?)
        .build()
        .map_err(|e| e.to_string())?;
    let b = simba_tokio::builder_dyn(traced(connect(&t.url).await?, &logs[1]))
        .config(config(plan)?)
        .build()
        .map_err(|e| e.to_string())?;
    let broadcasts = backend.broadcasts_releases();
    let mut parts = Vec::new();
    // SQL: the hand-over's floor, two durable writes (the release's commit,
    // the acquire's) and a round trip (the broadcast), sampled after each
    // hand-over on a connection of their own.
    let mut floor = match t.kind {
        Kind::Postgres | Kind::Mysql => floors(t).await.ok(),
        _ => None,
    };
    let (mut rtts, mut writes) = (Vec::new(), Vec::new());
    let clients = [a, b];
    let (tx, mut rx) = mpsc::unbounded_channel();
    let lease = format!("bench.handover.{}", crate::tag());
    let mut leader = clients[0]
        .election(&lease)
        .start(Notify(tx.clone()))
        .await
        .map_err(|e| e.to_string())?;
    recv_within(&mut rx, plan.lease * 5).await?;
    let mut cur = 0;
    let mut samples = Vec::new();
    for _ in 0..plan.handovers {
        let next = 1 - cur;
        let cand = clients[next]
            .election(&lease)
            .start(Notify(tx.clone()))
            .await
            .map_err(|e| e.to_string())?;
        tokio::time::sleep(pause(plan, broadcasts)).await;
        let t0 = Instant::now();
        let (_, got) = tokio::join!(leader.stop(), recv_within(&mut rx, plan.lease * 5));
        let (t1, _) = got?;
        samples.push(t1.saturating_duration_since(t0));
        if let Some(f) = floor.as_mut() {
            rtts.push(timed(&mut f.round_trip.1).await?);
            if let Some((_, w)) = f.write.as_mut() {
                writes.push(timed(w).await?);
            }
        }
        if let (Ok(mut l), Ok(mut c)) = (logs[cur].lock(), logs[next].lock()) {
            parts.extend(crate::trace::split(&l, &c, t0, t1));
            l.clear();
            c.clear();
        }
        leader = cand;
        cur = next;
    }
    leader.stop().await;
    for c in &clients {
        c.close().await;
    }
    let fig = Stat::of_durations(&samples)
        .map(Figure::Time)
        .ok_or("no samples")?;
    let breakdown = (!parts.is_empty()).then(|| {
        let mut text = format!("medians of {} of {} samples: ", parts.len(), samples.len());
        let mut sum = 0.0;
        for (i, name) in crate::trace::PARTS.iter().enumerate() {
            let v: Vec<Duration> = parts.iter().map(|p| p[i]).collect();
            let m = Stat::of_durations(&v).map_or(f64::NAN, |s| s.median * 1e3);
            sum += m;
            text.push_str(&format!(
                "{}{name} {m:.3} ms",
                if i > 0 { "; " } else { "" }
            ));
        }
        text.push_str(&format!(" (sum {sum:.3} ms)"));
        let med = |v: &[Duration]| Stat::of_durations(v).map(|s| s.median * 1e3);
        if let (Some(r), Some(w), Some(h)) = (med(&rtts), med(&writes), med(&samples)) {
            let f = 2.0 * w + r;
            text.push_str(&format!(
                "; floor 2 × durable write {w:.3} ms + round trip {r:.3} ms = {f:.3} ms, \
                 the hand-over {:.2}× it",
                h / f
            ));
        }
        text
    });
    Ok((fig, breakdown))
}

/// Spawns this binary as a helper with `args`, in its own process group,
/// stdout piped.
fn helper(tools: &Tools, args: &[String]) -> Result<tokio::process::Child, String> {
    tokio::process::Command::new(&tools.me)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", tools.me.display()))
}

fn kill_group(child: &tokio::process::Child, signal: rustix::process::Signal) {
    if let Some(pid) = child
        .id()
        .and_then(|p| rustix::process::Pid::from_raw(p as i32))
    {
        let _ = rustix::process::kill_process_group(pid, signal);
    }
}

async fn line_within(
    lines: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    limit: Duration,
) -> Result<String, String> {
    match tokio::time::timeout(limit, lines.next_line()).await {
        Ok(Ok(Some(l))) => Ok(l),
        Ok(Ok(None)) => Err("the helper exited".into()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("the helper said nothing within {limit:?}")),
    }
}

/// Crash fail-over: a helper process (this binary, `hold`) leads; a
/// candidate client here waits; the helper's process group gets SIGKILL at
/// a random point of its renewal period; the sample is SIGKILL → the
/// candidate's `on_elected`. Returned with the ratio to the lease.
///
/// # Errors
/// The first failure, as text.
pub async fn failover(t: &Target, plan: &Plan, tools: &Tools) -> Result<Figure, String> {
    let (cand_client, _) = client(&t.url, plan).await?;
    let lease = format!("bench.failover.{}", crate::tag());
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut samples = Vec::new();
    for _ in 0..plan.failovers {
        let mut child = helper(
            tools,
            &[
                "hold".into(),
                "--url".into(),
                t.url.clone(),
                "--name".into(),
                lease.clone(),
                "--lease-ms".into(),
                plan.lease.as_millis().to_string(),
            ],
        )?;
        let stdout = child.stdout.take().ok_or("no helper stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        let first = line_within(&mut lines, Duration::from_secs(30)).await?;
        if !first.starts_with("elected") {
            return Err(format!("the helper said {first:?}"));
        }
        let cand = cand_client
            .election(&lease)
            .start(Notify(tx.clone()))
            .await
            .map_err(|e| e.to_string())?;
        tokio::time::sleep(
            Duration::from_millis(100) + plan.renew_interval().mul_f64(fastrand::f64()),
        )
        .await;
        let t0 = Instant::now();
        kill_group(&child, rustix::process::Signal::KILL);
        let (t1, _) = recv_within(&mut rx, plan.lease * 4 + Duration::from_secs(5)).await?;
        samples.push(t1.saturating_duration_since(t0));
        let _ = child.wait().await;
        cand.stop().await;
    }
    cand_client.close().await;
    Stat::of_durations(&samples)
        .map(Figure::Time)
        .ok_or_else(|| "no samples".into())
}

/// The "relative to the lease" text of a fail-over figure.
pub fn lease_ratio(f: &Figure, lease: Duration) -> String {
    match f {
        Figure::Time(s) => format!(
            "median {:.2}×, p99 {:.2}× lease ({} s)",
            s.median / lease.as_secs_f64(),
            s.p99 / lease.as_secs_f64(),
            lease.as_secs_f64()
        ),
        _ => String::new(),
    }
}

/// A `simba run` process with its stderr lines forwarded as
/// `(id, time, line)`.
struct RunProc {
    id: usize,
    child: tokio::process::Child,
}

fn spawn_run(
    tools: &Tools,
    t: &Target,
    plan: &Plan,
    lease_name: &str,
    id: usize,
    tx: &mpsc::UnboundedSender<(usize, Instant, String)>,
) -> Result<RunProc, String> {
    let bin = tools.simba.as_ref().ok_or("no simba binary")?;
    let mut child = tokio::process::Command::new(bin)
        .arg("--backend")
        .arg(&t.url)
        .arg("--lease-duration")
        .arg(format!("{}ms", plan.lease.as_millis()))
        .args(["run", lease_name, "--grace", "5s", "--", "sleep", "1000"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .env("NO_COLOR", "1")
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", bin.display()))?;
    let stderr = child.stderr.take().ok_or("no stderr")?;
    let tx = tx.clone();
    tokio::spawn(async move {
        let mut lines = BufReader::new(stderr).lines();
        while let Ok(Some(l)) = lines.next_line().await {
            let _ = tx.send((id, Instant::now(), l));
        }
        let _ = tx.send((id, Instant::now(), "<exited>".into()));
    });
    Ok(RunProc { id, child })
}

async fn wait_line(
    rx: &mut mpsc::UnboundedReceiver<(usize, Instant, String)>,
    id: usize,
    what: &str,
    limit: Duration,
) -> Result<Instant, String> {
    let end = Instant::now() + limit;
    loop {
        let left = end.saturating_duration_since(Instant::now());
        let (from, at, line) = recv_within(rx, left).await?;
        if from != id {
            continue;
        }
        if line.contains(what) {
            return Ok(at);
        }
        if line.contains("<exited>") || line.contains("error") {
            return Err(format!("simba run: {line}"));
        }
    }
}

/// Graceful hand-over through `simba run`: two processes compete; the
/// leader gets SIGTERM (it stops its child, then releases); the sample is
/// SIGTERM → the other process printing `elected:`.
///
/// # Errors
/// The first failure, as text.
pub async fn cli_handover(t: &Target, plan: &Plan, tools: &Tools) -> Result<Figure, String> {
    let broadcasts = connect(&t.url).await?.broadcasts_releases();
    let lease = format!("bench.cli.{}", crate::tag());
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut leader = spawn_run(tools, t, plan, &lease, 0, &tx)?;
    wait_line(&mut rx, 0, "elected:", Duration::from_secs(30)).await?;
    let mut samples = Vec::new();
    for i in 1..=plan.cli_handovers {
        let cand = spawn_run(tools, t, plan, &lease, i, &tx)?;
        wait_line(&mut rx, i, "competing for", Duration::from_secs(30)).await?;
        tokio::time::sleep(pause(plan, broadcasts)).await;
        let t0 = Instant::now();
        if let Some(pid) = leader
            .child
            .id()
            .and_then(|p| rustix::process::Pid::from_raw(p as i32))
        {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
        let t1 = wait_line(&mut rx, i, "elected:", plan.lease * 5).await?;
        samples.push(t1.saturating_duration_since(t0));
        let _ = tokio::time::timeout(Duration::from_secs(10), leader.child.wait()).await;
        let _ = leader.id;
        leader = cand;
    }
    if let Some(pid) = leader
        .child
        .id()
        .and_then(|p| rustix::process::Pid::from_raw(p as i32))
    {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
    }
    let _ = tokio::time::timeout(Duration::from_secs(10), leader.child.wait()).await;
    Stat::of_durations(&samples)
        .map(Figure::Time)
        .ok_or_else(|| "no samples".into())
}

fn nums(line: &str, tag: &str) -> Result<(f64, f64), String> {
    let mut it = line.split_whitespace();
    if it.next() != Some(tag) {
        return Err(format!("expected `{tag} …` from the helper, got {line:?}"));
    }
    let cpu = it.next().and_then(|v| v.parse().ok()).unwrap_or(f64::NAN);
    let rss = it.next().and_then(|v| v.parse().ok()).unwrap_or(f64::NAN);
    Ok((cpu, rss))
}

/// Backend calls counted on the server, client CPU and RSS per held lease,
/// while a helper process (this binary, `hold-many`) holds 1, 100, 10,000
/// leases (elections on one client).
pub async fn holding(t: &Target, plan: &Plan, tools: &Tools) -> Vec<Row> {
    let k = t.kind.name();
    let mut rows = Vec::new();
    let ideal = 60.0 / plan.renew_interval().as_secs_f64();
    for &n in &plan.sizes {
        match holding_one(t, plan, tools, n).await {
            Ok((calls, extra, cpu, rss, rss_total)) => {
                let what = format!("backend calls per node per minute, holding {n} lease(s)");
                let row = match (&t.counter, calls) {
                    (Ok(c), Some(calls)) => Row::new(
                        k,
                        &what,
                        Figure::Value(format!("{} {}", fmt_num(calls), c.short())),
                    )
                    .relative(format!(
                        "{:.2}× one per renewal interval ({} /min)",
                        calls / ideal,
                        fmt_num(ideal)
                    )),
                    (Ok(_), None) => {
                        Row::new(k, &what, Figure::Missing("the counter failed".into()))
                    }
                    (Err(why), _) => Row::new(k, &what, Figure::Missing(why.clone())),
                };
                rows.push(
                    row.goal("S1.1: one call per renewal interval, whatever the lease count"),
                );
                if let Some((c, v)) = extra {
                    let what = format!("server transactions per minute, holding {n} lease(s)");
                    rows.push(match v {
                        Some(v) => Row::new(
                            k,
                            &what,
                            Figure::Value(format!("{} {}", fmt_num(v), c.short())),
                        )
                        .relative(format!(
                            "{:.2}× one per renewal interval ({} /min)",
                            v / ideal,
                            fmt_num(ideal)
                        ))
                        .goal("one InnoDB transaction per renewal (the bench alone writes on the server)"),
                        None => Row::new(k, &what, Figure::Missing(format!("{} failed", c.unit()))),
                    });
                }
                rows.push(Row::new(
                    k,
                    &format!("client CPU per held lease, holding {n}"),
                    Figure::Value(format!(
                        "{} ms CPU/min per lease ({} ms/min in all)",
                        fmt_num(cpu * 1e3 / n as f64),
                        fmt_num(cpu * 1e3)
                    )),
                ));
                rows.push(Row::new(
                    k,
                    &format!("client RSS per held lease, holding {n}"),
                    Figure::Value(format!(
                        "{} per lease ({} in all, from before the first election)",
                        fmt_bytes(rss),
                        fmt_bytes(rss_total)
                    )),
                ));
            }
            Err(why) => rows.push(Row::new(
                k,
                &format!("holding {n} lease(s): calls, CPU, RSS"),
                Figure::Missing(why),
            )),
        }
    }
    rows
}

/// The companion counter and its figure per minute, if any.
type Extra = Option<(Counter, Option<f64>)>;

/// `(server calls per minute, the companion counter's per minute, CPU
/// seconds per minute, RSS per lease, RSS in all)`.
async fn holding_one(
    t: &Target,
    plan: &Plan,
    tools: &Tools,
    n: usize,
) -> Result<(Option<f64>, Extra, f64, f64, f64), String> {
    let mut child = helper(
        tools,
        &[
            "hold-many".into(),
            "--url".into(),
            t.url.clone(),
            "--count".into(),
            n.to_string(),
            "--lease-ms".into(),
            plan.lease.as_millis().to_string(),
        ],
    )?;
    let stdout = child.stdout.take().ok_or("no helper stdout")?;
    let mut stdin = child.stdin.take().ok_or("no helper stdin")?;
    let mut lines = BufReader::new(stdout).lines();
    let (_, rss0) = nums(
        &line_within(&mut lines, Duration::from_secs(30)).await?,
        "base",
    )?;
    let limit = Duration::from_secs(60) + Duration::from_millis(30) * n as u32;
    let (_, rss1) = nums(&line_within(&mut lines, limit).await?, "ready")?;
    // Let the acquire burst settle (and PostgreSQL flush its statistics).
    tokio::time::sleep(plan.renew_interval() * 2).await;
    let companion = t.counter.as_ref().ok().and_then(Counter::companion);
    let e0 = match &companion {
        Some(c) => c.read().await.ok(),
        None => None,
    };
    let c0 = match &t.counter {
        Ok(c) => c.read().await.ok(),
        Err(_) => None,
    };
    let t0 = Instant::now();
    stdin
        .write_all(b"mark\n")
        .await
        .map_err(|e| e.to_string())?;
    let (cpu0, _) = nums(
        &line_within(&mut lines, Duration::from_secs(10)).await?,
        "mark",
    )?;
    tokio::time::sleep(plan.window).await;
    let c1 = match &t.counter {
        Ok(c) => c.read().await.ok(),
        Err(_) => None,
    };
    let e1 = match &companion {
        Some(c) => c.read().await.ok(),
        None => None,
    };
    let elapsed = t0.elapsed().as_secs_f64();
    stdin.write_all(b"end\n").await.map_err(|e| e.to_string())?;
    let (cpu1, _) = nums(
        &line_within(&mut lines, Duration::from_secs(10)).await?,
        "end",
    )?;
    let _ = tokio::time::timeout(Duration::from_secs(60), child.wait()).await;
    let calls = match (c0, c1) {
        (Some(a), Some(b)) => Some((b - a) / elapsed * 60.0),
        _ => None,
    };
    let extra = companion.map(|c| {
        let v = match (e0, e1) {
            (Some(a), Some(b)) => Some((b - a) / elapsed * 60.0),
            _ => None,
        };
        (c, v)
    });
    let cpu = (cpu1 - cpu0) / elapsed * 60.0;
    Ok((calls, extra, cpu, (rss1 - rss0) / n as f64, rss1 - rss0))
}
