//! Backend calls counted on the server: each counter reads one number that
//! grows by one per call (or per statement, message, packet: the unit says).

use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Where a backend's calls are counted.
#[derive(Clone, Debug)]
pub enum Counter {
    /// `pg_stat_database.xact_commit + xact_rollback` of the bench's own
    /// database, read from another database through `admin`.
    PgDatabase {
        /// An administrator URL on another database.
        admin: String,
        /// The bench's database.
        db: String,
    },
    /// `information_schema.USER_STATISTICS` (MariaDB `userstat`) of the
    /// bench's own user: its committed and rolled-back transactions (an
    /// autocommit statement is one), as PostgreSQL's `xact_commit` counts.
    MysqlUser {
        /// An administrator URL (another user).
        admin: String,
        /// The bench's user.
        user: String,
    },
    /// InnoDB's own transaction counters, `information_schema.INNODB_METRICS`
    /// `trx_rw_commits + trx_rollbacks` (the `trx_%` monitors, which the
    /// bench turns on): read-write transactions committed or rolled back.
    /// Global to the server (every client counts): meaningful while the bench
    /// is the server's only writer.
    MysqlInnodbTrx {
        /// An administrator URL.
        admin: String,
    },
    /// `SHOW GLOBAL STATUS` `Questions`: every client of the server counts.
    MysqlGlobal {
        /// An administrator URL.
        admin: String,
    },
    /// Redis `INFO commandstats`: the commands clients send (script calls
    /// and connection commands), not those a script runs inside the server
    /// (`commandstats` counts those too).
    RedisInfo {
        /// host:port of a server only this run uses.
        addr: String,
    },
    /// ZooKeeper `mntr` `zk_packets_received`.
    ZkMntr {
        /// host:port of a server only this run uses.
        addr: String,
    },
    /// etcd `/metrics`: the sum of `grpc_server_msg_received_total`.
    EtcdMetrics {
        /// host:port of a server only this run uses.
        addr: String,
    },
}

impl Counter {
    /// What one count is.
    pub fn unit(&self) -> &'static str {
        match self {
            Counter::PgDatabase { .. } => {
                "transactions (pg_stat_database.xact_commit of the bench's database)"
            }
            Counter::MysqlUser { .. } => {
                "transactions (USER_STATISTICS commits + rollbacks of the bench's user)"
            }
            Counter::MysqlInnodbTrx { .. } => {
                "InnoDB read-write transactions (INNODB_METRICS trx_rw_commits + trx_rollbacks, global: other writers included)"
            }
            Counter::MysqlGlobal { .. } => "statements (global Questions: other clients included)",
            Counter::RedisInfo { .. } => {
                "commands sent (INFO commandstats: script calls and connection commands, private server)"
            }
            Counter::ZkMntr { .. } => "packets (mntr zk_packets_received, private server)",
            Counter::EtcdMetrics { .. } => {
                "gRPC messages (grpc_server_msg_received_total, private server)"
            }
        }
    }

    /// The unit, short.
    pub fn short(&self) -> &'static str {
        match self {
            Counter::PgDatabase { .. } => "transactions/min",
            Counter::MysqlUser { .. } => "transactions/min",
            Counter::MysqlInnodbTrx { .. } => "InnoDB rw transactions/min (global)",
            Counter::MysqlGlobal { .. } => "statements/min (global)",
            Counter::RedisInfo { .. } => "commands/min",
            Counter::ZkMntr { .. } => "packets/min",
            Counter::EtcdMetrics { .. } => "gRPC messages/min",
        }
    }

    /// A second counter shown beside this one: on MariaDB/MySQL, InnoDB's
    /// own transaction count, since `USER_STATISTICS` counts one per
    /// statement inside an explicit transaction and `Questions` statements.
    pub fn companion(&self) -> Option<Counter> {
        match self {
            Counter::MysqlUser { admin, .. } | Counter::MysqlGlobal { admin } => {
                Some(Counter::MysqlInnodbTrx {
                    admin: admin.clone(),
                })
            }
            _ => None,
        }
    }

    /// The counter's current value.
    ///
    /// # Errors
    /// A description of what failed.
    pub async fn read(&self) -> Result<f64, String> {
        match self {
            #[cfg(feature = "postgres")]
            Counter::PgDatabase { admin, db } => {
                use sqlx::Connection;
                let mut c = sqlx::PgConnection::connect(admin)
                    .await
                    .map_err(|e| e.to_string())?;
                let v: i64 = sqlx::query_scalar(
                    "SELECT (xact_commit + xact_rollback)::bigint FROM pg_stat_database WHERE datname = $1",
                )
                .bind(db)
                .fetch_one(&mut c)
                .await
                .map_err(|e| e.to_string())?;
                let _ = c.close().await;
                Ok(v as f64)
            }
            #[cfg(feature = "mysql")]
            Counter::MysqlUser { admin, user } => {
                use sqlx::Connection;
                let mut c = sqlx::MySqlConnection::connect(admin)
                    .await
                    .map_err(|e| e.to_string())?;
                let v: Option<i64> = sqlx::query_scalar(
                    "SELECT CAST(SUM(COMMIT_TRANSACTIONS + ROLLBACK_TRANSACTIONS) AS SIGNED) \
                     FROM information_schema.USER_STATISTICS WHERE USER = ?",
                )
                .bind(user)
                .fetch_one(&mut c)
                .await
                .map_err(|e| e.to_string())?;
                let _ = c.close().await;
                Ok(v.unwrap_or(0) as f64)
            }
            #[cfg(feature = "mysql")]
            Counter::MysqlInnodbTrx { admin } => {
                use sqlx::Connection;
                let mut c = sqlx::MySqlConnection::connect(admin)
                    .await
                    .map_err(|e| e.to_string())?;
                let rows: Vec<(String, i64, i64)> = sqlx::query_as(
                    "SELECT CAST(NAME AS CHAR), CAST(COUNT AS SIGNED), CAST(ENABLED AS SIGNED) \
                     FROM information_schema.INNODB_METRICS \
                     WHERE NAME IN ('trx_rw_commits', 'trx_rollbacks')",
                )
                .fetch_all(&mut c)
                .await
                .map_err(|e| e.to_string())?;
                let _ = c.close().await;
                if rows.len() != 2 || rows.iter().any(|r| r.2 != 1) {
                    return Err(format!(
                        "InnoDB's trx_% monitors are off (SET GLOBAL innodb_monitor_enable = 'trx_%'): {rows:?}"
                    ));
                }
                Ok(rows.iter().map(|r| r.1 as f64).sum())
            }
            #[cfg(feature = "mysql")]
            Counter::MysqlGlobal { admin } => {
                use sqlx::{Connection, Row};
                let mut c = sqlx::MySqlConnection::connect(admin)
                    .await
                    .map_err(|e| e.to_string())?;
                let row = sqlx::query("SHOW GLOBAL STATUS LIKE 'Questions'")
                    .fetch_one(&mut c)
                    .await
                    .map_err(|e| e.to_string())?;
                let v: String = row.try_get(1).map_err(|e| e.to_string())?;
                let _ = c.close().await;
                v.parse().map_err(|_| format!("bad Questions value {v:?}"))
            }
            Counter::RedisInfo { addr } => {
                let text = exchange(addr, b"INFO commandstats\r\nQUIT\r\n").await?;
                Ok(redis_calls(&text))
            }
            Counter::ZkMntr { addr } => {
                let text = exchange(addr, b"mntr").await?;
                text.lines()
                    .find_map(|l| l.strip_prefix("zk_packets_received"))
                    .and_then(|v| v.trim().parse().ok())
                    .ok_or_else(|| format!("no zk_packets_received in mntr: {text:.200}"))
            }
            Counter::EtcdMetrics { addr } => {
                let req = format!("GET /metrics HTTP/1.0\r\nHost: {addr}\r\n\r\n");
                let text = exchange(addr, req.as_bytes()).await?;
                Ok(etcd_messages(&text))
            }
            #[allow(unreachable_patterns)]
            _ => Err("the backend's feature is not built in".into()),
        }
    }
}

/// Sends `request` to `addr` and reads until the server closes.
async fn exchange(addr: &str, request: &[u8]) -> Result<String, String> {
    let run = async {
        let mut s = tokio::net::TcpStream::connect(addr).await?;
        s.write_all(request).await?;
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).await?;
        Ok::<_, std::io::Error>(String::from_utf8_lossy(&buf).into_owned())
    };
    match tokio::time::timeout(Duration::from_secs(10), run).await {
        Ok(r) => r.map_err(|e| format!("{addr}: {e}")),
        Err(_) => Err(format!("{addr}: no answer in 10 s")),
    }
}

/// Commands a client sends itself; every other command in `commandstats`
/// is one a script ran inside the server (Simba's scripts call `GET`, `SET`,
/// `PEXPIRE`, `PUBLISH`, …), which `commandstats` counts as well.
const REDIS_CLIENT_COMMANDS: &[&str] = &[
    "evalsha",
    "eval",
    "evalsha_ro",
    "eval_ro",
    "fcall",
    "fcall_ro",
    "script",
    "ping",
    "client",
    "hello",
    "auth",
    "select",
    "subscribe",
    "psubscribe",
    "ssubscribe",
    "unsubscribe",
];

/// The sum of `calls=` of the `cmdstat_` lines of commands clients send
/// ([`REDIS_CLIENT_COMMANDS`], subcommands such as `client|setname`
/// included), `INFO` itself excluded.
pub fn redis_calls(info: &str) -> f64 {
    info.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("cmdstat_")?;
            let command = rest.split([':', '|']).next()?;
            REDIS_CLIENT_COMMANDS.contains(&command).then_some(l)
        })
        .filter_map(|l| {
            let calls = l.split(':').nth(1)?.split(',').next()?;
            calls.strip_prefix("calls=")?.parse::<f64>().ok()
        })
        .sum()
}

/// The sum of every `grpc_server_msg_received_total` sample.
pub fn etcd_messages(metrics: &str) -> f64 {
    metrics
        .lines()
        .filter(|l| l.starts_with("grpc_server_msg_received_total"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_commandstats_without_info() {
        let info = "# Commandstats\r\ncmdstat_evalsha:calls=10,usec=5,usec_per_call=0.5\r\n\
                    cmdstat_info:calls=7,usec=1\r\ncmdstat_ping:calls=2,usec=1\r\n\
                    cmdstat_client|setname:calls=1,usec=1\r\n\
                    cmdstat_pexpire:calls=40,usec=9\r\ncmdstat_get:calls=30,usec=3\r\n";
        // The script-internal PEXPIRE and GET are not calls of a client.
        assert_eq!(redis_calls(info), 13.0);
    }

    #[test]
    fn etcd_received_messages() {
        let m = "# HELP x\ngrpc_server_msg_received_total{grpc_method=\"Range\"} 5\n\
                 grpc_server_msg_received_total{grpc_method=\"LeaseKeepAlive\"} 1e+01\n\
                 grpc_server_msg_sent_total{grpc_method=\"Range\"} 5\n";
        assert_eq!(etcd_messages(m), 15.0);
    }
}
