//! The peers: PostgreSQL advisory locks and MariaDB `GET_LOCK` (driven here
//! through sqlx, one connection per holder), and the driver scripts of
//! `bench/peers/` for redis-py, kazoo and etcdctl (installed by
//! `bench/setup.sh`).

use crate::measure::Op;
use crate::report::Figure;
use crate::stats::Stat;
use crate::{Kind, Plan, Target, Tools};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, BufReader};

/// The SQL peer's name for `kind`.
pub fn sql_peer_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Postgres => "pg_advisory_lock/unlock",
        _ => "GET_LOCK/RELEASE_LOCK",
    }
}

/// A lock statement pair of the SQL peer.
#[derive(Clone, Debug)]
pub struct SqlLock {
    url: String,
    kind: Kind,
    key: String,
}

impl SqlLock {
    /// The peer lock on `t`'s server (PostgreSQL or MariaDB), with a key of
    /// this run.
    ///
    /// # Errors
    /// When `t` is neither.
    pub fn new(t: &Target) -> Result<SqlLock, String> {
        let url = t.admin.clone().ok_or("no SQL URL")?;
        match t.kind {
            Kind::Postgres => Ok(SqlLock {
                url,
                kind: t.kind,
                key: fastrand::i64(1..i64::MAX).to_string(),
            }),
            Kind::Mysql => Ok(SqlLock {
                url,
                kind: t.kind,
                key: format!("simba-bench-{}", crate::tag()),
            }),
            _ => Err("no SQL peer".into()),
        }
    }

    /// The peer lock on `t`'s server with a given key (a helper process's).
    ///
    /// # Errors
    /// When `t` is neither PostgreSQL nor MariaDB.
    pub fn with_key(t: &Target, key: &str) -> Result<SqlLock, String> {
        let mut l = SqlLock::new(t)?;
        l.key = key.to_owned();
        Ok(l)
    }

    /// Opens one holder (one connection).
    ///
    /// # Errors
    /// Connecting failed.
    pub async fn holder(&self) -> Result<Holder, String> {
        match self.kind {
            #[cfg(feature = "postgres")]
            Kind::Postgres => sqlx::postgres::PgPoolOptions::new()
                .max_connections(1)
                .connect(&self.url)
                .await
                .map(|p| Holder::Pg(p, self.key.parse().unwrap_or(1)))
                .map_err(|e| e.to_string()),
            #[cfg(feature = "mysql")]
            Kind::Mysql => sqlx::mysql::MySqlPoolOptions::new()
                .max_connections(1)
                .connect(&self.url)
                .await
                .map(|p| Holder::My(p, self.key.clone()))
                .map_err(|e| e.to_string()),
            _ => Err("not built in".into()),
        }
    }
}

/// One connection that takes and gives back the peer lock.
#[derive(Clone)]
pub enum Holder {
    /// PostgreSQL advisory lock on a key.
    #[cfg(feature = "postgres")]
    Pg(sqlx::PgPool, i64),
    /// MariaDB named lock.
    #[cfg(feature = "mysql")]
    My(sqlx::MySqlPool, String),
}

impl Holder {
    /// Takes the lock, waiting for it.
    ///
    /// # Errors
    /// The query failed or timed out (MariaDB: 60 s).
    pub async fn lock(&self) -> Result<(), String> {
        match self {
            #[cfg(feature = "postgres")]
            Holder::Pg(p, k) => sqlx::query("SELECT pg_advisory_lock($1)")
                .bind(*k)
                .execute(p)
                .await
                .map(|_| ())
                .map_err(|e| e.to_string()),
            #[cfg(feature = "mysql")]
            Holder::My(p, k) => {
                let got: Option<i64> = sqlx::query_scalar("SELECT GET_LOCK(?, 60)")
                    .bind(k)
                    .fetch_one(p)
                    .await
                    .map_err(|e| e.to_string())?;
                if got == Some(1) {
                    Ok(())
                } else {
                    Err(format!("GET_LOCK answered {got:?}"))
                }
            }
            #[allow(unreachable_patterns)]
            _ => Err("not built in".into()),
        }
    }

    /// Gives the lock back.
    ///
    /// # Errors
    /// The query failed.
    pub async fn unlock(&self) -> Result<(), String> {
        match self {
            #[cfg(feature = "postgres")]
            Holder::Pg(p, k) => sqlx::query("SELECT pg_advisory_unlock($1)")
                .bind(*k)
                .execute(p)
                .await
                .map(|_| ())
                .map_err(|e| e.to_string()),
            #[cfg(feature = "mysql")]
            Holder::My(p, k) => sqlx::query("SELECT RELEASE_LOCK(?)")
                .bind(k)
                .execute(p)
                .await
                .map(|_| ())
                .map_err(|e| e.to_string()),
            #[allow(unreachable_patterns)]
            _ => Err("not built in".into()),
        }
    }

    /// Acquire+release as one timed operation.
    pub fn cycle_op(self) -> Op {
        Box::new(move || {
            let h = self.clone();
            Box::pin(async move {
                h.lock().await?;
                h.unlock().await
            })
        })
    }
}

fn figure(samples: &[Duration]) -> Result<Figure, String> {
    Stat::of_durations(samples)
        .map(Figure::Time)
        .ok_or_else(|| "no samples".into())
}

/// The SQL peer's hand-over: one connection holds, another waits in the lock
/// call; the sample is unlock → the waiter's lock call returning.
///
/// # Errors
/// The first failure.
pub async fn sql_handover(lock: &SqlLock, n: usize) -> Result<Figure, String> {
    let hs = [lock.holder().await?, lock.holder().await?];
    hs[0].lock().await?;
    let mut cur = 0;
    let mut samples = Vec::new();
    for _ in 0..n {
        let next = 1 - cur;
        let waiter = hs[next].clone();
        let (tx, rx) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            let r = waiter.lock().await;
            let _ = tx.send((Instant::now(), r));
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        let t0 = Instant::now();
        hs[cur].unlock().await?;
        let (t1, r) = tokio::time::timeout(Duration::from_secs(10), rx)
            .await
            .map_err(|_| "the waiter did not get the lock in 10 s".to_string())?
            .map_err(|e| e.to_string())?;
        r?;
        samples.push(t1 - t0);
        cur = next;
    }
    hs[cur].unlock().await?;
    figure(&samples)
}

/// The SQL peer's crash fail-over: a helper process (`peer-hold`) holds the
/// lock on its connection and gets SIGKILL; the server sees the connection
/// close and the waiter gets the lock.
///
/// # Errors
/// The first failure.
pub async fn sql_failover(lock: &SqlLock, n: usize, tools: &Tools) -> Result<Figure, String> {
    let waiter = lock.holder().await?;
    let mut samples = Vec::new();
    for _ in 0..n {
        let mut child = tokio::process::Command::new(&tools.me)
            .args(["peer-hold", "--url", &lock.url, "--key", &lock.key])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| e.to_string())?;
        let out = child.stdout.take().ok_or("no stdout")?;
        let mut lines = BufReader::new(out).lines();
        match tokio::time::timeout(Duration::from_secs(30), lines.next_line()).await {
            Ok(Ok(Some(l))) if l.starts_with("held") => {}
            other => return Err(format!("the peer holder said {other:?}")),
        }
        let w = waiter.clone();
        let (tx, rx) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            let r = w.lock().await;
            let _ = tx.send((Instant::now(), r));
        });
        tokio::time::sleep(Duration::from_millis(100 + fastrand::u64(0..300))).await;
        let t0 = Instant::now();
        if let Some(pid) = child
            .id()
            .and_then(|p| rustix::process::Pid::from_raw(p as i32))
        {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
        let (t1, r) = tokio::time::timeout(Duration::from_secs(30), rx)
            .await
            .map_err(|_| "the waiter did not get the lock in 30 s".to_string())?
            .map_err(|e| e.to_string())?;
        r?;
        samples.push(t1 - t0);
        let _ = child.wait().await;
        waiter.unlock().await?;
    }
    figure(&samples)
}

/// Runs `bench/peers/<script> <args…>` with the peers' Python and reads the
/// JSON line it ends with: `{"samples": [seconds…]}` or `{"error": "…"}`.
///
/// # Errors
/// Why there is no figure (no venv, the script failed).
pub async fn script(tools: &Tools, script: &str, args: &[String]) -> Result<Figure, String> {
    let py = tools
        .python
        .clone()
        .ok_or("the peers' Python venv is missing: run bench/setup.sh")?;
    let run = tokio::process::Command::new(&py)
        .arg(tools.peers_dir.join(script))
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(900), run)
        .await
        .map_err(|_| format!("{script} ran over 15 minutes"))?
        .map_err(|e| format!("cannot run {}: {e}", py.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let Some(last) = stdout.lines().rev().find(|l| l.starts_with('{')) else {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(format!(
            "{script} printed no result: {}",
            err.lines().last().unwrap_or("(no output)")
        ));
    };
    let v: serde_json::Value = serde_json::from_str(last).map_err(|e| e.to_string())?;
    if let Some(e) = v.get("error").and_then(|e| e.as_str()) {
        return Err(format!("{script}: {e}"));
    }
    let samples: Vec<f64> = v
        .get("samples")
        .and_then(|s| s.as_array())
        .map(|a| a.iter().filter_map(|x| x.as_f64()).collect())
        .unwrap_or_default();
    Stat::of(samples)
        .map(Figure::Time)
        .ok_or_else(|| format!("{script}: no samples"))
}

/// The arguments common to every driver script.
pub fn script_args(mode: &str, addr: &str, n: usize, plan: &Plan) -> Vec<String> {
    vec![
        mode.into(),
        "--addr".into(),
        addr.into(),
        "--n".into(),
        n.to_string(),
        "--lease".into(),
        format!("{}", plan.lease.as_secs_f64()),
    ]
}
