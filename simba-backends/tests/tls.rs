//! TLS for every backend with a server: `sslmode` (PostgreSQL) and
//! `ssl-mode` (MySQL/MariaDB) are honoured, `rediss://`, `zks://` and
//! `etcds://` trust the CA they are given, a certificate the settings do
//! not trust is a typed `Rejected` error (never retried as if the server
//! were down), and credentials stay redacted.
//!
//! The servers are private instances started by `scripts/servers.d/tls.sh`
//! (part of the README's test command): PostgreSQL on 127.0.0.1:5433,
//! MariaDB on 127.0.0.1:3307, Redis on 127.0.0.1:6380 (ACL user
//! `simba`, password `s3cret`; the default user off), ZooKeeper on
//! 127.0.0.1:2282 (`secureClientPort` only) and etcd on 127.0.0.1:2389
//! (https only), all refusing plain text, with a certificate
//! for `localhost` and 127.0.0.1 signed by the test CA in
//! `/var/tmp/simba-test-tls/ca.pem`. Since those servers refuse plain
//! text, every successful call below went over TLS. Required when
//! `CI=true`, unless `SIMBA_TEST_SKIP_SERVERS` lists `tls` (or the
//! backend's own kind, which keeps `scripts/servers.d/tls.sh` from starting
//! its TLS instance).
#![cfg(any(
    feature = "postgres",
    feature = "mysql",
    feature = "redis-tls",
    feature = "zookeeper-tls",
    feature = "etcd"
))]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::*;
use simba_backends::{Backend, BackendConfig};
use simba_core::{AcquireOutcome, BackendError, BackendErrorKind, LeaseName};
use std::time::Duration;

const DIR: &str = "/var/tmp/simba-test-tls";

/// The TLS-only server on `port` (and the test CA) exist. When the run
/// skips `backend` (`postgres`, `zookeeper`, …), tls.sh did not start its
/// TLS instance either, so its absence is a skip.
fn tls_server(what: &str, port: u16, backend: &str) -> bool {
    let probe = match std::net::TcpStream::connect_timeout(
        &std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        Duration::from_secs(2),
    ) {
        Ok(_) if std::path::Path::new(&format!("{DIR}/ca.pem")).exists() => Ok(()),
        Ok(_) => Err(BackendError::new(
            BackendErrorKind::Unavailable,
            format!("{DIR}/ca.pem is missing (scripts/servers.d/tls.sh makes it)"),
        )),
        Err(e) => Err(BackendError::new(
            BackendErrorKind::Unavailable,
            format!("nothing listens on 127.0.0.1:{port}: {e}"),
        )),
    };
    match probe {
        Err(e) if simba_backends::test_servers::server_skipped(backend) => {
            let thread = std::thread::current();
            let test = thread.name().unwrap_or("a test");
            simba_backends::test_servers::missing_server(backend, what, test, &e);
            false
        }
        probe => server_available(what, probe),
    }
}

/// Opens a session, renews it, wins a name, releases it: the backend works
/// end to end.
async fn works(b: &dyn Backend) {
    let s = session(b, Duration::from_secs(10)).await;
    let renewal = b.renew(s).await.unwrap();
    assert!(renewal.remaining > Duration::ZERO, "{renewal:?}");
    let name = LeaseName::new("tls.job").unwrap();
    let AcquireOutcome::Won { token, .. } = b.acquire(s, &name).await.unwrap() else {
        panic!("a free name was not won")
    };
    let renewal = b.renew(s).await.unwrap();
    assert_eq!(renewal.owned, [(name.clone(), token)]);
    b.release(s, &name, token).await.unwrap();
    assert!(b.renew(s).await.unwrap().owned.is_empty());
    b.close_session(s).await.unwrap();
}

fn with_prefix(url: &str, tag: &str) -> String {
    format!("{url}&simba_table_prefix={tag}_")
}

/// A refused connection: `Rejected`, and the password never shown.
fn assert_refused(e: &BackendError, why: &str) {
    assert_eq!(e.kind, BackendErrorKind::Rejected, "{why}: {e}");
    assert!(!e.to_string().contains("hunter2"), "{why}: {e}");
}

/// A connection attempt that must be refused ([`assert_refused`]): its error.
fn refused<B: std::fmt::Debug>(attempt: Result<B, BackendError>, why: &str) -> BackendError {
    let e = attempt.unwrap_err();
    assert_refused(&e, why);
    e
}

#[cfg(feature = "postgres")]
mod postgres {
    use super::*;
    use simba_backends::postgres::PgBackend;

    const WHAT: &str = "PostgreSQL with TLS at 127.0.0.1:5433";

    async fn connect(url: &str) -> Result<PgBackend, BackendError> {
        PgBackend::connect(&BackendConfig::parse(url)?).await
    }

    #[tokio::test]
    async fn verify_full_against_the_test_ca_by_name_and_by_address() {
        if !tls_server(WHAT, 5433, "postgres") {
            return;
        }
        let tag = tag();
        for host in ["localhost", "127.0.0.1"] {
            let url = with_prefix(
                &format!(
                    "postgres://postgres:hunter2@{host}:5433/postgres\
                     ?sslmode=verify-full&sslrootcert={DIR}/ca.pem"
                ),
                &tag,
            );
            let b = connect(&url).await.unwrap();
            assert!(b.uses_tls().await.unwrap(), "{host}");
            works(&b).await;
        }
        drop_pg_tables(&tag).await;
    }

    #[tokio::test]
    async fn require_encrypts_without_checking_the_certificate() {
        if !tls_server(WHAT, 5433, "postgres") {
            return;
        }
        let tag = tag();
        let url = with_prefix(
            "postgres://postgres@127.0.0.1:5433/postgres?sslmode=require",
            &tag,
        );
        let b = connect(&url).await.unwrap();
        assert!(b.uses_tls().await.unwrap());
        works(&b).await;
        drop_pg_tables(&tag).await;
    }

    #[tokio::test]
    async fn an_untrusted_certificate_and_plain_text_are_refused() {
        if !tls_server(WHAT, 5433, "postgres") {
            return;
        }
        // Signed by a CA the settings do not name.
        refused(
            connect(&format!(
                "postgres://postgres:hunter2@localhost:5433/postgres\
             ?sslmode=verify-full&sslrootcert={DIR}/other-ca.pem"
            ))
            .await,
            "untrusted CA",
        );
        // The right CA but the wrong name: the certificate is for
        // localhost and 127.0.0.1 only.
        let e = connect(&format!(
            "postgres://postgres:hunter2@127.0.0.2:5433/postgres\
             ?sslmode=verify-full&sslrootcert={DIR}/ca.pem"
        ))
        .await;
        if let Err(e) = e {
            // 127.0.0.2 may not reach the server at all on some hosts;
            // either way it must not connect.
            assert!(
                matches!(
                    e.kind,
                    BackendErrorKind::Rejected | BackendErrorKind::Unavailable
                ),
                "{e}"
            );
            assert!(!e.to_string().contains("hunter2"), "{e}");
        } else {
            panic!("a certificate for another name was accepted");
        }
        // Plain text is refused by this server: so the successes above
        // were encrypted.
        let e = connect("postgres://postgres:hunter2@127.0.0.1:5433/postgres?sslmode=disable")
            .await
            .unwrap_err();
        assert!(!e.to_string().contains("hunter2"), "{e}");
    }

    /// The shared test server has SSL on: the default mode (`prefer`)
    /// encrypts there.
    #[tokio::test]
    async fn the_default_mode_prefers_tls() {
        if !pg_available().await {
            return;
        }
        let tag = tag();
        let b = connect(&with_prefix(
            &format!("{PG_URL}?application_name=simba-tls"),
            &tag,
        ))
        .await
        .unwrap();
        assert!(b.uses_tls().await.unwrap());
        let url = format!("{PG_URL}?sslmode=disable&simba_table_prefix={tag}_");
        let plain = connect(&url).await.unwrap();
        assert!(!plain.uses_tls().await.unwrap());
        drop(plain);
        let admin = sqlx::PgPool::connect(PG_URL).await.unwrap();
        for t in ["sessions", "leases", "members", "slots"] {
            sqlx::query(&format!("DROP TABLE IF EXISTS {tag}_{t}"))
                .execute(&admin)
                .await
                .unwrap();
        }
    }

    async fn drop_pg_tables(tag: &str) {
        let url = "postgres://postgres@127.0.0.1:5433/postgres?sslmode=require";
        let admin = sqlx::PgPool::connect(url).await.unwrap();
        for t in ["sessions", "leases", "members", "slots"] {
            sqlx::query(&format!("DROP TABLE IF EXISTS {tag}_{t}"))
                .execute(&admin)
                .await
                .unwrap();
        }
    }
}

#[cfg(feature = "mysql")]
mod mysql {
    use super::*;
    use simba_backends::mysql::MysqlBackend;

    const WHAT: &str = "MariaDB with TLS at 127.0.0.1:3307";

    async fn connect(url: &str) -> Result<MysqlBackend, BackendError> {
        MysqlBackend::connect(&BackendConfig::parse(url)?).await
    }

    #[tokio::test]
    async fn verify_identity_against_the_test_ca() {
        if !tls_server(WHAT, 3307, "mysql") {
            return;
        }
        let tag = tag();
        for (host, mode) in [("localhost", "VERIFY_IDENTITY"), ("127.0.0.1", "VERIFY_CA")] {
            let url = with_prefix(
                &format!("mysql://root@{host}:3307/test?ssl-mode={mode}&ssl-ca={DIR}/ca.pem"),
                &tag,
            );
            let b = connect(&url).await.unwrap();
            assert!(b.uses_tls().await.unwrap(), "{host}");
            works(&b).await;
        }
        let url = with_prefix("mysql://root@127.0.0.1:3307/test?ssl-mode=REQUIRED", &tag);
        let b = connect(&url).await.unwrap();
        assert!(b.uses_tls().await.unwrap());
        drop_mysql_tables("mysql://root@127.0.0.1:3307/test?ssl-mode=REQUIRED", &tag).await;
    }

    #[tokio::test]
    async fn an_untrusted_certificate_and_plain_text_are_refused() {
        if !tls_server(WHAT, 3307, "mysql") {
            return;
        }
        refused(connect(&format!(
            "mysql://root:hunter2@localhost:3307/test?ssl-mode=VERIFY_IDENTITY&ssl-ca={DIR}/other-ca.pem"
        )).await, "untrusted CA");
        let e = connect("mysql://root:hunter2@127.0.0.1:3307/test?ssl-mode=DISABLED")
            .await
            .unwrap_err();
        assert!(!e.to_string().contains("hunter2"), "{e}");
    }

    /// The shared test server has no TLS: the default mode falls back to
    /// plain text (logged), and `REQUIRED` refuses it with a typed error.
    #[tokio::test]
    async fn the_default_mode_falls_back_and_required_refuses() {
        if !mysql_available().await {
            return;
        }
        let tag = tag();
        let b = connect(&with_prefix(
            &format!("{MYSQL_URL}?ssl-mode=PREFERRED"),
            &tag,
        ))
        .await
        .unwrap();
        let tls = b.uses_tls().await.unwrap();
        drop(b);
        if !tls {
            refused(connect(&format!(
                "mysql://root:hunter2@127.0.0.1:3306/test?ssl-mode=REQUIRED&simba_table_prefix={tag}_"
            )).await, "REQUIRED on a server without TLS");
        }
        drop_mysql_tables(MYSQL_URL, &tag).await;
    }

    async fn drop_mysql_tables(url: &str, tag: &str) {
        let admin = sqlx::MySqlPool::connect(url).await.unwrap();
        for t in ["sessions", "leases", "members", "slots"] {
            sqlx::query(&format!("DROP TABLE IF EXISTS {tag}_{t}"))
                .execute(&admin)
                .await
                .unwrap();
        }
    }
}

#[cfg(feature = "redis-tls")]
mod redis {
    use super::*;
    use simba_backends::redis::RedisBackend;

    const WHAT: &str = "Redis with TLS at 127.0.0.1:6380";

    async fn connect(url: &str) -> Result<RedisBackend, BackendError> {
        RedisBackend::connect(&BackendConfig::parse(url)?).await
    }

    #[tokio::test]
    async fn rediss_with_the_test_ca_and_an_acl_user() {
        if !tls_server(WHAT, 6380, "redis") {
            return;
        }
        for host in ["localhost", "127.0.0.1"] {
            let b = connect(&format!(
                "rediss://simba:s3cret@{host}:6380/0?simba_tls_ca={DIR}/ca.pem&simba_key_prefix={}",
                tag()
            ))
            .await
            .unwrap();
            works(&b).await;
        }
    }

    #[tokio::test]
    async fn an_untrusted_certificate_a_wrong_password_and_plain_text_are_refused() {
        if !tls_server(WHAT, 6380, "redis") {
            return;
        }
        refused(
            connect(&format!(
                "rediss://simba:hunter2@localhost:6380/0?simba_tls_ca={DIR}/other-ca.pem"
            ))
            .await,
            "untrusted CA",
        );
        refused(
            connect(&format!(
                "rediss://simba:hunter2@localhost:6380/0?simba_tls_ca={DIR}/ca.pem"
            ))
            .await,
            "wrong password",
        );
        refused(
            connect(&format!(
                "rediss://simba:hunter2@localhost:6380/0?simba_tls_ca={DIR}/no-such-ca.pem"
            ))
            .await,
            "missing CA file",
        );
        // Plain text to the TLS port never gets an answer.
        let e = connect("redis://simba:hunter2@127.0.0.1:6380/0")
            .await
            .unwrap_err();
        assert!(!e.to_string().contains("hunter2"), "{e}");
    }
}

#[cfg(feature = "zookeeper-tls")]
mod zookeeper {
    use super::*;
    use simba_backends::zookeeper::ZkBackend;

    const WHAT: &str = "ZooKeeper with TLS at 127.0.0.1:2282";

    async fn connect(url: &str) -> Result<ZkBackend, BackendError> {
        let config = BackendConfig::parse(url)?.with_connect_timeout(Duration::from_secs(3));
        ZkBackend::connect(&config).await
    }

    /// `zks://` with the test CA, by name and by address, with digest
    /// credentials that never show.
    #[tokio::test]
    async fn zks_with_the_test_ca_works_end_to_end_and_hides_the_password() {
        if !tls_server(WHAT, 2282, "zookeeper") {
            return;
        }
        for host in ["localhost", "127.0.0.1"] {
            let b = connect(&format!(
                "zks://simba:hunter2@{host}:2282/simba-tls-{}?simba_tls_ca={DIR}/ca.pem",
                tag()
            ))
            .await
            .unwrap();
            let debug = format!("{b:?}");
            assert!(!debug.contains("hunter2"), "{debug}");
            assert!(debug.contains("tls: true"), "{debug}");
            works(&b).await;
            b.remove_tree().await.unwrap();
        }
        // Through the generic entry point too.
        let url = format!(
            "zks://localhost:2282/simba-tls-{}?simba_tls_ca={DIR}/ca.pem",
            tag()
        );
        let b = BackendConfig::parse(&url).unwrap().connect().await.unwrap();
        works(b.as_ref()).await;
    }

    #[tokio::test]
    async fn an_untrusted_certificate_a_missing_ca_and_plain_text_are_refused() {
        if !tls_server(WHAT, 2282, "zookeeper") {
            return;
        }
        // Signed by a CA the settings do not name: Rejected, not a server
        // that is down.
        let e = refused(
            connect(&format!(
                "zks://simba:hunter2@localhost:2282/simba-tls?simba_tls_ca={DIR}/other-ca.pem"
            ))
            .await,
            "untrusted CA",
        );
        assert!(e.to_string().contains("UnknownIssuer"), "{e}");
        refused(
            connect(&format!(
                "zks://simba:hunter2@localhost:2282/simba-tls?simba_tls_ca={DIR}/no-such-ca.pem"
            ))
            .await,
            "missing CA file",
        );
        // A CA file names a zks:// URL only.
        refused(
            connect(&format!(
                "zk://simba:hunter2@localhost:2282/simba-tls?simba_tls_ca={DIR}/ca.pem"
            ))
            .await,
            "CA file on zk://",
        );
        // Plain text to the TLS port never opens a session.
        let e = connect("zk://simba:hunter2@127.0.0.1:2282/simba-tls")
            .await
            .unwrap_err();
        assert!(!e.to_string().contains("hunter2"), "{e}");
        assert_ne!(e.kind, BackendErrorKind::Rejected, "{e}");
    }
}

#[cfg(feature = "etcd")]
mod etcd {
    use super::*;
    use simba_backends::etcd::EtcdBackend;

    const WHAT: &str = "etcd with TLS at 127.0.0.1:2389";

    async fn connect(url: &str) -> Result<EtcdBackend, BackendError> {
        let config = BackendConfig::parse(url)?.with_connect_timeout(Duration::from_secs(3));
        EtcdBackend::connect(&config).await
    }

    /// `etcds://` with the test CA, by name and by address.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn etcds_with_the_test_ca_works_end_to_end() {
        if !tls_server(WHAT, 2389, "etcd") {
            return;
        }
        for host in ["localhost", "127.0.0.1"] {
            let b = connect(&format!(
                "etcds://{host}:2389/simba-tls-{}?cacert={DIR}/ca.pem",
                tag()
            ))
            .await
            .unwrap();
            works(&b).await;
            b.delete_all().await.unwrap();
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_untrusted_certificate_a_missing_ca_and_plain_text_are_refused() {
        if !tls_server(WHAT, 2389, "etcd") {
            return;
        }
        // The server runs without authentication, so credentials are never
        // checked; they must still never show.
        refused(
            connect(&format!(
                "etcds://simba:hunter2@localhost:2389/simba-tls?cacert={DIR}/other-ca.pem"
            ))
            .await,
            "untrusted CA",
        );
        refused(
            connect(&format!(
                "etcds://simba:hunter2@localhost:2389/simba-tls?cacert={DIR}/no-such-ca.pem"
            ))
            .await,
            "missing CA file",
        );
        // Plain text to the TLS port never gets an answer.
        let e = connect("etcd://simba:hunter2@127.0.0.1:2389/simba-tls")
            .await
            .unwrap_err();
        assert!(!e.to_string().contains("hunter2"), "{e}");
    }
}
