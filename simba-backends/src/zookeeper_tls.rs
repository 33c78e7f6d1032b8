//! TLS for the ZooKeeper backend (`zks://`, feature `zookeeper-tls`).
//!
//! zookeeper-client speaks TLS itself (rustls); this module gives it the
//! roots to trust (the PEM file named by `simba_tls_ca`, or the system's
//! roots) and explains a failed connection. zookeeper-client reports a
//! handshake its verifier refused as a lost connection, the same as a
//! server that is down, so after a failed connect Simba makes one TLS
//! handshake of its own with each server, with the same roots: if rustls
//! refuses it (an untrusted certificate, a certificate for another name, a
//! server that does not speak TLS as rustls expects), the error is
//! `Rejected`, a setting to fix, never retried as an outage.
//!
//! Without the feature, a `zks://` URL is refused with `Rejected`.

use simba_core::{BackendError, BackendErrorKind};
use std::time::Duration;
use zookeeper_client as zk;

const NAME: &str = "zookeeper";

fn rejected(msg: String) -> BackendError {
    BackendError::new(BackendErrorKind::Rejected, msg)
}

/// The `host:port` pairs of a ZooKeeper connect string, read as
/// zookeeper-client reads them (`[v6]:port`, `host:port`, or `host` for
/// port 2181).
#[cfg(any(feature = "zookeeper-tls", test))]
pub(crate) fn host_ports(hosts: &str) -> Result<Vec<(String, u16)>, String> {
    let mut out = Vec::new();
    for hp in hosts.split(',') {
        let (host, port) = if let Some(rest) = hp.strip_prefix('[') {
            let (host, after) = rest
                .split_once(']')
                .ok_or_else(|| format!("`{hp}`: no closing `]`"))?;
            match after {
                "" => (host, ""),
                p => (
                    host,
                    p.strip_prefix(':')
                        .ok_or_else(|| format!("`{hp}`: expected `:port` after `]`"))?,
                ),
            }
        } else {
            hp.rsplit_once(':').unwrap_or((hp, ""))
        };
        let port = if port.is_empty() {
            2181
        } else {
            port.parse::<u16>()
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| format!("`{hp}`: bad port"))?
        };
        if host.is_empty() {
            return Err(format!("`{hp}`: no host"));
        }
        out.push((host.to_owned(), port));
    }
    Ok(out)
}

#[cfg(feature = "zookeeper-tls")]
pub(crate) use imp::Tls;

#[cfg(feature = "zookeeper-tls")]
mod imp {
    use super::*;
    use futures::future::{BoxFuture, Either};
    use futures::FutureExt;
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, ServerName};
    use std::sync::Arc;

    /// What a `zks://` connection trusts, ready for zookeeper-client and
    /// for Simba's own diagnostic handshake.
    #[derive(Clone)]
    pub(crate) struct Tls {
        options: zk::TlsOptions,
        config: Arc<rustls::ClientConfig>,
        servers: Vec<(ServerName<'static>, String, u16)>,
        /// Where the roots came from, for messages.
        roots: String,
    }

    impl Tls {
        /// Loads the roots (the PEM file `ca`, or the system's) for the
        /// servers `hosts`.
        ///
        /// # Errors
        /// `Rejected` for a host that is not a DNS name or an IP address, a
        /// CA file that cannot be read or holds no certificate, or no
        /// system roots.
        pub(crate) fn load(
            hosts: &str,
            ca: Option<&str>,
            redacted: &str,
        ) -> Result<Tls, BackendError> {
            let bad = |why: String| rejected(format!("{NAME}: `{redacted}`: {why}"));
            let mut servers = Vec::new();
            for (host, port) in host_ports(hosts).map_err(&bad)? {
                // zookeeper-client would panic on a name rustls cannot check.
                let name = ServerName::try_from(host.clone()).map_err(|_| {
                    bad(format!(
                        "`{host}` is neither a DNS name nor an IP address, so TLS cannot check it"
                    ))
                })?;
                servers.push((name, host, port));
            }
            let (certs, roots) = match ca {
                Some(path) => {
                    let pem = std::fs::read(path).map_err(|e| {
                        bad(format!(
                            "cannot read the CA file `{path}` (simba_tls_ca): {e}"
                        ))
                    })?;
                    let certs = CertificateDer::pem_slice_iter(&pem)
                        .collect::<Result<Vec<_>, _>>()
                        .map_err(|e| bad(format!("the CA file `{path}` is not PEM: {e}")))?;
                    (certs, format!("the CA file `{path}`"))
                }
                None => {
                    let found = rustls_native_certs::load_native_certs();
                    if found.certs.is_empty() {
                        let why = found.errors.first().map(|e| format!(": {e}"));
                        return Err(bad(format!(
                            "no system root certificates{}; name a CA file with simba_tls_ca",
                            why.unwrap_or_default()
                        )));
                    }
                    (found.certs, "the system's root certificates".to_owned())
                }
            };
            let mut store = rustls::RootCertStore::empty();
            let (added, _) = store.add_parsable_certificates(certs.iter().cloned());
            if added == 0 {
                return Err(bad(format!("no usable CA certificate in {roots}")));
            }
            let options = zk::TlsOptions::new()
                .with_pem_ca(&to_pem(&certs))
                .map_err(|e| bad(format!("{roots}: {e}")))?;
            let config = rustls::ClientConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .map_err(|e| bad(format!("TLS settings: {e}")))?
            .with_root_certificates(store)
            .with_no_client_auth();
            Ok(Tls {
                options,
                config: Arc::new(config),
                servers,
                roots,
            })
        }

        /// Connects over TLS with `connector`.
        pub(crate) fn connect<'a>(
            &self,
            connector: zk::Connector,
            hosts: &'a str,
        ) -> BoxFuture<'a, Result<zk::Client, zk::Error>> {
            // zookeeper-client builds its rustls configuration with the
            // process's default provider.
            crate::ensure_rustls_provider();
            connector
                .with_tls(self.options.clone())
                .secure_connect(hosts)
                .boxed()
        }

        /// After a failed connect: why TLS refused a server, if it did.
        /// One handshake per server, each within `limit`.
        pub(crate) async fn diagnose(&self, limit: Duration) -> Option<String> {
            for (name, host, port) in &self.servers {
                let handshake = async {
                    let tcp = async_net::TcpStream::connect((host.as_str(), *port)).await?;
                    futures_rustls::TlsConnector::from(self.config.clone())
                        .connect(name.clone(), tcp)
                        .await
                        .map(drop)
                };
                let timer = futures_timer::Delay::new(limit);
                let Either::Left((Err(e), _)) =
                    futures::future::select(std::pin::pin!(handshake), timer).await
                else {
                    continue;
                };
                let refused = e
                    .get_ref()
                    .and_then(|inner| inner.downcast_ref::<rustls::Error>());
                if let Some(tls) = refused {
                    return Some(format!(
                        "TLS with {host}:{port} failed: {tls} (trusting {})",
                        self.roots
                    ));
                }
            }
            None
        }
    }

    /// Certificates as PEM text (what zookeeper-client reads).
    fn to_pem(certs: &[CertificateDer<'_>]) -> String {
        use base64::Engine;
        let mut pem = String::new();
        for cert in certs {
            let b64 = base64::engine::general_purpose::STANDARD.encode(cert.as_ref());
            pem.push_str("-----BEGIN CERTIFICATE-----\n");
            for line in b64.as_bytes().chunks(64) {
                pem.push_str(&String::from_utf8_lossy(line));
                pem.push('\n');
            }
            pem.push_str("-----END CERTIFICATE-----\n");
        }
        pem
    }
}

/// Without the `zookeeper-tls` feature there is no TLS to configure: a
/// `zks://` URL is refused.
#[cfg(not(feature = "zookeeper-tls"))]
#[derive(Clone)]
pub(crate) enum Tls {}

#[cfg(not(feature = "zookeeper-tls"))]
impl Tls {
    pub(crate) fn load(
        _hosts: &str,
        _ca: Option<&str>,
        redacted: &str,
    ) -> Result<Tls, BackendError> {
        Err(rejected(format!(
            "{NAME}: `{redacted}`: zks:// needs TLS, and this build lacks the simba-backends \
             feature `zookeeper-tls`"
        )))
    }

    pub(crate) fn connect<'a>(
        &self,
        _connector: zk::Connector,
        _hosts: &'a str,
    ) -> futures::future::BoxFuture<'a, Result<zk::Client, zk::Error>> {
        match *self {}
    }

    pub(crate) async fn diagnose(&self, _limit: Duration) -> Option<String> {
        match *self {}
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn host_ports_read_as_zookeeper_client_reads_them() {
        assert_eq!(
            host_ports("a:1,[::1]:2282,b,[fe80::2]").unwrap(),
            [
                ("a".to_owned(), 1),
                ("::1".to_owned(), 2282),
                ("b".to_owned(), 2181),
                ("fe80::2".to_owned(), 2181)
            ]
        );
        for bad in ["a:0", "a:x", "[::1", "[::1]x", ":1", "a:1,"] {
            assert!(host_ports(bad).is_err(), "{bad}");
        }
    }
}
