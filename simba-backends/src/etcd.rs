//! The etcd backend (feature `etcd`): sessions are etcd leases, each lease
//! name is a queue of keys attached to them (the oldest holds), fencing
//! tokens are the keys' `create_revision`, and release broadcasts come from
//! a watch on deletes.
//!
//! URL: `etcd://[user:password@]host:port[,host2:port…][/key/prefix]`, or
//! `etcds://…` for TLS (the system's root certificates, or a CA file given as
//! `?cacert=/path/ca.pem`). The key prefix defaults to `/simba`; passwords
//! are redacted in every message.
//!
//! # Data model (see `docs/BACKENDS.md`)
//!
//! For key prefix `P`, a session whose etcd lease id is `L` (16 hex digits):
//!
//! | key | value | attached to lease |
//! |---|---|---|
//! | `P/s/L` | the 128-bit session id (32 hex digits) | `L` |
//! | `P/s/L/NAME` | empty: "session `L` has a place of `NAME`" (same `create_revision` as the place) | `L` |
//! | `P/q/NAME/L` | the session id: the session's **place** in the queue of `NAME` | `L` |
//! | `P/l/NAME` | empty: "a place of `NAME` was created"; its `mod_revision` is the latest place's `create_revision` | none |
//! | `P/g/GROUP/ID` | empty: "session `ID` (32 hex digits) is a member of `GROUP`" (S10.1) | `L` |
//! | `P/j/L/GROUP` | empty: "session `L` joined `GROUP`" | `L` |
//! | `P/c/NAME` | the last claimed schedule slot of `NAME`, 20 decimal digits (S11.1) | none |
//!
//! The session id is the etcd lease id in its low 64 bits and 64 random bits
//! above; every call checks the whole id against `P/s/L`, so a session id is
//! never reused even if etcd one day hands out the same lease id again (S1.3).
//!
//! **The queue.** The place of `NAME` with the lowest `create_revision`
//! holds the lease, and its token is that revision; the others wait in
//! revision order. etcd's revision is global and never decreases, so a place
//! created later has a higher revision than every place that exists then: no
//! place ever appears before an existing one, a place that is first stays
//! first until it is deleted, and the holders of a name follow one another
//! in increasing revision order, so tokens strictly increase (S3.2). A
//! waiting place becomes the holder exactly when every place before it is
//! gone, which the watch's deletions alone can tell (`etcd_queue`).
//!
//! * **open** grants a lease (TTL = the lease duration rounded *up* to whole
//!   seconds, etcd's unit; etcd may raise it to its minimum) and writes
//!   `P/s/L`. The reported remaining time is the TTL etcd granted.
//! * **renew** sends one keep-alive on the session's keep-alive stream and,
//!   concurrently, reads the range `P/s/L…` (the session key and its places'
//!   index): two messages, one round trip, however many leases are held
//!   (S1.1). It lists as owned only the places whose acquire through this
//!   client answered `Won` (a waiting place, or one that became first
//!   without being told, is not a term); a recorded term missing from the
//!   read is not owned (S3.4); a place no acquire of this client stands
//!   behind (a lost reply) is deleted after the renewal.
//! * **acquire**: if the watch struck every place before the session's
//!   waiting place, `Won` at once with no call (the session live by this
//!   client's count from its last renewal). Otherwise one transaction: if
//!   `P/s/L` holds this session id, a nested transaction creates
//!   `P/q/NAME/L`, `P/s/L/NAME` (on lease `L`) and puts `P/l/NAME`, unless
//!   the place exists; then it reads the queue `P/q/NAME/` sorted by
//!   `create_revision` (a transaction's operations apply in order at one
//!   revision, so the read sees the place). First → `Won`; else `Held` by
//!   the first place's session with its revision as the token, and the
//!   place stays, with the places before it recorded. Otherwise `Expired`.
//! * **the watch** (one per backend, on `P/q/`) keeps the places it saw
//!   created, by `create_revision`, and
//!   strikes every deleted place from the waiting places this client
//!   records, and only then announces the name to the release broadcast's
//!   subscribers (S4.2), so the woken candidate's acquire answers `Won`
//!   without a call. A deletion at a revision above the read that named a
//!   place proves that place gone (a key created again is a new place behind
//!   every existing one); a missed deletion only delays the win until the
//!   next acquire reads the queue again.
//! * **release** is one transaction deleting `P/q/NAME/L` and `P/s/L/NAME`
//!   only if the place has `create_revision == token` and holds this session
//!   id: a later place of this session has a higher revision, so a stale
//!   release is a no-op (S3.5).
//! * **withdraw** (S4.5) deletes the session's place unless an acquire
//!   through this client answered `Won` for it (a term ends only by
//!   release). Acquire, release and withdraw of one name run one at a time
//!   per session (a lock per name).
//! * **close** checks `P/s/L` holds this session id, then revokes lease `L`,
//!   which deletes every key attached to it at once (S1.4): places,
//!   memberships and all.
//! * **join** is one transaction: if `P/s/L` holds this session id, put
//!   `P/g/GROUP/ID` and `P/j/L/GROUP` on lease `L`. **leave** deletes both.
//!   The renewal's read is one read-only transaction of ranges: `P/s/L…`,
//!   `P/j/L/…` and `P/g/GROUP/…` for each group this client knows the session
//!   joined (a group joined through another client costs one more read, once).
//! * **claim slot** is one transaction: if `P/s/L` holds this session id,
//!   the place `P/q/NAME/L` holds it with `create_revision == token`, and no
//!   place of `NAME` is older (a compare over the range `P/q/NAME/`), a
//!   nested transaction writes `P/c/NAME` if it is missing or smaller
//!   (zero-padded decimals compare as numbers), else reads it.
//! * **expiry**: etcd revokes the lease, deleting its keys atomically.
//!
//! # Runtimes
//!
//! The `etcd-client` crate runs on tokio. Every call is spawned onto a tokio
//! runtime and awaited through its join handle, which any executor can poll:
//! inside a tokio runtime the backend uses that runtime (the one current when
//! it connected); elsewhere (async-std, a plain executor) it starts a runtime
//! of its own with one worker thread, shut down when the last clone of the
//! backend is dropped.

use crate::etcd_queue::{judge, split_place, strike, Entry, Struck, Waiting};
use crate::queue::{Queues, HOLDER_FRESH, MAX_HOLDERS};
use crate::{check_lease_duration, check_prefix, redact, Backend, BackendConfig, Inspection};
use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, EventType, GetOptions, LeaseKeepAliveStream,
    LeaseKeeper, LeaseTimeToLiveOptions, PutOptions, SortOrder, SortTarget, Txn, TxnOp,
    TxnOpResponse, WatchFilterType, WatchOptions,
};
use futures::future::BoxFuture;
use futures::FutureExt;
use simba_core::{
    AcquireOutcome, BackendError, BackendErrorKind, GroupView, LeaseName, RenewError, Renewal,
    SessionGrant, SessionId, SlotClaim, Token,
};
use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

const NAME: &str = "etcd";

/// The key prefix used when the URL has no path.
pub const DEFAULT_KEY_PREFIX: &str = "/simba";

/// Where and how to reach etcd, parsed from an `etcd://` / `etcds://` URL.
#[derive(Clone)]
pub struct EtcdOptions {
    endpoints: Vec<String>,
    user: Option<(String, String)>,
    tls: bool,
    ca_file: Option<String>,
    prefix: String,
    redacted: String,
    timeout: Duration,
}

impl std::fmt::Debug for EtcdOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdOptions")
            .field("url", &self.redacted)
            .field("endpoints", &self.endpoints)
            .field("user", &self.user.as_ref().map(|(u, _)| u))
            .field("tls", &self.tls)
            .field("prefix", &self.prefix)
            .finish()
    }
}

fn rejected(msg: String) -> BackendError {
    BackendError::new(BackendErrorKind::Rejected, msg)
}

/// Decodes `%XX` escapes in a user name or password.
fn percent_decode(s: &str, url: &str) -> Result<String, BackendError> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| {
                    rejected(format!("etcd: bad %-escape in the credentials of `{url}`"))
                })?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out)
        .map_err(|_| rejected(format!("etcd: credentials of `{url}` are not UTF-8")))
}

impl EtcdOptions {
    /// Parses `etcd://[user:password@]host:port[,host:port…][/prefix][?cacert=path]`
    /// (`etcds://` for TLS).
    ///
    /// # Errors
    /// `Rejected` (credentials redacted) for another scheme, no host, a bad
    /// prefix (`[A-Za-z0-9._:/-]`, at most 200 characters) or an unknown
    /// parameter.
    ///
    /// ```
    /// use simba_backends::etcd::EtcdOptions;
    /// let o = EtcdOptions::parse("etcd://app:pw@h1:2379,h2:2379/jobs").unwrap();
    /// assert_eq!(o.endpoints(), ["http://h1:2379", "http://h2:2379"]);
    /// assert_eq!(o.prefix(), "/jobs");
    /// assert_eq!(o.redacted_url(), "etcd://app:***@h1:2379,h2:2379/jobs");
    /// assert!(EtcdOptions::parse("etcd:///x").is_err());
    /// ```
    pub fn parse(url: &str) -> Result<EtcdOptions, BackendError> {
        let redacted = redact(url);
        let lower = url.to_ascii_lowercase();
        let (tls, rest) = if lower.starts_with("etcds://") {
            (true, &url["etcds://".len()..])
        } else if lower.starts_with("etcd://") {
            (false, &url["etcd://".len()..])
        } else {
            return Err(rejected(format!(
                "etcd: `{redacted}` is not an etcd:// URL"
            )));
        };
        let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (authority, path) = match rest.find('/') {
            Some(i) => rest.split_at(i),
            None => (rest, ""),
        };
        let (user, hosts) = match authority.rfind('@') {
            Some(at) => {
                let (userinfo, hosts) = (&authority[..at], &authority[at + 1..]);
                let (u, p) = userinfo.split_once(':').unwrap_or((userinfo, ""));
                (
                    Some((percent_decode(u, &redacted)?, percent_decode(p, &redacted)?)),
                    hosts,
                )
            }
            None => (None, authority),
        };
        let scheme = if tls { "https" } else { "http" };
        let mut endpoints = Vec::new();
        for h in hosts.split(',') {
            if h.is_empty() || h.contains(|c: char| c.is_whitespace() || c == '@') {
                return Err(rejected(format!("etcd: bad host list in `{redacted}`")));
            }
            endpoints.push(format!("{scheme}://{h}"));
        }
        let prefix = path.trim_end_matches('/');
        let prefix = if prefix.is_empty() {
            DEFAULT_KEY_PREFIX.to_owned()
        } else {
            prefix.to_owned()
        };
        if prefix.len() > 200
            || !prefix
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._:/-".contains(c))
        {
            return Err(rejected(format!(
                "etcd: key prefix {prefix:?} in `{redacted}`: expected at most 200 of [A-Za-z0-9._:/-]"
            )));
        }
        let mut ca_file = None;
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            match pair.split_once('=') {
                Some(("cacert", v)) if !v.is_empty() => ca_file = Some(v.to_owned()),
                _ => {
                    return Err(rejected(format!(
                        "etcd: unknown or empty parameter in `{redacted}` (known: cacert=PATH)"
                    )))
                }
            }
        }
        if ca_file.is_some() && !tls {
            return Err(rejected(format!(
                "etcd: `cacert` needs an etcds:// URL in `{redacted}`"
            )));
        }
        Ok(EtcdOptions {
            endpoints,
            user,
            tls,
            ca_file,
            prefix,
            redacted,
            timeout: Duration::from_secs(5),
        })
    }

    /// The endpoints (`http://host:port`, or `https://` for `etcds://`).
    pub fn endpoints(&self) -> &[String] {
        &self.endpoints
    }

    /// The key prefix, without a trailing `/`.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Replaces the key prefix (same rules as the URL path).
    ///
    /// # Errors
    /// `Rejected` for a bad prefix.
    pub fn with_prefix(mut self, prefix: &str) -> Result<Self, BackendError> {
        let p = EtcdOptions::parse(&format!("etcd://h/{}", prefix.trim_start_matches('/')))?;
        self.prefix = p.prefix;
        Ok(self)
    }

    /// The URL with the password replaced by `***`.
    pub fn redacted_url(&self) -> String {
        self.redacted.clone()
    }

    /// How long connecting, and each call, may take (default 5 s).
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Sets how long connecting, and each call, may take.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
}

/// The tokio runtime the calls run on.
struct Runtime {
    handle: tokio::runtime::Handle,
    /// A runtime of our own when connected outside tokio.
    owned: Option<tokio::runtime::Runtime>,
}

impl Drop for Runtime {
    fn drop(&mut self) {
        if let Some(rt) = self.owned.take() {
            // Never blocks, so it is fine from inside any async context.
            rt.shutdown_background();
        }
    }
}

/// The keep-alive stream of one session, opened on its first renewal.
type KeepAlive = Arc<tokio::sync::Mutex<Option<(LeaseKeeper, LeaseKeepAliveStream)>>>;

/// One lock per lease name (see [`Local::name_locks`]).
type NameLock = Arc<tokio::sync::Mutex<()>>;

/// Where a session stands on one lease name, as this client knows it.
#[derive(Clone, Debug)]
enum Place {
    /// An acquire is writing or reading the place (since then).
    Pending { since: Instant },
    /// The place waits behind `w.blockers`; `since` is the latest acquire
    /// that confirmed it.
    Waiting { w: Waiting, since: Instant },
    /// The place holds the lease and an acquire answered `Won`: a term.
    Won { rev: i64, since: Instant },
}

impl Place {
    fn won(rev: i64) -> Place {
        Place::Won {
            rev,
            since: Instant::now(),
        }
    }
}

/// What this client knows about a session it opened, renewed or acted for.
struct Local {
    session: SessionId,
    ttl_secs: i64,
    /// When the last successful renewal (or the grant) was *sent*.
    renewed_at: Instant,
    keep_alive: KeepAlive,
    /// The groups the session joined, as this client last saw them: the
    /// renewal reads their members in its one transaction.
    groups: std::collections::BTreeSet<LeaseName>,
    /// The session's places, by lease name.
    places: HashMap<LeaseName, Place>,
    /// Acquire, release and withdraw of one name run one at a time, so a
    /// place is never written and removed at once by this client.
    name_locks: HashMap<LeaseName, NameLock>,
}

impl Local {
    fn new(session: SessionId, ttl_secs: i64, renewed_at: Instant) -> Local {
        Local {
            session,
            ttl_secs,
            renewed_at,
            keep_alive: KeepAlive::default(),
            groups: std::collections::BTreeSet::new(),
            places: HashMap::new(),
            name_locks: HashMap::new(),
        }
    }
}

/// What the backend's one watch feeds (see [`track`]): deletions are
/// marked with the revision they happened at.
type Tracker = crate::queue::Tracker<i64>;

struct Inner {
    client: Client,
    rt: Runtime,
    prefix: String,
    redacted: String,
    timeout: Duration,
    local: Mutex<HashMap<i64, Local>>,
    /// The watch on places, see [`track`].
    tracker: Mutex<Tracker>,
    /// The holding place of each name as the latest acquire through this
    /// client read it (suffix, when read), see [`track`]: locked after
    /// `tracker`, never before.
    holders: Mutex<HashMap<String, (String, Instant)>>,
    /// The places the watch saw created and not yet deleted ([`Queues`]).
    queues: Mutex<Queues>,
    /// The first revision the running watch delivers every deletion from
    /// (`i64::MAX` while none runs): a holder read at an older revision
    /// may have been deleted unseen, and is not recorded.
    watch_from: std::sync::atomic::AtomicI64,
    /// Serializes starting the watch.
    tracker_start: futures::lock::Mutex<()>,
    /// Dropped with the backend: the watch task then ends.
    tracker_stop: Mutex<Option<tokio::sync::oneshot::Sender<()>>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The etcd backend. Cheap to clone (one shared client).
#[derive(Clone)]
pub struct EtcdBackend {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for EtcdBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdBackend")
            .field("url", &self.inner.redacted)
            .field("prefix", &self.inner.prefix)
            .finish()
    }
}

/// Turns an etcd client error into a typed [`BackendError`] (redacted).
fn map_err(what: &str, e: etcd_client::Error) -> BackendError {
    use etcd_client::Error as E;
    use tonic_code::*;
    let text = redact(&format!("{NAME} {what}: {e}"));
    // rustls refused the server's certificate (unknown issuer, another
    // name, expired): tonic reports it as a transport failure, but it is a
    // setting to fix, not a server that is down.
    if text.contains("invalid peer certificate") {
        return BackendError::new(BackendErrorKind::Rejected, text);
    }
    let kind = match &e {
        E::TransportError(_) | E::IoError(_) => BackendErrorKind::Unavailable,
        E::InvalidArgs(_) | E::InvalidUri(_) | E::InvalidMetadataValue(_) | E::EndpointError(_) => {
            BackendErrorKind::Rejected
        }
        E::GRpcStatus(s) => match s.code() as i32 {
            UNAVAILABLE | CANCELLED | ABORTED | UNKNOWN_TRANSPORT => BackendErrorKind::Unavailable,
            DEADLINE_EXCEEDED => BackendErrorKind::Timeout,
            INVALID_ARGUMENT | PERMISSION_DENIED | UNAUTHENTICATED | FAILED_PRECONDITION
            | OUT_OF_RANGE | RESOURCE_EXHAUSTED => BackendErrorKind::Rejected,
            _ => BackendErrorKind::Other,
        },
        E::LeaseKeepAliveError(_) | E::WatchError(_) => BackendErrorKind::Unavailable,
        _ => BackendErrorKind::Other,
    };
    BackendError::new(kind, text)
}

/// gRPC status codes, by number (tonic is not a direct dependency).
mod tonic_code {
    pub const CANCELLED: i32 = 1;
    pub const UNKNOWN_TRANSPORT: i32 = 2;
    pub const INVALID_ARGUMENT: i32 = 3;
    pub const DEADLINE_EXCEEDED: i32 = 4;
    pub const NOT_FOUND: i32 = 5;
    pub const PERMISSION_DENIED: i32 = 7;
    pub const RESOURCE_EXHAUSTED: i32 = 8;
    pub const FAILED_PRECONDITION: i32 = 9;
    pub const ABORTED: i32 = 10;
    pub const OUT_OF_RANGE: i32 = 11;
    pub const UNAVAILABLE: i32 = 14;
    pub const UNAUTHENTICATED: i32 = 16;
}

fn malformed(what: String) -> BackendError {
    BackendError::new(BackendErrorKind::Malformed, format!("{NAME}: {what}"))
}

fn is_not_found(e: &etcd_client::Error) -> bool {
    match e {
        etcd_client::Error::GRpcStatus(s) => {
            s.code() as i32 == tonic_code::NOT_FOUND || s.message().contains("not found")
        }
        etcd_client::Error::LeaseKeepAliveError(m) => m.contains("not found"),
        _ => false,
    }
}

/// The lease id in a session id's low 64 bits (`None` if it cannot be one).
fn lease_of(session: SessionId) -> Option<i64> {
    let low = session.as_u128() as u64;
    i64::try_from(low).ok().filter(|l| *l > 0)
}

fn token_from(name: &str, rev: i64) -> Result<Token, BackendError> {
    u64::try_from(rev)
        .ok()
        .and_then(Token::new)
        .ok_or_else(|| malformed(format!("revision {rev} of lease `{name}` is not > 0")))
}

fn session_from(value: &[u8]) -> Result<SessionId, BackendError> {
    std::str::from_utf8(value)
        .ok()
        .filter(|s| s.len() == 32)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| {
            malformed(format!(
                "a session id value of {} bytes is not 32 hex digits",
                value.len()
            ))
        })
}

fn secs(ttl: i64) -> Duration {
    Duration::from_secs(u64::try_from(ttl).unwrap_or(0))
}

impl EtcdBackend {
    /// Connects to the etcd that `url` names (`etcd://…`, `etcds://…`).
    ///
    /// # Errors
    /// As [`EtcdBackend::connect_with`].
    pub async fn connect_url(url: &str) -> Result<EtcdBackend, BackendError> {
        Self::connect_with(EtcdOptions::parse(url)?).await
    }

    /// Connects as `config` says (its URL, and its connect timeout as the
    /// timeout of connecting and of every call).
    ///
    /// # Errors
    /// As [`EtcdBackend::connect_with`].
    pub async fn connect(config: &BackendConfig) -> Result<EtcdBackend, BackendError> {
        let opts = EtcdOptions::parse(config.url())?.with_timeout(config.connect_timeout());
        Self::connect_with(opts).await
    }

    /// Connects and checks that etcd answers (one read), within the
    /// options' timeout.
    ///
    /// # Errors
    /// `Unavailable`/`Timeout` if etcd cannot be reached in time, `Rejected`
    /// for bad credentials or TLS settings; never hangs past the timeout.
    pub async fn connect_with(opts: EtcdOptions) -> Result<EtcdBackend, BackendError> {
        let rt = match tokio::runtime::Handle::try_current() {
            Ok(handle) => Runtime {
                handle,
                owned: None,
            },
            Err(_) => {
                let owned = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(1)
                    .thread_name("simba-etcd")
                    .enable_all()
                    .build()
                    .map_err(|e| {
                        BackendError::new(
                            BackendErrorKind::Other,
                            format!("etcd: cannot start a tokio runtime: {e}"),
                        )
                    })?;
                Runtime {
                    handle: owned.handle().clone(),
                    owned: Some(owned),
                }
            }
        };
        let mut co = ConnectOptions::new()
            .with_connect_timeout(opts.timeout)
            .with_keep_alive(Duration::from_secs(5), opts.timeout);
        if let Some((u, p)) = &opts.user {
            co = co.with_user(u.clone(), p.clone());
        }
        if opts.tls {
            let mut tls = etcd_client::TlsOptions::new().with_native_roots();
            if let Some(path) = &opts.ca_file {
                let pem = std::fs::read(path)
                    .map_err(|e| rejected(format!("etcd: cannot read CA file {path:?}: {e}")))?;
                tls = tls.ca_certificate(etcd_client::Certificate::from_pem(pem));
            }
            co = co.with_tls(tls);
        }
        let endpoints = opts.endpoints.clone();
        let probe_key = format!("{}/", opts.prefix);
        let what = format!("connect to {}", opts.redacted);
        let client = spawn_timed(&rt.handle, opts.timeout, &what, async move {
            let mut client = Client::connect(endpoints, Some(co)).await?;
            // Connecting is lazy: one read proves etcd answers.
            client
                .get(
                    probe_key,
                    Some(GetOptions::new().with_prefix().with_count_only()),
                )
                .await?;
            Ok(client)
        })
        .await?;
        Ok(EtcdBackend {
            inner: Arc::new(Inner {
                client,
                rt,
                prefix: opts.prefix,
                redacted: opts.redacted,
                timeout: opts.timeout,
                local: Mutex::new(HashMap::new()),
                tracker: Mutex::new(Tracker::default()),
                holders: Mutex::new(HashMap::new()),
                queues: Mutex::new(Queues::default()),
                watch_from: std::sync::atomic::AtomicI64::new(i64::MAX),
                tracker_start: futures::lock::Mutex::new(()),
                tracker_stop: Mutex::new(None),
            }),
        })
    }

    /// The key prefix.
    pub fn prefix(&self) -> &str {
        &self.inner.prefix
    }

    /// A clone of the underlying client (for tests and tools).
    pub fn client(&self) -> Client {
        self.inner.client.clone()
    }

    /// Deletes every key under the prefix (for tests: leaves nothing behind).
    ///
    /// # Errors
    /// A [`BackendError`] if the call failed.
    pub async fn delete_all(&self) -> Result<(), BackendError> {
        let mut c = self.client();
        let key = format!("{}/", self.inner.prefix);
        self.run("delete all", async move {
            c.delete(key, Some(etcd_client::DeleteOptions::new().with_prefix()))
                .await
                .map(|_| ())
        })
        .await
    }

    /// A raw `get` of one key, for benchmarks: the round trip every other
    /// call is compared with.
    ///
    /// # Errors
    /// A [`BackendError`] if the call failed.
    pub async fn raw_get(&self, key: &str) -> Result<usize, BackendError> {
        let mut c = self.client();
        let key = key.to_owned();
        self.run(
            "get",
            async move { Ok(c.get(key, None).await?.kvs().len()) },
        )
        .await
    }

    /// A raw `put` of one key, for benchmarks: a durable write (etcd
    /// commits it through its log before answering), the floor of any call
    /// that changes a lease (an acquire that places the session, a release;
    /// a hand-over to a waiting place is the release's delete alone).
    ///
    /// # Errors
    /// A [`BackendError`] if the call failed.
    pub async fn raw_put(&self, key: &str) -> Result<(), BackendError> {
        let mut c = self.client();
        let key = key.to_owned();
        self.run(
            "put",
            async move { c.put(key, "1", None).await.map(|_| ()) },
        )
        .await
    }

    fn key_session(&self, lease: i64) -> String {
        format!("{}/s/{lease:016x}", self.inner.prefix)
    }
    fn key_owned(&self, lease: i64, name: &LeaseName) -> String {
        format!("{}/s/{lease:016x}/{name}", self.inner.prefix)
    }
    /// `P/l/NAME`: put with every place of `NAME`, so its `mod_revision` is
    /// the latest place's `create_revision` (`inspect` shows it as a free
    /// name's latest token).
    fn key_lease(&self, name: &LeaseName) -> String {
        format!("{}/l/{name}", self.inner.prefix)
    }
    /// `P/q/NAME/`: the places of `NAME`.
    fn key_queue(&self, name: &LeaseName) -> String {
        format!("{}/q/{name}/", self.inner.prefix)
    }
    /// `P/q/NAME/L`: the place of session `L`.
    fn key_place(&self, name: &LeaseName, lease: i64) -> String {
        format!("{}/q/{name}/{lease:016x}", self.inner.prefix)
    }
    /// `P/g/GROUP/`: the members of a group.
    fn key_group(&self, group: &LeaseName) -> String {
        format!("{}/g/{group}/", self.inner.prefix)
    }
    /// `P/j/L/`: the groups session `L` joined.
    fn key_joined(&self, lease: i64) -> String {
        format!("{}/j/{lease:016x}/", self.inner.prefix)
    }
    fn key_slot(&self, name: &LeaseName) -> String {
        format!("{}/c/{name}", self.inner.prefix)
    }

    /// The groups this client knows `session` joined.
    fn cached_groups(&self, lease: i64, session: SessionId) -> Vec<LeaseName> {
        let local = self.inner.local.lock().unwrap_or_else(|p| p.into_inner());
        local
            .get(&lease)
            .filter(|l| l.session == session)
            .map(|l| l.groups.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Records what this client knows of `session`'s groups.
    fn cache_groups(
        &self,
        lease: i64,
        session: SessionId,
        change: impl FnOnce(&mut std::collections::BTreeSet<LeaseName>),
    ) {
        self.keep_alive_of(lease, session);
        let mut local = self.inner.local.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(l) = local.get_mut(&lease).filter(|l| l.session == session) {
            change(&mut l.groups);
        }
    }

    /// Joins (`join`) or leaves `group` for `session`: one transaction that
    /// writes (on the session's lease) or deletes the member key and the
    /// session's joined key, only while the session is live (S10.1).
    async fn membership(
        &self,
        join: bool,
        session: SessionId,
        group: &LeaseName,
    ) -> Result<(), BackendError> {
        let Some(lease) = lease_of(session) else {
            return Ok(());
        };
        let sid = session.to_string();
        let member = format!("{}{sid}", self.key_group(group));
        let joined = format!("{}{group}", self.key_joined(lease));
        let (what, ops) = if join {
            let on_lease = || Some(PutOptions::new().with_lease(lease));
            let ops = [
                TxnOp::put(member, "", on_lease()),
                TxnOp::put(joined, "", on_lease()),
            ];
            ("join group", ops)
        } else {
            let ops = [TxnOp::delete(member, None), TxnOp::delete(joined, None)];
            ("leave group", ops)
        };
        let txn = Txn::new()
            .when([Compare::value(
                self.key_session(lease),
                CompareOp::Equal,
                sid,
            )])
            .and_then(ops);
        let mut c = self.client();
        let resp = self.run(what, async move { c.txn(txn).await }).await?;
        // Not live: a join is a no-op. A leave is known either way.
        if resp.succeeded() || !join {
            self.cache_groups(lease, session, |known| {
                if join {
                    known.insert(group.clone());
                } else {
                    known.remove(group);
                }
            });
        }
        Ok(())
    }

    /// Deletes the place on `name` of the session on `lease` and its owned
    /// key, in one transaction, if `when` holds; `what` names the call.
    async fn delete_place(
        &self,
        what: &str,
        lease: i64,
        name: &LeaseName,
        when: impl Into<Vec<Compare>>,
    ) -> Result<(), BackendError> {
        let txn = Txn::new().when(when).and_then([
            TxnOp::delete(self.key_place(name, lease), None),
            TxnOp::delete(self.key_owned(lease, name), None),
        ]);
        let mut c = self.client();
        self.run(what, async move { c.txn(txn).await.map(|_| ()) })
            .await
    }

    /// Reads the members of `groups` in one read-only transaction.
    async fn read_members(&self, groups: &[LeaseName]) -> Result<Vec<GroupView>, BackendError> {
        let txn = Txn::new().and_then(
            groups
                .iter()
                .map(|g| TxnOp::get(self.key_group(g), Some(GetOptions::new().with_prefix())))
                .collect::<Vec<_>>(),
        );
        let mut c = self.client();
        let resp = self.run("renew", async move { c.txn(txn).await }).await?;
        let gets = gets_of(&resp);
        if gets.len() != groups.len() {
            return Err(malformed(format!(
                "renew read {} groups' members, expected {}",
                gets.len(),
                groups.len()
            )));
        }
        groups
            .iter()
            .zip(gets)
            .map(|(g, get)| self.view(g, &get))
            .collect()
    }

    /// A group's view from the range read of `P/g/GROUP/`.
    fn view(
        &self,
        group: &LeaseName,
        get: &etcd_client::GetResponse,
    ) -> Result<GroupView, BackendError> {
        let prefix = self.key_group(group);
        let mut members = get
            .kvs()
            .iter()
            .map(|kv| {
                kv.key()
                    .strip_prefix(prefix.as_bytes())
                    .ok_or_else(|| malformed(format!("a key outside {prefix} in its range")))
                    .and_then(session_from)
            })
            .collect::<Result<Vec<_>, _>>()?;
        members.sort_unstable();
        members.dedup();
        Ok(GroupView {
            group: group.clone(),
            members,
        })
    }

    /// Runs `fut` on the tokio runtime, bounded by the call timeout.
    async fn run<T: Send + 'static>(
        &self,
        what: &str,
        fut: impl Future<Output = Result<T, etcd_client::Error>> + Send + 'static,
    ) -> Result<T, BackendError> {
        spawn_timed(&self.inner.rt.handle, self.inner.timeout, what, fut).await
    }

    fn keep_alive_of(&self, lease: i64, session: SessionId) -> KeepAlive {
        let mut local = self.inner.local.lock().unwrap_or_else(|p| p.into_inner());
        match local.get(&lease) {
            Some(l) if l.session == session => l.keep_alive.clone(),
            _ => {
                let k = KeepAlive::default();
                let mut l = Local::new(session, 0, Instant::now());
                l.keep_alive = k.clone();
                local.insert(lease, l);
                k
            }
        }
    }

    /// The lock of `name` for the session (see [`Local::name_locks`]).
    fn name_lock(&self, lease: i64, session: SessionId, name: &LeaseName) -> NameLock {
        self.keep_alive_of(lease, session);
        let mut local = lock(&self.inner.local);
        match local.get_mut(&lease).filter(|l| l.session == session) {
            Some(l) => l.name_locks.entry(name.clone()).or_default().clone(),
            None => NameLock::default(),
        }
    }

    /// The session's place for `name`, as this client knows it.
    fn place_of(&self, lease: i64, session: SessionId, name: &LeaseName) -> Option<Place> {
        lock(&self.inner.local)
            .get(&lease)
            .filter(|l| l.session == session)
            .and_then(|l| l.places.get(name).cloned())
    }

    /// Whether this client knows `session` and knows it has no place of
    /// `name`: every place an acquire through this client may have written
    /// is recorded (`Pending` until the acquire's outcome is known, also
    /// when the call failed or timed out), and a place no record stands
    /// behind is deleted after the next renewal.
    fn knows_no_place(&self, lease: i64, session: SessionId, name: &LeaseName) -> bool {
        lock(&self.inner.local)
            .get(&lease)
            .filter(|l| l.session == session)
            .is_some_and(|l| !l.places.contains_key(name))
    }

    /// Records (or, with `None`, forgets) the session's place for `name`.
    fn set_place(&self, lease: i64, session: SessionId, name: &LeaseName, place: Option<Place>) {
        let mut local = lock(&self.inner.local);
        if let Some(l) = local.get_mut(&lease).filter(|l| l.session == session) {
            match place {
                Some(p) => {
                    l.places.insert(name.clone(), p);
                }
                None => {
                    l.places.remove(name);
                }
            }
        }
    }

    /// The session's remaining time as this client counts it from its last
    /// renewal (sent), if it knows one and some is left: no call.
    fn local_remaining(&self, lease: i64, session: SessionId) -> Option<Duration> {
        let local = lock(&self.inner.local);
        let l = local.get(&lease).filter(|l| l.session == session)?;
        let left = secs(l.ttl_secs).saturating_sub(l.renewed_at.elapsed());
        (left > Duration::ZERO).then_some(left)
    }

    /// Starts the backend's watch unless it runs (see [`track`]); resolves
    /// once etcd confirmed it.
    async fn ensure_tracker(&self) -> Result<(), BackendError> {
        let start = async {
            let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
            let (stop_tx, stop_rx) = tokio::sync::oneshot::channel();
            self.inner.rt.handle.spawn(track(
                Arc::downgrade(&self.inner),
                self.client(),
                self.inner.prefix.clone(),
                self.inner.timeout,
                ready_tx,
                stop_rx,
            ));
            match ready_rx.await {
                Ok(Ok(())) => {
                    *lock(&self.inner.tracker_stop) = Some(stop_tx);
                    lock(&self.inner.tracker).running = true;
                    Ok(())
                }
                Ok(Err(e)) => Err(map_err("watch", e)),
                Err(_) => Err(BackendError::new(
                    BackendErrorKind::Other,
                    "etcd watch: the watch task stopped",
                )),
            }
        };
        let inner = &self.inner;
        crate::queue::ensure_running(&inner.tracker, &inner.tracker_start, start).await
    }

    /// The acquire transaction (see the module docs): place the session in
    /// the queue of `name` unless it is there, and list the queue, in one
    /// round trip; then judge the listing.
    async fn acquire_call(
        &self,
        lease: i64,
        session: SessionId,
        name: &LeaseName,
    ) -> Result<AcquireOutcome, BackendError> {
        let sid = session.to_string();
        let skey = self.key_session(lease);
        let lkey = self.key_lease(name);
        let place = self.key_place(name, lease);
        let on_lease = || Some(PutOptions::new().with_lease(lease));
        let create = Txn::new()
            .when([Compare::create_revision(place.clone(), CompareOp::Equal, 0)])
            .and_then([
                TxnOp::put(place, sid.clone(), on_lease()),
                TxnOp::put(self.key_owned(lease, name), "", on_lease()),
                TxnOp::put(lkey, "", None),
            ]);
        let queue = self.key_queue(name);
        let listing = GetOptions::new()
            .with_prefix()
            .with_sort(SortTarget::Create, SortOrder::Ascend);
        // Live session: then the range after the nested write sees it
        // (etcd applies a transaction's operations in order, at one
        // revision).
        let txn = Txn::new()
            .when([Compare::value(skey, CompareOp::Equal, sid.clone())])
            .and_then([TxnOp::txn(create), TxnOp::get(queue.clone(), Some(listing))]);
        let mut c = self.client();
        let resp = self.run("acquire", async move { c.txn(txn).await }).await?;
        let gets = gets_of(&resp);
        let bad = |what: String| malformed(format!("acquire of `{name}`: {what}"));
        if !resp.succeeded() {
            // `P/s/L` is gone or holds another session id.
            self.forget(lease);
            return Ok(AcquireOutcome::Expired);
        }
        let [listed] = gets.as_slice() else {
            return Err(bad(format!(
                "{} reads in the reply, expected 1",
                gets.len()
            )));
        };
        let read_rev = resp
            .header()
            .map(|h| h.revision())
            .ok_or_else(|| bad("no revision in the reply".into()))?;
        let entries = listed
            .kvs()
            .iter()
            .map(|kv| {
                let suffix = kv
                    .key()
                    .strip_prefix(queue.as_bytes())
                    .and_then(|s| std::str::from_utf8(s).ok())
                    .ok_or_else(|| bad(format!("a key outside {queue} in its range")))?;
                Ok(Entry {
                    suffix: suffix.to_owned(),
                    rev: kv.create_revision(),
                    value: kv.value().to_vec(),
                })
            })
            .collect::<Result<Vec<_>, BackendError>>()?;
        let me = format!("{lease:016x}");
        // Judged and recorded under the watch's lock: a deletion the watch
        // reports is either remembered before the judging or struck from
        // the record after it.
        let (judged, own_gone) = {
            let tracker = lock(&self.inner.tracker);
            let deleted = tracker.deleted(name.as_str());
            let gone = |suffix: &str| {
                deleted
                    .and_then(|d| d.get(suffix))
                    .is_some_and(|d| *d > read_rev)
            };
            let judged = judge(&entries, &me, sid.as_bytes(), gone);
            let own_gone = gone(&me);
            // The holder as this listing shows it (places seen deleted
            // since left out), recorded under the watch's lock: a deletion
            // of it is either left out here or seen by the watch after.
            let watched = tracker.running
                && read_rev.saturating_add(1)
                    >= self
                        .inner
                        .watch_from
                        .load(std::sync::atomic::Ordering::SeqCst);
            let mut holders = lock(&self.inner.holders);
            if holders.len() >= MAX_HOLDERS {
                holders.clear();
            }
            match &judged.first {
                Some(first) if watched => {
                    holders.insert(
                        name.as_str().to_owned(),
                        (first.suffix.clone(), Instant::now()),
                    );
                }
                _ => {
                    holders.remove(name.as_str());
                }
            }
            drop(holders);
            if let (Some(rev), false) = (judged.ours, judged.blockers.is_empty()) {
                if !own_gone {
                    let w = Waiting {
                        rev,
                        read_rev,
                        blockers: judged.blockers.clone(),
                    };
                    let since = Instant::now();
                    self.set_place(lease, session, name, Some(Place::Waiting { w, since }));
                }
            }
            (judged, own_gone)
        };
        let holder = || {
            let first = judged.first.as_ref();
            Ok::<_, BackendError>(AcquireOutcome::Held {
                holder: first.and_then(|f| session_from(&f.value).ok()),
                token: first
                    .map(|f| token_from(name.as_str(), f.rev))
                    .transpose()?,
                holder_remaining: None,
            })
        };
        let Some(rev) = judged.ours else {
            if own_gone {
                // Deleted since (expiry, or another client acting for the
                // session): the next acquire tells which.
                self.set_place(lease, session, name, None);
                return holder();
            }
            return Err(bad(if judged.foreign {
                format!("its place {me} holds another session id")
            } else {
                format!("the listing misses its place {me}")
            }));
        };
        let token = token_from(name.as_str(), rev)?;
        if !judged.blockers.is_empty() {
            if !lock(&self.inner.tracker).running {
                // The watch that moves the place forward; without it the
                // next acquire reads the queue again.
                if let Err(error) = self.ensure_tracker().await {
                    tracing::debug!(%error, "etcd: no watch yet; waiters re-read the queue");
                }
            }
            return holder();
        }
        // First (or every place before it seen deleted since): a term.
        let remaining = self.remaining(session, lease).await?;
        self.set_place(lease, session, name, Some(Place::won(rev)));
        Ok(AcquireOutcome::Won { token, remaining })
    }

    fn forget(&self, lease: i64) {
        self.inner
            .local
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&lease);
    }

    /// The session's remaining time as this client knows it (never more than
    /// true: counted from when the last renewal was sent), else etcd's.
    async fn remaining(&self, session: SessionId, lease: i64) -> Result<Duration, BackendError> {
        {
            let local = self.inner.local.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(l) = local.get(&lease).filter(|l| l.session == session) {
                let left = secs(l.ttl_secs).saturating_sub(l.renewed_at.elapsed());
                if left > Duration::ZERO {
                    return Ok(left);
                }
            }
        }
        let mut c = self.client();
        let ttl = self
            .run("time to live", async move {
                Ok(c.lease_time_to_live(lease, None).await?.ttl())
            })
            .await?;
        Ok(secs(ttl))
    }
}

/// Spawns `fut` on `handle` bounded by `timeout`, and awaits it from any
/// executor.
async fn spawn_timed<T: Send + 'static>(
    handle: &tokio::runtime::Handle,
    timeout: Duration,
    what: &str,
    fut: impl Future<Output = Result<T, etcd_client::Error>> + Send + 'static,
) -> Result<T, BackendError> {
    // The timer is created inside the task: outside tokio there is no timer.
    let task = handle.spawn(async move { tokio::time::timeout(timeout, fut).await });
    match task.await {
        Ok(Ok(Ok(v))) => Ok(v),
        Ok(Ok(Err(e))) => Err(map_err(what, e)),
        Ok(Err(_)) => Err(BackendError::new(
            BackendErrorKind::Timeout,
            format!("{NAME} {what}: no answer within {timeout:?}"),
        )),
        Err(e) => Err(BackendError::new(
            BackendErrorKind::Other,
            format!("{NAME} {what}: the call's task failed: {e}"),
        )),
    }
}

/// The TTL to ask etcd for: the lease duration rounded up to whole seconds.
fn ttl_for(lease_duration: Duration) -> Result<i64, BackendError> {
    check_lease_duration(lease_duration)?;
    let whole = lease_duration.as_secs() + u64::from(lease_duration.subsec_nanos() > 0);
    i64::try_from(whole.max(1)).map_err(|_| {
        rejected(format!(
            "lease duration {lease_duration:?} is too long for etcd"
        ))
    })
}

impl Backend for EtcdBackend {
    crate::queue::queue_backend_common!();

    fn open_session_with<'a>(
        &'a self,
        lease_duration: Duration,
        metadata: &'a crate::SessionMetadata,
    ) -> BoxFuture<'a, Result<SessionGrant, BackendError>> {
        let metadata = metadata.encode();
        async move {
            let ttl = ttl_for(lease_duration)?;
            let mut hi = [0u8; 8];
            getrandom::getrandom(&mut hi).map_err(|e| {
                BackendError::new(
                    BackendErrorKind::Other,
                    format!("no OS randomness for a session id: {e}"),
                )
            })?;
            let hi = u64::from_be_bytes(hi);
            let mut c = self.client();
            let prefix = self.inner.prefix.clone();
            let sent = Instant::now();
            let (session, granted) = self
                .run("open session", async move {
                    let grant = c.lease_grant(ttl, None).await?;
                    let lease = grant.id();
                    let low = u64::try_from(lease).unwrap_or(0);
                    let session = SessionId::from_u128((u128::from(hi) << 64) | u128::from(low));
                    // The session key holds exactly the session id (every
                    // guarded write compares it); the metadata, if any, sits
                    // beside it on the same lease, written in one transaction.
                    let mut puts = vec![TxnOp::put(
                        format!("{prefix}/s/{lease:016x}"),
                        session.to_string(),
                        Some(PutOptions::new().with_lease(lease)),
                    )];
                    if !metadata.is_empty() {
                        puts.push(TxnOp::put(
                            format!("{prefix}/m/{lease:016x}"),
                            metadata.clone(),
                            Some(PutOptions::new().with_lease(lease)),
                        ));
                    }
                    c.txn(Txn::new().and_then(puts)).await?;
                    Ok((session, grant.ttl()))
                })
                .await?;
            let Some(lease) = lease_of(session).filter(|_| granted > 0) else {
                return Err(malformed(format!(
                    "lease grant returned id {session} with TTL {granted}"
                )));
            };
            self.inner
                .local
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(lease, Local::new(session, granted, sent));
            Ok(SessionGrant {
                session,
                remaining: secs(granted),
            })
        }
        .boxed()
    }

    fn renew(&self, session: SessionId) -> BoxFuture<'_, Result<Renewal, RenewError>> {
        async move {
            let Some(lease) = lease_of(session) else {
                return Err(RenewError::Expired);
            };
            let keep_alive = self.keep_alive_of(lease, session);
            let mut lc = self.inner.client.lease_client();
            let ka = async move {
                let mut guard = keep_alive.lock().await;
                // Taken out while in use: if this future is dropped mid-call
                // (timeout), the stream goes with it and the next renewal
                // opens a fresh one, never reading a stale reply.
                let (mut keeper, mut stream) = match guard.take() {
                    Some(pair) => pair,
                    None => match lc.keep_alive(lease).await {
                        Ok(pair) => pair,
                        Err(e) if is_not_found(&e) => return Ok(0),
                        Err(e) => return Err(e),
                    },
                };
                keeper.keep_alive().await?;
                match stream.message().await? {
                    Some(resp) => {
                        *guard = Some((keeper, stream));
                        Ok(resp.ttl())
                    }
                    None => Err(etcd_client::Error::LeaseKeepAliveError(
                        "keep-alive stream ended".into(),
                    )),
                }
            };
            let mut c = self.client();
            let skey = self.key_session(lease);
            // One read-only transaction: the session key and its owned index,
            // the groups it joined, and the members of the groups this client
            // knows it joined (S10.1).
            let cached = self.cached_groups(lease, session);
            let mut reads = vec![
                TxnOp::get(skey, Some(GetOptions::new().with_prefix())),
                TxnOp::get(
                    self.key_joined(lease),
                    Some(GetOptions::new().with_prefix()),
                ),
            ];
            reads.extend(
                cached
                    .iter()
                    .map(|g| TxnOp::get(self.key_group(g), Some(GetOptions::new().with_prefix()))),
            );
            let txn = Txn::new().and_then(reads);
            let read = async move { c.txn(txn).await };
            let sent = Instant::now();
            let (ttl, resp) = self
                .run("renew", async move {
                    let (ka, read) = futures::join!(ka, read);
                    Ok((ka?, read?))
                })
                .await?;
            let gets = gets_of(&resp);
            let [own, joined, members @ ..] = gets.as_slice() else {
                return Err(malformed(format!("renew read {} ranges", gets.len())).into());
            };
            if members.len() != cached.len() {
                return Err(malformed(format!(
                    "renew read {} groups' members, expected {}",
                    members.len(),
                    cached.len()
                ))
                .into());
            }
            let kvs = own.kvs();
            let skey = self.key_session(lease);
            let mine = kvs.iter().find(|kv| kv.key() == skey.as_bytes());
            if ttl <= 0 || mine.is_none_or(|kv| kv.value() != session.to_string().as_bytes()) {
                self.forget(lease);
                return Err(RenewError::Expired);
            }
            let owned_prefix = format!("{skey}/");
            // The session's places (its index: same revision as the place).
            let mut listed: HashMap<LeaseName, i64> = HashMap::new();
            for kv in kvs {
                let Some(name) = kv.key().strip_prefix(owned_prefix.as_bytes()) else {
                    continue;
                };
                let name = std::str::from_utf8(name)
                    .ok()
                    .and_then(|n| LeaseName::new(n).ok())
                    .ok_or_else(|| malformed(format!("a bad lease name under {owned_prefix}")))?;
                token_from(name.as_str(), kv.create_revision())?;
                listed.insert(name, kv.create_revision());
            }
            let mut owned = Vec::new();
            // Places no acquire of this client stands behind: left by a lost
            // reply (none recorded). A waiting place stays until it wins, is
            // withdrawn, or ends with the session (S4.5).
            let mut stale: Vec<(LeaseName, i64)> = Vec::new();
            if let Some(l) = lock(&self.inner.local)
                .get_mut(&lease)
                .filter(|l| l.session == session)
            {
                l.ttl_secs = ttl;
                l.renewed_at = sent;
                for (name, rev) in &listed {
                    match l.places.get(name) {
                        // Only a place an acquire answered `Won` is a term.
                        Some(Place::Won { rev: r, .. }) if r == rev => {
                            owned.push((name.clone(), token_from(name.as_str(), *rev)?));
                        }
                        Some(Place::Waiting { w, .. }) if w.rev == *rev => {}
                        Some(Place::Pending { since })
                            if *since + self.inner.timeout * 2 >= sent => {}
                        _ => stale.push((name.clone(), *rev)),
                    }
                }
                // A place recorded before this read was sent and missing
                // from it is gone: a term so ended shows as not owned (S3.4).
                l.places.retain(|name, place| match place {
                    Place::Won { rev, since }
                    | Place::Waiting {
                        w: Waiting { rev, .. },
                        since,
                    } => *since >= sent || listed.get(name) == Some(rev),
                    // An acquire whose outcome is unknown (still running, or
                    // failed) may have written a place; once the record is
                    // old and the read shows none, there is none.
                    Place::Pending { since } => {
                        *since + self.inner.timeout * 2 >= sent || listed.contains_key(name)
                    }
                });
            }
            owned.sort_by(|a, b| a.0.cmp(&b.0));
            if !stale.is_empty() {
                self.inner.rt.handle.spawn(clean_up(
                    Arc::downgrade(&self.inner),
                    lease,
                    session,
                    stale,
                ));
            }
            // The groups joined, as the index says; members read above for
            // those this client knew, in one more read for the others.
            let jprefix = self.key_joined(lease);
            let mut groups = std::collections::BTreeSet::new();
            for kv in joined.kvs() {
                let g = kv
                    .key()
                    .strip_prefix(jprefix.as_bytes())
                    .and_then(|g| std::str::from_utf8(g).ok())
                    .and_then(|g| LeaseName::new(g).ok())
                    .ok_or_else(|| malformed(format!("a bad group name under {jprefix}")))?;
                groups.insert(g);
            }
            let mut views = Vec::with_capacity(groups.len());
            for (g, get) in cached.iter().zip(members) {
                if groups.contains(g) {
                    views.push(self.view(g, get)?);
                }
            }
            let unknown: Vec<LeaseName> = groups
                .iter()
                .filter(|g| !cached.contains(g))
                .cloned()
                .collect();
            if !unknown.is_empty() {
                views.extend(self.read_members(&unknown).await?);
            }
            views.sort_by(|a, b| a.group.cmp(&b.group));
            self.cache_groups(lease, session, |known| *known = groups);
            Ok(Renewal {
                groups: views,
                remaining: secs(ttl),
                owned,
            })
        }
        .boxed()
    }

    fn acquire<'a>(
        &'a self,
        session: SessionId,
        name: &'a LeaseName,
    ) -> BoxFuture<'a, Result<AcquireOutcome, BackendError>> {
        async move {
            let Some(lease) = lease_of(session) else {
                return Ok(AcquireOutcome::Expired);
            };
            let serial = self.name_lock(lease, session, name);
            let _serial = serial.lock().await;
            match self.place_of(lease, session, name) {
                Some(Place::Waiting { w, .. }) if w.blockers.is_empty() => {
                    // The watch saw every place before ours deleted after
                    // ours existed, and none can appear before it: ours
                    // holds the lease (S4.2). No call, as long as this
                    // client counts the session live from its renewals.
                    if let Some(remaining) = self.local_remaining(lease, session) {
                        let token = token_from(name.as_str(), w.rev)?;
                        self.set_place(lease, session, name, Some(Place::won(w.rev)));
                        return Ok(AcquireOutcome::Won { token, remaining });
                    }
                }
                Some(Place::Waiting { .. } | Place::Won { .. }) => {}
                // A new acquire: the record counts from it (a `Pending` left
                // by a failed one would let a renewal take the place this
                // one writes for a stale one).
                Some(Place::Pending { .. }) | None => self.set_place(
                    lease,
                    session,
                    name,
                    Some(Place::Pending {
                        since: Instant::now(),
                    }),
                ),
            }
            // A failed call (or one dropped at its call timeout) leaves the
            // place `Pending`: the transaction may have been applied, so a
            // withdraw must still delete what it may have written; a place
            // so left is also found by the next acquire, or deleted after a
            // renewal once the record is old.
            self.acquire_call(lease, session, name).await
        }
        .boxed()
    }

    fn release<'a>(
        &'a self,
        session: SessionId,
        name: &'a LeaseName,
        token: Token,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        async move {
            let Some(lease) = lease_of(session) else {
                return Ok(());
            };
            let Ok(rev) = i64::try_from(token.get()) else {
                return Ok(()); // no key has such a revision
            };
            let serial = self.name_lock(lease, session, name);
            let _serial = serial.lock().await;
            let place = self.key_place(name, lease);
            // The term's own place: unique to the term (a later place of
            // this session has a higher revision), so a stale release
            // compares false and is a no-op (S3.5).
            let when = [
                Compare::create_revision(place.clone(), CompareOp::Equal, rev),
                Compare::value(place, CompareOp::Equal, session.to_string()),
            ];
            self.delete_place("release", lease, name, when).await?;
            if let Some(Place::Won { rev: r, .. }) = self.place_of(lease, session, name) {
                if r == rev {
                    self.set_place(lease, session, name, None);
                }
            }
            Ok(())
        }
        .boxed()
    }

    fn withdraw<'a>(
        &'a self,
        session: SessionId,
        name: &'a LeaseName,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        async move {
            let Some(lease) = lease_of(session) else {
                return Ok(());
            };
            let serial = self.name_lock(lease, session, name);
            let _serial = serial.lock().await;
            if let Some(Place::Won { .. }) = self.place_of(lease, session, name) {
                // A term: only a release with its token ends it (S4.5).
                return Ok(());
            }
            if self.knows_no_place(lease, session, name) {
                // No place to delete (withdrawn already, deleted, or never
                // written): no call. Every withdraw is a write etcd commits
                // one after the other, and members of a group of 1,000
                // partitions sent thousands of these.
                return Ok(());
            }
            let sid = session.to_string();
            let place = self.key_place(name, lease);
            let when = [
                Compare::value(self.key_session(lease), CompareOp::Equal, sid.clone()),
                Compare::value(place, CompareOp::Equal, sid),
            ];
            self.delete_place("withdraw", lease, name, when).await?;
            self.set_place(lease, session, name, None);
            Ok(())
        }
        .boxed()
    }

    fn close_session(&self, session: SessionId) -> BoxFuture<'_, Result<(), BackendError>> {
        async move {
            let Some(lease) = lease_of(session) else {
                return Ok(());
            };
            self.forget(lease);
            let mut c = self.client();
            let skey = self.key_session(lease);
            let sid = session.to_string();
            self.run("close session", async move {
                let r = c.get(skey, None).await?;
                if r.kvs()
                    .first()
                    .is_none_or(|kv| kv.value() != sid.as_bytes())
                {
                    return Ok(()); // expired or not ours
                }
                match c.lease_revoke(lease).await {
                    Ok(_) => Ok(()),
                    Err(e) if is_not_found(&e) => Ok(()),
                    Err(e) => Err(e),
                }
            })
            .await
        }
        .boxed()
    }

    fn inspect<'a>(
        &'a self,
        prefix: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Inspection, BackendError>> {
        async move {
            let filter = prefix.unwrap_or("");
            check_prefix(filter)?;
            let root = format!("{}/", self.inner.prefix);
            let mut c = self.client();
            let key = root.clone();
            let kvs = self
                .run("inspect", async move {
                    Ok(c.get(key, Some(GetOptions::new().with_prefix()))
                        .await?
                        .take_kvs())
                })
                .await?;
            let (s_pre, l_pre) = (format!("{root}s/"), format!("{root}l/"));
            // Session metadata: P/m/L, on the session's lease.
            let m_pre = format!("{root}m/");
            let metadata_of: HashMap<i64, String> = kvs
                .iter()
                .filter(|kv| kv.key().starts_with(m_pre.as_bytes()))
                .map(|kv| (kv.lease(), String::from_utf8_lossy(kv.value()).into_owned()))
                .collect();
            // Sessions: P/s/L (no further '/'), with etcd's remaining TTL.
            let mut sessions = Vec::new();
            for kv in &kvs {
                let Some(rest) = kv.key().strip_prefix(s_pre.as_bytes()) else {
                    continue;
                };
                if rest.contains(&b'/') {
                    continue;
                }
                let metadata = metadata_of.get(&kv.lease()).map_or("", String::as_str);
                sessions.push((
                    session_from(kv.value())?,
                    kv.lease(),
                    crate::SessionMetadata::decode(metadata),
                ));
            }
            let mut lc = self.inner.client.lease_client();
            let ids: Vec<i64> = sessions.iter().map(|(_, l, _)| *l).collect();
            let ttls = self
                .run("inspect sessions", async move {
                    let mut out = Vec::with_capacity(ids.len());
                    for id in ids {
                        match lc
                            .time_to_live(id, Some(LeaseTimeToLiveOptions::new()))
                            .await
                        {
                            Ok(r) => out.push((r.ttl(), r.granted_ttl())),
                            Err(e) if is_not_found(&e) => out.push((-1, 0)),
                            Err(e) => return Err(e),
                        }
                    }
                    Ok(out)
                })
                .await?;
            let mut out = Inspection::default();
            let mut remaining: HashMap<SessionId, Duration> = HashMap::new();
            for ((session, _, metadata), (ttl, granted)) in sessions.iter().zip(ttls) {
                if ttl <= 0 {
                    continue;
                }
                remaining.insert(*session, secs(ttl));
                out.sessions.push(crate::SessionInfo {
                    session: *session,
                    remaining: secs(ttl),
                    lease_duration: secs(granted),
                    metadata: metadata.clone(),
                });
            }
            let q_pre = format!("{root}q/");
            let parse_name = |bytes: &[u8]| {
                std::str::from_utf8(bytes)
                    .ok()
                    .and_then(|n| LeaseName::new(n).ok())
                    .ok_or_else(|| malformed("a bad lease name in a key".into()))
            };
            // Per name: the latest revision any term of it may have
            // (`P/l/NAME`'s mod_revision), and the places in revision order.
            #[derive(Default)]
            struct Seen {
                latest: i64,
                places: Vec<(i64, SessionId)>,
            }
            let mut seen: std::collections::BTreeMap<LeaseName, Seen> =
                std::collections::BTreeMap::new();
            for kv in &kvs {
                let key = kv.key();
                if let Some(n) = key.strip_prefix(l_pre.as_bytes()) {
                    let s = seen.entry(parse_name(n)?).or_default();
                    s.latest = s.latest.max(kv.mod_revision());
                } else if let Some(rest) = key.strip_prefix(q_pre.as_bytes()) {
                    let (n, _) =
                        split_place(rest).ok_or_else(|| malformed("a bad place key".into()))?;
                    let s = seen.entry(parse_name(n.as_bytes())?).or_default();
                    s.places
                        .push((kv.create_revision(), session_from(kv.value())?));
                }
            }
            for (name, s) in seen {
                if !name.as_str().starts_with(filter) {
                    continue;
                }
                // The first place holds the name.
                let first = s.places.iter().min_by_key(|(rev, _)| *rev).copied();
                let latest = s
                    .places
                    .iter()
                    .map(|(rev, _)| *rev)
                    .fold(s.latest, i64::max);
                let live = first.and_then(|(rev, h)| remaining.get(&h).map(|r| (rev, h, *r)));
                let info = match live {
                    Some((rev, holder, rem)) => crate::LeaseInfo {
                        holder: Some(holder),
                        token: Some(token_from(name.as_str(), rev)?),
                        remaining: Some(rem),
                        name,
                    },
                    // Free (or its holder expired between the two reads).
                    None => crate::LeaseInfo {
                        token: (latest > 0)
                            .then(|| token_from(name.as_str(), latest))
                            .transpose()?,
                        holder: None,
                        remaining: None,
                        name,
                    },
                };
                out.leases.push(info);
            }
            out.sessions.sort_by_key(|s| s.session);
            Ok(out)
        }
        .boxed()
    }

    crate::forward::groups_by_membership!();

    fn claim_slot<'a>(
        &'a self,
        session: SessionId,
        name: &'a LeaseName,
        token: Token,
        slot: u64,
    ) -> BoxFuture<'a, Result<SlotClaim, BackendError>> {
        async move {
            let (Some(lease), Ok(rev)) = (lease_of(session), i64::try_from(token.get())) else {
                return Ok(SlotClaim::NotHolder);
            };
            let sid = session.to_string();
            let place = self.key_place(name, lease);
            let ckey = self.key_slot(name);
            // 20 digits hold every u64; equal-length decimals compare as
            // numbers byte by byte, as etcd compares values.
            let padded = format!("{slot:020}");
            let later = Txn::new()
                .when([Compare::value(
                    ckey.clone(),
                    CompareOp::Less,
                    padded.clone(),
                )])
                .and_then([TxnOp::put(ckey.clone(), padded.clone(), None)])
                .or_else([TxnOp::get(ckey.clone(), None)]);
            let first = Txn::new()
                .when([Compare::version(ckey.clone(), CompareOp::Equal, 0)])
                .and_then([TxnOp::put(ckey, padded, None)])
                .or_else([TxnOp::txn(later)]);
            let txn = Txn::new()
                .when([
                    Compare::value(self.key_session(lease), CompareOp::Equal, sid.clone()),
                    // The term's place, and no place of the name older than
                    // it: the holder with exactly this token.
                    Compare::create_revision(place.clone(), CompareOp::Equal, rev),
                    Compare::value(place, CompareOp::Equal, sid),
                    Compare::create_revision(self.key_queue(name), CompareOp::Greater, rev - 1)
                        .with_prefix(),
                ])
                .and_then([TxnOp::txn(first)]);
            let mut c = self.client();
            let resp = self
                .run("claim slot", async move { c.txn(txn).await })
                .await?;
            if !resp.succeeded() {
                return Ok(SlotClaim::NotHolder);
            }
            let bad = |what: &str| malformed(format!("claim slot of `{name}`: {what}"));
            let first = nested(&resp).ok_or_else(|| bad("no nested reply"))?;
            if first.succeeded() {
                return Ok(SlotClaim::Claimed);
            }
            let later = nested(&first).ok_or_else(|| bad("no second nested reply"))?;
            if later.succeeded() {
                return Ok(SlotClaim::Claimed);
            }
            let last = gets_of(&later)
                .first()
                .and_then(|g| g.kvs().first())
                .and_then(|kv| std::str::from_utf8(kv.value()).ok())
                .and_then(|v| v.parse::<u64>().ok())
                .ok_or_else(|| bad("the last slot is unreadable"))?;
            Ok(SlotClaim::AlreadyClaimed { last })
        }
        .boxed()
    }

    fn name(&self) -> &'static str {
        NAME
    }
}

/// The range reads of a transaction's reply, in order.
fn gets_of(resp: &etcd_client::TxnResponse) -> Vec<etcd_client::GetResponse> {
    resp.op_responses()
        .into_iter()
        .filter_map(|r| match r {
            TxnOpResponse::Get(g) => Some(g),
            _ => None,
        })
        .collect()
}

/// The reply of a transaction's first nested transaction.
fn nested(resp: &etcd_client::TxnResponse) -> Option<etcd_client::TxnResponse> {
    resp.op_responses().into_iter().find_map(|r| match r {
        TxnOpResponse::Txn(t) => Some(t),
        _ => None,
    })
}

/// Deletes the places a renewal found stale, each under its name's lock and
/// only if nothing of the session's was recorded for it meanwhile.
async fn clean_up(
    inner: Weak<Inner>,
    lease: i64,
    session: SessionId,
    stale: Vec<(LeaseName, i64)>,
) {
    for (name, rev) in stale {
        let Some(inner) = inner.upgrade() else { return };
        let b = EtcdBackend { inner };
        let serial = b.name_lock(lease, session, &name);
        let _serial = serial.lock().await;
        if lock(&b.inner.local)
            .get(&lease)
            .is_none_or(|l| l.session != session)
        {
            return; // closed or expired meanwhile
        }
        let delete = match b.place_of(lease, session, &name) {
            None => true,
            Some(Place::Waiting { w, .. }) => w.rev != rev,
            Some(Place::Pending { since }) => since.elapsed() > b.inner.timeout * 2,
            Some(Place::Won { rev: r, .. }) => r != rev,
        };
        if !delete {
            continue;
        }
        let place = b.key_place(&name, lease);
        let when = [Compare::create_revision(place, CompareOp::Equal, rev)];
        match b.delete_place("clean up", lease, &name, when).await {
            Ok(_) => match b.place_of(lease, session, &name) {
                Some(Place::Waiting { w, .. }) if w.rev == rev => {
                    b.set_place(lease, session, &name, None)
                }
                Some(Place::Pending { .. }) => b.set_place(lease, session, &name, None),
                _ => {}
            },
            Err(error) => {
                tracing::debug!(%error, %name, "etcd: a stale place stays until a later renewal");
            }
        }
    }
}

/// The backend's one watch, on `P/q/` (deletes only): every deleted place
/// is remembered for a while (a listing that crossed it is judged without
/// it), struck from the waiting places this client records, and only then
/// announced to the release broadcast's subscribers (S4.2). The watch starts at
/// a revision read just before it (so a watch created while nothing changed
/// is in sync at once, and nothing deleted after that read is missed), and
/// after a broken stream resumes from the last revision seen. Ends with the
/// backend.
/// Waits for a watch's "created" reply.
async fn created(stream: &mut etcd_client::WatchStream) -> Result<(), etcd_client::Error> {
    loop {
        match stream.message().await? {
            Some(r) if r.created() => return Ok(()),
            Some(_) => continue,
            None => {
                return Err(etcd_client::Error::WatchError(
                    "watch stream ended before it was created".into(),
                ))
            }
        }
    }
}

/// The groups a member-key watch reply shows a new member of (S10.5): a
/// put that created its key (`P/g/GROUP/SESSION`); a put of a key that
/// exists, a member joining again, is no news.
fn joined_groups(resp: &etcd_client::WatchResponse, g_pre: &str) -> Vec<LeaseName> {
    let mut groups: Vec<LeaseName> = Vec::new();
    for ev in resp.events() {
        let Some(kv) = ev.kv() else { continue };
        if ev.event_type() != EventType::Put || kv.create_revision() != kv.mod_revision() {
            continue;
        }
        let Some(rest) = kv.key().strip_prefix(g_pre.as_bytes()) else {
            continue;
        };
        let Some(end) = rest.iter().rposition(|&b| b == b'/') else {
            continue;
        };
        let group = std::str::from_utf8(&rest[..end])
            .ok()
            .and_then(|g| LeaseName::new(g).ok());
        if let Some(group) = group.filter(|g| !groups.contains(g)) {
            groups.push(group);
        }
    }
    groups
}

async fn track(
    inner: Weak<Inner>,
    mut client: Client,
    prefix: String,
    timeout: Duration,
    ready: tokio::sync::oneshot::Sender<Result<(), etcd_client::Error>>,
    mut stop: tokio::sync::oneshot::Receiver<()>,
) {
    let q_pre = format!("{prefix}/q/");
    // Just past `P/q/`: the range holds the places.
    let end = format!("{prefix}/q0");
    // The member keys `P/g/GROUP/SESSION`.
    let g_pre = format!("{prefix}/g/");
    let g_end = format!("{prefix}/g0");
    let mut ready = Some(ready);
    let mut next_rev: Option<i64> = None;
    loop {
        if inner.strong_count() == 0 {
            return; // the backend is gone
        }
        let start = async {
            let from = match next_rev {
                Some(r) => r,
                None => {
                    let r = client
                        .get(q_pre.clone(), Some(GetOptions::new().with_count_only()))
                        .await?;
                    r.header().map(|h| h.revision()).unwrap_or(0) + 1
                }
            };
            // Puts too: the places created, so that a deletion of one
            // behind another is known as a withdraw ([`Queues`]).
            let opts = WatchOptions::new()
                .with_range(end.clone())
                .with_start_revision(from);
            let mut stream = client.watch(q_pre.clone(), Some(opts)).await?;
            // Wait for the "created" reply: from here on, no delete is missed.
            created(&mut stream).await?;
            // New member keys (S10.5): a join is announced by its group's
            // name. A hint only: one missed across a reconnection is learnt
            // at the next renewal.
            let opts = WatchOptions::new()
                .with_range(g_end.clone())
                .with_start_revision(from)
                .with_filters([WatchFilterType::NoDelete]);
            let mut joins = client.watch(g_pre.clone(), Some(opts)).await?;
            created(&mut joins).await?;
            Ok((from, stream, joins))
        };
        let started = tokio::time::timeout(timeout, start).await;
        let (from, mut stream, mut joins) = match started {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                if let Some(r) = ready.take() {
                    let _ = r.send(Err(e));
                    return;
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
                continue;
            }
            Err(_) => {
                if let Some(r) = ready.take() {
                    let _ = r.send(Err(etcd_client::Error::WatchError(format!(
                        "no watch within {timeout:?}"
                    ))));
                    return;
                }
                continue;
            }
        };
        if let Some(inner) = inner.upgrade() {
            inner
                .watch_from
                .store(from, std::sync::atomic::Ordering::SeqCst);
        }
        if let Some(r) = ready.take() {
            if r.send(Ok(())).is_err() {
                return;
            }
        }
        next_rev = Some(from);
        loop {
            let msg = tokio::select! {
                _ = &mut stop => return,
                m = stream.message() => m,
                j = joins.message() => match j {
                    Ok(Some(resp)) => {
                        let Some(inner) = inner.upgrade() else { return };
                        let groups = joined_groups(&resp, &g_pre);
                        if !groups.is_empty() {
                            lock(&inner.tracker).announce(&groups);
                        }
                        continue;
                    }
                    // Broken: resume both from the last revision seen.
                    Ok(None) | Err(_) => break,
                },
            };
            match msg {
                Ok(Some(resp)) => {
                    if resp.canceled() {
                        // Compacted past our revision: start again from now
                        // (deletions in between are missed: waiters then
                        // re-read the queue at their next acquire).
                        if resp.compact_revision() > 0 {
                            next_rev = None;
                            if let Some(inner) = inner.upgrade() {
                                lock(&inner.queues).clear();
                            }
                        }
                        break;
                    }
                    let Some(inner) = inner.upgrade() else { return };
                    let mut names: Vec<LeaseName> = Vec::new();
                    for ev in resp.events() {
                        let Some(kv) = ev.kv() else { continue };
                        next_rev = Some(kv.mod_revision() + 1);
                        if ev.event_type() != EventType::Delete {
                            let place = kv
                                .key()
                                .strip_prefix(q_pre.as_bytes())
                                .and_then(split_place);
                            if let Some((n, suffix)) = place {
                                lock(&inner.queues).created(n, suffix, kv.create_revision());
                            }
                            continue;
                        }
                        let key = kv.key();
                        let name = if let Some(rest) = key.strip_prefix(q_pre.as_bytes()) {
                            let Some((n, suffix)) = split_place(rest) else {
                                continue;
                            };
                            let Ok(name) = LeaseName::new(n) else {
                                continue;
                            };
                            // Remembered, then struck, under the watch's lock
                            // (the order an acquire judges in).
                            let mut tracker = lock(&inner.tracker);
                            tracker.note_deleted(n, suffix, kv.mod_revision());
                            let mut local = lock(&inner.local);
                            let mut unblocked = false;
                            for (lease, l) in local.iter_mut() {
                                let struck = match l.places.get_mut(&name) {
                                    Some(Place::Waiting { w, .. }) => {
                                        let struck = strike(
                                            w,
                                            &format!("{lease:016x}"),
                                            suffix,
                                            kv.mod_revision(),
                                        );
                                        unblocked |=
                                            struck == Struck::Blocker && w.blockers.is_empty();
                                        struck
                                    }
                                    _ => Struck::Nothing,
                                };
                                if struck == Struck::Own {
                                    l.places.remove(&name);
                                }
                            }
                            drop(local);
                            // A deletion frees the lease only if it deletes
                            // the holding place. While the holder an acquire
                            // read still stands first (no place can appear
                            // before it), deleting another place, a waiter
                            // withdrawing, frees nothing: not announced
                            // (S4.2). Announced, a withdraw by any member of
                            // a group cleared the other members' marks of
                            // the partition (S10.2): they asked again for
                            // partitions a live member held, and free ones
                            // stayed unowned.
                            // A place the watch saw created stands before
                            // it: a withdraw too ([`Queues`]).
                            let behind = lock(&inner.queues).deleted(n, suffix);
                            let mut holders = lock(&inner.holders);
                            let frees = !behind
                                && match holders.get(n) {
                                    Some((h, at)) if at.elapsed() < HOLDER_FRESH && h != suffix => {
                                        false
                                    }
                                    _ => {
                                        holders.remove(n);
                                        true
                                    }
                                };
                            drop(holders);
                            if !frees && !unblocked {
                                continue;
                            }
                            name
                        } else {
                            continue;
                        };
                        if names.last() != Some(&name) {
                            names.push(name);
                        }
                    }
                    if !names.is_empty() {
                        lock(&inner.tracker).announce(&names);
                    }
                }
                // Broken: resume from the last revision seen.
                Ok(None) | Err(_) => break,
            }
        }
        // Deletions may be missed from here on (compaction): every
        // deletion is announced until acquires read the holders again.
        if let Some(inner) = inner.upgrade() {
            let tracker = lock(&inner.tracker);
            inner
                .watch_from
                .store(i64::MAX, std::sync::atomic::Ordering::SeqCst);
            lock(&inner.holders).clear();
            drop(tracker);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
