//! The ZooKeeper backend (feature `zookeeper`, ZooKeeper 3.6 or later), with
//! release broadcasts through a persistent recursive watch (and join
//! announcements through a second one, on the groups, S10.5).
//!
//! A Simba session **is** a ZooKeeper session (S1.3): [`Backend::open_session`]
//! opens a new ZooKeeper client with the lease duration as its requested
//! session timeout, and the Simba session id is the ZooKeeper session id.
//! ZooKeeper grants at most its `maxSessionTimeout`, and one call proves the
//! session alive for only 5/12 of the negotiated timeout (S8.5), which
//! [`Backend::renewal_proves`] says.
//!
//! URL: `zk://[user:password@]host:port[,host:port…][/root]`, or `zks://…`
//! for TLS (feature `zookeeper-tls`; the server's `secureClientPort`),
//! trusting the system's root certificates or the CA in the PEM file that
//! `?simba_tls_ca=/path/ca.pem` names. The certificate must name the host
//! as written in the URL. An untrusted certificate is a `Rejected` error,
//! and `user:password` (digest authentication) is redacted in every message
//! and `Debug` output.
//!
//! Data model under the root (`zk://host:2181/root`, default `/simba`):
//!
//! | znode | kind | meaning |
//! |---|---|---|
//! | `<root>/sessions/<id as 16 hex digits>` | ephemeral | a live session; data `lease_ms timeout_ms` |
//! | `<root>/leases/<name>` | persistent | the name; its `mzxid` is the `czxid` of its latest place |
//! | `<root>/leases/<name>/c-<id as 16 hex digits>-<sequence>` | ephemeral sequential | a place: the lowest sequence holds the lease (owner = `ephemeralOwner`, token = `czxid`), the others wait in order |
//! | `<root>/groups/<group>` | persistent | a partitioned group (S10.1) |
//! | `<root>/groups/<group>/<id as 16 hex digits>` | ephemeral | a member: it lives exactly as long as the member's session |
//! | `<root>/slots/<name>` | persistent | the last claimed schedule slot of `name` (S11.1), in decimal |
//!
//! Acquire is one multi-op (create the session's place + touch `<name>`)
//! and, sent right behind it on the same connection (ZooKeeper answers a
//! session's requests in order), a listing of `<name>`'s children: one round
//! trip. The place with the lowest sequence number holds the lease, and its
//! token is its `czxid`, a zxid, which never repeats or decreases. A `Held`
//! acquire keeps its place, so the lease passes to the first waiter the
//! moment the places before it are deleted (a release, a close or an
//! expiry): the backend's persistent recursive watch sees those deletions,
//! and the waiter's next acquire answers `Won` without another call (S4.2).
//! A waiter that stops competing removes its place (`withdraw`, S4.5).
//! Release deletes the term's own place (unique to the term, so a stale
//! release is a no-op, S3.5). Renew is one `getEphemerals` call (S1.1), sent
//! with one multi-read of the joined groups' members (S10.1) when there are
//! any.
//!
//! The ZooKeeper client pings the server on its own, so a session whose
//! owner stops renewing would never expire. Each session therefore has a
//! watchdog task that closes it once `lease_duration` has passed since the
//! last renewal was sent; ZooKeeper's own expiry (a dead or partitioned
//! process) ends it too. See `docs/BACKENDS.md`.

use crate::queue::{Queues, HOLDER_FRESH, MAX_HOLDERS};
use crate::zookeeper_queue::{judge, parse_place, place_prefix, QueueView};
use crate::zookeeper_tls::Tls;
use crate::{check_lease_duration, check_prefix, Backend, BackendConfig, Inspection};
use crate::{LeaseInfo, SessionInfo, SessionMetadata};
use futures::future::BoxFuture;
use futures::FutureExt;
use simba_core::{
    AcquireOutcome, BackendError, BackendErrorKind, Fraction, LeaseName, RenewError, Renewal,
    SessionGrant, SessionId, SlotClaim, Token,
};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};
use zookeeper_client as zk;

const NAME: &str = "zookeeper";
/// The session timeout the backend's own (observer) session asks for.
const OBSERVER_TIMEOUT: Duration = Duration::from_secs(10);

/// The ZooKeeper backend. Cheap to clone (one shared state).
#[derive(Clone)]
pub struct ZkBackend {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for ZkBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZkBackend")
            .field("url", &self.inner.target.redacted)
            .field("root", &self.inner.target.root)
            .field("tls", &self.inner.target.tls.is_some())
            .finish()
    }
}

/// Where the backend connects, parsed from a `zk://` or `zks://` URL.
#[derive(Clone)]
struct Target {
    /// `host:port,host:port` for the client.
    hosts: String,
    /// The root path (no trailing `/`).
    root: String,
    /// `user:password` for digest authentication.
    digest: Option<Vec<u8>>,
    /// The URL with the password hidden.
    redacted: String,
    connect_timeout: Duration,
    /// `zks://`: what the connection trusts.
    tls: Option<Tls>,
}

struct Inner {
    target: Target,
    leases_dir: String,
    sessions_dir: String,
    groups_dir: String,
    slots_dir: String,
    observer: Mutex<zk::Client>,
    sessions: Mutex<HashMap<SessionId, Arc<Entry>>>,
    /// The persistent recursive watch on `<root>/leases` (see [`track`]).
    tracker: Mutex<Tracker>,
    /// The holding child of each name as the latest acquire through this
    /// backend read it (child, when read), see [`track`]: locked after
    /// `tracker`, never before.
    holders: Mutex<HashMap<String, (String, Instant)>>,
    /// The places the watch saw created and not yet deleted ([`Queues`]).
    queues: Mutex<Queues>,
    /// Counts the watch's starts and ends: a listing read while the same
    /// watch ran throughout has every later deletion delivered.
    watch_epoch: AtomicU64,
    /// Serializes starting the watch.
    tracker_start: futures::lock::Mutex<()>,
    /// Dropped with the backend: the watch task then ends.
    tracker_stop: Mutex<Option<futures::channel::oneshot::Sender<()>>>,
}

/// What the backend's one watch on `<root>/leases` feeds (a child's name
/// never comes back: a deletion needs no mark).
type Tracker = crate::queue::Tracker<()>;

/// Where a session stands on one lease name, as this backend knows it.
#[derive(Clone, Debug)]
enum Place {
    /// An acquire is creating a place (since then).
    Pending { since: Instant },
    /// A place waiting behind `blockers` (children of `<name>`); `since` is
    /// the latest acquire that confirmed it.
    Waiting {
        path: String,
        czxid: i64,
        blockers: BTreeSet<String>,
        since: Instant,
    },
    /// The place holds the lease and an acquire answered `Won`: a term.
    Won {
        path: String,
        czxid: i64,
        since: Instant,
    },
}

impl Place {
    fn won(path: String, czxid: i64) -> Place {
        Place::Won {
            path,
            czxid,
            since: Instant::now(),
        }
    }
}

/// One open session held by this backend.
struct Entry {
    zk_id: i64,
    lease: Duration,
    timeout: Duration,
    client: Mutex<Option<zk::Client>>,
    /// Local instant after which the watchdog closes the session.
    deadline: Mutex<Instant>,
    /// This session's places, by lease name.
    places: Mutex<HashMap<String, Place>>,
    /// One lock per lease name: acquire, release and withdraw of one name
    /// run one at a time, so a place is never created and removed at once.
    name_locks: Mutex<HashMap<String, Arc<futures::lock::Mutex<()>>>>,
    /// The groups this session joined (S10.1): its renewal lists their
    /// members. A ZooKeeper session acts only through the backend that
    /// opened it, so this is the whole truth.
    groups: Mutex<std::collections::BTreeSet<String>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A ZooKeeper error as a typed [`BackendError`].
fn map_err(what: &str, e: zk::Error) -> BackendError {
    use zk::Error as E;
    let kind = match &e {
        E::ConnectionLoss | E::NoHosts | E::ClientClosed | E::SessionMoved | E::NotReadOnly => {
            BackendErrorKind::Unavailable
        }
        E::Timeout | E::Throttled => BackendErrorKind::Timeout,
        E::NoAuth | E::AuthFailed | E::InvalidAcl | E::BadArguments(_) | E::QuotaExceeded => {
            BackendErrorKind::Rejected
        }
        E::UnmarshalError { .. } | E::MarshallingError | E::UnexpectedErrorCode(_) => {
            BackendErrorKind::Malformed
        }
        _ => BackendErrorKind::Other,
    };
    BackendError::new(kind, crate::redact(&format!("{NAME} {what}: {e}")))
}

/// A call on a disconnected (not expired) session.
fn suspended(what: &str) -> BackendError {
    BackendError::new(
        BackendErrorKind::Unavailable,
        format!("{NAME} {what}: disconnected from ZooKeeper; the session is suspended"),
    )
}

/// Runs a call for at most `limit` (ZooKeeper queues calls made while the
/// client reconnects; the caller gets `Timeout` instead of waiting).
async fn bounded<T>(
    call: impl std::future::Future<Output = Result<T, zk::Error>>,
    limit: Duration,
) -> Result<T, zk::Error> {
    let timer = futures_timer::Delay::new(limit);
    match futures::future::select(std::pin::pin!(call), timer).await {
        futures::future::Either::Left((r, _)) => r,
        futures::future::Either::Right(_) => Err(zk::Error::Timeout),
    }
}

fn multi_err(e: zk::MultiWriteError) -> zk::Error {
    e.into()
}

fn malformed(what: String) -> BackendError {
    BackendError::new(BackendErrorKind::Malformed, format!("{NAME}: {what}"))
}

/// The Simba id of a ZooKeeper session (S1.3): its 64 bits, zero-extended.
pub fn session_id_of(zk_id: i64) -> SessionId {
    SessionId::from_u128(u128::from(zk_id as u64))
}

/// The ZooKeeper session id of a Simba id, if it is one.
pub fn zk_session_of(session: SessionId) -> Option<i64> {
    u64::try_from(session.as_u128()).ok().map(|v| v as i64)
}

fn token_of(name: &str, zxid: i64) -> Result<Token, BackendError> {
    u64::try_from(zxid)
        .ok()
        .and_then(Token::new)
        .ok_or_else(|| malformed(format!("zxid {zxid} of lease `{name}` is not > 0")))
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Parses `zk://[user:password@]host:port[,host:port…][/root][?…]` (or
/// `zks://` for TLS, with the CA file from `simba_tls_ca`).
fn parse_target(config: &BackendConfig) -> Result<Target, BackendError> {
    let url = config.url();
    let redacted = config.redacted_url();
    let bad = |why: &str| {
        BackendError::new(
            BackendErrorKind::Rejected,
            format!("{NAME}: bad URL `{redacted}`: {why}"),
        )
    };
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| bad("expected zk://host:port/root"))?;
    let secure = scheme.eq_ignore_ascii_case("zks");
    let rest = rest.split(['?', '#']).next().unwrap_or("");
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    let (digest, hosts) = match authority.rfind('@') {
        Some(at) => {
            let userinfo = &authority[..at];
            if !userinfo.contains(':') {
                return Err(bad("credentials must be user:password"));
            }
            (Some(userinfo.as_bytes().to_vec()), &authority[at + 1..])
        }
        None => (None, authority),
    };
    if hosts.is_empty() {
        return Err(bad("no host"));
    }
    if hosts
        .chars()
        .any(|c| !(c.is_ascii_alphanumeric() || ".-:,[]_".contains(c)))
    {
        return Err(bad("hosts must be host:port[,host:port…]"));
    }
    let path = path.trim_end_matches('/');
    let root = if path.is_empty() {
        "/simba".to_owned()
    } else {
        path.to_owned()
    };
    let segment_ok = |s: &str| {
        !s.is_empty()
            && s != "."
            && s != ".."
            && s != "zookeeper"
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || "._:-".contains(c))
    };
    if !root[1..].split('/').all(segment_ok) {
        return Err(bad(
            "the root path must be /segment[/segment…] of [A-Za-z0-9._:-]",
        ));
    }
    let tls = match (secure, config.tls_ca()) {
        (true, ca) => Some(Tls::load(hosts, ca, &redacted)?),
        (false, Some(_)) => return Err(bad("simba_tls_ca needs a zks:// URL")),
        (false, None) => None,
    };
    Ok(Target {
        hosts: hosts.to_owned(),
        root,
        digest,
        redacted,
        connect_timeout: config.connect_timeout(),
        tls,
    })
}

impl Target {
    fn acls(&self) -> zk::Acls<'static> {
        if self.digest.is_some() {
            zk::Acls::creator_all()
        } else {
            zk::Acls::anyone_all()
        }
    }

    /// Opens a new ZooKeeper session, within the connect timeout.
    async fn connect(&self, session_timeout: Duration) -> Result<zk::Client, BackendError> {
        let connector = zk::Client::connector()
            .with_session_timeout(session_timeout)
            .with_connection_timeout(self.connect_timeout)
            .with_fail_eagerly();
        let connecting = match &self.tls {
            None => connector.connect(&self.hosts).boxed(),
            Some(tls) => tls.connect(connector, &self.hosts),
        };
        let limit = futures_timer::Delay::new(self.connect_timeout + Duration::from_millis(500));
        let client = match futures::future::select(connecting, limit).await {
            futures::future::Either::Left((Ok(client), _)) => client,
            futures::future::Either::Left((Err(e), _)) => {
                let what = format!("connect to {}", self.redacted);
                // zookeeper-client reports a refused handshake as a lost
                // connection: ask TLS itself whether it refused a server.
                if let (Some(tls), zk::Error::NoHosts | zk::Error::ConnectionLoss) = (&self.tls, &e)
                {
                    if let Some(why) = tls.diagnose(self.connect_timeout).await {
                        return Err(BackendError::new(
                            BackendErrorKind::Rejected,
                            crate::redact(&format!("{NAME} {what}: {why}")),
                        ));
                    }
                }
                return Err(map_err(&what, e));
            }
            futures::future::Either::Right(_) => {
                return Err(BackendError::new(
                    BackendErrorKind::Timeout,
                    format!(
                        "{NAME}: connect to {} timed out after {:?}",
                        self.redacted, self.connect_timeout
                    ),
                ))
            }
        };
        // Digest credentials once the session is established, not sent
        // with the connect request: ZooKeeper's Netty connection factory
        // (the one that serves TLS) may answer an auth packet that follows
        // the connect request at once before the connect itself, and
        // zookeeper-client then drops the connection (26 of 40 connects
        // failed so on ZooKeeper 3.8 over TLS). zookeeper-client keeps the
        // credentials and sends them again after a reconnect.
        if let Some(d) = &self.digest {
            let authenticated = bounded(client.auth("digest", d), self.connect_timeout).await;
            if let Err(e) = authenticated {
                return Err(map_err(&format!("authenticate to {}", self.redacted), e));
            }
        }
        Ok(client)
    }
}

enum Gone {
    /// This backend never opened it (or forgot it after closing it).
    Unknown,
    /// Closed by its watchdog or expired by ZooKeeper.
    Expired,
}

impl ZkBackend {
    /// Connects to `url` (`zk://[user:password@]host:port[,…][/root]`, or
    /// `zks://…?simba_tls_ca=/path/ca.pem` for TLS).
    ///
    /// # Errors
    /// `Rejected` for a URL of another backend or a malformed one; otherwise
    /// as [`ZkBackend::connect`].
    pub async fn connect_url(url: &str) -> Result<ZkBackend, BackendError> {
        let config = BackendConfig::parse(url)?;
        if config.kind() != crate::BackendKind::Zookeeper {
            return Err(BackendError::new(
                BackendErrorKind::Rejected,
                format!(
                    "{NAME}: `{}` is not a zk:// or zks:// URL",
                    config.redacted_url()
                ),
            ));
        }
        Self::connect(&config).await
    }

    /// Connects (opening the backend's own observer session) and creates
    /// `<root>/leases` and `<root>/sessions` if they are missing.
    ///
    /// # Errors
    /// `Rejected` for a bad URL, bad credentials, missing permissions, or
    /// (`zks://`) a CA file that cannot be read, a build without the
    /// `zookeeper-tls` feature, or a server whose certificate TLS refuses;
    /// `Unavailable`/`Timeout` if no server answers within the connect
    /// timeout.
    pub async fn connect(config: &BackendConfig) -> Result<ZkBackend, BackendError> {
        let target = parse_target(config)?;
        let observer = target.connect(OBSERVER_TIMEOUT).await?;
        let leases_dir = format!("{}/leases", target.root);
        let sessions_dir = format!("{}/sessions", target.root);
        let groups_dir = format!("{}/groups", target.root);
        let slots_dir = format!("{}/slots", target.root);
        let acls = target.acls();
        let opts = zk::CreateMode::Persistent.with_acls(acls);
        for dir in [&leases_dir, &sessions_dir, &groups_dir, &slots_dir] {
            observer
                .mkdir(dir, &opts)
                .await
                .map_err(|e| map_err(&format!("create {dir}"), e))?;
        }
        Ok(ZkBackend {
            inner: Arc::new(Inner {
                target,
                leases_dir,
                sessions_dir,
                groups_dir,
                slots_dir,
                observer: Mutex::new(observer),
                sessions: Mutex::new(HashMap::new()),
                tracker: Mutex::new(Tracker::default()),
                holders: Mutex::new(HashMap::new()),
                queues: Mutex::new(Queues::default()),
                watch_epoch: AtomicU64::new(0),
                tracker_start: futures::lock::Mutex::new(()),
                tracker_stop: Mutex::new(None),
            }),
        })
    }

    /// The root path of this backend's znodes.
    pub fn root(&self) -> &str {
        &self.inner.target.root
    }

    /// Deletes the root and everything under it (ending no session: live
    /// sessions' znodes are deleted too, so call it once they are closed).
    /// For tests and for decommissioning a root.
    ///
    /// # Errors
    /// A [`BackendError`] if a call failed.
    pub async fn remove_tree(&self) -> Result<(), BackendError> {
        let c = self.observer().await?;
        let mut stack = vec![self.inner.target.root.clone()];
        let mut order = Vec::new();
        while let Some(path) = stack.pop() {
            let children = match c.list_children(&path).await {
                Ok(ch) => ch,
                Err(zk::Error::NoNode) => continue,
                Err(e) => return Err(map_err("remove tree", e)),
            };
            stack.extend(children.iter().map(|ch| format!("{path}/{ch}")));
            order.push(path);
        }
        for path in order.iter().rev() {
            match c.delete(path, None).await {
                Ok(()) | Err(zk::Error::NoNode) => {}
                Err(e) => return Err(map_err("remove tree", e)),
            }
        }
        Ok(())
    }

    /// The observer session's client, reconnected if ZooKeeper ended it.
    async fn observer(&self) -> Result<zk::Client, BackendError> {
        let current = lock(&self.inner.observer).clone();
        if !current.state().is_terminated() {
            return Ok(current);
        }
        let fresh = self.inner.target.connect(OBSERVER_TIMEOUT).await?;
        *lock(&self.inner.observer) = fresh.clone();
        Ok(fresh)
    }

    /// Starts the backend's watch on `<root>/leases` unless it runs: one
    /// persistent recursive watch on the observer session, whose deletions
    /// move this backend's waiting places forward and then reach the
    /// release broadcasts' subscribers (S4.2), in that order; and one on
    /// `<root>/groups`, whose created member znodes reach them as the
    /// group's name (S10.5).
    async fn ensure_tracker(&self) -> Result<(), BackendError> {
        let start = async {
            let c = self.observer().await?;
            let watcher = c
                .watch(
                    &self.inner.leases_dir,
                    zk::AddWatchMode::PersistentRecursive,
                )
                .await
                .map_err(|e| map_err("watch", e))?;
            let joins = c
                .watch(
                    &self.inner.groups_dir,
                    zk::AddWatchMode::PersistentRecursive,
                )
                .await
                .map_err(|e| map_err("watch the groups", e))?;
            let (stop_tx, stop_rx) = futures::channel::oneshot::channel();
            *lock(&self.inner.tracker_stop) = Some(stop_tx);
            {
                let mut tracker = lock(&self.inner.tracker);
                tracker.running = true;
                self.inner.watch_epoch.fetch_add(1, Ordering::SeqCst);
            }
            drop(asyncs::spawn(track(
                Arc::downgrade(&self.inner),
                watcher,
                joins,
                stop_rx,
            )));
            Ok(())
        };
        let inner = &self.inner;
        crate::queue::ensure_running(&inner.tracker, &inner.tracker_start, start).await
    }

    fn lease_path(&self, name: &str) -> String {
        format!("{}/{name}", self.inner.leases_dir)
    }

    fn place_base(&self, name: &str, zk_id: i64) -> String {
        format!("{}/{name}/{}", self.inner.leases_dir, place_prefix(zk_id))
    }

    fn group_path(&self, group: &str) -> String {
        format!("{}/{group}", self.inner.groups_dir)
    }

    fn member_path(&self, group: &str, zk_id: i64) -> String {
        format!("{}/{group}/{:016x}", self.inner.groups_dir, zk_id as u64)
    }

    fn slot_path(&self, name: &str) -> String {
        format!("{}/{name}", self.inner.slots_dir)
    }

    fn marker_path(&self, zk_id: i64) -> String {
        format!("{}/{:016x}", self.inner.sessions_dir, zk_id as u64)
    }

    /// The live session's entry and client for the call `what`: `None`
    /// once the session expired (an unknown one is checked first, see
    /// [`ZkBackend::unknown`]); `suspended` while its connection is lost,
    /// which is not expiry (S1.2): the session is suspended until the
    /// client reconnects or ZooKeeper expires it.
    async fn live(
        &self,
        session: SessionId,
        what: &str,
    ) -> Result<Option<(Arc<Entry>, zk::Client)>, BackendError> {
        let (entry, client) = match self.client_of(session).await {
            Ok(x) => x,
            Err(Gone::Expired) => return Ok(None),
            Err(Gone::Unknown) => {
                self.unknown(session).await?;
                return Ok(None);
            }
        };
        if client.state() == zk::SessionState::Disconnected {
            return Err(suspended(what));
        }
        Ok(Some((entry, client)))
    }

    /// Runs `call` on the live session `entry` within its timeout: `None`
    /// if ZooKeeper expired the session meanwhile (it is then forgotten);
    /// any other failure as the error of the call `what`.
    async fn on_session<T>(
        &self,
        session: SessionId,
        entry: &Arc<Entry>,
        what: &str,
        call: impl std::future::Future<Output = Result<T, zk::Error>>,
    ) -> Result<Option<T>, BackendError> {
        match bounded(call, entry.timeout).await {
            Ok(t) => Ok(Some(t)),
            Err(zk::Error::SessionExpired) => {
                self.forget(session, entry).await;
                Ok(None)
            }
            Err(e) => Err(map_err(what, e)),
        }
    }

    /// The session's live client, or why there is none.
    async fn client_of(&self, session: SessionId) -> Result<(Arc<Entry>, zk::Client), Gone> {
        let entry = lock(&self.inner.sessions).get(&session).cloned();
        let Some(entry) = entry else {
            return Err(Gone::Unknown);
        };
        if Instant::now() >= *lock(&entry.deadline) {
            self.forget(session, &entry).await;
            return Err(Gone::Expired);
        }
        let client = lock(&entry.client).clone();
        match client {
            Some(c) if !c.state().is_terminated() => Ok((entry, c)),
            _ => {
                self.forget(session, &entry).await;
                Err(Gone::Expired)
            }
        }
    }

    /// Closes the session's client (ZooKeeper deletes its ephemerals at
    /// once) and drops it from the map.
    async fn forget(&self, session: SessionId, entry: &Arc<Entry>) {
        {
            let mut map = lock(&self.inner.sessions);
            if map.get(&session).is_some_and(|e| Arc::ptr_eq(e, entry)) {
                map.remove(&session);
            }
        }
        entry.shutdown().await;
    }

    /// For a session this backend does not hold: `Expired` if ZooKeeper has
    /// no such live session, an error if another client holds it.
    async fn unknown(&self, session: SessionId) -> Result<(), BackendError> {
        let Some(zk_id) = zk_session_of(session) else {
            return Ok(());
        };
        let observer = self.observer().await?;
        let marker = self.marker_path(zk_id);
        match observer.check_stat(&marker).await {
            Ok(None) => Ok(()),
            Ok(Some(_)) => Err(BackendError::new(
                BackendErrorKind::Rejected,
                format!("{NAME}: session {session} is live but was opened by another client"),
            )),
            Err(e) => Err(map_err("check session", e)),
        }
    }

    /// A raw durable write, for benchmarks: one `setData` of a persistent
    /// znode (`<root>/floor`, created on first use) through `session`'s
    /// client. ZooKeeper logs every write before it answers, so this is
    /// the floor of any call that changes a lease (a take-over is two: the
    /// old holder's delete, the next holder's create).
    ///
    /// # Errors
    /// A [`BackendError`] if `session` is not open here or a call failed.
    #[cfg(feature = "testkit")]
    pub async fn raw_write(&self, session: SessionId) -> Result<(), BackendError> {
        let client = self.zk_client(session).ok_or_else(|| {
            BackendError::new(
                BackendErrorKind::Rejected,
                format!("{NAME}: session {session} is not open on this backend"),
            )
        })?;
        let path = format!("{}/floor", self.inner.target.root);
        match client.set_data(&path, b"1", None).await {
            Ok(_) => Ok(()),
            Err(zk::Error::NoNode) => {
                let opts = zk::CreateMode::Persistent.with_acls(self.inner.target.acls());
                match client.create(&path, b"1", &opts).await {
                    Ok(_) | Err(zk::Error::NodeExists) => Ok(()),
                    Err(e) => Err(map_err("create the floor znode", e)),
                }
            }
            Err(e) => Err(map_err("write the floor znode", e)),
        }
    }

    /// For tests: the session's ZooKeeper client, to observe or disturb it.
    #[cfg(feature = "testkit")]
    pub fn zk_client(&self, session: SessionId) -> Option<zk::Client> {
        let entry = lock(&self.inner.sessions).get(&session).cloned()?;
        let client = lock(&entry.client).clone();
        client
    }

    /// Whether the watch saw the child `child` of `name` deleted lately.
    /// Judges a listing of `name`'s children for the ZooKeeper session
    /// `me`, without the places the watch has seen deleted (a deleted
    /// place's name never comes back). Costs the listing's length, however
    /// many deletions the backend remembers for other names.
    /// The watch as it stands before a listing is read: the epoch of the
    /// running watch, if one runs (see [`Self::judge_listing`]).
    fn watch_now(&self) -> Option<u64> {
        let tracker = lock(&self.inner.tracker);
        tracker
            .running
            .then(|| self.inner.watch_epoch.load(Ordering::SeqCst))
    }

    /// Judges a listing of `name`'s children for `me`, leaving out those
    /// the watch saw deleted. The holder it shows is recorded for the
    /// broadcast filter (see [`track`]) only when the watch that ran before
    /// the listing was read (`watched`, from [`Self::watch_now`]) still runs:
    /// then every deletion after the listing reaches it, and a deletion of
    /// the holder is either left out here or seen by the watch after.
    fn judge_listing(
        &self,
        name: &str,
        children: &[String],
        me: i64,
        watched: Option<u64>,
    ) -> QueueView {
        let tracker = lock(&self.inner.tracker);
        let gone = tracker.deleted(name);
        let judged = judge(children, me, |child| {
            gone.is_some_and(|g| g.contains_key(child))
        });
        let still =
            tracker.running && watched == Some(self.inner.watch_epoch.load(Ordering::SeqCst));
        let mut holders = lock(&self.inner.holders);
        if holders.len() >= MAX_HOLDERS {
            holders.clear();
        }
        match &judged.first {
            Some(first) if still => {
                holders.insert(name.to_owned(), (first.clone(), Instant::now()));
            }
            _ => {
                holders.remove(name);
            }
        }
        drop(holders);
        drop(tracker);
        judged
    }

    /// Acquire (see the module docs): answer from the session's place when
    /// the watch has seen every place before it deleted, else create a place
    /// (or read the queue again) in one round trip.
    async fn acquire_with(
        &self,
        entry: &Entry,
        client: &zk::Client,
        name: &LeaseName,
    ) -> Result<AcquireOutcome, zk::Error> {
        let n = name.as_str();
        let _serial = entry.name_lock(n).await;
        let parent = self.lease_path(n);
        let me = entry.zk_id;
        let place = lock(&entry.places).get(n).cloned();
        let watched = self.watch_now();
        match place {
            Some(Place::Won { path, czxid, .. }) => {
                // A repeat: the place still exists, or the term is over.
                if client.check_stat(&path).await?.is_some() {
                    return Ok(self.won(entry, czxid));
                }
                lock(&entry.places).remove(n);
            }
            Some(Place::Waiting {
                path,
                czxid,
                blockers,
                ..
            }) => {
                if blockers.is_empty() {
                    // Every place before ours was deleted after ours existed,
                    // and none can appear before it: ours holds the lease
                    // (S4.2). The session lives until the engine's deadline,
                    // which this answer does not move.
                    self.set_place(entry, n, Place::won(path, czxid));
                    return Ok(self.won(entry, czxid));
                }
                let children = match client.list_children(&parent).await {
                    Ok(c) => c,
                    Err(zk::Error::NoNode) => Vec::new(),
                    Err(e) => return Err(e),
                };
                let judged = self.judge_listing(n, &children, me, watched);
                let child = path.rsplit('/').next().unwrap_or_default();
                if judged.ours.as_deref() == Some(child) {
                    return Ok(self.placed(
                        entry,
                        n,
                        path,
                        czxid,
                        judged.blockers,
                        judged.first_owner,
                    ));
                }
                // Our place is gone (or a lower one of ours appeared after
                // a lost reply): start over.
                lock(&entry.places).remove(n);
            }
            Some(Place::Pending { .. }) | None => {}
        }
        self.set_place(
            entry,
            n,
            Place::Pending {
                since: Instant::now(),
            },
        );
        let result = self.create_place(entry, client, n, watched).await;
        if result.is_err() {
            // Nothing of ours is known to exist; a place a lost reply left
            // is found by the next acquire's listing, or removed by a
            // withdraw or the renewal's clean-up.
            let mut places = lock(&entry.places);
            if matches!(places.get(n), Some(Place::Pending { .. })) {
                places.remove(n);
            }
        }
        result
    }

    /// Creates the session's place for `n` and lists the queue behind it.
    /// `watched`: the watch as it stood before the acquire read anything
    /// ([`Self::watch_now`]).
    async fn create_place(
        &self,
        entry: &Entry,
        client: &zk::Client,
        n: &str,
        watched: Option<u64>,
    ) -> Result<AcquireOutcome, zk::Error> {
        let parent = self.lease_path(n);
        let base = self.place_base(n, entry.zk_id);
        let acls = self.inner.target.acls();
        let sequential = zk::CreateMode::EphemeralSequential.with_acls(acls);
        let persistent = zk::CreateMode::Persistent.with_acls(acls);
        let me = entry.zk_id;
        // A name's parent znode is created by the first acquire that finds
        // it missing, in the same multi-op as that acquire's place: a new
        // name costs two round trips (the multi that fails, the one that
        // creates both), not three.
        let mut with_parent = false;
        for _ in 0..4 {
            let mut multi = client.new_multi_writer();
            if with_parent {
                multi.add_create(&parent, &[], &persistent)?;
            }
            multi.add_create(&base, &me.to_be_bytes(), &sequential)?;
            multi.add_set_data(&parent, &[], None)?;
            // Both requests are sent now, in this order: the listing sees
            // the new place and every older child still there.
            let created = multi.commit();
            let listed = client.list_children(&parent);
            let (created, listed) = futures::join!(created, listed);
            let results = match created.map_err(multi_err) {
                Ok(r) => r,
                // No parent yet: create it with the place.
                Err(zk::Error::NoNode) if !with_parent => {
                    with_parent = true;
                    continue;
                }
                // Another session created it meanwhile.
                Err(zk::Error::NodeExists) if with_parent => {
                    with_parent = false;
                    continue;
                }
                Err(e) => return Err(e),
            };
            let children = listed?;
            let mut path = None;
            let mut czxid = None;
            for r in results {
                match r {
                    // The place, not the parent the same multi may create.
                    zk::MultiWriteResult::Create { path: p, .. } if p.starts_with(&base) => {
                        path = Some(p)
                    }
                    zk::MultiWriteResult::SetData { stat } => czxid = Some(stat.mzxid),
                    _ => {}
                }
            }
            let (Some(path), Some(czxid)) = (path, czxid) else {
                return Err(zk::Error::UnexpectedError(
                    "the place's multi-op answered without its results".into(),
                ));
            };
            let child = path.rsplit('/').next().unwrap_or_default().to_owned();
            let judged = self.judge_listing(n, &children, me, watched);
            let Some(ours) = judged.ours.clone() else {
                return Err(zk::Error::UnexpectedError(format!(
                    "the listing of `{n}` misses the place {child} just created"
                )));
            };
            // Places of ours left by lost replies: keep the first, delete
            // the rest (the new one included if it is not the first).
            let extra: Vec<String> = judged
                .extra
                .iter()
                .map(|c| format!("{parent}/{c}"))
                .collect();
            let deletes = futures::future::join_all(extra.iter().map(|p| client.delete(p, None)));
            let (path, czxid) = if ours == child {
                for r in deletes.await {
                    match r {
                        Ok(()) | Err(zk::Error::NoNode) => {}
                        Err(e) => return Err(e),
                    }
                }
                (path, czxid)
            } else {
                let first = format!("{parent}/{ours}");
                let (stat, _) = futures::join!(client.check_stat(&first), deletes);
                match stat? {
                    Some(stat) => (first, stat.czxid),
                    None => continue, // withdrawn meanwhile? list again
                }
            };
            return Ok(self.placed(entry, n, path, czxid, judged.blockers, judged.first_owner));
        }
        Ok(AcquireOutcome::Held {
            holder: None,
            token: None,
            holder_remaining: None,
        })
    }

    /// Records the session's place and answers: `Won` if nothing stands
    /// before it, else `Held` by the first place's owner.
    fn placed(
        &self,
        entry: &Entry,
        n: &str,
        path: String,
        czxid: i64,
        blockers: BTreeSet<String>,
        first_owner: Option<i64>,
    ) -> AcquireOutcome {
        if blockers.is_empty() {
            self.set_place(entry, n, Place::won(path, czxid));
            return self.won(entry, czxid);
        }
        self.set_place(
            entry,
            n,
            Place::Waiting {
                path,
                czxid,
                blockers,
                since: Instant::now(),
            },
        );
        AcquireOutcome::Held {
            holder: first_owner.map(session_id_of),
            token: None,
            holder_remaining: None,
        }
    }

    fn set_place(&self, entry: &Entry, n: &str, place: Place) {
        lock(&entry.places).insert(n.to_owned(), place);
    }

    /// The path of the session's place that is the term with `token`, if
    /// there is one: from the places won through this backend, else read
    /// (a lost acquire reply).
    async fn term_path(
        &self,
        entry: &Entry,
        client: &zk::Client,
        name: &str,
        token: Token,
    ) -> Result<Option<String>, zk::Error> {
        if let Some(Place::Won { path, czxid, .. }) = lock(&entry.places).get(name) {
            if u64::try_from(*czxid).ok() == Some(token.get()) {
                return Ok(Some(path.clone()));
            }
        }
        let parent = self.lease_path(name);
        let children = match client.list_children(&parent).await {
            Ok(c) => c,
            Err(zk::Error::NoNode) => return Ok(None),
            Err(e) => return Err(e),
        };
        let judged = judge(&children, entry.zk_id, |_| false);
        // Only the first child holds the lease; it must be ours.
        let Some(ours) = judged.ours.filter(|_| judged.blockers.is_empty()) else {
            return Ok(None);
        };
        let path = format!("{parent}/{ours}");
        Ok(match client.check_stat(&path).await? {
            Some(stat) if u64::try_from(stat.czxid).ok() == Some(token.get()) => Some(path),
            _ => None,
        })
    }

    /// Deletes the session's places of `name` that are not a term: the one
    /// recorded, or (nothing recorded) every one a listing shows.
    async fn withdraw_with(
        &self,
        entry: &Entry,
        client: &zk::Client,
        name: &str,
    ) -> Result<(), zk::Error> {
        let _serial = entry.name_lock(name).await;
        let place = lock(&entry.places).get(name).cloned();
        let paths = match place {
            Some(Place::Won { .. }) => return Ok(()), // a term: only release ends it
            Some(Place::Waiting { path, .. }) => vec![path],
            Some(Place::Pending { .. }) | None => {
                let parent = self.lease_path(name);
                let children = match client.list_children(&parent).await {
                    Ok(c) => c,
                    Err(zk::Error::NoNode) => Vec::new(),
                    Err(e) => return Err(e),
                };
                let mine = place_prefix(entry.zk_id);
                children
                    .into_iter()
                    .filter(|c| c.starts_with(&mine))
                    .map(|c| format!("{parent}/{c}"))
                    .collect()
            }
        };
        let deletes = futures::future::join_all(paths.iter().map(|p| client.delete(p, None))).await;
        for r in deletes {
            match r {
                Ok(()) | Err(zk::Error::NoNode) => {}
                Err(e) => return Err(e),
            }
        }
        lock(&entry.places).remove(name);
        Ok(())
    }

    /// Claim a slot (S11.1): read the last slot, then one multi-op that
    /// checks the term (its place at version 0: the place exists only while
    /// the term lasts, and is unique to it) and writes the slot at the
    /// version read, or only checks when the slot
    /// is not later. A concurrent claim changes the slot's version: read
    /// again.
    async fn claim_with(
        &self,
        entry: &Entry,
        client: &zk::Client,
        name: &LeaseName,
        token: Token,
        slot: u64,
    ) -> Result<SlotClaim, zk::Error> {
        let n = name.as_str();
        let Some(place) = self.term_path(entry, client, n, token).await? else {
            return Ok(SlotClaim::NotHolder);
        };
        let path = self.slot_path(n);
        let persistent = zk::CreateMode::Persistent.with_acls(self.inner.target.acls());
        let text = slot.to_string();
        for _ in 0..8 {
            let read = match client.get_data(&path).await {
                Ok((data, stat)) => {
                    let last = std::str::from_utf8(&data)
                        .ok()
                        .and_then(|d| d.parse::<u64>().ok())
                        .ok_or_else(|| {
                            zk::Error::UnexpectedError(format!(
                                "slot znode of `{n}` holds {data:?}"
                            ))
                        })?;
                    Some((last, stat.version))
                }
                Err(zk::Error::NoNode) => None,
                Err(e) => return Err(e),
            };
            let mut multi = client.new_multi_writer();
            multi.add_check_version(&place, 0)?;
            let already = match read {
                Some((last, v)) if last >= slot => {
                    multi.add_check_version(&path, v)?;
                    Some(last)
                }
                Some((_, v)) => {
                    multi.add_set_data(&path, text.as_bytes(), Some(v))?;
                    None
                }
                None => {
                    multi.add_create(&path, text.as_bytes(), &persistent)?;
                    None
                }
            };
            match multi.commit().await {
                Ok(_) => {
                    return Ok(match already {
                        Some(last) => SlotClaim::AlreadyClaimed { last },
                        None => SlotClaim::Claimed,
                    })
                }
                // The term's check: this term ended.
                Err(zk::MultiWriteError::OperationFailed { index: 0, .. }) => {
                    return Ok(SlotClaim::NotHolder)
                }
                // The slot changed (or appeared) since it was read.
                Err(zk::MultiWriteError::OperationFailed {
                    source: zk::Error::BadVersion | zk::Error::NodeExists | zk::Error::NoNode,
                    ..
                }) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(zk::Error::UnexpectedError(format!(
            "the slot of `{n}` changed eight times while claiming"
        )))
    }

    fn won(&self, entry: &Entry, zxid: i64) -> AcquireOutcome {
        match u64::try_from(zxid).ok().and_then(Token::new) {
            // The session lives until its watchdog's deadline (set by the
            // last renewal), which an acquire does not move: report the time
            // left until then, never the full timeout, or the caller would
            // believe the term valid after the watchdog closed the session.
            Some(token) => AcquireOutcome::Won {
                token,
                remaining: entry
                    .timeout
                    .min(lock(&entry.deadline).saturating_duration_since(Instant::now())),
            },
            None => AcquireOutcome::Held {
                holder: None,
                token: None,
                holder_remaining: None,
            },
        }
    }
}

/// The renewal's multi-read replies (one `getChildren` per joined group) as
/// views, members ascending.
fn group_views(
    joined: &[String],
    replies: Vec<zk::MultiReadResult>,
) -> Result<Vec<simba_core::GroupView>, BackendError> {
    if replies.len() != joined.len() {
        return Err(malformed(format!(
            "renew read {} groups' members, expected {}",
            replies.len(),
            joined.len()
        )));
    }
    let mut out = Vec::with_capacity(joined.len());
    for (g, reply) in joined.iter().zip(replies) {
        let children = match reply {
            zk::MultiReadResult::Children { children } => children,
            // The group's znode is gone (a removed tree): no members.
            zk::MultiReadResult::Error {
                err: zk::Error::NoNode,
            } => Vec::new(),
            zk::MultiReadResult::Error { err } => return Err(map_err("renew", err)),
            _ => {
                return Err(malformed(format!(
                    "group {g:?}: data where children were read"
                )))
            }
        };
        let mut members = children
            .iter()
            .map(|c| {
                u64::from_str_radix(c, 16)
                    .ok()
                    .filter(|_| c.len() == 16)
                    .map(|id| session_id_of(id as i64))
                    .ok_or_else(|| malformed(format!("member znode {c:?} of group {g:?}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        members.sort_unstable();
        members.dedup();
        let group =
            LeaseName::new(g.as_str()).map_err(|e| malformed(format!("group name {g:?}: {e}")))?;
        out.push(simba_core::GroupView { group, members });
    }
    Ok(out)
}

impl Entry {
    /// Waits for the lock of lease name `n` (see `name_locks`).
    async fn name_lock(&self, n: &str) -> futures::lock::OwnedMutexGuard<()> {
        let m = lock(&self.name_locks)
            .entry(n.to_owned())
            .or_insert_with(|| Arc::new(futures::lock::Mutex::new(())))
            .clone();
        m.lock_owned().await
    }

    /// Closes the client and waits (bounded) until ZooKeeper confirmed it.
    async fn shutdown(&self) {
        let client = lock(&self.client).take();
        let Some(client) = client else {
            return;
        };
        let mut states = client.state_watcher();
        drop(client);
        let wait = async {
            loop {
                if states.changed().await.is_terminated() {
                    return;
                }
            }
        };
        let limit = futures_timer::Delay::new(self.timeout.min(Duration::from_secs(5)));
        futures::future::select(wait.boxed(), limit).await;
    }
}

/// Closes the session once its deadline passes without a renewal.
async fn watchdog(entry: Weak<Entry>, inner: Weak<Inner>, session: SessionId) {
    loop {
        let Some(e) = entry.upgrade() else { return };
        if lock(&e.client).is_none() {
            return;
        }
        let deadline = *lock(&e.deadline);
        let now = Instant::now();
        if now >= deadline {
            if let Some(inner) = inner.upgrade() {
                let mut map = lock(&inner.sessions);
                if map.get(&session).is_some_and(|x| Arc::ptr_eq(x, &e)) {
                    map.remove(&session);
                }
            }
            e.shutdown().await;
            return;
        }
        drop(e);
        futures_timer::Delay::new(deadline - now).await;
    }
}

/// The backend's watch: every deleted place is remembered for a while (a
/// listing that crossed it reads without it), struck from the waiting
/// places' blockers of every session this backend holds, and then announced
/// to the subscribers. Ends with the observer session or the backend.
async fn track(
    inner: Weak<Inner>,
    mut watcher: zk::PersistentWatcher,
    mut joins: zk::PersistentWatcher,
    mut stop: futures::channel::oneshot::Receiver<()>,
) {
    use futures::future::{select, Either};
    loop {
        let (event, of_groups) = {
            let changed = std::pin::pin!(watcher.changed());
            let joined = std::pin::pin!(joins.changed());
            match select(select(changed, joined), &mut stop).await {
                Either::Left((Either::Left((event, _)), _)) => (event, false),
                Either::Left((Either::Right((event, _)), _)) => (event, true),
                Either::Right(_) => return,
            }
        };
        let Some(inner) = inner.upgrade() else { return };
        if of_groups && event.event_type == zk::EventType::NodeCreated {
            // A member znode `<root>/groups/<group>/<session>` created: a
            // session joined `<group>` (S10.5; a join of a member already
            // listed creates nothing). The group's own znode is not a join.
            let prefix = format!("{}/", inner.groups_dir);
            let group = event
                .path
                .strip_prefix(&prefix)
                .and_then(|r| r.split_once('/'))
                .filter(|(_, member)| !member.contains('/'))
                .and_then(|(g, _)| LeaseName::new(g).ok());
            if let Some(group) = group {
                lock(&inner.tracker).announce(&[group]);
            }
            continue;
        }
        match event.event_type {
            zk::EventType::NodeCreated => {
                // A place of `<root>/leases/<name>`: its sequence number
                // orders it in the name's queue.
                let prefix = format!("{}/", inner.leases_dir);
                let place = event
                    .path
                    .strip_prefix(&prefix)
                    .and_then(|r| r.split_once('/'))
                    .filter(|(_, child)| !child.contains('/'))
                    .and_then(|(n, child)| Some((n, child, parse_place(child)?.1)));
                if let Some((n, child, seq)) = place {
                    let order = i64::try_from(seq).unwrap_or(i64::MAX);
                    lock(&inner.queues).created(n, child, order);
                }
            }
            zk::EventType::NodeDeleted => {
                let prefix = format!("{}/", inner.leases_dir);
                let Some((n, child)) = event
                    .path
                    .strip_prefix(&prefix)
                    .and_then(|r| r.split_once('/'))
                else {
                    continue;
                };
                if child.contains('/') {
                    continue;
                }
                lock(&inner.tracker).note_deleted(n, child, ());
                let entries: Vec<Arc<Entry>> = lock(&inner.sessions).values().cloned().collect();
                let mut unblocked = false;
                for e in entries {
                    if let Some(Place::Waiting { blockers, .. }) = lock(&e.places).get_mut(n) {
                        unblocked |= blockers.remove(child) && blockers.is_empty();
                    }
                }
                // A deletion frees the lease only if it deletes the holding
                // child. A child the watch saw created stands before it, or
                // the holder an acquire read still stands first (no child
                // can appear before it): deleting another child, a waiter
                // withdrawing, frees nothing: not announced (S4.2).
                // Announced, a withdraw by any member of a group cleared the
                // other members' marks of the partition (S10.2): they asked
                // again for partitions a live member held, and free ones
                // stayed unowned; and a member that had read no holder heard
                // it as a release and split a leave differently ([`Queues`]).
                let behind = lock(&inner.queues).deleted(n, child);
                let frees = !behind && {
                    let mut holders = lock(&inner.holders);
                    match holders.get(n) {
                        Some((h, at)) if at.elapsed() < HOLDER_FRESH && h != child => false,
                        _ => {
                            holders.remove(n);
                            true
                        }
                    }
                };
                if !frees && !unblocked {
                    continue;
                }
                if let Ok(name) = LeaseName::new(n) {
                    lock(&inner.tracker).announce(&[name]);
                }
            }
            zk::EventType::Session if !event.session_state.is_terminated() => {
                // Disconnected or connected again: creations and deletions
                // may have been missed meanwhile.
                lock(&inner.queues).clear();
            }
            zk::EventType::Session if event.session_state.is_terminated() => {
                // The subscribers' streams end; they subscribe again.
                // Deletions may be missed from here on: every deletion is
                // announced until acquires read the holders again.
                let mut tracker = lock(&inner.tracker);
                tracker.stopped();
                inner.watch_epoch.fetch_add(1, Ordering::SeqCst);
                lock(&inner.holders).clear();
                lock(&inner.queues).clear();
                return;
            }
            _ => {}
        }
    }
}

/// Deletes places the renewal found stale, each under its name's lock and
/// only if nothing of the session's was recorded for it meanwhile.
async fn clean_up(entry: Weak<Entry>, client: zk::Client, stale: Vec<(String, String)>) {
    for (n, path) in stale {
        let Some(e) = entry.upgrade() else { return };
        let _serial = e.name_lock(&n).await;
        let current = lock(&e.places).get(&n).cloned();
        let delete = match &current {
            None => true,
            Some(Place::Waiting { path: p, .. }) => *p != path,
            Some(Place::Pending { since }) => since.elapsed() > e.timeout * 2,
            Some(Place::Won { path: p, .. }) => *p != path,
        };
        if !delete {
            continue;
        }
        match client.delete(&path, None).await {
            Ok(()) | Err(zk::Error::NoNode) => {
                let mut places = lock(&e.places);
                // A pending place may be this one, left by a lost reply;
                // a recorded waiting place or term is never the one deleted.
                if matches!(places.get(&n), Some(Place::Pending { .. })) {
                    places.remove(&n);
                }
            }
            Err(error) => {
                tracing::debug!(%error, path, "zookeeper: a stale place stays until a later renewal");
            }
        }
    }
}

impl Backend for ZkBackend {
    crate::queue::queue_backend_common!();

    fn open_session_with<'a>(
        &'a self,
        lease_duration: Duration,
        metadata: &'a SessionMetadata,
    ) -> BoxFuture<'a, Result<SessionGrant, BackendError>> {
        async move {
            check_lease_duration(lease_duration)?;
            // ZooKeeper's session timeout is an i32 of milliseconds.
            let requested = lease_duration.min(Duration::from_millis(i32::MAX as u64));
            let started = Instant::now();
            let client = self.inner.target.connect(requested).await?;
            let zk_id = client.session_id().0;
            let timeout = client.session_timeout();
            let marker = self.marker_path(zk_id);
            // `lease timeout` in ms, then the metadata on the lines below.
            let mut data = format!("{} {}", millis(lease_duration), millis(timeout));
            if !metadata.is_empty() {
                data.push('\n');
                data.push_str(&metadata.encode());
            }
            let opts = zk::CreateMode::Ephemeral.with_acls(self.inner.target.acls());
            if let Err(e) = client.create(&marker, data.as_bytes(), &opts).await {
                return Err(map_err("open session", e));
            }
            let session = session_id_of(zk_id);
            let entry = Arc::new(Entry {
                zk_id,
                lease: lease_duration,
                timeout,
                client: Mutex::new(Some(client)),
                deadline: Mutex::new(started + lease_duration),
                places: Mutex::new(HashMap::new()),
                name_locks: Mutex::new(HashMap::new()),
                groups: Mutex::new(std::collections::BTreeSet::new()),
            });
            lock(&self.inner.sessions).insert(session, entry.clone());
            // Detached: dropping the join handle does not cancel the task.
            drop(asyncs::spawn(watchdog(
                Arc::downgrade(&entry),
                Arc::downgrade(&self.inner),
                session,
            )));
            Ok(SessionGrant {
                session,
                remaining: timeout,
            })
        }
        .boxed()
    }

    fn renew(&self, session: SessionId) -> BoxFuture<'_, Result<Renewal, RenewError>> {
        async move {
            // Connection loss is not expiry (S1.2), see `live`.
            let Some((entry, client)) = self.live(session, "renew").await? else {
                return Err(RenewError::Expired);
            };
            let sent = Instant::now();
            // The members of the joined groups (S10.1): one multi-read, sent
            // with the listing before either reply is awaited (one round
            // trip; ZooKeeper answers a session's requests in order).
            let joined: Vec<String> = lock(&entry.groups).iter().cloned().collect();
            let mut reader = client.new_multi_reader();
            for g in &joined {
                reader
                    .add_get_children(&self.group_path(g))
                    .map_err(|e| map_err("renew", e))?;
            }
            let members = reader.commit();
            let listing = client.list_ephemerals(&self.inner.leases_dir);
            let both = async {
                let (paths, members) = futures::join!(listing, members);
                Ok::<_, zk::Error>((paths?, members?))
            };
            let read = self.on_session(session, &entry, "renew", both).await?;
            let Some((paths, members)) = read else {
                return Err(RenewError::Expired);
            };
            let late = {
                let mut deadline = lock(&entry.deadline);
                let late = *deadline <= sent;
                if !late {
                    *deadline = sent + entry.lease;
                }
                late
            };
            if late {
                // The watchdog's deadline passed before the call was sent.
                self.forget(session, &entry).await;
                return Err(RenewError::Expired);
            }
            let prefix = format!("{}/", self.inner.leases_dir);
            let mut owned = Vec::new();
            let mut live: HashSet<&str> = HashSet::with_capacity(paths.len());
            // Places no acquire of the engine stands behind: left by a lost
            // reply (none recorded). A waiting place stays until it wins, is
            // withdrawn, or ends with the session (S4.5): a candidate parked
            // for an acquire slot (S4.6) keeps its turn.
            let mut stale: Vec<(String, String)> = Vec::new();
            {
                let mut places = lock(&entry.places);
                for p in &paths {
                    let Some((n, child)) = p.strip_prefix(&prefix).and_then(|r| r.split_once('/'))
                    else {
                        continue;
                    };
                    if parse_place(child).is_none() {
                        continue;
                    }
                    live.insert(p.as_str());
                    match places.get(n) {
                        Some(Place::Won { path, czxid, .. }) if path == p => {
                            let name = LeaseName::new(n)
                                .map_err(|e| malformed(format!("lease znode {p:?}: {e}")))?;
                            owned.push((name, token_of(n, *czxid)?));
                        }
                        Some(Place::Waiting { path, .. }) if path == p => {}
                        Some(Place::Pending { since }) if *since + entry.timeout * 2 >= sent => {}
                        _ => stale.push((n.to_owned(), p.clone())),
                    }
                }
                // A place recorded before this listing was sent and missing
                // from it is gone: a term so ended shows as not owned (S3.4).
                places.retain(|_, place| match place {
                    Place::Won { path, since, .. } | Place::Waiting { path, since, .. } => {
                        *since >= sent || live.contains(path.as_str())
                    }
                    Place::Pending { .. } => true,
                });
            }
            if !stale.is_empty() {
                drop(asyncs::spawn(clean_up(
                    Arc::downgrade(&entry),
                    client.clone(),
                    stale,
                )));
            }
            owned.sort_by(|a, b| a.0.cmp(&b.0));
            Ok(Renewal {
                groups: group_views(&joined, members)?,
                remaining: entry.timeout,
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
            let Some((entry, client)) = self.live(session, "acquire").await? else {
                return Ok(AcquireOutcome::Expired);
            };
            let call = self.acquire_with(&entry, &client, name);
            let outcome = self.on_session(session, &entry, "acquire", call).await?;
            Ok(outcome.unwrap_or(AcquireOutcome::Expired))
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
            // An unknown or expired session owns nothing: a no-op.
            let Ok((entry, client)) = self.client_of(session).await else {
                return Ok(());
            };
            let n = name.as_str();
            let _serial = entry.name_lock(n).await;
            let release = async {
                let Some(path) = self.term_path(&entry, &client, n, token).await? else {
                    return Ok(()); // not this session's term (any more): stale
                };
                match client.delete(&path, None).await {
                    Ok(()) | Err(zk::Error::NoNode) => {}
                    Err(e) => return Err(e),
                }
                let mut places = lock(&entry.places);
                if matches!(places.get(n), Some(Place::Won { path: p, .. }) if *p == path) {
                    places.remove(n);
                }
                Ok(())
            };
            match bounded(release, entry.timeout).await {
                Ok(()) | Err(zk::Error::SessionExpired) => Ok(()),
                Err(e) => Err(map_err("release", e)),
            }
        }
        .boxed()
    }

    fn withdraw<'a>(
        &'a self,
        session: SessionId,
        name: &'a LeaseName,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        async move {
            // An unknown or expired session has no places.
            let Ok((entry, client)) = self.client_of(session).await else {
                return Ok(());
            };
            if client.state() == zk::SessionState::Disconnected {
                return Err(suspended("withdraw"));
            }
            match bounded(
                self.withdraw_with(&entry, &client, name.as_str()),
                entry.timeout,
            )
            .await
            {
                Ok(()) | Err(zk::Error::SessionExpired) => Ok(()),
                Err(e) => Err(map_err("withdraw", e)),
            }
        }
        .boxed()
    }

    fn close_session(&self, session: SessionId) -> BoxFuture<'_, Result<(), BackendError>> {
        async move {
            let entry = lock(&self.inner.sessions).remove(&session);
            if let Some(entry) = entry {
                entry.shutdown().await;
            }
            Ok(())
        }
        .boxed()
    }

    fn inspect<'a>(
        &'a self,
        prefix: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Inspection, BackendError>> {
        async move {
            let prefix = prefix.unwrap_or("");
            check_prefix(prefix)?;
            let get = |e| map_err("inspect", e);
            let c = self.observer().await?;
            let (ids, names) = futures::join!(
                c.list_children(&self.inner.sessions_dir),
                c.list_children(&self.inner.leases_dir)
            );
            let (ids, mut names) = (ids.map_err(get)?, names.map_err(get)?);
            names.retain(|n| n.starts_with(prefix));
            let mut out = Inspection::default();
            // Every read is sent before any reply is awaited.
            let datas = futures::future::join_all(
                ids.iter()
                    .map(|id| c.get_data(&format!("{}/{id}", self.inner.sessions_dir))),
            );
            let parents =
                futures::future::join_all(names.iter().map(|n| c.check_stat(&self.lease_path(n))));
            let queues = futures::future::join_all(
                names.iter().map(|n| c.list_children(&self.lease_path(n))),
            );
            let (datas, parents, queues) = futures::join!(datas, parents, queues);
            // Each lease's first place holds it: read their stats, all at once.
            let mut firsts = Vec::with_capacity(names.len());
            for (n, queue) in names.iter().zip(queues) {
                let queue = match queue {
                    Ok(q) => q,
                    Err(zk::Error::NoNode) => Vec::new(),
                    Err(e) => return Err(get(e)),
                };
                firsts.push(
                    judge(&queue, 0, |_| false)
                        .first
                        .map(|child| format!("{}/{child}", self.lease_path(n))),
                );
            }
            let c = &c;
            let holders = futures::future::join_all(firsts.iter().map(|f| async move {
                match f {
                    Some(path) => c.check_stat(path).await,
                    None => Ok(None),
                }
            }))
            .await;
            let mut remaining: HashMap<i64, Duration> = HashMap::new();
            for (id, data) in ids.iter().zip(datas) {
                let (data, stat) = match data {
                    Ok(d) => d,
                    Err(zk::Error::NoNode) => continue, // ended meanwhile
                    Err(e) => return Err(get(e)),
                };
                let text = String::from_utf8_lossy(&data);
                let (first, metadata) = text.split_once('\n').unwrap_or((&text, ""));
                let mut parts = first.split(' ').map(|p| p.parse::<u64>().ok());
                let (Some(Some(lease)), Some(Some(timeout))) = (parts.next(), parts.next()) else {
                    return Err(malformed(format!("session znode {id} holds {text:?}")));
                };
                let lease = Duration::from_millis(lease);
                let timeout = Duration::from_millis(timeout).min(lease);
                remaining.insert(stat.ephemeral_owner, timeout);
                out.sessions.push(SessionInfo {
                    session: session_id_of(stat.ephemeral_owner),
                    remaining: timeout,
                    lease_duration: lease,
                    metadata: SessionMetadata::decode(metadata),
                });
            }
            for ((n, parent), holder) in names.iter().zip(parents).zip(holders) {
                let Some(parent) = parent.map_err(get)? else {
                    continue;
                };
                let name =
                    LeaseName::new(n).map_err(|e| malformed(format!("lease znode {n:?}: {e}")))?;
                let info = match holder.map_err(get)? {
                    Some(h) => LeaseInfo {
                        name,
                        holder: Some(session_id_of(h.ephemeral_owner)),
                        token: Some(token_of(n, h.czxid)?),
                        remaining: Some(
                            remaining
                                .get(&h.ephemeral_owner)
                                .copied()
                                .unwrap_or(Duration::ZERO),
                        ),
                    },
                    None => LeaseInfo {
                        name,
                        holder: None,
                        // Every place's multi sets the parent's data (its
                        // mzxid is the place's token), in the same
                        // transaction that may create the parent: a
                        // version above 0 means some place was made.
                        token: if parent.version > 0 {
                            Some(token_of(n, parent.mzxid)?)
                        } else {
                            None
                        },
                        remaining: None,
                    },
                };
                out.leases.push(info);
            }
            out.sessions.sort_by_key(|s| s.session);
            out.leases.sort_by(|a, b| a.name.cmp(&b.name));
            Ok(out)
        }
        .boxed()
    }

    fn join_group<'a>(
        &'a self,
        session: SessionId,
        group: &'a LeaseName,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        async move {
            let Some((entry, client)) = self.live(session, "join group").await? else {
                // A session that is not live joins nothing.
                return Ok(());
            };
            let g = group.as_str();
            let member = self.member_path(g, entry.zk_id);
            let acls = self.inner.target.acls();
            let ephemeral = zk::CreateMode::Ephemeral.with_acls(acls);
            let persistent = zk::CreateMode::Persistent.with_acls(acls);
            let join = async {
                for _ in 0..4 {
                    match client.create(&member, &[], &ephemeral).await {
                        Ok(_) | Err(zk::Error::NodeExists) => return Ok(true),
                        Err(zk::Error::NoNode) => {
                            match client.create(&self.group_path(g), &[], &persistent).await {
                                Ok(_) | Err(zk::Error::NodeExists) => {}
                                Err(e) => return Err(e),
                            }
                        }
                        Err(e) => return Err(e),
                    }
                }
                Ok(false)
            };
            match self.on_session(session, &entry, "join group", join).await? {
                Some(true) => {
                    lock(&entry.groups).insert(g.to_owned());
                    Ok(())
                }
                Some(false) => Err(BackendError::new(
                    BackendErrorKind::Other,
                    format!("{NAME} join group: `{g}` vanished four times while joining"),
                )),
                None => Ok(()),
            }
        }
        .boxed()
    }

    fn leave_group<'a>(
        &'a self,
        session: SessionId,
        group: &'a LeaseName,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        async move {
            // An unknown or expired session is a member of nothing.
            let Ok((entry, client)) = self.client_of(session).await else {
                return Ok(());
            };
            let g = group.as_str();
            lock(&entry.groups).remove(g);
            let member = self.member_path(g, entry.zk_id);
            match bounded(client.delete(&member, None), entry.timeout).await {
                Ok(()) | Err(zk::Error::NoNode | zk::Error::SessionExpired) => Ok(()),
                Err(e) => Err(map_err("leave group", e)),
            }
        }
        .boxed()
    }

    fn claim_slot<'a>(
        &'a self,
        session: SessionId,
        name: &'a LeaseName,
        token: Token,
        slot: u64,
    ) -> BoxFuture<'a, Result<SlotClaim, BackendError>> {
        async move {
            let Some((entry, client)) = self.live(session, "claim slot").await? else {
                return Ok(SlotClaim::NotHolder);
            };
            let call = self.claim_with(&entry, &client, name, token, slot);
            let answer = self.on_session(session, &entry, "claim slot", call).await?;
            Ok(answer.unwrap_or(SlotClaim::NotHolder))
        }
        .boxed()
    }

    fn renewal_proves(&self) -> Fraction {
        // S8.5: one call proves the session alive for 5/12 of its timeout.
        Fraction::new(5, 12).unwrap_or(Fraction::ONE)
    }

    fn name(&self) -> &'static str {
        NAME
    }
}

/// A private standalone ZooKeeper for tests that stop or restart a server
/// (feature `testkit`): on a loopback port, its data in a temporary
/// directory, killed and deleted on drop.
///
/// It needs a ZooKeeper server installed (3.6 or later) and `java` on the
/// `PATH`: the class path is [`ZK_CLASSPATH_VAR`] if set, else Debian's
/// (package `zookeeperd`: `/usr/share/java/zookeeper.jar` with
/// `netty-codec.jar` and `slf4j-nop.jar` beside it when present). The
/// server's `zoo.cfg` is written by [`TestServer`] itself: a 200 ms tick,
/// sessions of 1 to 60 s, four-letter words `srvr` and `ruok`, no admin
/// server, `forceSync=no` (test data is thrown away), then the extra lines.
#[cfg(feature = "testkit")]
pub struct TestServer {
    port: u16,
    dir: std::path::PathBuf,
    extra: Vec<String>,
    child: Option<std::process::Child>,
}

/// The environment variable that, if set, is the Java class path of the
/// ZooKeeper server a [`TestServer`] runs.
#[cfg(feature = "testkit")]
pub const ZK_CLASSPATH_VAR: &str = "SIMBA_ZOOKEEPER_CLASSPATH";

#[cfg(feature = "testkit")]
impl TestServer {
    /// Starts a server on `127.0.0.1:port` with extra `zoo.cfg` lines, and
    /// waits (up to 60 s) until a session can be opened.
    ///
    /// # Errors
    /// A message if the server could not be started or never answered.
    pub async fn start(port: u16, extra: &[&str]) -> Result<TestServer, String> {
        let id = crate::random_session_id().map_err(|e| e.to_string())?;
        let dir = std::env::temp_dir().join(format!("simba-zk-{port}-{}", &id.to_string()[..8]));
        let mut server = TestServer {
            port,
            dir,
            extra: extra.iter().map(|s| (*s).to_owned()).collect(),
            child: None,
        };
        server.resume().await?;
        Ok(server)
    }

    /// The URL of this server with `root`.
    pub fn url(&self, root: &str) -> String {
        format!("zk://127.0.0.1:{}{root}", self.port)
    }

    /// Kills the server (its data stays).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Deletes the server's data (while stopped): a restart that loses data.
    pub fn wipe(&mut self) {
        let _ = std::fs::remove_dir_all(self.dir.join("data"));
    }

    /// Starts the server again on the same port and data directory.
    ///
    /// # Errors
    /// A message if it never answered within 60 s.
    pub async fn resume(&mut self) -> Result<(), String> {
        self.stop();
        let log =
            std::fs::File::create(std::env::temp_dir().join(format!("simba-zk-{}.log", self.port)))
                .map_err(|e| e.to_string())?;
        let cfg = self.write_config()?;
        let classpath = zk_classpath()?;
        let child = std::process::Command::new("java")
            .args([
                "-Xmx256m",
                "-XX:+UseSerialGC",
                "-Dzookeeper.admin.enableServer=false",
                "-Dzookeeper.jmx.log4j.disable=true",
                "-cp",
                &classpath,
                "org.apache.zookeeper.server.ZooKeeperServerMain",
            ])
            .arg(&cfg)
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log)
            .spawn()
            .map_err(|e| format!("cannot run java (a ZooKeeper test server needs it): {e}"))?;
        self.child = Some(child);
        let config = BackendConfig::parse(&self.url("/simba-probe"))
            .map_err(|e| e.to_string())?
            .with_connect_timeout(Duration::from_secs(2));
        let started = Instant::now();
        loop {
            if let Ok(b) = ZkBackend::connect(&config).await {
                drop(b);
                return Ok(());
            }
            if started.elapsed() > Duration::from_secs(60) {
                return Err(format!(
                    "the private ZooKeeper on port {} did not answer within 60 s",
                    self.port
                ));
            }
            futures_timer::Delay::new(Duration::from_millis(300)).await;
        }
    }
}

#[cfg(feature = "testkit")]
impl TestServer {
    /// Writes the server's `zoo.cfg` (loopback only, data in the server's
    /// directory) and answers its path.
    fn write_config(&self) -> Result<std::path::PathBuf, String> {
        use std::fmt::Write as _;
        let data = self.dir.join("data");
        std::fs::create_dir_all(&data)
            .map_err(|e| format!("cannot create {}: {e}", data.display()))?;
        let mut cfg = format!(
            "tickTime=200\ndataDir={}\nclientPort={}\nclientPortAddress=127.0.0.1\n\
             maxClientCnxns=0\nminSessionTimeout=1000\nmaxSessionTimeout=60000\n\
             admin.enableServer=false\n4lw.commands.whitelist=srvr,ruok\n\
             autopurge.purgeInterval=0\nforceSync=no\n",
            data.display(),
            self.port
        );
        for line in &self.extra {
            let _ = writeln!(cfg, "{line}");
        }
        let path = self.dir.join("zoo.cfg");
        std::fs::write(&path, cfg).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        Ok(path)
    }
}

/// The class path of the ZooKeeper server: [`ZK_CLASSPATH_VAR`], else
/// Debian's jars. (The manifest of Debian's 3.8 `zookeeper.jar` lists
/// netty-handler but not netty-codec, which holds the base class of
/// netty's `SslHandler`; slf4j-nop silences logging.)
#[cfg(feature = "testkit")]
fn zk_classpath() -> Result<String, String> {
    if let Ok(cp) = std::env::var(ZK_CLASSPATH_VAR) {
        return Ok(cp);
    }
    let jar = "/usr/share/java/zookeeper.jar";
    if !std::path::Path::new(jar).exists() {
        return Err(format!(
            "{jar} is missing: install ZooKeeper's server (Debian: zookeeperd) \
             or set {ZK_CLASSPATH_VAR}"
        ));
    }
    let mut cp = jar.to_owned();
    for extra in [
        "/usr/share/java/netty-codec.jar",
        "/usr/share/java/slf4j-nop.jar",
    ] {
        if std::path::Path::new(extra).exists() {
            cp.push(':');
            cp.push_str(extra);
        }
    }
    Ok(cp)
}

#[cfg(feature = "testkit")]
impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn target(url: &str) -> Result<Target, BackendError> {
        parse_target(&BackendConfig::parse(url).unwrap())
    }

    #[test]
    fn urls_parse_with_credentials_redacted() {
        let t = target("zk://app:s3cret@h1:2181,h2:2181/jobs/simba").unwrap();
        assert_eq!(t.hosts, "h1:2181,h2:2181");
        assert_eq!(t.root, "/jobs/simba");
        assert_eq!(t.digest.as_deref(), Some(&b"app:s3cret"[..]));
        assert!(!t.redacted.contains("s3cret"), "{}", t.redacted);
        let t = target("zookeeper://127.0.0.1:2181").unwrap();
        assert_eq!(t.root, "/simba");
        assert!(t.digest.is_none());
        for bad in [
            "zk://u:pw@/x",
            "zk://h:1/a//b",
            "zk://h:1/a/../b",
            "zk://h:1/zookeeper",
            "zk://h 1/x",
            "zk://app@h:1/x",
        ] {
            let e = target(bad).err().unwrap();
            assert_eq!(e.kind, BackendErrorKind::Rejected, "{bad}");
            assert!(!e.to_string().contains("pw@"), "{e}");
        }
    }

    #[test]
    fn zks_urls_take_a_ca_file_and_zk_urls_refuse_one() {
        let c = BackendConfig::parse("zks://u:pw@h:2281/x?simba_tls_ca=/no/such/ca.pem").unwrap();
        assert_eq!(c.kind(), crate::BackendKind::Zookeeper);
        assert_eq!(c.tls_ca(), Some("/no/such/ca.pem"));
        let e = target("zk://u:pw@h:2181/x?simba_tls_ca=/no/such/ca.pem")
            .err()
            .unwrap();
        assert_eq!(e.kind, BackendErrorKind::Rejected);
        assert!(e.to_string().contains("needs a zks:// URL"), "{e}");
        // Without the feature a zks:// URL is refused; with it, the CA file
        // must be readable. Either way: Rejected, the password hidden.
        let e = target("zks://u:pw@h:2281/x?simba_tls_ca=/no/such/ca.pem")
            .err()
            .unwrap();
        assert_eq!(e.kind, BackendErrorKind::Rejected);
        assert!(!e.to_string().contains("pw@"), "{e}");
        #[cfg(not(feature = "zookeeper-tls"))]
        assert!(e.to_string().contains("zookeeper-tls"), "{e}");
        #[cfg(feature = "zookeeper-tls")]
        {
            assert!(e.to_string().contains("cannot read the CA file"), "{e}");
            // TLS checks the name: a host rustls cannot check is refused
            // here (zookeeper-client would panic on it).
            let e = target("zks://u:pw@-h:2281/x?simba_tls_ca=/no/such/ca.pem")
                .err()
                .unwrap();
            assert!(e.to_string().contains("neither a DNS name"), "{e}");
        }
    }

    #[test]
    fn session_ids_round_trip() {
        for id in [1_i64, 0x0100_0000_0000_0001, -5, i64::MAX] {
            assert_eq!(zk_session_of(session_id_of(id)), Some(id));
        }
        assert_eq!(zk_session_of(SessionId::from_u128(1 << 64)), None);
    }
}
