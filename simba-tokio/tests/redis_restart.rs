//! Through the client (S1.2): a private Redis without persistence restarts
//! while a term is held. The term ends (`SessionExpired` or
//! `DeadlinePassed`), nothing panics, the client opens a new session and wins
//! a new term whose token is higher (S3.2). Port 6394, started and killed by
//! the test; without `redis-server` it fails, unless `SIMBA_TEST_SKIP_SERVERS`
//! lists `redis`.
#![cfg(feature = "redis")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use simba_backends::redis::RedisBackend;
use simba_backends::BackendConfig;
use simba_tokio::{RevokeReason, SimbaConfig};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

struct PrivateRedis {
    port: u16,
    dir: std::path::PathBuf,
    child: Option<Child>,
}

impl PrivateRedis {
    fn spawn(&mut self) -> Result<(), String> {
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(["--daemonize", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start redis-server: {e}"))?;
        self.child = Some(child);
        for _ in 0..200 {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        Err(format!(
            "redis-server on port {} did not come up",
            self.port
        ))
    }
    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_without_persistence_ends_the_term_and_a_new_one_is_won() {
    let port = 6394;
    let dir = std::env::temp_dir().join(format!("simba-redis-client-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut server = PrivateRedis {
        port,
        dir,
        child: None,
    };
    if let Err(e) = server.spawn() {
        // A missing redis-server fails the test unless the run opted out
        // of `redis` (SIMBA_TEST_SKIP_SERVERS), not only under `CI=true`.
        simba_backends::test_servers::missing_server(
            "redis",
            "a private redis-server",
            "a_restart_without_persistence_ends_the_term_and_a_new_one_is_won",
            &e,
        );
        return;
    }
    let config = BackendConfig::parse(&format!("redis://127.0.0.1:{port}/0"))
        .unwrap()
        .with_connect_timeout(Duration::from_secs(1));
    let backend = RedisBackend::connect(&config).await.unwrap();
    let simba = simba_tokio::builder(backend)
        .config(
            SimbaConfig::builder()
                .lease_duration(Duration::from_secs(2))
                .build()
                .unwrap(),
        )
        .build()
        .unwrap();
    let lock = simba.lock("restart.leader");
    let first = lock.acquire_timeout(Duration::from_secs(20)).await.unwrap();
    let t1 = first.term().token();
    assert!(first.term().is_valid());

    // Every key is lost: the session with it.
    server.kill();
    server.spawn().unwrap();

    let reason = tokio::time::timeout(Duration::from_secs(30), first.term().revoked())
        .await
        .expect("the term outlived the restart by 30 s");
    assert!(
        matches!(
            reason,
            RevokeReason::SessionExpired | RevokeReason::DeadlinePassed
        ),
        "term ended with {reason:?}"
    );
    assert!(!first.term().is_valid());
    drop(first);

    let second = lock.acquire_timeout(Duration::from_secs(30)).await.unwrap();
    let t2 = second.term().token();
    assert!(second.term().is_valid());
    assert!(t2 > t1, "token after the restart {t2} is not above {t1}");
    second.release().await;
    simba.close().await;
}
