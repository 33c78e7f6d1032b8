//! The servers the bench measures: PostgreSQL and MariaDB (the running
//! ones, in a database and user of the bench's own so their counters see
//! only the bench), and private Redis, ZooKeeper and etcd servers on
//! private ports (so `INFO`, `mntr` and `/metrics` see only the bench).

use crate::counters::Counter;
use crate::{Kind, Target, Tools};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Private ports.
const REDIS_PORT: u16 = 16390;
const ZK_PORT: u16 = 12190;
const ETCD_PORT: u16 = 12390;
const ETCD_PEER_PORT: u16 = 12391;

/// The bench's own database and MariaDB user.
pub const BENCH_DB: &str = "simba_bench";

/// Private servers and temporary directories, removed by [`Private::stop`].
#[derive(Default)]
pub struct Private {
    children: Vec<tokio::process::Child>,
    dirs: Vec<PathBuf>,
    /// MariaDB's `userstat` to put back.
    restore_userstat: Option<String>,
    /// Table prefix of this run's SQL tables, dropped at the end.
    sql_prefix: Option<(Option<String>, Option<String>, String)>,
}

impl Private {
    /// Stops the private servers, drops this run's SQL tables and removes
    /// the temporary directories.
    pub async fn stop(mut self) {
        for c in &mut self.children {
            let _ = c.kill().await;
        }
        if let Some((pg, my, prefix)) = self.sql_prefix.take() {
            drop_tables(pg, my, &prefix).await;
        }
        #[cfg(feature = "mysql")]
        if let Some((admin, old)) = self.restore_userstat.take().and_then(|s| {
            s.split_once('\n')
                .map(|(a, b)| (a.to_owned(), b.to_owned()))
        }) {
            use sqlx::Connection;
            if let Ok(mut c) = sqlx::MySqlConnection::connect(&admin).await {
                let _ = sqlx::query(&format!("SET GLOBAL userstat = {old}"))
                    .execute(&mut c)
                    .await;
            }
        }
        for d in &self.dirs {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

#[allow(unused_variables)]
async fn drop_tables(pg: Option<String>, my: Option<String>, prefix: &str) {
    #[cfg(feature = "postgres")]
    if let Some(url) = pg {
        use sqlx::Connection;
        if let Ok(mut c) = sqlx::PgConnection::connect(&url).await {
            let names: Vec<String> =
                sqlx::query_scalar("SELECT tablename::text FROM pg_tables WHERE tablename LIKE $1")
                    .bind(format!("{prefix}%"))
                    .fetch_all(&mut c)
                    .await
                    .unwrap_or_default();
            for n in names {
                let _ = sqlx::query(&format!("DROP TABLE IF EXISTS \"{n}\" CASCADE"))
                    .execute(&mut c)
                    .await;
            }
        }
    }
    #[cfg(feature = "mysql")]
    if let Some(url) = my {
        use sqlx::Connection;
        if let Ok(mut c) = sqlx::MySqlConnection::connect(&url).await {
            let names: Vec<String> = sqlx::query_scalar(
                "SELECT CAST(table_name AS CHAR) FROM information_schema.tables \
                 WHERE table_schema = ? AND table_name LIKE ?",
            )
            .bind(BENCH_DB)
            .bind(format!("{prefix}%"))
            .fetch_all(&mut c)
            .await
            .unwrap_or_default();
            for n in names {
                let _ = sqlx::query(&format!("DROP TABLE IF EXISTS `{BENCH_DB}`.`{n}`"))
                    .execute(&mut c)
                    .await;
            }
        }
    }
}

fn env(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_owned())
}

/// Waits until `check` answers, up to `limit`.
async fn wait_for<F, Fut>(limit: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    while start.elapsed() < limit {
        if check().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    false
}

async fn ask(addr: &str, request: &[u8]) -> Option<String> {
    let run = async {
        let mut s = tokio::net::TcpStream::connect(addr).await.ok()?;
        s.write_all(request).await.ok()?;
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).await.ok()?;
        Some(String::from_utf8_lossy(&buf).into_owned())
    };
    tokio::time::timeout(Duration::from_secs(3), run)
        .await
        .ok()
        .flatten()
}

fn temp_dir(private: &mut Private, what: &str, tag: &str) -> Result<PathBuf, String> {
    let dir = std::env::temp_dir().join(format!("simba-bench-{what}-{tag}"));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    private.dirs.push(dir.clone());
    Ok(dir)
}

fn spawn(
    private: &mut Private,
    program: &str,
    args: &[String],
    log: &std::path::Path,
) -> Result<(), String> {
    let out = std::fs::File::create(log).map_err(|e| e.to_string())?;
    let err = out.try_clone().map_err(|e| e.to_string())?;
    let child = tokio::process::Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot start {program}: {e}"))?;
    private.children.push(child);
    Ok(())
}

/// Prepares every kind in `kinds`: connects nothing yet, but starts the
/// private servers and creates the bench's database and user. A kind that
/// cannot be prepared comes back as `Err(why)`.
pub async fn prepare(
    kinds: &[Kind],
    tools: &Tools,
    tag: &str,
    private: &mut Private,
) -> Vec<(Kind, Result<Target, String>)> {
    let prefix = format!("b{tag}_");
    let mut out = Vec::new();
    let mut pg_admin = None;
    let mut my_admin = None;
    for &kind in kinds {
        let t = if !kind.built_in() {
            Err(format!(
                "the `{}` feature is not built in this simba-bench",
                kind.name()
            ))
        } else {
            match kind {
                Kind::Sqlite => sqlite(private, tag),
                Kind::Postgres => postgres(&prefix, &mut pg_admin).await,
                Kind::Mysql => mysql(&prefix, private, &mut my_admin).await,
                Kind::Redis => redis(private, tag).await,
                Kind::Zookeeper => zookeeper(private, tools, tag).await,
                Kind::Etcd => etcd(private, tag).await,
            }
        };
        out.push((kind, t));
    }
    private.sql_prefix = Some((pg_admin, my_admin, prefix));
    out
}

fn sqlite(private: &mut Private, tag: &str) -> Result<Target, String> {
    let dir = temp_dir(private, "sqlite", tag)?;
    Ok(Target {
        kind: Kind::Sqlite,
        url: format!("sqlite://{}", dir.join("bench.db").display()),
        addr: None,
        admin: None,
        counter: Err("SQLite has no server to count calls on".into()),
        note: format!("file in {}", std::env::temp_dir().display()),
    })
}

#[cfg(not(feature = "postgres"))]
async fn postgres(_prefix: &str, _admin_out: &mut Option<String>) -> Result<Target, String> {
    Err("not built in".into())
}

#[cfg(feature = "postgres")]
async fn postgres(prefix: &str, admin_out: &mut Option<String>) -> Result<Target, String> {
    {
        use sqlx::Connection;
        let base = env("SIMBA_BENCH_PG", "postgres://postgres@127.0.0.1:5432");
        let admin = format!("{base}/postgres");
        let mut c = sqlx::PgConnection::connect(&admin)
            .await
            .map_err(|e| format!("no PostgreSQL at {}: {e}", simba_backends::redact(&base)))?;
        let exists: Option<i32> =
            sqlx::query_scalar("SELECT 1 FROM pg_database WHERE datname = $1")
                .bind(BENCH_DB)
                .fetch_optional(&mut c)
                .await
                .map_err(|e| e.to_string())?;
        if exists.is_none() {
            sqlx::query(&format!("CREATE DATABASE {BENCH_DB}"))
                .execute(&mut c)
                .await
                .map_err(|e| format!("cannot create database {BENCH_DB}: {e}"))?;
        }
        let _ = c.close().await;
        *admin_out = Some(format!("{base}/{BENCH_DB}"));
        let host = base
            .rsplit('@')
            .next()
            .unwrap_or("127.0.0.1:5432")
            .to_owned();
        Ok(Target {
            kind: Kind::Postgres,
            url: format!("{base}/{BENCH_DB}?simba_table_prefix={prefix}"),
            addr: Some(host),
            admin: Some(format!("{base}/{BENCH_DB}")),
            counter: Ok(Counter::PgDatabase {
                admin,
                db: BENCH_DB.into(),
            }),
            note: "database simba_bench on the running server".into(),
        })
    }
}

#[cfg(not(feature = "mysql"))]
async fn mysql(
    _prefix: &str,
    _private: &mut Private,
    _admin_out: &mut Option<String>,
) -> Result<Target, String> {
    Err("not built in".into())
}

#[cfg(feature = "mysql")]
async fn mysql(
    prefix: &str,
    private: &mut Private,
    admin_out: &mut Option<String>,
) -> Result<Target, String> {
    {
        use sqlx::Connection;
        let host = env("SIMBA_BENCH_MYSQL_HOST", "127.0.0.1:3306");
        let admin = env("SIMBA_BENCH_MYSQL", &format!("mysql://root@{host}/mysql"));
        let mut c = sqlx::MySqlConnection::connect(&admin).await.map_err(|e| {
            format!(
                "no MariaDB/MySQL at {}: {e}",
                simba_backends::redact(&admin)
            )
        })?;
        let setup = [
            format!("CREATE DATABASE IF NOT EXISTS {BENCH_DB}"),
            format!("CREATE USER IF NOT EXISTS '{BENCH_DB}'@'%'"),
            format!("CREATE USER IF NOT EXISTS '{BENCH_DB}'@'localhost'"),
            format!("GRANT ALL ON {BENCH_DB}.* TO '{BENCH_DB}'@'%'"),
            format!("GRANT ALL ON {BENCH_DB}.* TO '{BENCH_DB}'@'localhost'"),
        ];
        for s in &setup {
            sqlx::query(s)
                .execute(&mut c)
                .await
                .map_err(|e| format!("`{s}` failed: {e}"))?;
        }
        // InnoDB's own transaction counters, counted beside the user's
        // (`Counter::companion`); left on (they cost a few atomic adds per
        // transaction). Without the privilege, that row says why.
        let _ = sqlx::query("SET GLOBAL innodb_monitor_enable = 'trx_%'")
            .execute(&mut c)
            .await;
        // Per-user statement counters (MariaDB's userstat), else the global
        // (shared) counter.
        let old: Option<String> = sqlx::query_scalar("SELECT CAST(@@userstat AS CHAR)")
            .fetch_one(&mut c)
            .await
            .ok();
        let counter = match old.as_deref() {
            Some("1") => Counter::MysqlUser {
                admin: admin.clone(),
                user: BENCH_DB.into(),
            },
            Some(old) => match sqlx::query("SET GLOBAL userstat = 1").execute(&mut c).await {
                Ok(_) => {
                    private.restore_userstat = Some(format!("{admin}\n{old}"));
                    Counter::MysqlUser {
                        admin: admin.clone(),
                        user: BENCH_DB.into(),
                    }
                }
                Err(_) => Counter::MysqlGlobal {
                    admin: admin.clone(),
                },
            },
            None => Counter::MysqlGlobal {
                admin: admin.clone(),
            },
        };
        let _ = c.close().await;
        *admin_out = Some(admin.clone());
        Ok(Target {
            kind: Kind::Mysql,
            url: format!("mysql://{BENCH_DB}@{host}/{BENCH_DB}?simba_table_prefix={prefix}"),
            addr: Some(host.clone()),
            admin: Some(format!("mysql://{BENCH_DB}@{host}/{BENCH_DB}")),
            counter: Ok(counter),
            note: "user and database simba_bench on the running server".into(),
        })
    }
}

async fn redis(private: &mut Private, tag: &str) -> Result<Target, String> {
    let key = format!("simba_key_prefix=bench-{tag}");
    if let Ok(url) = std::env::var("SIMBA_BENCH_REDIS") {
        let addr = url
            .trim_start_matches("redis://")
            .split('/')
            .next()
            .unwrap_or("127.0.0.1:6379")
            .to_owned();
        return Ok(Target {
            kind: Kind::Redis,
            url: format!("{url}?{key}"),
            addr: Some(addr.clone()),
            admin: None,
            counter: Err(
                "SIMBA_BENCH_REDIS names a shared server: commandstats would count other clients"
                    .into(),
            ),
            note: "the server of SIMBA_BENCH_REDIS".into(),
        });
    }
    let Some(bin) = crate::which("redis-server") else {
        return Err("redis-server not found (the bench starts a private one)".into());
    };
    let dir = temp_dir(private, "redis", tag)?;
    let addr = format!("127.0.0.1:{REDIS_PORT}");
    let args: Vec<String> = [
        "--port",
        &REDIS_PORT.to_string(),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        &dir.display().to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    spawn(private, &bin.display().to_string(), &args, &dir.join("log"))?;
    let ok = wait_for(Duration::from_secs(15), || async {
        ask(&addr, b"PING\r\nQUIT\r\n")
            .await
            .is_some_and(|r| r.contains("PONG"))
    })
    .await;
    if !ok {
        return Err(format!("the private redis-server on {addr} did not answer"));
    }
    Ok(Target {
        kind: Kind::Redis,
        url: format!("redis://{addr}/0?{key}"),
        addr: Some(addr.clone()),
        admin: None,
        counter: Ok(Counter::RedisInfo { addr }),
        note: format!("private redis-server on port {REDIS_PORT}"),
    })
}

async fn zookeeper(private: &mut Private, tools: &Tools, tag: &str) -> Result<Target, String> {
    let script = tools.scripts_dir.join("zookeeper-server.sh");
    if !script.is_file() {
        return Err(format!("{} not found", script.display()));
    }
    let dir = temp_dir(private, "zk", tag)?;
    let addr = format!("127.0.0.1:{ZK_PORT}");
    let args = vec![
        script.display().to_string(),
        ZK_PORT.to_string(),
        dir.display().to_string(),
        "4lw.commands.whitelist=*".into(),
        "forceSync=yes".into(),
    ];
    spawn(private, "bash", &args, &dir.join("log"))?;
    let ok = wait_for(Duration::from_secs(60), || async {
        if !ask(&addr, b"ruok")
            .await
            .is_some_and(|r| r.contains("imok"))
        {
            return false;
        }
        // `imok` comes before the server accepts sessions: ready once a
        // client session opens.
        #[cfg(feature = "zookeeper")]
        {
            let connect = zookeeper_client::Client::connect(&addr);
            matches!(
                tokio::time::timeout(Duration::from_secs(5), connect).await,
                Ok(Ok(_))
            )
        }
        #[cfg(not(feature = "zookeeper"))]
        true
    })
    .await;
    if !ok {
        let log = std::fs::read_to_string(dir.join("log")).unwrap_or_default();
        return Err(format!(
            "the private ZooKeeper on {addr} did not open a session: {}",
            log.lines().last().unwrap_or("")
        ));
    }
    Ok(Target {
        kind: Kind::Zookeeper,
        url: format!("zk://{addr}/simba-bench-{tag}"),
        addr: Some(addr.clone()),
        admin: None,
        counter: Ok(Counter::ZkMntr { addr }),
        note: format!(
            "private ZooKeeper on port {ZK_PORT} (scripts/zookeeper-server.sh: tickTime 200 ms, forceSync=yes)"
        ),
    })
}

async fn etcd(private: &mut Private, tag: &str) -> Result<Target, String> {
    let Some(bin) = crate::which("etcd") else {
        return Err("etcd not found (the bench starts a private one)".into());
    };
    let dir = temp_dir(private, "etcd", tag)?;
    let addr = format!("127.0.0.1:{ETCD_PORT}");
    let client = format!("http://{addr}");
    let peer = format!("http://127.0.0.1:{ETCD_PEER_PORT}");
    let args: Vec<String> = vec![
        "--name".into(),
        "simba-bench".into(),
        "--data-dir".into(),
        dir.join("data").display().to_string(),
        "--listen-client-urls".into(),
        client.clone(),
        "--advertise-client-urls".into(),
        client.clone(),
        "--listen-peer-urls".into(),
        peer.clone(),
        "--initial-advertise-peer-urls".into(),
        peer.clone(),
        "--initial-cluster".into(),
        format!("simba-bench={peer}"),
        "--initial-cluster-state".into(),
        "new".into(),
    ];
    spawn(private, &bin.display().to_string(), &args, &dir.join("log"))?;
    let req = format!("GET /health HTTP/1.0\r\nHost: {addr}\r\n\r\n");
    let ok = wait_for(Duration::from_secs(30), || async {
        ask(&addr, req.as_bytes())
            .await
            .is_some_and(|r| r.contains("\"health\":\"true\""))
    })
    .await;
    if !ok {
        return Err(format!("the private etcd on {addr} did not become healthy"));
    }
    Ok(Target {
        kind: Kind::Etcd,
        url: format!("etcd://{addr}/simba-bench/{tag}"),
        addr: Some(addr.clone()),
        admin: None,
        counter: Ok(Counter::EtcdMetrics { addr }),
        note: format!("private etcd on port {ETCD_PORT}"),
    })
}
