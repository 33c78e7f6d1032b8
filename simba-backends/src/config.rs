//! Backend URLs and options.

use crate::Backend;
use simba_core::{BackendError, BackendErrorKind};
use std::fmt;
use std::time::Duration;

/// The table prefix used unless configured otherwise.
pub const DEFAULT_TABLE_PREFIX: &str = "simba_";

/// The Redis key prefix used unless configured otherwise: every key of one
/// deployment is `{simba}:…` (one Cluster hash slot).
pub const DEFAULT_KEY_PREFIX: &str = "simba";

/// Connections a SQL backend's pool opens at most unless configured
/// otherwise: one for its calls (PostgreSQL adds one for its release
/// listener, outside this pool). See `docs/BACKENDS.md`, "Connection budget".
pub const DEFAULT_POOL_MAX: u32 = 1;

/// A pooled SQL connection idle for this long or longer is pinged before
/// Simba uses it; one used more recently is not (see
/// `BackendConfig::sqlx_pool`'s reasoning in `docs/BACKENDS.md`,
/// "Connections").
///
/// ```
/// assert_eq!(simba_backends::PING_IDLE_AFTER.as_secs(), 5);
/// ```
pub const PING_IDLE_AFTER: Duration = Duration::from_secs(5);

/// How long a SQL backend's call waits for a pooled connection unless
/// configured otherwise. The client's driver cancels every call after the
/// renewal period in force (its call timeout, S2.4), so a queued call is never
/// cut short by the pool before the driver's own timeout for renewal periods
/// up to this long; connecting at start is bounded by the (shorter) connect
/// timeout instead.
pub const DEFAULT_POOL_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(60);

/// Which kind of backend a URL names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BackendKind {
    /// `sqlite://path` or `sqlite::memory:` (feature `sqlite`).
    Sqlite,
    /// `postgres://…` or `postgresql://…` (feature `postgres`).
    Postgres,
    /// `mysql://…` or `mariadb://…` (feature `mysql`).
    Mysql,
    /// `redis://…` or `rediss://…` (TLS), or
    /// `redis+sentinel://s1:26379,s2:26379/service[/db]` (the primary that
    /// Redis Sentinel names) (feature `redis`).
    Redis,
    /// `etcd://…` or `etcds://…` for TLS (feature `etcd`).
    Etcd,
    /// `zk://…` or `zookeeper://…`, or `zks://…` for TLS (feature `zookeeper`;
    /// TLS needs `zookeeper-tls`).
    Zookeeper,
}

impl BackendKind {
    /// Every backend Simba ships, in the order the documents list them. The
    /// documents' lists of backends, features and URL schemes are checked
    /// against this (`simba-backends/tests/docs_agree.rs`).
    pub const ALL: [BackendKind; 6] = [
        BackendKind::Postgres,
        BackendKind::Mysql,
        BackendKind::Sqlite,
        BackendKind::Redis,
        BackendKind::Zookeeper,
        BackendKind::Etcd,
    ];

    /// The backend's name as the documents write it.
    ///
    /// ```
    /// use simba_backends::BackendKind;
    /// assert_eq!(BackendKind::Mysql.title(), "MySQL/MariaDB");
    /// ```
    pub fn title(self) -> &'static str {
        match self {
            BackendKind::Sqlite => "SQLite",
            BackendKind::Postgres => "PostgreSQL",
            BackendKind::Mysql => "MySQL/MariaDB",
            BackendKind::Redis => "Redis",
            BackendKind::Etcd => "etcd",
            BackendKind::Zookeeper => "ZooKeeper",
        }
    }

    /// The cargo feature that compiles the backend in (the same name on
    /// `simba-backends`, `simba-client`, both adapters and `simba-cli`).
    pub fn feature(self) -> &'static str {
        match self {
            BackendKind::Sqlite => "sqlite",
            BackendKind::Postgres => "postgres",
            BackendKind::Mysql => "mysql",
            BackendKind::Redis => "redis",
            BackendKind::Etcd => "etcd",
            BackendKind::Zookeeper => "zookeeper",
        }
    }

    /// The extra cargo feature its TLS scheme needs, if TLS is not part of
    /// [`BackendKind::feature`] (PostgreSQL, MySQL and etcd have TLS built in).
    pub fn tls_feature(self) -> Option<&'static str> {
        match self {
            BackendKind::Redis => Some("redis-tls"),
            BackendKind::Zookeeper => Some("zookeeper-tls"),
            _ => None,
        }
    }

    /// The URL schemes that name it (`scheme://…`; SQLite also
    /// `sqlite::memory:`), TLS schemes included.
    ///
    /// ```
    /// use simba_backends::{BackendConfig, BackendKind};
    /// for kind in BackendKind::ALL {
    ///     for scheme in kind.schemes() {
    ///         let url = format!("{scheme}://localhost/0");
    ///         assert_eq!(BackendConfig::parse(&url).unwrap().kind(), kind);
    ///     }
    /// }
    /// ```
    pub fn schemes(self) -> &'static [&'static str] {
        match self {
            BackendKind::Sqlite => &["sqlite"],
            BackendKind::Postgres => &["postgres", "postgresql"],
            BackendKind::Mysql => &["mysql", "mariadb"],
            BackendKind::Redis => &["redis", "rediss", "redis+sentinel"],
            BackendKind::Etcd => &["etcd", "etcds"],
            BackendKind::Zookeeper => &["zk", "zookeeper", "zks"],
        }
    }

    /// The backend a URL names by its scheme.
    fn of_url(url: &str) -> Option<BackendKind> {
        let lower = url.to_ascii_lowercase();
        if lower.starts_with("sqlite:") {
            return Some(BackendKind::Sqlite);
        }
        let (scheme, _) = lower.split_once("://")?;
        BackendKind::ALL
            .into_iter()
            .find(|k| k.schemes().contains(&scheme))
    }
}

/// `sqlite://, postgres://, …`: every scheme, for error messages.
fn scheme_list() -> String {
    let all: Vec<String> = BackendKind::ALL
        .iter()
        .flat_map(|k| k.schemes())
        .map(|s| format!("{s}://"))
        .collect();
    all.join(", ")
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BackendKind::Sqlite => "sqlite",
            BackendKind::Postgres => "postgres",
            BackendKind::Mysql => "mysql",
            BackendKind::Redis => "redis",
            BackendKind::Etcd => "etcd",
            BackendKind::Zookeeper => "zookeeper",
        })
    }
}

/// Why a backend URL or option was refused. Credentials are redacted.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The URL's scheme names no known backend.
    #[error(
        "unknown backend URL scheme in `{url}`: expected one of {}",
        scheme_list()
    )]
    UnknownScheme {
        /// The URL, credentials redacted.
        url: String,
    },
    /// The URL does not parse: `reason` says what is wrong (a port out of
    /// range, a Redis database that is not a number, …).
    #[error("invalid backend URL `{url}`: {reason}")]
    InvalidUrl {
        /// The URL, credentials redacted.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The backend's cargo feature is not enabled in this build.
    #[error("the {kind} backend is not compiled in: enable the simba-backends feature `{kind}`")]
    FeatureDisabled {
        /// The backend asked for.
        kind: BackendKind,
    },
    /// The table prefix is not `[a-z][a-z0-9_]{0,31}` (or empty).
    #[error(
        "invalid table prefix {prefix:?}: expected at most 32 of [a-z0-9_], starting with a letter"
    )]
    InvalidPrefix {
        /// The refused prefix.
        prefix: String,
    },
    /// The Redis key prefix is not 1 to 64 of `[A-Za-z0-9._:-]`.
    #[error("invalid key prefix {prefix:?}: expected 1 to 64 of [A-Za-z0-9._:-]")]
    InvalidKeyPrefix {
        /// The refused prefix.
        prefix: String,
    },
    /// A MySQL URL names several hosts (`mysql://h1,h2/db`): the driver
    /// (sqlx 0.8) connects to one host, and Simba's MySQL backend does not
    /// follow a fail-over between hosts (docs/BACKENDS.md, "Replicated
    /// deployments": name the primary through a DNS name or a proxy that
    /// follows it). PostgreSQL takes host lists (see
    /// [`BackendConfig::postgres_hosts`]).
    #[error(
        "`{url}` names several hosts: Simba's MySQL backend connects to one host; \
         point the URL at the primary through a name or proxy that follows fail-overs"
    )]
    MultiHost {
        /// The URL, credentials redacted.
        url: String,
    },
    /// A PostgreSQL host list (`postgres://h1:p1,h2:p2/db`) that Simba
    /// cannot use: an empty host, a Unix socket in a list, or the hosts
    /// given as a list in the `host` query parameter instead of the
    /// URL's authority.
    #[error("bad host list in `{url}`: {reason}")]
    InvalidHostList {
        /// The URL, credentials redacted.
        url: String,
        /// What is wrong with the list.
        reason: String,
    },
    /// A query parameter Simba reads has a bad value.
    #[error("invalid value for `{key}` in `{url}`")]
    InvalidParameter {
        /// The parameter.
        key: &'static str,
        /// The URL, credentials redacted.
        url: String,
    },
}

impl From<ConfigError> for BackendError {
    fn from(e: ConfigError) -> Self {
        BackendError::new(BackendErrorKind::Rejected, e.to_string())
    }
}

/// How to reach a backend: its URL plus Simba's options.
///
/// Simba reads and strips its query parameters from the URL:
/// `simba_table_prefix` (default [`DEFAULT_TABLE_PREFIX`]),
/// the SQL pool's settings `simba_pool_max` (default [`DEFAULT_POOL_MAX`];
/// `simba_max_connections` is an older name for it),
/// `simba_pool_idle_timeout_ms`, `simba_pool_max_lifetime_ms` (default: off,
/// connections are kept; `0` is off too; see
/// [`BackendConfig::pool_idle_timeout`]) and `simba_pool_acquire_timeout_ms`
/// (default [`DEFAULT_POOL_ACQUIRE_TIMEOUT`]), and for Redis `simba_key_prefix` (default
/// [`DEFAULT_KEY_PREFIX`]), and for PostgreSQL `simba_listen` (`false` turns
/// the release listener off), `simba_listen_url` (the listener's own URL,
/// percent-encoded) and `simba_transaction_pooling` (`true` behind PgBouncer
/// in transaction mode; see [`BackendConfig::transaction_pooling`]); the rest
/// goes to the driver.
///
/// ```
/// use simba_backends::{BackendConfig, BackendKind};
/// let c = BackendConfig::parse("postgres://app:pw@db/simba?simba_table_prefix=jobs_").unwrap();
/// assert_eq!(c.kind(), BackendKind::Postgres);
/// assert_eq!(c.table_prefix(), "jobs_");
/// assert_eq!(c.redacted_url(), "postgres://app:***@db/simba");
/// assert!(BackendConfig::parse("ftp://x").is_err());
/// let r = BackendConfig::parse("redis://app:pw@cache:6380/2?simba_key_prefix=jobs").unwrap();
/// assert_eq!(r.kind(), BackendKind::Redis);
/// assert_eq!(r.key_prefix(), "jobs");
/// assert_eq!(r.redacted_url(), "redis://app:***@cache:6380/2");
/// ```
#[derive(Clone)]
pub struct BackendConfig {
    kind: BackendKind,
    url: String,
    table_prefix: String,
    key_prefix: String,
    max_connections: u32,
    connect_timeout: Duration,
    create_schema: bool,
    pool: PoolSettings,
    listen: bool,
    listen_url: Option<String>,
    transaction_pooling: bool,
    tls_ca: Option<String>,
    pg_hosts: Vec<(String, u16)>,
    session_attrs: SessionAttrs,
}

/// Which server of a PostgreSQL host list the backend may use: libpq's
/// `target_session_attrs`, the values that make sense for Simba (it writes
/// on every call; `read-only`, `standby` and `prefer-standby` are refused).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum SessionAttrs {
    /// The first host that accepts a connection (`any`, the default).
    #[default]
    Any,
    /// The first host whose sessions are not read-only (`read-write`):
    /// `SHOW transaction_read_only` is `off`.
    ReadWrite,
    /// The first host that is not in recovery (`primary`):
    /// `pg_is_in_recovery()` is false.
    Primary,
}

/// Splits a PostgreSQL URL's host list (`h1:p1,[v6]:p2,h3`): host and port
/// (5432 by default) of each. Empty for an empty authority (a Unix socket
/// given by `host=`).
fn parse_host_list(hosts: &str) -> Result<Vec<(String, u16)>, String> {
    if hosts.is_empty() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for h in hosts.split(',') {
        let (host, port) = match h.strip_prefix('[') {
            Some(v6) => match v6.split_once(']') {
                Some((a, tail)) => (a, tail.strip_prefix(':')),
                None => return Err(format!("`{h}`: an IPv6 address without its `]`")),
            },
            None => match h.rsplit_once(':') {
                Some((a, p)) => (a, Some(p)),
                None => (h, None),
            },
        };
        if host.is_empty() {
            return Err(if hosts.contains(',') {
                "an empty host in the list".to_owned()
            } else {
                "an empty host".to_owned()
            });
        }
        if hosts.contains(',') && host.starts_with('%') {
            return Err(format!(
                "`{host}`: a Unix socket cannot be part of a host list"
            ));
        }
        let port = match port {
            None => 5432,
            Some(p) => p
                .parse::<u16>()
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| format!("`{h}`: a bad port"))?,
        };
        out.push((host.to_owned(), port));
    }
    Ok(out)
}

/// A SQL pool's timeouts (`None` or `Some(ZERO)`: off).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct PoolSettings {
    idle_timeout: Option<Duration>,
    max_lifetime: Option<Duration>,
    acquire_timeout: Duration,
}

impl fmt::Debug for BackendConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BackendConfig")
            .field("kind", &self.kind)
            .field("url", &self.redacted_url())
            .field("table_prefix", &self.table_prefix)
            .field("key_prefix", &self.key_prefix)
            .field("max_connections", &self.max_connections)
            .field("connect_timeout", &self.connect_timeout)
            .field("create_schema", &self.create_schema)
            .field("pool", &self.pool)
            .field("listen", &self.listen)
            .field("listen_url", &self.listen_url.as_deref().map(redact))
            .field("transaction_pooling", &self.transaction_pooling)
            .field("postgres_hosts", &self.pg_hosts)
            .field("session_attrs", &self.session_attrs)
            .finish()
    }
}

impl BackendConfig {
    /// [`BackendConfig::parse`] for one backend's `connect_url`: `Rejected`
    /// if `url` is malformed or names another kind of backend than `kind`
    /// (`backend` is its name, for the message).
    #[cfg(any(
        feature = "sqlite",
        feature = "postgres",
        feature = "mysql",
        feature = "redis"
    ))]
    pub(crate) fn parse_for(
        url: &str,
        kind: BackendKind,
        backend: &str,
    ) -> Result<BackendConfig, simba_core::BackendError> {
        let config = BackendConfig::parse(url)?;
        if config.kind() != kind {
            return Err(simba_core::BackendError::new(
                simba_core::BackendErrorKind::Rejected,
                format!(
                    "{backend}: `{}` is not a {backend} URL",
                    config.redacted_url()
                ),
            ));
        }
        Ok(config)
    }

    /// Parses a backend URL.
    ///
    /// # Errors
    /// [`ConfigError`] for an unknown scheme or a bad Simba parameter.
    pub fn parse(url: &str) -> Result<BackendConfig, ConfigError> {
        let lower = url.to_ascii_lowercase();
        let Some(kind) = BackendKind::of_url(url) else {
            return Err(ConfigError::UnknownScheme { url: redact(url) });
        };
        if kind != BackendKind::Sqlite {
            check_authority(kind, url).map_err(|reason| ConfigError::InvalidUrl {
                url: redact(url),
                reason,
            })?;
        }
        let mut pg_hosts = Vec::new();
        let mut session_attrs = SessionAttrs::Any;
        let mut driver_url = if kind == BackendKind::Mysql && lower.starts_with("mariadb://") {
            format!("mysql://{}", &url["mariadb://".len()..])
        } else {
            url.to_owned()
        };
        if matches!(kind, BackendKind::Postgres | BackendKind::Mysql) {
            let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
            let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
            let (authority, tail) = rest.split_at(end);
            let (user, hosts) = match authority.rsplit_once('@') {
                Some((u, h)) => (Some(u), h),
                None => (None, authority),
            };
            if kind == BackendKind::Mysql && hosts.contains(',') {
                return Err(ConfigError::MultiHost { url: redact(url) });
            }
            if kind == BackendKind::Postgres {
                let bad = |reason: &str| ConfigError::InvalidHostList {
                    url: redact(url),
                    reason: reason.to_owned(),
                };
                pg_hosts = parse_host_list(hosts).map_err(|r| bad(&r))?;
                if pg_hosts.len() > 1 {
                    // The driver is given the first host; the backend
                    // switches between them (`docs/BACKENDS.md`,
                    // "Replicated deployments").
                    let first = match &pg_hosts[0] {
                        (h, p) if h.contains(':') => format!("[{h}]:{p}"),
                        (h, p) => format!("{h}:{p}"),
                    };
                    let user = user.map_or(String::new(), |u| format!("{u}@"));
                    driver_url = format!("{scheme}://{user}{first}{tail}");
                }
                let query = tail.split_once('?').map_or("", |x| x.1);
                for pair in query.split(['&', '#']) {
                    if let Some(v) = pair.strip_prefix("host=") {
                        if v.contains(',') || v.to_ascii_lowercase().contains("%2c") {
                            return Err(bad(
                                "list the hosts in the URL's authority (postgres://h1:p1,h2:p2/db), \
                                 not in `host=`",
                            ));
                        }
                    }
                }
            }
        }
        let mut table_prefix = DEFAULT_TABLE_PREFIX.to_owned();
        let mut key_prefix = DEFAULT_KEY_PREFIX.to_owned();
        let mut max_connections = DEFAULT_POOL_MAX;
        let mut pool = PoolSettings {
            idle_timeout: None,
            max_lifetime: None,
            acquire_timeout: DEFAULT_POOL_ACQUIRE_TIMEOUT,
        };
        let mut listen = true;
        let mut listen_url = None;
        let mut tls_ca = None;
        let mut transaction_pooling = false;
        let flag = |key: &'static str, v: &str| match v {
            "true" | "1" | "on" | "yes" => Ok(true),
            "false" | "0" | "off" | "no" => Ok(false),
            _ => Err(ConfigError::InvalidParameter {
                key,
                url: redact(url),
            }),
        };
        let millis = |key: &'static str, v: &str| {
            v.parse::<u64>()
                .map(Duration::from_millis)
                .map_err(|_| ConfigError::InvalidParameter {
                    key,
                    url: redact(url),
                })
        };
        if let Some(q) = driver_url.find('?') {
            let (base, query) = driver_url.split_at(q);
            let mut kept = Vec::new();
            for pair in query[1..].split('&').filter(|p| !p.is_empty()) {
                let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
                match k {
                    "simba_table_prefix" => table_prefix = v.to_owned(),
                    "simba_key_prefix" => key_prefix = v.to_owned(),
                    "simba_max_connections" | "simba_pool_max" => {
                        let key = if k == "simba_pool_max" {
                            "simba_pool_max"
                        } else {
                            "simba_max_connections"
                        };
                        max_connections = v.parse().ok().filter(|n| *n > 0).ok_or_else(|| {
                            ConfigError::InvalidParameter {
                                key,
                                url: redact(url),
                            }
                        })?;
                    }
                    "simba_listen" => listen = flag("simba_listen", v)?,
                    "simba_listen_url" => {
                        let decoded = percent_decode(v).filter(|u| {
                            let l = u.to_ascii_lowercase();
                            l.starts_with("postgres://") || l.starts_with("postgresql://")
                        });
                        listen_url =
                            Some(decoded.ok_or_else(|| ConfigError::InvalidParameter {
                                key: "simba_listen_url",
                                url: redact(url),
                            })?);
                    }
                    // Redis and ZooKeeper over TLS: the CA file (PEM) that
                    // signs the server's certificate, instead of the
                    // public (Redis) or system (ZooKeeper) roots.
                    "simba_tls_ca"
                        if matches!(kind, BackendKind::Redis | BackendKind::Zookeeper) =>
                    {
                        tls_ca =
                            Some(percent_decode(v).filter(|p| !p.is_empty()).ok_or_else(|| {
                                ConfigError::InvalidParameter {
                                    key: "simba_tls_ca",
                                    url: redact(url),
                                }
                            })?);
                    }
                    // libpq's name: which server of a host list to use.
                    "target_session_attrs" if kind == BackendKind::Postgres => {
                        session_attrs = match v {
                            "any" => SessionAttrs::Any,
                            "read-write" => SessionAttrs::ReadWrite,
                            "primary" => SessionAttrs::Primary,
                            // Simba writes on every call: a standby is of
                            // no use to it.
                            _ => {
                                return Err(ConfigError::InvalidParameter {
                                    key: "target_session_attrs",
                                    url: redact(url),
                                })
                            }
                        };
                    }
                    "simba_transaction_pooling" => {
                        transaction_pooling = flag("simba_transaction_pooling", v)?;
                    }
                    "simba_pool_idle_timeout_ms" => {
                        pool.idle_timeout = Some(millis("simba_pool_idle_timeout_ms", v)?);
                    }
                    "simba_pool_max_lifetime_ms" => {
                        pool.max_lifetime = Some(millis("simba_pool_max_lifetime_ms", v)?);
                    }
                    "simba_pool_acquire_timeout_ms" => {
                        let t = millis("simba_pool_acquire_timeout_ms", v)?;
                        if t.is_zero() {
                            return Err(ConfigError::InvalidParameter {
                                key: "simba_pool_acquire_timeout_ms",
                                url: redact(url),
                            });
                        }
                        pool.acquire_timeout = t;
                    }
                    _ => kept.push(pair),
                }
            }
            driver_url = if kept.is_empty() {
                base.to_owned()
            } else {
                format!("{base}?{}", kept.join("&"))
            };
        }
        check_table_prefix(&table_prefix)?;
        check_key_prefix(&key_prefix)?;
        Ok(BackendConfig {
            kind,
            url: driver_url,
            table_prefix,
            key_prefix,
            max_connections,
            connect_timeout: Duration::from_secs(5),
            create_schema: true,
            pool,
            listen,
            listen_url,
            transaction_pooling,
            tls_ca,
            pg_hosts,
            session_attrs,
        })
    }

    /// PostgreSQL: the hosts of the URL's authority with their ports (5432
    /// if not given), in the order written; one for a single-host URL.
    /// With several (`postgres://h1:p1,h2:p2/db`, libpq's syntax) the
    /// backend connects to the first that accepts and, with
    /// `target_session_attrs=read-write` or `primary`, is not a standby
    /// (`pg_is_in_recovery()`, `transaction_read_only`), and moves to the
    /// next when its server fails (`docs/BACKENDS.md`, "Replicated
    /// deployments"). [`BackendConfig::url`] names the first host only.
    /// Empty for other backends and for a Unix socket.
    ///
    /// ```
    /// use simba_backends::{BackendConfig, SessionAttrs};
    /// let c = BackendConfig::parse(
    ///     "postgres://app:pw@db1:6432,[::1],db3/simba?target_session_attrs=read-write",
    /// )?;
    /// assert_eq!(
    ///     c.postgres_hosts(),
    ///     [("db1".to_owned(), 6432), ("::1".to_owned(), 5432), ("db3".to_owned(), 5432)]
    /// );
    /// assert_eq!(c.session_attrs(), SessionAttrs::ReadWrite);
    /// assert_eq!(c.url(), "postgres://app:pw@db1:6432/simba");
    /// assert!(BackendConfig::parse("postgres://db1,,db3/simba").is_err());
    /// assert!(BackendConfig::parse("mysql://db1,db2/simba").is_err());
    /// # Ok::<(), simba_backends::ConfigError>(())
    /// ```
    pub fn postgres_hosts(&self) -> &[(String, u16)] {
        &self.pg_hosts
    }

    /// PostgreSQL: which server of the host list the backend may use (URL
    /// parameter `target_session_attrs`, libpq's name; default `any`).
    pub fn session_attrs(&self) -> SessionAttrs {
        self.session_attrs
    }

    /// Redis over TLS (`rediss://`) and ZooKeeper over TLS (`zks://`): the
    /// file of the CA certificate (PEM) the server's certificate must chain
    /// to, from the URL parameter `simba_tls_ca=/path/ca.pem`; `None` trusts
    /// the public roots (Redis) or the system's roots (ZooKeeper).
    ///
    /// ```
    /// use simba_backends::BackendConfig;
    /// let c = BackendConfig::parse("rediss://cache:6380/0?simba_tls_ca=/etc/ssl/cache-ca.pem")?;
    /// assert_eq!(c.tls_ca(), Some("/etc/ssl/cache-ca.pem"));
    /// assert_eq!(c.url(), "rediss://cache:6380/0");
    /// let z = BackendConfig::parse("zks://zk1:2281,zk2:2281/jobs?simba_tls_ca=/etc/ssl/zk-ca.pem")?;
    /// assert_eq!(z.tls_ca(), Some("/etc/ssl/zk-ca.pem"));
    /// assert_eq!(z.url(), "zks://zk1:2281,zk2:2281/jobs");
    /// # Ok::<(), simba_backends::ConfigError>(())
    /// ```
    pub fn tls_ca(&self) -> Option<&str> {
        self.tls_ca.as_deref()
    }

    /// The backend kind.
    pub fn kind(&self) -> BackendKind {
        self.kind
    }

    /// The URL handed to the driver (Simba's parameters stripped). It may
    /// hold credentials: log [`BackendConfig::redacted_url`] instead.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The URL with any password replaced by `***`.
    pub fn redacted_url(&self) -> String {
        redact(&self.url)
    }

    /// The prefix of Simba's table names.
    pub fn table_prefix(&self) -> &str {
        &self.table_prefix
    }

    /// Sets the prefix of Simba's table names (`[a-z][a-z0-9_]{0,31}` or empty).
    ///
    /// # Errors
    /// [`ConfigError::InvalidPrefix`].
    pub fn with_table_prefix(mut self, prefix: &str) -> Result<Self, ConfigError> {
        check_table_prefix(prefix)?;
        self.table_prefix = prefix.to_owned();
        Ok(self)
    }

    /// The prefix of Simba's Redis keys: every key is `{prefix}:…`.
    pub fn key_prefix(&self) -> &str {
        &self.key_prefix
    }

    /// Sets the prefix of Simba's Redis keys (1 to 64 of `[A-Za-z0-9._:-]`).
    ///
    /// # Errors
    /// [`ConfigError::InvalidKeyPrefix`].
    pub fn with_key_prefix(mut self, prefix: &str) -> Result<Self, ConfigError> {
        check_key_prefix(prefix)?;
        self.key_prefix = prefix.to_owned();
        Ok(self)
    }

    /// The SQL pool's maximum number of connections for calls (default
    /// [`DEFAULT_POOL_MAX`]; URL parameter `simba_pool_max`). PostgreSQL's
    /// release listener has one connection of its own on top.
    pub fn max_connections(&self) -> u32 {
        self.max_connections
    }

    /// Sets the pool's maximum number of connections (at least 1).
    pub fn with_max_connections(mut self, n: u32) -> Self {
        self.max_connections = n.max(1);
        self
    }

    /// How long an idle pooled connection is kept (`None` or zero: for
    /// ever, the default). URL parameter `simba_pool_idle_timeout_ms`.
    ///
    /// Off by default, and the maximum lifetime too: with either set, sqlx
    /// 0.8 runs a pool reaper that a race in its idle count can send into
    /// a loop that never yields (sqlx issue 3645, fixed upstream after
    /// 0.8.6). The loop holds one of the runtime's worker threads and, with
    /// tokio, can strand the task whose wake it holds, so the client stops
    /// renewing: a SQLite test of three members hung that way, at 100% CPU.
    /// A connection idle for [`PING_IDLE_AFTER`] is pinged before it is
    /// used, so a connection the server closed meanwhile is replaced
    /// without one.
    ///
    /// ```
    /// use simba_backends::BackendConfig;
    /// let c = BackendConfig::parse("postgres://db/app").unwrap();
    /// assert_eq!(c.pool_idle_timeout(), None);
    /// let c = BackendConfig::parse("postgres://db/app?simba_pool_idle_timeout_ms=60000").unwrap();
    /// assert_eq!(c.pool_idle_timeout(), Some(std::time::Duration::from_secs(60)));
    /// ```
    pub fn pool_idle_timeout(&self) -> Option<Duration> {
        self.pool.idle_timeout
    }

    /// Sets how long an idle pooled connection is kept (zero: forever).
    pub fn with_pool_idle_timeout(mut self, timeout: Duration) -> Self {
        self.pool.idle_timeout = Some(timeout);
        self
    }

    /// How long a pooled connection lives before it is replaced (`None` or
    /// zero: for ever, the default; see
    /// [`BackendConfig::pool_idle_timeout`] for why). URL parameter
    /// `simba_pool_max_lifetime_ms`.
    pub fn pool_max_lifetime(&self) -> Option<Duration> {
        self.pool.max_lifetime
    }

    /// Sets how long a pooled connection lives (zero: forever).
    pub fn with_pool_max_lifetime(mut self, lifetime: Duration) -> Self {
        self.pool.max_lifetime = Some(lifetime);
        self
    }

    /// How long a call waits for a pooled connection (default
    /// [`DEFAULT_POOL_ACQUIRE_TIMEOUT`]; URL parameter
    /// `simba_pool_acquire_timeout_ms`).
    pub fn pool_acquire_timeout(&self) -> Duration {
        self.pool.acquire_timeout
    }

    /// Sets how long a call waits for a pooled connection (at least 1 ms).
    pub fn with_pool_acquire_timeout(mut self, timeout: Duration) -> Self {
        self.pool.acquire_timeout = timeout.max(Duration::from_millis(1));
        self
    }

    /// sqlx pool options from these settings (size and timeouts).
    ///
    /// A connection is pinged before a call only when it has been idle for
    /// [`PING_IDLE_AFTER`] or longer, not before every call (sqlx's
    /// default, one extra round trip per call): sqlx already pings each
    /// connection when it goes back to the pool, so an idle connection was
    /// live when it went idle. One that breaks within that time (the server
    /// restarted) fails the call it is used for; the engine handles it as
    /// any failed call (a renewal is retried after a short back-off, S2.4).
    #[cfg(feature = "postgres")]
    pub(crate) fn sqlx_pool<DB: sqlx::Database>(&self) -> sqlx::pool::PoolOptions<DB> {
        self.sqlx_pool_keeping(|_| true)
    }

    /// [`BackendConfig::sqlx_pool`], whose connections are also closed (and
    /// replaced by new ones) when `keep(age)` says a connection of that age
    /// may no longer be used: a backend whose `after_connect` settings
    /// changed drops the connections made before the change.
    #[cfg(any(feature = "postgres", feature = "mysql"))]
    pub(crate) fn sqlx_pool_keeping<DB: sqlx::Database>(
        &self,
        keep: impl Fn(Duration) -> bool + Send + Sync + 'static,
    ) -> sqlx::pool::PoolOptions<DB> {
        use sqlx::Connection as _;
        let o = sqlx::pool::PoolOptions::<DB>::new()
            .max_connections(self.max_connections)
            .acquire_timeout(self.pool.acquire_timeout)
            .test_before_acquire(false)
            .before_acquire(move |conn, meta| {
                let keep = keep(meta.age);
                Box::pin(async move {
                    if !keep {
                        return Ok(false);
                    }
                    if meta.idle_for >= PING_IDLE_AFTER {
                        conn.ping().await?;
                    }
                    Ok(true)
                })
            });
        let (idle, life) = self.sqlx_lifetimes();
        o.idle_timeout(idle).max_lifetime(life)
    }

    /// The idle timeout and maximum lifetime to give sqlx (`None`: off,
    /// unless set and not zero; see [`BackendConfig::pool_idle_timeout`]).
    #[cfg(any(feature = "sqlite", feature = "postgres", feature = "mysql"))]
    pub(crate) fn sqlx_lifetimes(&self) -> (Option<Duration>, Option<Duration>) {
        let on = |d: Option<Duration>| d.filter(|d| !d.is_zero());
        (on(self.pool.idle_timeout), on(self.pool.max_lifetime))
    }

    /// Whether the PostgreSQL backend listens for release broadcasts (S4.2,
    /// LISTEN/NOTIFY on a connection of its own; default `true`; URL
    /// parameter `simba_listen`). Without the listener a freed lease is
    /// taken over at a waiter's next retry instead of at once. Turned off
    /// by [`BackendConfig::transaction_pooling`] unless
    /// [`BackendConfig::listen_url`] is set, since LISTEN does not work
    /// through a transaction-pooling proxy such as PgBouncer.
    pub fn listen(&self) -> bool {
        self.listen && (!self.transaction_pooling || self.listen_url.is_some())
    }

    /// Sets whether the PostgreSQL backend listens for release broadcasts.
    ///
    /// ```
    /// use simba_backends::BackendConfig;
    /// let c = BackendConfig::parse("postgres://db/app?simba_listen=false").unwrap();
    /// assert!(!c.listen());
    /// assert!(c.with_listen(true).listen());
    /// ```
    pub fn with_listen(mut self, listen: bool) -> Self {
        self.listen = listen;
        self
    }

    /// Where the PostgreSQL release listener connects, if not to
    /// [`BackendConfig::url`] (URL parameter `simba_listen_url`,
    /// percent-encoded): for example straight to PostgreSQL while the calls
    /// go through PgBouncer. It may hold credentials: do not log it.
    pub fn listen_url(&self) -> Option<&str> {
        self.listen_url.as_deref()
    }

    /// Sets where the PostgreSQL release listener connects (a `postgres://`
    /// URL; `None`: the calls' URL).
    ///
    /// ```
    /// use simba_backends::BackendConfig;
    /// let c = BackendConfig::parse("postgres://pgbouncer:6432/app?simba_transaction_pooling=true")
    ///     .unwrap()
    ///     .with_listen_url(Some("postgres://db:5432/app"))?;
    /// assert!(c.listen());
    /// assert_eq!(c.listen_url(), Some("postgres://db:5432/app"));
    /// assert!(c.with_listen_url(Some("mysql://db/app")).is_err());
    /// # Ok::<(), simba_backends::ConfigError>(())
    /// ```
    ///
    /// # Errors
    /// [`ConfigError::InvalidParameter`] if `url` is not a `postgres://` URL.
    pub fn with_listen_url(mut self, url: Option<&str>) -> Result<Self, ConfigError> {
        if let Some(u) = url {
            let l = u.to_ascii_lowercase();
            if !(l.starts_with("postgres://") || l.starts_with("postgresql://")) {
                return Err(ConfigError::InvalidParameter {
                    key: "simba_listen_url",
                    url: redact(u),
                });
            }
        }
        self.listen_url = url.map(str::to_owned);
        Ok(self)
    }

    /// Whether the PostgreSQL backend runs behind a transaction-pooling
    /// proxy such as PgBouncer in `pool_mode = transaction` (default
    /// `false`; URL parameter `simba_transaction_pooling`). Then no
    /// statement is prepared under a name (sqlx's statement cache is off and
    /// every statement is parsed unnamed), every call runs inside one
    /// explicit transaction (so that a statement's parse and its execution
    /// reach the same server connection), the `extra_float_digits` startup
    /// parameter is not sent, and the release listener is off unless
    /// [`BackendConfig::listen_url`] names a direct connection. See
    /// `docs/BACKENDS.md`, "PgBouncer".
    pub fn transaction_pooling(&self) -> bool {
        self.transaction_pooling
    }

    /// Sets whether the PostgreSQL backend runs behind a transaction-pooling proxy.
    ///
    /// ```
    /// use simba_backends::BackendConfig;
    /// let c = BackendConfig::parse("postgres://pgbouncer:6432/app")
    ///     .unwrap()
    ///     .with_transaction_pooling(true);
    /// assert!(c.transaction_pooling());
    /// assert!(!c.listen()); // no listen_url: LISTEN would not pass the proxy
    /// ```
    pub fn with_transaction_pooling(mut self, on: bool) -> Self {
        self.transaction_pooling = on;
        self
    }

    /// How long connecting (or waiting for a pooled connection) may take.
    pub fn connect_timeout(&self) -> Duration {
        self.connect_timeout
    }

    /// Sets how long connecting (or waiting for a pooled connection) may take.
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Whether connecting creates missing tables (default `true`).
    pub fn create_schema(&self) -> bool {
        self.create_schema
    }

    /// Sets whether connecting creates missing tables. When `false`, connect
    /// only checks them, so a user without `CREATE` privilege gets a clear
    /// error about the missing table instead of a privilege error.
    pub fn with_create_schema(mut self, create: bool) -> Self {
        self.create_schema = create;
        self
    }

    /// Connects to the backend, checking (and by default creating) its
    /// tables.
    ///
    /// # Errors
    /// [`ConfigError::FeatureDisabled`] (as `Rejected`) if the backend's
    /// feature is off; otherwise the backend's `connect` errors.
    pub async fn connect(&self) -> Result<Box<dyn Backend>, BackendError> {
        match self.kind {
            #[cfg(feature = "sqlite")]
            BackendKind::Sqlite => Ok(Box::new(crate::sqlite::SqliteBackend::connect(self).await?)),
            #[cfg(feature = "postgres")]
            BackendKind::Postgres => Ok(Box::new(crate::postgres::PgBackend::connect(self).await?)),
            #[cfg(feature = "mysql")]
            BackendKind::Mysql => Ok(Box::new(crate::mysql::MysqlBackend::connect(self).await?)),
            #[cfg(feature = "redis")]
            BackendKind::Redis => Ok(Box::new(crate::redis::RedisBackend::connect(self).await?)),
            #[cfg(feature = "etcd")]
            BackendKind::Etcd => Ok(Box::new(crate::etcd::EtcdBackend::connect(self).await?)),
            #[cfg(feature = "zookeeper")]
            BackendKind::Zookeeper => {
                Ok(Box::new(crate::zookeeper::ZkBackend::connect(self).await?))
            }
            #[allow(unreachable_patterns)]
            kind => Err(ConfigError::FeatureDisabled { kind }.into()),
        }
    }
}

/// What is wrong with the hosts, ports or (Redis) database of a server URL,
/// if anything: each `host:port` of the (comma-separated) host list has a
/// port of 1 to 65535, and a Redis path is a database number.
fn check_authority(kind: BackendKind, url: &str) -> Result<(), String> {
    let Some((_, rest)) = url.split_once("://") else {
        return Ok(());
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    let hosts = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    for host in hosts.split(',') {
        let port = match host.strip_prefix('[') {
            // [v6]:port
            Some(v6) => match v6.split_once(']') {
                Some((_, tail)) => tail.strip_prefix(':'),
                None => return Err(format!("`{host}`: an IPv6 address without its `]`")),
            },
            None => host.rsplit_once(':').map(|(_, p)| p),
        };
        if let Some(port) = port {
            match port.parse::<u64>() {
                Ok(1..=65535) => {}
                Ok(n) => return Err(format!("port {n} is out of range (1 to 65535)")),
                Err(_) if port.is_empty() => {
                    return Err(format!("`{host}` has an empty port"));
                }
                Err(_) => return Err(format!("port `{port}` is not a number")),
            }
        }
    }
    if kind == BackendKind::Redis {
        let db = path.split(['?', '#']).next().unwrap_or("");
        let db = db.trim_start_matches('/');
        // redis+sentinel://s1:p,s2:p/SERVICE[/DB]: the service name comes first.
        let db = if url.to_ascii_lowercase().starts_with("redis+sentinel://") {
            db.split_once('/').map_or("", |(_, d)| d)
        } else {
            db
        };
        if !db.is_empty() && db.parse::<u32>().is_err() {
            return Err(format!(
                "the Redis database `{db}` is not a number (redis://host:port/DB)"
            ));
        }
    }
    Ok(())
}

/// Decodes `%XX` escapes (`None` for a bad escape or non-UTF-8 result).
fn percent_decode(v: &str) -> Option<String> {
    let b = v.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

fn check_key_prefix(prefix: &str) -> Result<(), ConfigError> {
    if !prefix.is_empty() && prefix.len() <= 64 && prefix.chars().all(simba_core::is_name_char) {
        Ok(())
    } else {
        Err(ConfigError::InvalidKeyPrefix {
            prefix: prefix.to_owned(),
        })
    }
}

pub(crate) fn check_table_prefix(prefix: &str) -> Result<(), ConfigError> {
    let ok = prefix.is_empty()
        || (prefix.len() <= 32
            && prefix.starts_with(|c: char| c.is_ascii_lowercase())
            && prefix
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'));
    if ok {
        Ok(())
    } else {
        Err(ConfigError::InvalidPrefix {
            prefix: prefix.to_owned(),
        })
    }
}

/// Replaces the password of every `scheme://user:password@host` in `text`
/// with `***`; also any `password=` query value. Used on every error message.
///
/// ```
/// assert_eq!(
///     simba_backends::redact("error for mysql://root:hunter2@db:3306/x?password=p&a=1"),
///     "error for mysql://root:***@db:3306/x?password=***&a=1"
/// );
/// ```
pub fn redact(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("://") {
        let (head, tail) = rest.split_at(i + 3);
        out.push_str(head);
        let end = tail
            .find(|c: char| c == '/' || c == '?' || c == '#' || c.is_whitespace())
            .unwrap_or(tail.len());
        let authority = &tail[..end];
        match authority.rfind('@') {
            Some(at) => {
                let userinfo = &authority[..at];
                match userinfo.find(':') {
                    Some(colon) => {
                        out.push_str(&userinfo[..colon]);
                        out.push_str(":***");
                    }
                    None => out.push_str(userinfo),
                }
                out.push_str(&authority[at..]);
            }
            None => out.push_str(authority),
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    redact_password_params(&out)
}

fn redact_password_params(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("password=") {
        let (head, tail) = rest.split_at(i + "password=".len());
        out.push_str(head);
        let end = tail
            .find(|c: char| c == '&' || c == '#' || c.is_whitespace())
            .unwrap_or(tail.len());
        out.push_str("***");
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    /// The error of a URL that must be refused.
    fn refused(url: &str) -> ConfigError {
        BackendConfig::parse(url).err().unwrap()
    }

    /// No pool reaper unless one is asked for (see
    /// `BackendConfig::pool_idle_timeout`: sqlx 0.8's reaper can spin for
    /// good and hang the runtime).
    #[cfg(feature = "postgres")]
    #[test]
    fn sql_pools_run_no_reaper_unless_asked() {
        let lifetimes = |url: &str| {
            let o = BackendConfig::parse(url)
                .unwrap()
                .sqlx_pool::<sqlx::Postgres>();
            (o.get_idle_timeout(), o.get_max_lifetime())
        };
        assert_eq!(lifetimes("postgres://db/app"), (None, None));
        assert_eq!(
            lifetimes(
                "postgres://db/app?simba_pool_idle_timeout_ms=0&simba_pool_max_lifetime_ms=0"
            ),
            (None, None)
        );
        assert_eq!(
            lifetimes(
                "postgres://db/app?simba_pool_idle_timeout_ms=1500&simba_pool_max_lifetime_ms=9000"
            ),
            (
                Some(Duration::from_millis(1500)),
                Some(Duration::from_secs(9))
            )
        );
    }

    #[test]
    fn parses_every_scheme_and_strips_simba_parameters() {
        let c = BackendConfig::parse("sqlite:///tmp/x.db?mode=rwc&simba_table_prefix=a_").unwrap();
        assert_eq!(c.kind(), BackendKind::Sqlite);
        assert_eq!(c.url(), "sqlite:///tmp/x.db?mode=rwc");
        assert_eq!(c.table_prefix(), "a_");
        let c = BackendConfig::parse("mariadb://root@h/db?simba_max_connections=3").unwrap();
        assert_eq!(c.kind(), BackendKind::Mysql);
        assert_eq!(c.url(), "mysql://root@h/db");
        assert_eq!(c.max_connections(), 3);
        assert_eq!(
            BackendConfig::parse("postgresql://h/db").unwrap().kind(),
            BackendKind::Postgres
        );
        let s = BackendConfig::parse(
            "redis+sentinel://:pw@s1:26379,s2:26379/simba/2?simba_key_prefix=jobs",
        )
        .unwrap();
        assert_eq!(s.kind(), BackendKind::Redis);
        assert_eq!(s.key_prefix(), "jobs");
        assert_eq!(s.url(), "redis+sentinel://:pw@s1:26379,s2:26379/simba/2");
        assert_eq!(
            s.redacted_url(),
            "redis+sentinel://:***@s1:26379,s2:26379/simba/2"
        );
        let c = BackendConfig::parse("rediss://u:pw@h:6380/3?simba_key_prefix=app.x").unwrap();
        assert_eq!(c.kind(), BackendKind::Redis);
        assert_eq!(c.url(), "rediss://u:pw@h:6380/3");
        assert_eq!(c.key_prefix(), "app.x");
        assert_eq!(c.redacted_url(), "rediss://u:***@h:6380/3");
        assert!(!format!("{c:?}").contains("pw"));
        assert_eq!(
            BackendConfig::parse("redis://h").unwrap().key_prefix(),
            DEFAULT_KEY_PREFIX
        );
        for bad in ["", "a{b}", "a b", &"k".repeat(65)] {
            let e = refused(&format!("redis://:pw@h/?simba_key_prefix={bad}"));
            assert!(matches!(e, ConfigError::InvalidKeyPrefix { .. }), "{bad}");
        }
    }

    #[test]
    fn postgres_host_lists_parse_in_order() {
        let c = BackendConfig::parse(
            "postgres://u:pw@h1:5433,h2,[fe80::1]:6000/db?target_session_attrs=primary&simba_pool_max=2",
        )
        .unwrap();
        assert_eq!(
            c.postgres_hosts(),
            [
                ("h1".to_owned(), 5433),
                ("h2".to_owned(), 5432),
                ("fe80::1".to_owned(), 6000)
            ]
        );
        assert_eq!(c.session_attrs(), SessionAttrs::Primary);
        // The driver sees the first host; Simba's parameter and libpq's
        // `target_session_attrs` are stripped.
        assert_eq!(c.url(), "postgres://u:pw@h1:5433/db");
        assert_eq!(c.max_connections(), 2);
        let one = BackendConfig::parse("postgresql://h/db").unwrap();
        assert_eq!(one.postgres_hosts(), [("h".to_owned(), 5432)]);
        assert_eq!(one.session_attrs(), SessionAttrs::Any);
        assert_eq!(one.url(), "postgresql://h/db");
        let any = BackendConfig::parse("postgres://a,b/db?target_session_attrs=any").unwrap();
        assert_eq!(any.url(), "postgres://a:5432/db");
        assert_eq!(any.session_attrs(), SessionAttrs::Any);
        // A Unix socket (empty authority) has no host list.
        let sock = BackendConfig::parse("postgres:///db?host=/run/postgresql").unwrap();
        assert!(sock.postgres_hosts().is_empty());
        assert!(BackendConfig::parse("redis://h/0")
            .unwrap()
            .postgres_hosts()
            .is_empty());
    }

    #[test]
    fn bad_postgres_host_lists_give_typed_errors() {
        for bad in [
            "postgres://u:pw@h1,,h2/db",
            "postgres://u:pw@h1,/db",
            "postgres://u:pw@,h2/db",
            "postgres://u:pw@h1,%2Frun%2Fpg/db",
            "postgres://u:pw@/db?host=h1,h2",
        ] {
            let e = BackendConfig::parse(bad).unwrap_err();
            assert!(
                matches!(e, ConfigError::InvalidHostList { .. }),
                "{bad}: {e:?}"
            );
            assert!(!e.to_string().contains("pw@"), "{e}");
        }
        for bad in [
            "postgres://h1:0,h2/db",
            "postgres://h1:x,h2/db",
            "postgres://h1:70000,h2/db",
            "postgres://u:pw@h1,[::1/db",
        ] {
            let e = BackendConfig::parse(bad).unwrap_err();
            assert!(
                matches!(
                    e,
                    ConfigError::InvalidUrl { .. } | ConfigError::InvalidHostList { .. }
                ),
                "{bad}: {e:?}"
            );
        }
        for attrs in ["read-only", "standby", "prefer-standby", "rw", ""] {
            let url = format!("postgres://h1,h2/db?target_session_attrs={attrs}");
            assert_eq!(
                BackendConfig::parse(&url).unwrap_err(),
                ConfigError::InvalidParameter {
                    key: "target_session_attrs",
                    url
                }
            );
        }
        assert!(matches!(
            BackendConfig::parse("mariadb://h1,h2/db").unwrap_err(),
            ConfigError::MultiHost { .. }
        ));
    }

    #[test]
    fn bad_urls_give_typed_errors_without_credentials() {
        assert_eq!(
            BackendConfig::parse("mysql://u:secret@h1:3306,h2:3306/db").unwrap_err(),
            ConfigError::MultiHost {
                url: "mysql://u:***@h1:3306,h2:3306/db".into()
            }
        );
        let e = refused("oracle://scott:tiger@h/x");
        assert!(matches!(e, ConfigError::UnknownScheme { .. }));
        assert!(!e.to_string().contains("tiger"), "{e}");
        let e = refused("postgres://u:pw@h/x?simba_table_prefix=Bad-Prefix");
        assert!(matches!(e, ConfigError::InvalidPrefix { .. }));
        let e = refused("postgres://u:pw@h/x?simba_max_connections=0");
        assert!(!e.to_string().contains("pw@"), "{e}");
    }

    #[test]
    fn a_bad_port_or_redis_database_says_what_is_wrong() {
        let e = refused("redis://u:pw@127.0.0.1:99999/");
        assert!(matches!(e, ConfigError::InvalidUrl { .. }));
        let text = e.to_string();
        assert!(text.contains("port 99999 is out of range"), "{text}");
        assert!(!text.contains("pw@"), "{text}");
        for (url, says) in [
            ("postgres://h:0/db", "port 0 is out of range"),
            ("mysql://h:abc/db", "port `abc` is not a number"),
            ("zk://a:2181,b:/root", "`b:` has an empty port"),
            ("redis://h:6379/x", "database `x` is not a number"),
            ("etcd://[::1:2379", "without its `]`"),
        ] {
            let e = BackendConfig::parse(url).err().unwrap().to_string();
            assert!(e.contains(says), "{url}: {e}");
        }
        for good in [
            "postgres:///db",
            "postgres://u:p:q@h/db",
            "zk://a:2181,b:2182/root",
            "etcd://[::1]:2379",
            "redis://h:6379/3?simba_key_prefix=k",
            "redis://h",
        ] {
            assert!(BackendConfig::parse(good).is_ok(), "{good}");
        }
        let e = BackendConfig::parse("ftp://h").err().unwrap().to_string();
        for kind in BackendKind::ALL {
            for scheme in kind.schemes() {
                assert!(e.contains(&format!("{scheme}://")), "{e}");
            }
        }
    }

    #[test]
    fn listener_and_pooling_parameters() {
        let c = BackendConfig::parse("postgres://h:6432/db?simba_listen=false&sslmode=disable")
            .unwrap();
        assert!(!c.listen());
        assert_eq!(c.url(), "postgres://h:6432/db?sslmode=disable");
        let c = BackendConfig::parse(
            "postgres://h:6432/db?simba_transaction_pooling=true\
             &simba_listen_url=postgres%3A%2F%2Fu%3Apw%40h%3A5432%2Fdb%3Fsslmode%3Ddisable",
        )
        .unwrap();
        assert!(c.transaction_pooling());
        assert!(c.listen());
        assert_eq!(
            c.listen_url(),
            Some("postgres://u:pw@h:5432/db?sslmode=disable")
        );
        assert!(!format!("{c:?}").contains("pw"));
        assert!(
            !BackendConfig::parse("postgres://h/db?simba_transaction_pooling=1")
                .unwrap()
                .listen()
        );
        for bad in [
            "simba_listen=maybe",
            "simba_listen_url=mysql%3A%2F%2Fh",
            "simba_listen_url=%zz",
            "simba_transaction_pooling=",
        ] {
            let e = refused(&format!("postgres://h/db?{bad}"));
            assert!(matches!(e, ConfigError::InvalidParameter { .. }), "{bad}");
        }
    }

    #[test]
    fn redact_hides_passwords_only() {
        assert_eq!(redact("postgres://h/db"), "postgres://h/db");
        assert_eq!(redact("postgres://u@h/db"), "postgres://u@h/db");
        assert_eq!(redact("a postgres://u:p@h b"), "a postgres://u:***@h b");
        assert_eq!(redact("x://u:p:q@h"), "x://u:***@h");
    }
}
