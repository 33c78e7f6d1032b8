//! PostgreSQL host lists (`postgres://h1,h2/db?target_session_attrs=…`,
//! docs/BACKENDS.md, "Host lists and fail-over"): the backend starts on the
//! first usable host and, when its server goes away, moves to the next one,
//! its release listener too. The "first host" is a TCP proxy to the test
//! server that the test kills; the second is the test server itself. What a
//! fail-over to a promoted standby does to terms and fenced writes is the
//! replicated chaos run's (scripts/replicated/run.sh).
#![cfg(feature = "postgres")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::*;
use futures::StreamExt;
use simba_backends::postgres::PgBackend;
use simba_backends::Backend;
use simba_core::{AcquireOutcome, BackendErrorKind, LeaseName, RenewError};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::AbortHandle;

/// A TCP proxy to the test server on 127.0.0.1:5432 that can be killed
/// (its listener and every connection through it closed).
struct Proxy {
    port: u16,
    tasks: Arc<Mutex<Vec<AbortHandle>>>,
}

impl Proxy {
    async fn start() -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let tasks: Arc<Mutex<Vec<AbortHandle>>> = Arc::default();
        let t = Arc::clone(&tasks);
        let accept = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let conn = tokio::spawn(async move {
                    if let Ok(mut out) = TcpStream::connect("127.0.0.1:5432").await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut out).await;
                    }
                });
                t.lock().unwrap().push(conn.abort_handle());
            }
        });
        tasks.lock().unwrap().push(accept.abort_handle());
        Proxy { port, tasks }
    }

    fn kill(&self) {
        for t in self.tasks.lock().unwrap().drain(..) {
            t.abort();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_list_moves_to_the_next_host_when_its_server_goes() {
    if !pg_available().await {
        return;
    }
    let tag = tag();
    let proxy = Proxy::start().await;
    let url = format!(
        "postgres://postgres@127.0.0.1:{},127.0.0.1:5432/test\
         ?target_session_attrs=read-write&simba_table_prefix={tag}_",
        proxy.port
    );
    let b = PgBackend::connect_url(&url).await.unwrap();
    assert_eq!(
        b.current_host(),
        Some((format!("127.0.0.1:{}", proxy.port), 0)),
        "the first host of the list that accepts"
    );
    let mut releases = b.subscribe_releases().await.unwrap().unwrap();
    let s = session(&b, Duration::from_secs(60)).await;
    let name = LeaseName::new("hostlist").unwrap();

    proxy.kill();
    // The call on the broken connection fails as a lost server
    // (`Unavailable`); the next one finds the second host.
    let mut failed = 0;
    loop {
        match b.renew(s).await {
            Ok(_) => break,
            Err(RenewError::Backend(e)) => {
                assert_eq!(e.kind, BackendErrorKind::Unavailable, "{e}");
                failed += 1;
                assert!(failed < 5, "still failing: {e}");
            }
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(
        b.current_host(),
        Some(("127.0.0.1:5432".to_owned(), 1)),
        "moved to the second host after {failed} failed call(s)"
    );

    // The release listener followed: a release made now is heard (the
    // listener may still be reconnecting, so release until one arrives).
    let heard = async {
        loop {
            let token = match b.acquire(s, &name).await.unwrap() {
                AcquireOutcome::Won { token, .. } => token,
                other => panic!("{other:?}"),
            };
            b.release(s, &name, token).await.unwrap();
            if let Ok(Some(n)) =
                tokio::time::timeout(Duration::from_millis(500), releases.next()).await
            {
                break n;
            }
        }
    };
    let n = tokio::time::timeout(Duration::from_secs(30), heard)
        .await
        .expect("no release heard from the second host within 30 s");
    assert_eq!(n, name);
    b.close_session(s).await.unwrap();
    drop(b);
    drop_pg_tables(&tag).await;
}

#[tokio::test]
async fn a_host_list_with_no_usable_host_is_unavailable_naming_each() {
    let c = simba_backends::BackendConfig::parse(
        "postgres://u:s3cret@127.0.0.1:1,127.0.0.1:2/db?target_session_attrs=primary",
    )
    .unwrap()
    .with_connect_timeout(Duration::from_secs(2));
    let e = c.connect().await.err().unwrap();
    assert_eq!(e.kind, BackendErrorKind::Unavailable, "{e}");
    let text = e.to_string();
    assert!(
        text.contains("127.0.0.1:1") && text.contains("127.0.0.1:2"),
        "{e}"
    );
    assert!(!text.contains("s3cret"), "{e}");
}
