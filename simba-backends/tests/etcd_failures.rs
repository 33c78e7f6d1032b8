//! The etcd backend when etcd fails: restarted while a term is held,
//! unreachable at start, and the connection killed in the middle of a
//! renewal. Each test runs a private etcd (client ports 23790-23799, peer
//! ports 23800-23809, data in a temporary directory). Requires the `etcd`
//! binary when `CI=true` (`scripts/test.sh` installs it).
#![cfg(feature = "etcd")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::*;
use simba_backends::etcd::{EtcdBackend, EtcdOptions};
use simba_backends::Backend;
use simba_core::{AcquireOutcome, BackendErrorKind, LeaseName, RenewError};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A private single-member etcd; killed (and its data removed) on drop.
struct PrivateEtcd {
    child: Option<Child>,
    dir: PathBuf,
    client: u16,
    peer: u16,
}

impl PrivateEtcd {
    /// Starts one, or `None` (skip; a failure under `CI=true`) if the
    /// `etcd` binary is missing.
    fn start(client: u16, peer: u16) -> Option<PrivateEtcd> {
        let found = Command::new("etcd")
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map(|s| s.success())
            .map_err(|e| {
                simba_core::BackendError::new(BackendErrorKind::Unavailable, e.to_string())
            });
        let ok = found.and_then(|ok| {
            ok.then_some(()).ok_or_else(|| {
                simba_core::BackendError::new(
                    BackendErrorKind::Unavailable,
                    "etcd --version failed",
                )
            })
        });
        if !server_available("the etcd binary", ok) {
            return None;
        }
        let dir = std::env::temp_dir().join(format!("simba-etcd-{}-{client}", tag()));
        let mut e = PrivateEtcd {
            child: None,
            dir,
            client,
            peer,
        };
        e.spawn();
        Some(e)
    }

    fn url(&self) -> String {
        format!("etcd://127.0.0.1:{}/failures", self.client)
    }

    fn spawn(&mut self) {
        let c = format!("http://127.0.0.1:{}", self.client);
        let p = format!("http://127.0.0.1:{}", self.peer);
        let name = format!("p{}", self.client);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(std::env::temp_dir().join(format!("simba-etcd-{}.log", self.client)))
            .unwrap();
        let child = Command::new("etcd")
            .args(["--name", &name, "--data-dir"])
            .arg(&self.dir)
            .args(["--listen-client-urls", &c, "--advertise-client-urls", &c])
            .args([
                "--listen-peer-urls",
                &p,
                "--initial-advertise-peer-urls",
                &p,
            ])
            .args(["--initial-cluster", &format!("{name}={p}")])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.child = Some(child);
    }

    fn signal(&self, sig: &str) {
        if let Some(c) = &self.child {
            let _ = Command::new("kill")
                .args([sig, &c.id().to_string()])
                .status();
        }
    }

    /// SIGSTOPs etcd and waits until every one of its threads is stopped
    /// (`kill` returns once the signal is queued; on a loaded machine a
    /// running thread may still answer a request for a moment after).
    fn freeze(&self) {
        self.signal("-STOP");
        let Some(c) = &self.child else { return };
        let pid = c.id();
        let stopped = || {
            let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
                return false;
            };
            tasks.flatten().all(|t| {
                std::fs::read_to_string(t.path().join("stat")).is_ok_and(|stat| {
                    // The state follows the command name's closing parenthesis.
                    stat.rsplit_once(')')
                        .is_some_and(|(_, rest)| rest.trim_start().starts_with(['T', 't']))
                })
            })
        };
        let until = std::time::Instant::now() + Duration::from_secs(5);
        while !stopped() {
            assert!(
                std::time::Instant::now() < until,
                "etcd (pid {pid}) did not stop within 5 s of SIGSTOP"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn kill(&mut self) {
        kill_child(&mut self.child);
    }

    /// Kills it (SIGKILL, no clean shutdown) and starts it again on the
    /// same data.
    fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    /// A backend of this etcd, retrying while it starts (up to 30 s).
    async fn backend(&self) -> EtcdBackend {
        let started = Instant::now();
        loop {
            let opts = EtcdOptions::parse(&self.url())
                .unwrap()
                .with_timeout(Duration::from_secs(2));
            match EtcdBackend::connect_with(opts).await {
                Ok(b) => return b,
                Err(e) if started.elapsed() < Duration::from_secs(30) => {
                    let _ = e;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => panic!("private etcd on {} never answered: {e}", self.client),
            }
        }
    }
}

impl Drop for PrivateEtcd {
    fn drop(&mut self) {
        self.signal("-CONT");
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Retries `renew` while etcd comes back (typed errors only), up to 30 s.
async fn renew_until_ok(b: &EtcdBackend, s: simba_core::SessionId) -> simba_core::Renewal {
    let started = Instant::now();
    loop {
        match b.renew(s).await {
            Ok(r) => return r,
            Err(RenewError::Backend(e))
                if is_unreachable(e.kind) && started.elapsed() < Duration::from_secs(30) =>
            {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            other => panic!("renew after the restart gave {other:?}"),
        }
    }
}

/// The next release broadcast; fails after `limit`.
async fn next_release(
    releases: &mut futures::stream::BoxStream<'static, LeaseName>,
    limit: Duration,
) -> Option<LeaseName> {
    tokio::time::timeout(limit, futures::StreamExt::next(releases))
        .await
        .unwrap_or_else(|_| panic!("no release broadcast within {limit:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_restarted_while_a_term_is_held() {
    let Some(mut etcd) = PrivateEtcd::start(23790, 23800) else {
        return;
    };
    let b = etcd.backend().await;
    let mut releases = b.subscribe_releases().await.unwrap().unwrap();
    let s = session(&b, Duration::from_secs(20)).await;
    let o = session(&b, Duration::from_secs(20)).await;
    let n = LeaseName::new("restart.held").unwrap();
    let AcquireOutcome::Won { token, .. } = b.acquire(s, &n).await.unwrap() else {
        panic!("first acquire did not win");
    };

    etcd.restart();

    // The same client recovers: the session, its lease and its token survive.
    let r = renew_until_ok(&b, s).await;
    assert_eq!(r.owned, vec![(n.clone(), token)], "owned after restart");
    match b.acquire(o, &n).await.unwrap() {
        AcquireOutcome::Held {
            holder, token: t, ..
        } => {
            assert_eq!(holder, Some(s));
            assert_eq!(t, Some(token));
        }
        other => panic!("acquire by another session after restart: {other:?}"),
    }
    // The release broadcast resumes too (the watch reconnects).
    b.release(s, &n, token).await.unwrap();
    let got = next_release(&mut releases, Duration::from_secs(30)).await;
    assert_eq!(got, Some(n.clone()));
    let AcquireOutcome::Won { token: t2, .. } = b.acquire(o, &n).await.unwrap() else {
        panic!("acquire after the release did not win");
    };
    assert!(t2 > token, "token {t2} after restart not above {token}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_unreachable_at_start_is_a_typed_error_not_a_hang() {
    // Nothing listens on 23791.
    let started = Instant::now();
    let opts = EtcdOptions::parse("etcd://u:secret@127.0.0.1:23791/x")
        .unwrap()
        .with_timeout(Duration::from_secs(2));
    let e = EtcdBackend::connect_with(opts).await.unwrap_err();
    assert!(is_unreachable(e.kind), "{e:?}");
    assert!(!e.message.contains("secret"), "{e}");
    // A port that accepts connections but never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:23793").unwrap();
    let opts = EtcdOptions::parse("etcd://127.0.0.1:23793/x")
        .unwrap()
        .with_timeout(Duration::from_secs(2));
    let e = EtcdBackend::connect_with(opts).await.unwrap_err();
    assert!(is_unreachable(e.kind), "{e:?}");
    drop(silent);
    // Bounded by the timeouts, not by etcd: generous for a loaded machine.
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "took {:?}",
        started.elapsed()
    );
    // Through the generic entry point too.
    let e = simba_backends::connect("etcd://127.0.0.1:23791")
        .await
        .err()
        .unwrap();
    assert!(is_unreachable(e.kind), "{e:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_connection_killed_mid_renewal() {
    let Some(mut etcd) = PrivateEtcd::start(23792, 23802) else {
        return;
    };
    let b = etcd.backend().await;
    let s = session(&b, Duration::from_secs(20)).await;
    let n = LeaseName::new("killed.renewal").unwrap();
    let AcquireOutcome::Won { token, .. } = b.acquire(s, &n).await.unwrap() else {
        panic!("acquire did not win");
    };
    b.renew(s).await.unwrap(); // the keep-alive stream is open
                               // Freeze etcd so that the renewal is in flight, then kill it.
    etcd.freeze();
    let b2 = b.clone();
    let renewal = tokio::spawn(async move { b2.renew(s).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    etcd.kill();
    match renewal.await.unwrap() {
        Err(RenewError::Backend(e)) if is_unreachable(e.kind) => {}
        other => panic!("renewal on a killed connection gave {other:?}"),
    }
    etcd.spawn();
    let r = renew_until_ok(&b, s).await;
    assert_eq!(r.owned, vec![(n.clone(), token)], "nothing half-done");
    let AcquireOutcome::Won { token: again, .. } = b.acquire(s, &n).await.unwrap() else {
        panic!("re-acquire after recovery did not win");
    };
    assert_eq!(again, token);
}

/// The hand-over of the waiter queue: a waiter whose place was the only one
/// behind the holder's wins, once the watch reported the release, with no
/// call at all: its acquire answers `Won` while etcd is frozen. Its renewal
/// lists the term once etcd is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_a_woken_waiter_wins_without_a_call() {
    let Some(etcd) = PrivateEtcd::start(23796, 23806) else {
        return;
    };
    let b = etcd.backend().await;
    let mut releases = b.subscribe_releases().await.unwrap().unwrap();
    let a = session(&b, Duration::from_secs(20)).await;
    let w = session(&b, Duration::from_secs(20)).await;
    let n = LeaseName::new("handed.over").unwrap();
    let AcquireOutcome::Won { token, .. } = b.acquire(a, &n).await.unwrap() else {
        panic!("the first acquire did not win");
    };
    match b.acquire(w, &n).await.unwrap() {
        AcquireOutcome::Held { holder, .. } => assert_eq!(holder, Some(a)),
        other => panic!("the waiter's acquire gave {other:?}"),
    }
    b.release(a, &n, token).await.unwrap();
    let got = next_release(&mut releases, Duration::from_secs(10)).await;
    assert_eq!(got, Some(n.clone()));
    etcd.freeze();
    let won = tokio::time::timeout(Duration::from_millis(500), b.acquire(w, &n)).await;
    etcd.signal("-CONT");
    let Ok(Ok(AcquireOutcome::Won { token: t2, .. })) = won else {
        panic!("the woken waiter's acquire with etcd frozen gave {won:?}");
    };
    assert!(t2 > token, "the waiter's token {t2} is not above {token}");
    let r = renew_until_ok(&b, w).await;
    assert_eq!(r.owned, vec![(n.clone(), t2)], "the waiter's term");
}
