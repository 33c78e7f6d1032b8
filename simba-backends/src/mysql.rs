//! The MySQL / MariaDB backend (feature `mysql`). No release broadcast:
//! each release or close that frees a lease writes a row to a release log,
//! and one waker connection per node reads it when woken: on MariaDB it
//! reads the log's latest row every few milliseconds on the server; on
//! MySQL it sleeps in `SELECT SLEEP` until a freeing release interrupts it
//! with `KILL QUERY` (S4.2; see [`Wake`]).
//!
//! MySQL has no `UPDATE … RETURNING`, so the operations that must read and
//! decide are one short InnoDB transaction of *locking* reads: a locking read
//! (`FOR UPDATE`, `LOCK IN SHARE MODE`) always reads the latest committed row
//! and holds its lock to the commit, whatever the isolation level, so the
//! decision cannot be based on a stale row. The other operations are single
//! statements. Times are microseconds of `NOW(6)` on the server (session time
//! zone UTC), fixed within one statement. See `docs/BACKENDS.md`.

use crate::sql::{
    acquire_version, group_views, malformed, map_err, micros, name_from, pool_call, prefixed,
    session_from, slot_from, slot_to_i64, token_from, token_to_i64, AcquireRoutine, Skeleton,
    Statements, Tables, ACQUIRE_MARK,
};
use crate::{Backend, BackendConfig, PoolOptions, SessionMetadata};
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::FutureExt;
use simba_core::{
    AcquireOutcome, BackendError, Command, Input, LeaseName, RenewError, Renewal, SessionGrant,
    SessionId, SlotClaim, Token,
};
use sqlx::mysql::{MySqlConnectOptions, MySqlPool};
use sqlx::Connection;
use sqlx::Row;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const NAME: &str = "mysql";
/// Stands for the session id (a hex literal) in `Sql::renew`.
const RENEW_ID: &str = "@simba_session@";
/// Stands for the connection id of the node's own waker in the statements
/// that find the sleeping wakers (0: none): a node's own releases reach its
/// waker without an interruption ([`Wake::freed`]).
const SELF_ID: &str = "@simba_self@";
/// Now, in microseconds since the epoch, on the server's clock.
const NOW: &str = "CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS SIGNED)";

/// The MySQL / MariaDB backend. Cheap to clone (a pool handle).
#[derive(Clone, Debug)]
pub struct MysqlBackend {
    pool: MySqlPool,
    sql: Sql,
    wake: Arc<Wake>,
    /// MariaDB: anonymous compound statements, and wakers that read the
    /// release log while they wait. MySQL: `KILL QUERY` of the connection
    /// of each waker in `User sleep`, one at a time.
    mariadb: bool,
}

/// How long a waker's `SELECT SLEEP` lasts before it starts another (a
/// silent dead connection is noticed within this and 5 s more).
const WAKER_SLEEP_S: u64 = 10;
/// How often a MariaDB waker reads what it watches while it waits
/// (milliseconds, `Sql::sleep_stmt`).
const WAKER_POLL_MS: u64 = 5;
/// At most this many names freed by a node wait for its own stream.
const FREED_MAX: usize = 10_000;
/// A woken waker reads at most this many free partitions of its node's
/// groups. Every one newly free must reach the stream: a member splits a
/// leave's releases by the list it heard (S10.2), so one that hears only
/// part of them asks for a different part than the others, and the rest
/// stay unowned until its next renewal (with 64, a 1,000-partition leave
/// left about 15 partitions unowned for one renewal interval).
const GROUP_FREE_MAX: usize = 10_000;
/// At most this many release log rows per waker read (more: it reads
/// again at once).
const LOG_READ_MAX: usize = 10_000;
/// Release log rows are kept this long (seconds): a waker reads them
/// within milliseconds of a release, or within [`WAKER_SLEEP_S`] if its
/// interruption was lost.
const LOG_KEEP_S: u64 = 60;
/// A node deletes old release log rows at most this often (seconds), after
/// one of its releases or closes.
const LOG_PRUNE_EVERY_S: u64 = 30;
/// A `seq` missing from the release log's rows is read again for this long
/// (milliseconds): the release that took it may not have committed yet.
const LOG_GAP_MS: u64 = 2_000;
/// At most this many missing `seq`s are read again.
const LOG_GAPS_MAX: usize = 2_000;
/// A waker remembers the last yielded release of at most this many leases
/// (`Waker::heard`; past it, it forgets them all).
const HEARD_MAX: usize = 100_000;
/// At most this many open sessions of a node are remembered for
/// [`Sql::group_free`].
const SESSIONS_MAX: usize = 64;

/// Release wake-ups (S4.2; `docs/BACKENDS.md`, "MySQL / MariaDB", "Release
/// wake-ups"): a release or close that frees a lease writes a row to the
/// release log, in the same transaction on MariaDB. Each node's waker
/// connection waits until the log has a row of another node's release
/// that it has not read, or the membership of its groups changes: on
/// MariaDB it reads them every [`WAKER_POLL_MS`] on the
/// server ([`Sql::sleep_stmt`]); on MySQL it sits in a `SELECT SLEEP`
/// recognisable by its text, which a release interrupts (every such
/// statement of the same table prefix that its user may see and kill but
/// its own node's; a release through its own waker's second connection,
/// [`Waker::start_kick`]). A woken node reads the log's rows since its last
/// read, and which of the names it waits for, and which partitions of its
/// groups, are newly free; the names a node freed reach its own stream
/// without a wake. A wake is only a hint.
#[derive(Debug)]
struct Wake {
    /// Whether this node runs a waker (`simba_listen`, default on).
    listen: bool,
    /// Names whose latest acquire by this node found them held.
    waited: Mutex<BTreeSet<String>>,
    /// Names this node freed itself, for its own stream (its own release
    /// wakes its waker too, as a `NOTIFY` reaches its own listener); kept
    /// only while a waker runs, and at most [`FREED_MAX`].
    freed: Mutex<Vec<String>>,
    /// Whether `subscribe_releases` started a waker.
    subscribed: AtomicBool,
    /// The lock wait timeout (seconds) of this backend's own connections,
    /// once a session's lease is known (0: the server's default; a pool
    /// passed to `from_pool` is never changed).
    lock_wait_s: AtomicU64,
    /// When `lock_wait_s` last changed: a pooled connection made before
    /// then has the old bound and is replaced at its next use.
    lock_wait_changed: Mutex<Option<Instant>>,
    own_pool: bool,
    /// Set by a session close, cleared by a session open: with no session
    /// open, the waker holds no connection (its sleep would otherwise keep
    /// a server thread busy for up to [`WAKER_SLEEP_S`] after the node is
    /// gone, beyond the connection budget).
    closed: AtomicBool,
    /// Sessions opened through this backend and not yet closed.
    open: AtomicU64,
    /// When this node last deleted old release log rows ([`prune_log`]).
    pruned: Mutex<Option<Instant>>,
    /// The server's connection id of the waker's connection (0: none).
    sleeper: AtomicU64,
    /// Wake-ups asked of the waker, and how many of them it had taken when
    /// its last wake-up ended.
    kicks_asked: AtomicU64,
    kicks_done: AtomicU64,
    /// This node's open sessions (ids as hex): a woken waker reads the
    /// free partitions of the groups they joined.
    sessions: Mutex<BTreeSet<String>>,
    /// Asks this node's waker to interrupt every sleeping waker
    /// ([`Waker::start_kick`]); `None` while no waker runs. Requests coalesce.
    kick: Mutex<Option<futures::channel::mpsc::Sender<()>>>,
    /// Tells this node's waker that names it freed wait in `freed`: they
    /// reach its stream while it sleeps, without an interruption.
    nudge: Mutex<Option<futures::channel::mpsc::Sender<()>>>,
    /// A test's pause after the waker's next read
    /// ([`MysqlBackend::pause_waker_after_next_read`]).
    #[cfg(feature = "testkit")]
    pause: Mutex<Option<WakerPause>>,
}

/// The waker tells that it read and waits for leave to go on.
#[cfg(feature = "testkit")]
type WakerPause = (
    futures::channel::oneshot::Sender<()>,
    futures::channel::oneshot::Receiver<()>,
);

impl Wake {
    /// A new node's waker state: `listen`, whether release wake-ups are on;
    /// `own_pool`, whether the backend made its pool (and sets its lock
    /// wait).
    fn new(listen: bool, own_pool: bool) -> Arc<Wake> {
        Arc::new(Wake {
            listen,
            waited: Mutex::new(BTreeSet::new()),
            freed: Mutex::new(Vec::new()),
            subscribed: AtomicBool::new(false),
            lock_wait_s: AtomicU64::new(0),
            lock_wait_changed: Mutex::new(None),
            own_pool,
            closed: AtomicBool::new(false),
            open: AtomicU64::new(0),
            pruned: Mutex::new(None),
            sleeper: AtomicU64::new(0),
            kick: Mutex::new(None),
            nudge: Mutex::new(None),
            sessions: Mutex::new(BTreeSet::new()),
            kicks_asked: AtomicU64::new(0),
            kicks_done: AtomicU64::new(0),
            #[cfg(feature = "testkit")]
            pause: Mutex::new(None),
        })
    }

    /// Whether this node's turn to delete old release log rows came (and
    /// if so, takes it).
    fn prune_due(&self) -> bool {
        let mut at = self.pruned.lock().unwrap_or_else(|p| p.into_inner());
        let due = at.is_none_or(|t| t.elapsed() >= Duration::from_secs(LOG_PRUNE_EVERY_S));
        if due {
            *at = Some(Instant::now());
        }
        due
    }

    /// Waits where a test asked the waker to pause after a read.
    #[cfg(feature = "testkit")]
    async fn pause_after_read(&self) {
        let pause = self.pause.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some((read, go_on)) = pause {
            let _ = read.send(());
            let _ = go_on.await;
        }
    }

    /// Whether a pooled connection of age `age` was made after the lock
    /// wait bound last changed (so it has the current bound).
    fn made_after_change(&self, age: Duration) -> bool {
        match *self
            .lock_wait_changed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
        {
            Some(at) => age < at.elapsed(),
            None => true,
        }
    }

    fn note(&self, name: &LeaseName, outcome: &Result<AcquireOutcome, BackendError>) {
        if !self.listen {
            return;
        }
        let mut waited = self.waited.lock().unwrap_or_else(|p| p.into_inner());
        match outcome {
            Ok(AcquireOutcome::Held { .. }) => {
                waited.insert(name.as_str().to_owned());
            }
            Ok(_) => {
                waited.remove(name.as_str());
            }
            Err(_) => {}
        }
    }

    fn waited(&self) -> Vec<String> {
        let waited = self.waited.lock().unwrap_or_else(|p| p.into_inner());
        waited.iter().cloned().collect()
    }

    fn freed(&self, names: impl IntoIterator<Item = String>) {
        if self.subscribed.load(Ordering::Relaxed) {
            {
                let mut freed = self.freed.lock().unwrap_or_else(|p| p.into_inner());
                let room = FREED_MAX.saturating_sub(freed.len());
                freed.extend(names.into_iter().take(room));
            }
            // A full channel: a nudge is pending, which covers these.
            if let Some(n) = self
                .nudge
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .as_mut()
            {
                let _ = n.try_send(());
            }
        }
    }

    /// `stmt` with [`SELF_ID`] as this node's waker's connection id (0:
    /// none running), which it then does not interrupt.
    fn without_self(&self, stmt: &str) -> String {
        stmt.replace(SELF_ID, &self.sleeper.load(Ordering::Relaxed).to_string())
    }

    fn take_freed(&self) -> Vec<String> {
        std::mem::take(&mut *self.freed.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Whether the waker wakes the others (see [`Wake::kicks`]), and the
    /// statement for `session` that goes with it: `only` if so, else
    /// `wakes` (which wakes the sleeping wakers itself), in either case
    /// without this node's own waker.
    fn statement(&self, only: &str, wakes: &str, session: SessionId) -> (bool, String) {
        let kicks = self.kicks();
        let stmt = if kicks { only } else { wakes };
        let id = format!("X'{}'", hex_id(session));
        (kicks, self.without_self(stmt).replace(RENEW_ID, &id))
    }

    /// Whether this node's waker runs and wakes the others for it.
    fn kicks(&self) -> bool {
        self.kick
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .is_some_and(|k| !k.is_closed())
    }

    /// Whether a wake-up asked of the waker has not ended yet.
    fn kick_pending(&self) -> bool {
        self.kicks_done.load(Ordering::Relaxed) < self.kicks_asked.load(Ordering::Relaxed)
    }

    /// Asks the waker to wake the others; `false` if no waker takes it
    /// (the caller then wakes them itself).
    fn request_kick(&self) -> bool {
        self.kicks_asked.fetch_add(1, Ordering::Relaxed);
        let mut kick = self.kick.lock().unwrap_or_else(|p| p.into_inner());
        match kick.as_mut().map(|k| k.try_send(())) {
            // A full channel: a request is pending, which covers this one.
            Some(Ok(())) => true,
            Some(Err(e)) if e.is_full() => true,
            _ => {
                *kick = None;
                false
            }
        }
    }
}

#[derive(Clone, Debug)]
struct Sql {
    /// The shared calls and statements; its `renew` is the renewal's two
    /// statements, with [`RENEW_ID`] for the session.
    sk: Skeleton<sqlx::MySql>,
    /// `CALL <prefix>acquire_lease(?, ?)`.
    acquire: String,
    /// The acquire procedure's name (`<prefix>acquire_lease`).
    acquire_proc: String,
    /// The head of every waker's result (`Waker::sleep_stmt`), by which
    /// MySQL's `PROCESSLIST.INFO` shows a sleeping waker.
    sleep: String,
    /// `'simba-waker:<prefix>'`: on MariaDB the waker's `SLEEP` statement
    /// names it, so `PROCESSLIST.INFO` shows a waiting waker by it (the
    /// statement running inside its block).
    waker_tag: String,
    /// The release's multi-statement (`RENEW_ID`, `@name@`, `@token@`):
    /// the `UPDATE` and its log row, then (MySQL) the sleeping wakers to
    /// interrupt if it freed the lease.
    release_wake: String,
    /// The close's multi-statement (`RENEW_ID`): the leases it held, their
    /// log rows and the two deletes, then (MySQL) the wakers to interrupt
    /// if it held any.
    close_wake: String,
    /// `release_wake` for a node whose waker wakes the others
    /// ([`Waker::start_kick`]); the same statement on both servers.
    release_only: String,
    /// `close_wake` for such a node; the same statement.
    close_only: String,
    /// The interruption alone (MySQL): the sleeping wakers' connection
    /// ids (then one `KILL QUERY` each). Empty on MariaDB.
    kick: String,
    /// Whether a release interrupts the sleeping wakers (MySQL), or they
    /// read what they watch while they wait (MariaDB, `Sql::sleep_stmt`).
    kills: bool,
    /// The waited names that are free now (`@names@`: a quoted list),
    /// with their latest token.
    free: String,
    /// At most [`GROUP_FREE_MAX`] free partitions of the groups that the
    /// sessions `@sessions@` (hex literals) joined.
    group_free: String,
    /// Every free partition of those groups (for [`Scope`]).
    group_free_all: String,
    /// Each group that the sessions `@sessions@` joined, with a
    /// fingerprint of its members (how many, and a checksum of their
    /// session ids).
    group_members: String,
    /// The fingerprint of all those groups' members at once.
    members_fp: String,
    /// A release's log row (`@name@`, `@token@`, `RENEW_ID`), written if
    /// the statement before it freed the lease (a batch's releases).
    log_release: String,
    /// The release log's rows after `@after@` (and those whose `seq` is
    /// among `@gaps@`, a list), oldest first, at most [`LOG_READ_MAX`].
    log_read: String,
    /// The release log's latest `seq` (0 if empty).
    log_last: String,
    /// How many of the release log's rows after `@after@` or among
    /// `@gaps@` are of releases by other nodes.
    log_others: String,
    /// Deletes log rows older than [`LOG_KEEP_S`].
    log_prune: String,
    ensure_slot: String,
    read_slot: String,
    write_slot: String,
}

impl Sql {
    /// The statements for `prefix`; `node` identifies this backend's rows
    /// of the release log (a random id, as a session's).
    fn new(prefix: &str, mariadb: bool, node: SessionId) -> Sql {
        let node = format!("X'{}'", hex_id(node));
        let t = Tables::with_release_log(prefix);
        let (s, l, m, c) = (&t.sessions, &t.leases, &t.members, &t.slots);
        let r = t
            .releases
            .clone()
            .unwrap_or_else(|| format!("{prefix}releases"));
        // Every waker statement starts with this head (`Waker::sleep_stmt`).
        let waker_tag = format!("'simba-waker:{prefix}'");
        let sleep = format!("SELECT {waker_tag}, ");
        // MySQL's sleeping wakers, for a release to interrupt (MariaDB's
        // wakers are not interrupted: they read what they watch every few
        // milliseconds, `Sql::sleep_stmt`). Built with CONCAT so that this
        // statement's own text never starts with the head. MySQL interrupts
        // only a statement sleeping right now (never the next one on that
        // connection). Without the PROCESS privilege a user sees only its
        // own connections.
        let sleepers = format!(
            "SELECT CAST(ID AS SIGNED) AS q FROM information_schema.PROCESSLIST \
             WHERE STATE = 'User sleep' AND COMMAND = 'Query' AND ID <> {SELF_ID} \
             AND LEFT(INFO, {}) = CONCAT('SELECT ''simba', '-waker:{prefix}'', ')",
            sleep.chars().count()
        );
        let release_update = format!(
            "UPDATE {l} SET session = NULL, acquired_us = NULL \
             WHERE name = '@name@' AND session = {RENEW_ID} AND token = @token@"
        );
        // The release log (S4.2, `Waker::read_log`): a row for each
        // lease freed by a release or a close, so that a waker hears a
        // release even if the lease was taken again before its read.
        // The row names the node (this backend) that wrote it: its own
        // waker skips it, whichever of its sessions released.
        let log_release = format!(
            "INSERT INTO {r} (name, token, session, node, at_us) \
             SELECT '@name@', @token@, {RENEW_ID}, {node}, {NOW} FROM DUAL WHERE ROW_COUNT() > 0"
        );
        let log_close = format!(
            "INSERT INTO {r} (name, token, session, node, at_us) \
             SELECT name, token, session, {node}, {NOW} FROM {l} WHERE session = {RENEW_ID}"
        );
        let close_deletes = format!(
            "SELECT CAST(name AS CHAR) FROM {l} WHERE session = {RENEW_ID}; \
             DELETE FROM {s} WHERE id = {RENEW_ID}; \
             DELETE FROM {m} WHERE session = {RENEW_ID};"
        );
        // MariaDB: the release or close and its log rows are one
        // transaction (a waker reads both or neither), rolled back on any
        // error before it reaches the client, so that no transaction stays
        // open on the pooled connection. The log rows of a close are
        // written before its deletes: their shared locks on the lease rows
        // come before the session row's exclusive lock, in the order an
        // acquire takes them (no deadlock with an acquire of one of them).
        let tx_head = "DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END; \
                       START TRANSACTION;";
        let release_tx = format!(
            "{tx_head} {release_update}; SET n = ROW_COUNT(); \
             IF n > 0 THEN {log_release}; END IF; COMMIT;"
        );
        let close_tx = format!("{tx_head} {log_close}; {close_deletes} COMMIT;");
        let (release_wake, close_wake, release_only, close_only, kick) = if mariadb {
            // One round trip: an anonymous compound statement.
            let release =
                format!("BEGIN NOT ATOMIC DECLARE n BIGINT DEFAULT 0; {release_tx} SELECT n; END");
            let close = format!("BEGIN NOT ATOMIC {close_tx} END");
            (
                release.clone(),
                close.clone(),
                release,
                close,
                String::new(),
            )
        } else {
            // MySQL: the log row right after the write (not atomic with
            // it; a waker that reads in between hears the lease from its
            // free-lease read instead, `Waker::read_free`).
            let release =
                format!("{release_update}; {log_release}; {sleepers} AND ROW_COUNT() > 0");
            let close = format!(
                "{close_deletes} {log_close}; \
                 {sleepers} AND EXISTS (SELECT 1 FROM {l} WHERE session = {RENEW_ID})"
            );
            (
                release.clone(),
                close.clone(),
                release,
                close,
                sleepers.clone(),
            )
        };
        let sk = Statements {
            columns: "SELECT CAST(column_name AS CHAR) FROM information_schema.columns \
                      WHERE table_schema = DATABASE() AND table_name = ?",
            open: format!("INSERT INTO {s} (id, lease_us, expires_us, metadata) VALUES (?, ?, {NOW} + ?, ?)"),
            gc: vec![
                format!(
                    "DELETE FROM {m} WHERE session IN \
                     (SELECT id FROM {s} WHERE expires_us <= {NOW})"
                ),
                format!("DELETE FROM {s} WHERE expires_us <= {NOW} LIMIT 100"),
            ],
            // One round trip, two autocommit statements sent together (a
            // multi-statement query; the id is a hex literal, see
            // `renew_on`): the `UPDATE` (one InnoDB transaction, its
            // affected-row count says live or expired), then one plain
            // `SELECT` of kind 0 rows (the lease duration and each owned
            // lease) and kind 1 rows (the live members of every group the
            // session joined, S10.1), however many leases and groups. The
            // read only reports; it decides nothing (`docs/BACKENDS.md`).
            renew: format!(
                "UPDATE {s} SET expires_us = {NOW} + lease_us \
                 WHERE id = {RENEW_ID} AND expires_us > {NOW}; \
                 SELECT CAST(0 AS SIGNED), s.lease_us, CAST(l.name AS CHAR), l.token, \
                   CAST(NULL AS BINARY(16)) \
                 FROM {s} s LEFT JOIN {l} l ON l.session = s.id WHERE s.id = {RENEW_ID} \
                 UNION ALL \
                 SELECT CAST(1 AS SIGNED), CAST(0 AS SIGNED), CAST(gm.name AS CHAR), \
                   CAST(0 AS SIGNED), gm.session \
                 FROM {m} gm JOIN {s} h ON h.id = gm.session AND h.expires_us > {NOW} \
                 WHERE gm.name IN (SELECT name FROM {m} WHERE session = {RENEW_ID})"
            ),
            // A test hold's; the backend's own calls also wake waiters
            // (`release_wake`, `close_wake`).
            release: format!(
                "UPDATE {l} SET session = NULL, acquired_us = NULL \
                 WHERE session = ? AND name = ? AND token = ?"
            ),
            close: format!("DELETE FROM {s} WHERE id = ?"),
            close_tidy: Some(format!("DELETE FROM {m} WHERE session = ?")),
            channel: None,
            join: format!(
                "INSERT IGNORE INTO {m} (name, session) \
                 SELECT ?, id FROM {s} WHERE id = ? AND expires_us > {NOW}"
            ),
            leave: format!("DELETE FROM {m} WHERE name = ? AND session = ?"),
            holds: format!(
                "SELECT 1 FROM {l} l JOIN {s} h ON h.id = l.session \
                 WHERE l.name = ? AND l.session = ? AND l.token = ? AND h.expires_us > {NOW} \
                 LOCK IN SHARE MODE"
            ),
            inspect_sessions: format!(
                "SELECT id, lease_us, expires_us - {NOW}, metadata FROM {s} WHERE expires_us > {NOW}"
            ),
            inspect_leases: format!(
                "SELECT CAST(l.name AS CHAR), l.token, h.id, h.expires_us - {NOW} FROM {l} l \
                 LEFT JOIN {s} h ON h.id = l.session AND h.expires_us > {NOW} \
                 WHERE LEFT(l.name, ?) = ?"
            ),
            // The acquire procedure's first statement.
            lock: Some(format!(
                "INSERT INTO {l} (name, session, token, acquired_us) VALUES (?, NULL, 0, NULL) \
                 ON DUPLICATE KEY UPDATE token = token"
            )),
        };
        // Partition leases `{{group}}:p{{index}}` (S3.1) of the groups the
        // node's sessions joined, by a range of the primary key, with their
        // latest token (each acquire gives the next one).
        let group_free = format!(
            "SELECT CAST(l.name AS CHAR) AS n, l.token AS t FROM {m} g \
             JOIN {l} l ON l.name >= CONCAT(g.name, ':p') AND l.name < CONCAT(g.name, ':q') \
             LEFT JOIN {s} h ON h.id = l.session AND h.expires_us > {NOW} \
             WHERE g.session IN (@sessions@) AND h.id IS NULL"
        );
        Sql {
            log_release,
            log_read: format!(
                "SELECT seq, CAST(name AS CHAR), token, CAST(node = {node} AS SIGNED) FROM {r} \
                 WHERE seq > @after@ OR seq IN (@gaps@) ORDER BY seq LIMIT {LOG_READ_MAX}"
            ),
            log_last: format!("SELECT CAST(COALESCE(MAX(seq), 0) AS SIGNED) FROM {r}"),
            log_others: format!(
                "SELECT COUNT(*) FROM {r} \
                 WHERE (seq > @after@ OR seq IN (@gaps@)) AND node <> {node}"
            ),
            log_prune: format!(
                "DELETE FROM {r} WHERE at_us < {NOW} - {} LIMIT 10000",
                LOG_KEEP_S * 1_000_000
            ),
            release_wake,
            close_wake,
            release_only,
            close_only,
            kick,
            kills: !mariadb,
            free: format!(
                "SELECT CAST(l.name AS CHAR) AS n, l.token AS t FROM {l} l \
                 LEFT JOIN {s} h ON h.id = l.session AND h.expires_us > {NOW} \
                 WHERE l.name IN (@names@) AND h.id IS NULL"
            ),
            group_free: format!("{group_free} LIMIT {GROUP_FREE_MAX}"),
            group_free_all: group_free,
            group_members: format!(
                "SELECT CAST(o.name AS CHAR), \
                   CONCAT(COUNT(*), ':', SUM(CRC32(HEX(o.session)))) FROM {m} o \
                 WHERE o.name IN (SELECT name FROM {m} WHERE session IN (@sessions@)) \
                 GROUP BY o.name"
            ),
            members_fp: format!(
                "SELECT CONCAT(COUNT(*), ':', \
                   COALESCE(SUM(CRC32(CONCAT(o.name, ':', HEX(o.session)))), 0)) FROM {m} o \
                 WHERE o.name IN (SELECT name FROM {m} WHERE session IN (@sessions@))"
            ),
            sleep,
            waker_tag,
            acquire: format!("CALL {prefix}acquire_lease(?, ?)"),
            acquire_proc: format!("{prefix}acquire_lease"),
            ensure_slot: format!(
                "INSERT INTO {c} (name, slot) VALUES (?, -1) ON DUPLICATE KEY UPDATE slot = slot"
            ),
            read_slot: format!("SELECT slot FROM {c} WHERE name = ? FOR UPDATE"),
            write_slot: format!("UPDATE {c} SET slot = ? WHERE name = ?"),
            sk: Skeleton::new(NAME, true, t, sk),
        }
    }

    /// The free leases a waker watches for `scope`: its waited names and
    /// every partition of its sessions' groups; `None` if it watches none.
    fn scope_free(&self, scope: &Scope) -> Option<String> {
        let mut parts = Vec::new();
        if !scope.names.is_empty() {
            parts.push(self.free.replace("@names@", &scope.names));
        }
        if !scope.sessions.is_empty() {
            parts.push(self.group_free_all.replace("@sessions@", &scope.sessions));
        }
        (!parts.is_empty()).then(|| parts.join(" UNION "))
    }

    /// A query of one string that changes whenever what a waker watches
    /// for `scope` changes: the release log's rows of other nodes' releases
    /// after `after` or among `gaps` (the missing `seq`s, a list: any
    /// release or close that freed a lease of the table prefix, a lease
    /// released and taken again included), and the membership of the
    /// groups its sessions joined (S10.5). On MySQL also the free leases it watches
    /// (`scope_free`: how many, and a checksum of their names and tokens),
    /// as it is only read when a sleep starts (on MariaDB the waker reads
    /// it again and again while it waits, `Sql::sleep_stmt`, and the free
    /// leases of a 1,000-partition group are too many for that). The log's
    /// rows are not filtered by the names and groups of the scope: a name
    /// the node starts waiting for, or a group it joins, after the read is
    /// read at the next wake; nor are its own node's: its own releases reach
    /// its stream without a wake (`Wake::freed`).
    fn fingerprint(&self, scope: &Scope, after: i64, gaps: &str) -> String {
        let members = if scope.sessions.is_empty() {
            "'-'".to_owned()
        } else {
            format!(
                "({})",
                self.members_fp.replace("@sessions@", &scope.sessions)
            )
        };
        let free = match self.scope_free(scope) {
            Some(free) if self.kills => format!(
                "(SELECT CONCAT(COUNT(*), ':', COALESCE(SUM(CRC32(CONCAT(f.n, ':', f.t))), 0)) \
                 FROM ({free}) f)"
            ),
            _ => "'-'".to_owned(),
        };
        let log = self
            .log_others
            .replace("@after@", &after.to_string())
            .replace("@gaps@", gaps);
        format!("SELECT CONCAT({free}, '/', {members}, '/', ({log}))")
    }

    /// The waker's statement, with `watch` (the query of a fingerprint,
    /// [`Sql::fingerprint`], and its value at the waker's last read): 1 if
    /// what it watches changed or it was interrupted, 0 if it waited
    /// [`WAKER_SLEEP_S`] and nothing changed.
    ///
    /// MariaDB: it reads the fingerprint every [`WAKER_POLL_MS`] while it
    /// waits, on the server; no release interrupts it. A `KILL QUERY` of a
    /// sleeping statement stalled 2 s whenever the statement's `SLEEP`
    /// began or ended at that moment (the killer retries the sleeps' one
    /// mutex 40 times 50 ms apart, while the woken sleep waits for the
    /// killer), and every other interruption of the table prefix waited
    /// behind it: with the release log, whose rows end more sleeps early,
    /// 4 runs of 10 had a 1,000-partition or 8-partition join wait 2.01 s.
    ///
    /// MySQL: a `SLEEP` of [`WAKER_SLEEP_S`] that a release interrupts,
    /// after the head by which a release finds it, and only if the
    /// fingerprint did not change since the read (a release or join that
    /// committed after the read, and whose interruption came before this
    /// statement began, is seen here).
    fn sleep_stmt(&self, watch: Option<(&str, &str)>) -> String {
        let head = &self.sleep;
        match watch {
            Some((query, fp)) if !self.kills => format!(
                "BEGIN NOT ATOMIC DECLARE i INT DEFAULT 0; DECLARE w INT DEFAULT 0; \
                 WHILE w = 0 AND i < {polls} DO \
                   IF NOT (({query}) <=> '{fp}') THEN SET w = 1; \
                   ELSE DO {quoted}, SLEEP({poll}); SET i = i + 1; END IF; \
                 END WHILE; \
                 {head}CAST(w AS SIGNED); END",
                polls = WAKER_SLEEP_S * 1000 / WAKER_POLL_MS,
                quoted = &self.waker_tag,
                poll = format_args!("{}.{:03}", WAKER_POLL_MS / 1000, WAKER_POLL_MS % 1000),
            ),
            Some((query, fp)) => {
                format!("{head}CAST(IF(({query}) = '{fp}', SLEEP({WAKER_SLEEP_S}), 1) AS SIGNED)")
            }
            None => format!("{head}CAST(SLEEP({WAKER_SLEEP_S}) AS SIGNED)"),
        }
    }
}

/// What a waker's read covered: its node's waited names (a quoted list)
/// and open sessions (hex literals), both sorted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Scope {
    names: String,
    sessions: String,
}

impl Scope {
    /// The waited names and open sessions of `wake` now.
    fn of(wake: &Wake) -> Scope {
        // The names' checked characters hold no quote (S3.1).
        let names = wake
            .waited()
            .iter()
            .map(|n| format!("'{n}'"))
            .collect::<Vec<_>>()
            .join(",");
        let sessions = {
            let open = wake.sessions.lock().unwrap_or_else(|p| p.into_inner());
            open.iter()
                .map(|id| format!("X'{id}'"))
                .collect::<Vec<_>>()
                .join(",")
        };
        Scope { names, sessions }
    }
}

impl MysqlBackend {
    crate::sql::sql_backend_inherent!(Mysql, mysql, MysqlBackend, MySqlPool, "mysql://app@db/app");

    /// Connects to the server that `config` names and checks (by default
    /// creates) the tables.
    ///
    /// # Errors
    /// `Rejected` for a bad URL, missing privileges or a foreign table of the
    /// same name; `Unavailable`/`Timeout` if the server cannot be reached.
    pub async fn connect(config: &BackendConfig) -> Result<MysqlBackend, BackendError> {
        crate::ensure_rustls_provider();
        let opts = MySqlConnectOptions::from_str(config.url())
            .map_err(|e| map_err(NAME, "URL", e))?
            .timezone(Some("+00:00".to_owned()));
        let wake = Wake::new(config.listen(), true);
        // A statement abandoned at its call timeout (S2.4) keeps the
        // connection until the server ends it: a new connection waits for
        // row locks no longer than a call may last (`lock_wait_sql`).
        let shared = Arc::clone(&wake);
        let changed = Arc::clone(&wake);
        // At most `max_connections` (default 1) for all calls; a connection
        // made before the bound last changed is replaced.
        let pool = config
            .sqlx_pool_keeping::<sqlx::MySql>(move |age| changed.made_after_change(age))
            .after_connect(move |c, _| {
                let set = lock_wait_sql(shared.lock_wait_s.load(Ordering::Relaxed));
                Box::pin(async move {
                    if let Some(set) = set {
                        sqlx::Executor::execute(&mut *c, set.as_str()).await?;
                    }
                    Ok(())
                })
            })
            .connect_lazy_with(opts);
        let what = format!("connect to {}", config.redacted_url());
        crate::sql::first_connection(NAME, &what, &pool, config.connect_timeout()).await?;
        let mariadb = is_mariadb(&pool).await?;
        let backend = MysqlBackend {
            pool,
            sql: Sql::new(config.table_prefix(), mariadb, crate::random_session_id()?),
            wake,
            mariadb,
        };
        let mode = crate::sql::tls_mode(config.url(), "ssl-mode");
        if matches!(mode.as_deref(), None | Some("preferred")) {
            let tls = backend.uses_tls().await?;
            crate::sql::log_plain_fallback(NAME, &config.redacted_url(), mode.as_deref(), tls);
        }
        backend.prepare_schema(config.create_schema()).await?;
        Ok(backend)
    }

    /// Creates the tables and the acquire procedure if they are missing, and
    /// replaces an older Simba's acquire procedure (a newer one is kept);
    /// refuses (without changing anything) tables of the same names, or a
    /// procedure of the same name, that Simba did not create.
    ///
    /// # Errors
    /// `Rejected` naming a foreign table or procedure, or a missing
    /// privilege (`CREATE ROUTINE`, and `ALTER ROUTINE` to replace an older
    /// procedure).
    pub async fn migrate(&self) -> Result<(), BackendError> {
        let state = self.acquire_proc_state().await?;
        let sk = &self.sql.sk;
        let Some(state) = sk
            .routine_to_migrate(&self.pool, state, &self.routine())
            .await?
        else {
            return Ok(());
        };
        let prefix = &self.sql.sk.t.prefix;
        // The tables: every file but the acquire procedure's.
        let tables = prefixed(
            &[MIGRATIONS[0], MIGRATIONS[1], MIGRATIONS[3]].concat(),
            prefix,
        );
        for ddl in tables.split(";\n").filter(|d| !d.trim().is_empty()) {
            sqlx::raw_sql(ddl)
                .execute(&self.pool)
                .await
                .map_err(|e| map_err(NAME, "create tables", e))?;
        }
        // A table created meanwhile by someone else must still be ours.
        self.sql.sk.check_tables(&self.pool).await?;
        // The procedure: created if missing, an older Simba's replaced (a
        // node of that version still running keeps working: the arguments
        // and the answer's columns are the same; its acquire fails once if
        // it calls between the drop and the create). A newer Simba's stays.
        let ddl = match state {
            AcquireRoutine::Missing => vec![acquire_create_sql(prefix)],
            AcquireRoutine::Outdated => vec![acquire_drop_sql(prefix), acquire_create_sql(prefix)],
            AcquireRoutine::Current | AcquireRoutine::Newer | AcquireRoutine::Foreign => vec![],
        };
        for stmt in ddl {
            if let Err(e) = sqlx::raw_sql(&stmt).execute(&self.pool).await {
                // Another process may have created it at the same moment.
                if !self.acquire_proc_state().await?.usable() {
                    return Err(map_err(NAME, "create the acquire procedure", e));
                }
            }
        }
        Ok(())
    }

    /// With `create`, [`MysqlBackend::migrate`]; without, refuses to start
    /// unless every table and this version's acquire procedure (or a newer
    /// Simba's) exist.
    async fn prepare_schema(&self, create: bool) -> Result<(), BackendError> {
        let routine = async {
            self.acquire_proc_state()
                .await?
                .check(NAME, &self.routine())
        };
        let sk = &self.sql.sk;
        sk.prepare_schema(&self.pool, create, self.migrate(), routine)
            .await
    }

    /// Whether the acquire procedure in the current database is this
    /// version's, an older Simba's, a newer Simba's, someone else's, or
    /// missing. Its body is compared when the server shows it to this user
    /// (`information_schema.ROUTINES.ROUTINE_DEFINITION` is NULL for a user
    /// who neither created it nor may read every routine's source); else
    /// its `COMMENT`, which carries the same version, decides.
    async fn acquire_proc_state(&self) -> Result<AcquireRoutine, BackendError> {
        let found: Vec<(Option<String>, Option<String>)> = sqlx::query_as(
            "SELECT CAST(ROUTINE_DEFINITION AS CHAR), CAST(ROUTINE_COMMENT AS CHAR) \
             FROM information_schema.ROUTINES \
             WHERE ROUTINE_SCHEMA = DATABASE() AND ROUTINE_NAME = ? AND ROUTINE_TYPE = 'PROCEDURE'",
        )
        .bind(&self.sql.acquire_proc)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| map_err(NAME, "read schema", e))?;
        let Some((body, comment)) = found.first() else {
            return Ok(AcquireRoutine::Missing);
        };
        let version = match body {
            Some(body) if *body == acquire_proc_body(&self.sql.sk.t.prefix) => {
                return Ok(AcquireRoutine::Current)
            }
            Some(body) => acquire_version(body, ACQUIRE_MARK),
            None => comment.as_deref().and_then(|c| {
                acquire_version(c, COMMENT_MARK).filter(|_| c.starts_with(COMMENT_MARK))
            }),
        };
        Ok(match version {
            // The body could not be read: the comment names this version.
            Some(v) if v == ACQUIRE_VERSION && body.is_none() => AcquireRoutine::Current,
            declared => AcquireRoutine::of_version(declared, ACQUIRE_VERSION),
        })
    }

    /// The acquire procedure, as its errors name it.
    fn routine(&self) -> String {
        format!("procedure `{}`", self.sql.acquire_proc)
    }

    /// The DDL that creates Simba's tables and acquire procedure under
    /// `table_prefix`: what [`MysqlBackend::migrate`] runs (it creates the
    /// procedure only if missing or older), the files of
    /// `simba-backends/migrations/mysql/` (for sqlx-migrate, Flyway and the
    /// like) concatenated, with `simba_` replaced by `table_prefix`.
    /// The procedure's body contains `;`: send it as one multi-statement
    /// query (as sqlx-migrate does), or to the `mysql` client inside
    /// `DELIMITER //` … `//`.
    pub fn schema_sql(table_prefix: &str) -> String {
        prefixed(&MIGRATIONS.concat(), table_prefix)
    }

    /// A backend on the application's own pool, so Simba shares its
    /// connections, TLS settings and credentials. The pool must allow one
    /// connection more than the application needs at its busiest, since
    /// Simba's calls wait for a free connection (and time out after one
    /// renewal period, S2.4).
    /// Keep sqlx's default session time zone (`+00:00`): the backend reads
    /// the server clock as `UNIX_TIMESTAMP(NOW(6))`.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use simba_backends::{mysql::MysqlBackend, PoolOptions};
    /// let pool = sqlx::MySqlPool::connect("mysql://app@db/app").await?;
    /// let backend = MysqlBackend::from_pool(pool.clone(), &PoolOptions::new()).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// With [`PoolOptions::create_schema`] `false`, `Rejected` if the tables
    /// are missing; otherwise as [`MysqlBackend::migrate`].
    pub async fn from_pool(
        pool: MySqlPool,
        options: &PoolOptions,
    ) -> Result<MysqlBackend, BackendError> {
        let mariadb = is_mariadb(&pool).await?;
        let backend = MysqlBackend {
            pool,
            sql: Sql::new(
                options.get_table_prefix(),
                mariadb,
                crate::random_session_id()?,
            ),
            wake: Wake::new(true, false),
            mariadb,
        };
        backend.prepare_schema(options.get_create_schema()).await?;
        Ok(backend)
    }

    /// Drops Simba's four tables and the acquire procedure of this backend's
    /// table prefix, with every session, lease and token in them: for tests
    /// and for uninstalling.
    /// Never call it while a node may still use them (their tokens would
    /// start again at 1, S3.2).
    ///
    /// # Errors
    /// As any call, or `Rejected` without the privilege to drop.
    pub async fn drop_tables(&self) -> Result<(), BackendError> {
        let sk = &self.sql.sk;
        let ddl = [sk.t.drop_sql(), acquire_drop_sql(&sk.t.prefix)];
        sk.drop_tables(&self.pool, &ddl).await
    }

    /// Whether this backend's connection to the server is encrypted (TLS),
    /// as the server reports it (`Ssl_cipher`). The URL's `ssl-mode`
    /// decides: `DISABLED`, `PREFERRED` (the default: TLS if the server
    /// offers it, else plain text, logged at connect), `REQUIRED`,
    /// `VERIFY_CA` and `VERIFY_IDENTITY` (the server's certificate checked
    /// against `ssl-ca`, or the public roots, and for `VERIFY_IDENTITY` its
    /// name).
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), simba_core::BackendError> {
    /// use simba_backends::mysql::MysqlBackend;
    /// let b = MysqlBackend::connect_url(
    ///     "mysql://app@db.example:3306/app?ssl-mode=VERIFY_IDENTITY&ssl-ca=/etc/ssl/db-ca.pem",
    /// )
    /// .await?;
    /// assert!(b.uses_tls().await?);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As any call: `Unavailable`/`Timeout` if the server cannot be reached.
    pub async fn uses_tls(&self) -> Result<bool, BackendError> {
        let cipher: Option<(String, String)> =
            sqlx::query_as("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
                .fetch_optional(&self.pool)
                .await
                .map_err(|e| map_err(NAME, "TLS status", e))?;
        Ok(cipher.is_some_and(|(_, value)| !value.is_empty()))
    }

    /// For the wake-up tests: the release waker pauses after its next read
    /// of the free names, as a slow node may between that read and its
    /// next sleep. The first receiver answers once it read; it goes on
    /// when the sender is used or dropped.
    ///
    /// ```no_run
    /// # async fn f(b: simba_backends::mysql::MysqlBackend) {
    /// let (read, go_on) = b.pause_waker_after_next_read();
    /// let _ = read.await; // the waker read and waits
    /// let _ = go_on.send(());
    /// # }
    /// ```
    #[cfg(feature = "testkit")]
    pub fn pause_waker_after_next_read(
        &self,
    ) -> (
        futures::channel::oneshot::Receiver<()>,
        futures::channel::oneshot::Sender<()>,
    ) {
        let (read_tx, read_rx) = futures::channel::oneshot::channel();
        let (go_tx, go_rx) = futures::channel::oneshot::channel();
        *self.wake.pause.lock().unwrap_or_else(|p| p.into_inner()) = Some((read_tx, go_rx));
        (read_rx, go_tx)
    }

    /// For the conformance suite: runs `acquire(session, name)` while another
    /// connection holds `session`'s row locked, then kills the server
    /// connection serving the acquire while it waits, and returns what the
    /// acquire returned.
    ///
    /// # Errors
    /// A [`BackendError`] if the helper connection failed.
    #[cfg(feature = "testkit")]
    pub async fn acquire_while_killed(
        &self,
        session: SessionId,
        name: &LeaseName,
    ) -> Result<Result<AcquireOutcome, BackendError>, BackendError> {
        use sqlx::{Connection, Executor};
        let opts = self.pool.connect_options();
        let err = |e| map_err(NAME, "test helper", e);
        let mut blocker = sqlx::MySqlConnection::connect_with(&opts)
            .await
            .map_err(err)?;
        blocker.execute("BEGIN").await.map_err(err)?;
        sqlx::query(&format!(
            "SELECT 1 FROM {} WHERE id = ? FOR UPDATE",
            self.sql.sk.t.sessions
        ))
        .bind(&session.to_bytes()[..])
        .execute(&mut blocker)
        .await
        .map_err(err)?;
        // The statement shown is the procedure's, or the CALL.
        let pattern = format!("%{}leases l LEFT JOIN%", self.sql.sk.t.prefix);
        let call = format!("%{}%", self.sql.acquire_proc);
        let killer = crate::sql::kill_waiting(&mut blocker, move |blocker| {
            let (pattern, call) = (pattern.clone(), call.clone());
            async move {
                let ids: Vec<i64> = sqlx::query_scalar(
                    "SELECT CAST(ID AS SIGNED) FROM information_schema.PROCESSLIST \
                     WHERE (INFO LIKE ? OR INFO LIKE ?) AND ID <> CONNECTION_ID()",
                )
                .bind(&pattern)
                .bind(&call)
                .fetch_all(&mut *blocker)
                .await
                .map_err(err)?;
                let Some(id) = ids.first() else {
                    return Ok(false);
                };
                blocker
                    .execute(format!("KILL {id}").as_str())
                    .await
                    .map_err(err)?;
                Ok(true)
            }
            .boxed()
        });
        let (result, killed) = futures::join!(self.acquire(session, name), killer);
        blocker.execute("ROLLBACK").await.map_err(err)?;
        let _ = blocker.close().await;
        killed?;
        Ok(result)
    }
}

/// A connection: the pool's, or a test hold's open transaction.
type Conn = sqlx::MySqlConnection;

/// Whether the server is MariaDB (its version says so).
async fn is_mariadb(pool: &MySqlPool) -> Result<bool, BackendError> {
    let version: String = sqlx::query_scalar("SELECT CAST(VERSION() AS CHAR)")
        .fetch_one(pool)
        .await
        .map_err(|e| map_err(NAME, "server version", e))?;
    Ok(version.to_ascii_lowercase().contains("mariadb"))
}

/// The lock wait timeout for a session whose calls time out after `secs`
/// (rounded up; InnoDB counts whole seconds), for row locks and for
/// metadata locks; `None` before any session is open.
fn lock_wait_sql(secs: u64) -> Option<String> {
    (secs > 0).then(|| {
        format!("SET SESSION innodb_lock_wait_timeout = {secs}, lock_wait_timeout = {secs}")
    })
}

/// `session` as 32 hex digits (for `X'…'` literals).
fn hex_id(session: SessionId) -> String {
    session
        .to_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// MySQL: interrupts the sleeping wakers `ids` (connection ids), one
/// `KILL QUERY` each (MariaDB's wakers are not interrupted).
/// Best effort: a waker gone meanwhile, or one this user may not kill, is
/// skipped (a wake is only a hint).
async fn wake_sleepers(c: &mut Conn, ids: &[i64]) {
    for id in ids {
        let kill = format!("KILL QUERY {id}");
        if let Err(e) = sqlx::Executor::execute(&mut *c, kill.as_str()).await {
            tracing::debug!(backend = NAME, error = %e, "release wake-up failed");
        }
    }
}

/// Interrupts every sleeping waker of the table prefix (`kick`: the
/// `Sql::kick` statement) on `c`. Best effort, as [`wake_sleepers`]: a
/// failure is logged (a wake is only a hint); `false` if the connection
/// failed.
async fn kick_on(kick: &str, c: &mut Conn) -> bool {
    match run_multi(c, kick).await {
        Ok(results) => {
            match sleeper_ids(&results) {
                Ok(ids) => wake_sleepers(c, &ids).await,
                Err(e) => tracing::debug!(backend = NAME, error = %e, "release wake-up failed"),
            }
            true
        }
        Err(e) => {
            tracing::debug!(backend = NAME, error = %e, "release wake-up failed");
            false
        }
    }
}

/// Runs a multi-statement: each statement's affected rows and rows.
async fn run_multi(
    c: &mut Conn,
    stmt: &str,
) -> Result<Vec<(u64, Vec<sqlx::mysql::MySqlRow>)>, sqlx::Error> {
    use futures::TryStreamExt;
    let mut out = Vec::new();
    let mut rows = Vec::new();
    let mut results = sqlx::Executor::fetch_many(&mut *c, stmt);
    while let Some(item) = results.try_next().await? {
        match item {
            sqlx::Either::Left(done) => out.push((done.rows_affected(), std::mem::take(&mut rows))),
            sqlx::Either::Right(row) => rows.push(row),
        }
    }
    Ok(out)
}

/// The sleeping wakers' ids, from the last statement's rows.
fn sleeper_ids(results: &[(u64, Vec<sqlx::mysql::MySqlRow>)]) -> Result<Vec<i64>, sqlx::Error> {
    match results.last() {
        Some((_, rows)) => rows.iter().map(|r| r.try_get::<i64, _>(0)).collect(),
        None => Ok(Vec::new()),
    }
}

/// The column of the marker rows that separate the calls of a batch's
/// query (`MysqlBackend::batch_tx`).
const BATCH_MARK: &str = "simba_batch_call";

/// Whether `row` is a marker of a batch's query.
fn is_marker(row: &sqlx::mysql::MySqlRow) -> bool {
    use sqlx::Column;
    matches!(row.columns(), [col] if col.name() == BATCH_MARK)
}

/// The `COMMENT` of the acquire procedure starts with this, followed by
/// `, version N` (read where the server does not show this user the body).
const COMMENT_MARK: &str = "Simba's acquire";
/// This Simba's version of the acquire procedure.
const ACQUIRE_VERSION: u32 = 1;

/// Simba's migration files for MySQL / MariaDB, in order (see
/// [`MysqlBackend::schema_sql`]).
const MIGRATIONS: [&str; 4] = [
    include_str!("../migrations/mysql/0001_simba.sql"),
    include_str!("../migrations/mysql/0002_groups_slots.sql"),
    include_str!("../migrations/mysql/0003_acquire.sql"),
    include_str!("../migrations/mysql/0004_releases.sql"),
];

/// `0003_acquire.sql`, first line: drops an older acquire procedure.
fn acquire_drop_sql(prefix: &str) -> String {
    let file = prefixed(MIGRATIONS[2], prefix);
    let end = file.find('\n').map_or(file.len(), |i| i + 1);
    file[..end].to_owned()
}

/// `0003_acquire.sql` after its first line: creates the acquire procedure.
/// `SQL SECURITY INVOKER`: it runs with the caller's privileges on the
/// tables, whoever created it.
fn acquire_create_sql(prefix: &str) -> String {
    let file = prefixed(MIGRATIONS[2], prefix);
    let start = file.find('\n').map_or(file.len(), |i| i + 1);
    file[start..].to_owned()
}

/// The acquire procedure's body, as `information_schema.ROUTINES` shows it
/// (see the module docs and `docs/BACKENDS.md`, "MySQL / MariaDB"): one
/// InnoDB transaction of its own (with autocommit off, as in a test hold,
/// the caller's), in the order that makes it safe:
/// 1. `INSERT … ON DUPLICATE KEY UPDATE` makes sure the lease row exists
///    and locks it exclusively, waiting for any transaction holding it.
/// 2. One locking read (`LOCK IN SHARE MODE`) of the lease row and both
///    sessions: InnoDB serves it from the latest committed versions, not
///    the transaction's read view, and holds the share locks to the end:
///    a renewal or close in flight commits before (and is seen) or after.
///    Both remaining times come from one clock reading (`NOW(6)` is read
///    per statement in a procedure).
/// 3. If the caller is live and the lease free or its holder not live (and
///    the token can grow), take it with the next token and commit; else
///    roll back (nothing was written but a new free row).
/// 4. Answer one row: holder, token, the caller's remaining time, and the
///    holder's (the caller's if it just took it).
///
/// Any error rolls the transaction back before it reaches the client
/// (`EXIT HANDLER … RESIGNAL`), so no transaction stays open on the
/// connection; a deadlock victim's is rolled back whole by InnoDB anyway.
///
/// It is `0003_acquire.sql` from its `BEGIN` line to its last `END`.
fn acquire_proc_body(prefix: &str) -> String {
    let create = acquire_create_sql(prefix);
    let start = create.find("\nBEGIN\n").map_or(0, |i| i + 1);
    let body = create[start..].trim_end();
    body.strip_suffix(';').unwrap_or(body).to_owned()
}

/// Whether `e` reports InnoDB's deadlock victim (error 1213, SQLSTATE
/// 40001): its transaction was rolled back whole.
fn is_deadlock(e: &BackendError) -> bool {
    e.message.contains("1213 (40001)") || e.message.contains("Deadlock found")
}

/// Acquire: one call of the acquire procedure (`acquire_proc_body`), one
/// round trip. It locks the lease row, then reads both sessions' latest
/// versions with a locking read, takes the lease if it is takeable, and
/// answers one row: the holder and token as it left them, and both
/// sessions' remaining time on the clock reading that judged them.
async fn acquire_on(
    sql: &Sql,
    c: &mut Conn,
    session: SessionId,
    name: &LeaseName,
) -> Result<AcquireOutcome, BackendError> {
    let rows = sqlx::query(&sql.acquire)
        .bind(&session.to_bytes()[..])
        .bind(name.as_str())
        .fetch_all(&mut *c)
        .await
        .map_err(sql.sk.err("acquire"))?;
    sql.sk.decide_rows(session, name, &rows)
}

/// Renew: one round trip (see `Sql::renew`), one InnoDB transaction (the
/// `UPDATE`; the plain `SELECT` after it is a read-only one). Sent as a
/// text-protocol multi-statement query, since a prepared statement holds
/// one statement: the session id goes in as a hex literal (`X'…'`, 32 hex
/// digits of Simba's own id, nothing a user writes).
async fn renew_on(sql: &Sql, c: &mut Conn, session: SessionId) -> Result<Renewal, RenewError> {
    use futures::TryStreamExt;
    let get = |e| map_err(NAME, "renew", e);
    let id = hex_id(session);
    let stmt = sql.sk.s.renew.replace(RENEW_ID, &format!("X'{id}'"));
    let mut results = sqlx::Executor::fetch_many(&mut *c, stmt.as_str());
    // The UPDATE's result comes first, then the SELECT's rows and result.
    let mut updated = None;
    let mut rows = Vec::new();
    while let Some(item) = results.try_next().await.map_err(get)? {
        match item {
            sqlx::Either::Left(done) => {
                updated.get_or_insert(done.rows_affected());
            }
            sqlx::Either::Right(row) => rows.push(row),
        }
    }
    drop(results);
    if updated.unwrap_or(0) == 0 {
        return Err(RenewError::Expired);
    }
    let mut remaining = Duration::ZERO;
    let mut owned = Vec::with_capacity(rows.len());
    let mut members = Vec::new();
    for r in rows {
        let kind: i64 = r.try_get(0).map_err(get)?;
        let name: Option<String> = r.try_get(2).map_err(get)?;
        if kind == 1 {
            let member: Option<Vec<u8>> = r.try_get(4).map_err(get)?;
            if let (Some(g), Some(m)) = (name, member) {
                members.push((name_from(NAME, &g)?, session_from(NAME, &m)?));
            }
            continue;
        }
        let lease_us: i64 = r.try_get(1).map_err(get)?;
        remaining = micros(lease_us);
        let token: Option<i64> = r.try_get(3).map_err(get)?;
        if let (Some(n), Some(t)) = (name, token) {
            owned.push((name_from(NAME, &n)?, token_from(NAME, &n, t)?));
        }
    }
    Ok(Renewal {
        remaining,
        owned,
        groups: group_views(members),
    })
}

/// Release by the backend's own calls (a test hold's is the skeleton's):
/// one multi-statement that also lists the sleeping wakers if the lease was
/// freed, and then one more round trip to interrupt them.
async fn release_on(
    sql: &Sql,
    c: &mut Conn,
    session: SessionId,
    name: &LeaseName,
    token: Token,
    (wake, mariadb): (&Wake, bool),
) -> Result<(), BackendError> {
    let token = i64::try_from(token.get())
        .map_err(|_| malformed(NAME, format!("token {token} out of range")))?;
    let get = |e| map_err(NAME, "release", e);
    // Literals: the name's checked characters ([A-Za-z0-9._:-], S3.1) hold
    // no quote; the id is hex; the token a number.
    // MySQL, with a waker running: the waker wakes the others, on a
    // connection of its own (see [`Waker::start_kick`]), not on the pooled
    // connection that this node's renewals wait for.
    let (kicks, stmt) = wake.statement(&sql.release_only, &sql.release_wake, session);
    let stmt = stmt
        .replace("@name@", name.as_str())
        .replace("@token@", &token.to_string());
    let results = run_multi(c, &stmt).await.map_err(get)?;
    let freed = if mariadb {
        // The block's one row: how many rows the UPDATE freed.
        let n = results.iter().flat_map(|(_, rows)| rows).next();
        n.map(|r| r.try_get::<i64, _>(0)).transpose().map_err(get)? > Some(0)
    } else {
        results.first().is_some_and(|(n, _)| *n > 0)
    };
    let woke = !kicks;
    if !mariadb && freed && woke {
        wake_sleepers(c, &sleeper_ids(&results).map_err(get)?).await;
    }
    // The others first: the waker wakes them before it yields this name
    // to its own node's stream.
    if freed && !woke && !wake.request_kick() {
        kick_on(&wake.without_self(&sql.kick), c).await;
    }
    if freed {
        wake.freed([name.as_str().to_owned()]);
        prune_log(sql, c, wake).await;
    }
    Ok(())
}

/// Deletes the release log's old rows on `c`, if this node did not for
/// [`LOG_PRUNE_EVERY_S`]: after a release or close that wrote to the log,
/// so the log stays small whether or not any node reads it. Best effort:
/// a failure is logged (the next one tries again).
async fn prune_log(sql: &Sql, c: &mut Conn, wake: &Wake) {
    if !wake.prune_due() {
        return;
    }
    if let Err(e) = sqlx::Executor::execute(&mut *c, sql.log_prune.as_str()).await {
        tracing::debug!(backend = NAME, error = %e, "release log prune failed");
    }
}

/// Close by the backend's own calls, as [`release_on`]: one
/// multi-statement that wakes the sleeping wakers if the session held a
/// lease.
async fn close_on(
    sql: &Sql,
    c: &mut Conn,
    session: SessionId,
    (wake, mariadb): (&Wake, bool),
) -> Result<(), BackendError> {
    let get = |e| map_err(NAME, "close session", e);
    let (kicks, stmt) = wake.statement(&sql.close_only, &sql.close_wake, session);
    let results = run_multi(c, &stmt).await.map_err(get)?;
    let mut held = Vec::new();
    if let Some((_, rows)) = results.first() {
        let names: Result<Vec<String>, _> = rows.iter().map(|r| r.try_get(0)).collect();
        held = names.map_err(get)?;
    }
    let freed = !held.is_empty();
    wake.freed(held);
    if freed {
        prune_log(sql, c, wake).await;
    }
    if kicks {
        // The node may be ending: a wake-up is not left to its waker (this
        // one, or one asked for by a release just before).
        if freed || wake.kick_pending() {
            kick_on(&wake.without_self(&sql.kick), c).await;
        }
    } else if !mariadb {
        wake_sleepers(c, &sleeper_ids(&results).map_err(get)?).await;
    }
    Ok(())
}

/// Claim a schedule slot (S11.1): one InnoDB transaction of locking reads
/// (see `docs/BACKENDS.md`).
/// 1. Judge the holder on the latest committed lease and session rows,
///    share-locked to the commit: an acquire, release, renewal or close in
///    flight commits before (and is seen) or after this claim.
/// 2. Make sure the slot row exists (a placeholder `-1` if new, gone again
///    on rollback) and lock it exclusively; read its latest value.
/// 3. Write the slot if it is later, and commit.
async fn claim_on(
    sql: &Sql,
    c: &mut Conn,
    session: SessionId,
    name: &LeaseName,
    token: Token,
    slot: u64,
) -> Result<SlotClaim, BackendError> {
    let get = |e| map_err(NAME, "claim slot", e);
    let slot = slot_to_i64(NAME, slot)?;
    let Some(token) = token_to_i64(token) else {
        return Ok(SlotClaim::NotHolder);
    };
    let mut tx = c.begin().await.map_err(get)?;
    if !sql.sk.holds(&mut tx, session, name, token).await? {
        tx.rollback().await.map_err(get)?;
        return Ok(SlotClaim::NotHolder);
    }
    sqlx::query(&sql.ensure_slot)
        .bind(name.as_str())
        .execute(&mut *tx)
        .await
        .map_err(get)?;
    let last: i64 = sqlx::query_scalar(&sql.read_slot)
        .bind(name.as_str())
        .fetch_one(&mut *tx)
        .await
        .map_err(get)?;
    if last >= 0 && last >= slot {
        tx.rollback().await.map_err(get)?;
        return Ok(SlotClaim::AlreadyClaimed {
            last: slot_from(NAME, name, last)?,
        });
    }
    sqlx::query(&sql.write_slot)
        .bind(slot)
        .bind(name.as_str())
        .execute(&mut *tx)
        .await
        .map_err(get)?;
    tx.commit().await.map_err(get)?;
    Ok(SlotClaim::Claimed)
}

/// A pooled connection that a batch (S4.7) changed (`autocommit = 0`, a
/// transaction open): if the batch is dropped before it put the connection
/// back as it found it (a call timeout, S2.4), the connection is closed,
/// not returned to the pool.
struct BatchConn(Option<sqlx::pool::PoolConnection<sqlx::MySql>>);

impl Drop for BatchConn {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            c.close_on_drop();
        }
    }
}

impl MysqlBackend {
    /// A session became a member of a group: announced (S10.5) by waking
    /// the other nodes' wakers, as a release does; each reads the members
    /// of its node's groups and yields the name of each group whose members
    /// changed. Without a waker on this node the members learn the join at
    /// their next renewal.
    fn joined(&self, _group: &LeaseName) {
        if self.wake.listen && self.sql.kills {
            self.wake.request_kick();
        }
    }
}

impl MysqlBackend {
    /// The calls of a batch (S4.7) in one transaction, sent as one
    /// text-protocol query (one round trip): `autocommit` off, so that the
    /// acquire procedure runs inside the transaction (it commits on its own
    /// only under autocommit), the calls in name order, each after a marker
    /// row that tells its results from the next call's, and `autocommit` on
    /// again, which commits. The values are literals, as in `renew_on`:
    /// session ids as hex, names from their checked character set (S3.1),
    /// tokens as numbers. Their replies by index and the names the releases
    /// freed; `Err` if a call failed or the transaction could not begin
    /// (the caller rolls back); `Ok(Err(_))` if the commit failed or the
    /// connection failed on the way (every outcome unknown).
    async fn batch_tx(&self, c: &mut Conn, calls: &[Command]) -> crate::sql::Batched {
        use futures::TryStreamExt;
        let err = |e| map_err(NAME, "batch", e);
        let mut order: Vec<usize> = (0..calls.len()).collect();
        order.sort_by(|&i, &j| crate::sql::name_of(&calls[i]).cmp(crate::sql::name_of(&calls[j])));
        let leases = &self.sql.sk.t.leases;
        let mut query = String::from("SET autocommit = 0");
        for &i in &order {
            let call = match &calls[i] {
                Command::Acquire { session, name, .. } => format!(
                    "CALL {}(X'{}', '{}')",
                    self.sql.acquire_proc,
                    hex_id(*session),
                    name.as_str()
                ),
                // The release and its log row (S4.2), if it freed the
                // lease.
                Command::Release {
                    session,
                    name,
                    token,
                    ..
                } => {
                    let (id, token) = (
                        format!("X'{}'", hex_id(*session)),
                        crate::sql::token_column(NAME, *token)?.to_string(),
                    );
                    let log = self
                        .sql
                        .log_release
                        .replace(RENEW_ID, &id)
                        .replace("@name@", name.as_str())
                        .replace("@token@", &token);
                    format!(
                        "UPDATE {leases} SET session = NULL, acquired_us = NULL \
                         WHERE session = {id} AND name = '{}' AND token = {token}; {log}",
                        name.as_str(),
                    )
                }
                // Nothing to run (S4.5).
                Command::Withdraw { .. } => continue,
                other => return Err(crate::sql::not_in_batch(NAME, other)),
            };
            query.push_str(&format!("; SELECT {i} AS {BATCH_MARK}; {call}"));
        }
        query.push_str(&format!("; SELECT -1 AS {BATCH_MARK}; SET autocommit = 1"));
        // Per call index: its rows, and the rows its statements changed.
        let mut results: Vec<(Vec<sqlx::mysql::MySqlRow>, u64)> =
            calls.iter().map(|_| (Vec::new(), 0)).collect();
        // The marker last seen: none yet, a call's index, or the commit.
        let mut at: Option<i64> = None;
        let mut stream = sqlx::Executor::fetch_many(&mut *c, query.as_str());
        loop {
            let item = match stream.try_next().await {
                Ok(Some(item)) => item,
                Ok(None) => break,
                Err(e @ sqlx::Error::Database(_)) if at != Some(-1) => return Err(err(e)),
                Err(e) => {
                    drop(stream);
                    // The commit failed, or the connection: put the
                    // connection back to `autocommit` on (or let the
                    // caller roll back and close it).
                    sqlx::Executor::execute(&mut *c, "SET autocommit = 1")
                        .await
                        .map_err(err)?;
                    return Ok(Err(err(e)));
                }
            };
            match item {
                sqlx::Either::Right(row) if is_marker(&row) => {
                    at = Some(row.try_get::<i64, _>(0).map_err(err)?);
                }
                sqlx::Either::Right(row) => {
                    if let Some(r) = at
                        .and_then(|i| usize::try_from(i).ok())
                        .and_then(|i| results.get_mut(i))
                    {
                        r.0.push(row);
                    }
                }
                sqlx::Either::Left(done) => {
                    if let Some(r) = at
                        .and_then(|i| usize::try_from(i).ok())
                        .and_then(|i| results.get_mut(i))
                    {
                        r.1 += done.rows_affected();
                    }
                }
            }
        }
        drop(stream);
        if at != Some(-1) {
            return Ok(Err(malformed(
                NAME,
                "a batch's query ended before its commit".to_owned(),
            )));
        }
        let mut freed = Vec::new();
        let replies = calls
            .iter()
            .zip(results)
            .map(|(call, (rows, changed))| match call {
                Command::Acquire { op, session, name } => Input::AcquireReplied {
                    op: *op,
                    result: self.sql.sk.decide_rows(*session, name, &rows),
                },
                Command::Release { op, name, .. } => {
                    if changed > 0 {
                        freed.push(name.as_str().to_owned());
                    }
                    Input::ReleaseReplied {
                        op: *op,
                        result: Ok(()),
                    }
                }
                // A withdraw (checked above: nothing else is here).
                other => Input::WithdrawReplied {
                    op: other.op(),
                    result: Ok(()),
                },
            })
            .collect();
        Ok(Ok((replies, freed)))
    }

    /// A batch (S4.7) on one connection: in one transaction (`batch_tx`);
    /// if a call fails, rolled back and each call run on its own as the
    /// backend's own calls run it. The releases' wake-up (S4.2) comes once
    /// the batch committed, once for all of them.
    async fn batch(&self, calls: Vec<Command>) -> Vec<Input> {
        if let Some(replies) = crate::sql::only_withdraws(&calls) {
            return replies;
        }
        let conn = match self.sql.sk.conn(&self.pool, "batch").await {
            Ok(c) => c,
            Err(e) => return calls.iter().map(|c| Input::failed(c, e.clone())).collect(),
        };
        let mut guard = BatchConn(Some(conn));
        let replies = match guard.0.as_mut() {
            Some(c) => self.batch_on(c, &calls).await,
            None => None,
        };
        let Some(replies) = replies else {
            // The connection could not be put back as it was found: the
            // guard closes it, and each call runs on its own.
            drop(guard);
            let mut replies = Vec::with_capacity(calls.len());
            for call in calls {
                replies.push(self.execute(call, &crate::metadata::NO_METADATA).await);
            }
            return replies;
        };
        for (call, reply) in calls.iter().zip(&replies) {
            if let (Command::Acquire { name, .. }, Input::AcquireReplied { result, .. }) =
                (call, reply)
            {
                self.wake.note(name, result);
            }
        }
        // Back to the pool as it was found.
        guard.0.take();
        replies
    }

    /// [`MysqlBackend::batch`] on `c`; `None` if `c` could not be put back
    /// to `autocommit = 1` after a failure.
    async fn batch_on(&self, c: &mut Conn, calls: &[Command]) -> Option<Vec<Input>> {
        let (replies, freed) = match self.batch_tx(c, calls).await {
            Ok(Ok(done)) => done,
            Ok(Err(e)) => (
                calls
                    .iter()
                    .map(|call| Input::failed(call, e.clone()))
                    .collect(),
                Vec::new(),
            ),
            Err(_) => {
                let _ = sqlx::Executor::execute(&mut *c, "ROLLBACK").await;
                sqlx::Executor::execute(&mut *c, "SET autocommit = 1")
                    .await
                    .ok()?;
                let mut replies = Vec::with_capacity(calls.len());
                for call in calls {
                    replies.push(self.one_of_batch(c, call).await);
                }
                (replies, Vec::new())
            }
        };
        if !freed.is_empty() {
            if self.sql.kills && !(self.wake.kicks() && self.wake.request_kick()) {
                kick_on(&self.wake.without_self(&self.sql.kick), c).await;
            }
            self.wake.freed(freed);
            prune_log(&self.sql, c, &self.wake).await;
        }
        Some(replies)
    }

    /// One call of a batch that failed as a whole, on its own on `c`, as
    /// the backend's own call makes it.
    async fn one_of_batch(&self, c: &mut Conn, call: &Command) -> Input {
        match call {
            Command::Acquire { op, session, name } => {
                let mut tries = 0;
                let result = loop {
                    match acquire_on(&self.sql, c, *session, name).await {
                        Err(e) if tries < 3 && is_deadlock(&e) => tries += 1,
                        other => break other,
                    }
                };
                Input::AcquireReplied { op: *op, result }
            }
            Command::Release {
                op,
                session,
                name,
                token,
            } => {
                let wake = (&*self.wake, self.mariadb);
                Input::ReleaseReplied {
                    op: *op,
                    result: release_on(&self.sql, c, *session, name, *token, wake).await,
                }
            }
            // A withdraw (nothing to do), or a call no batch carries.
            other => crate::sql::batch_call(&self.sql, c, other, &mut Vec::new())
                .await
                .unwrap_or_else(|e| Input::failed(other, e)),
        }
    }
}

// Up to 64 calls, sent as one query (`MysqlBackend::batch_tx`): one round
// trip however many calls it carries; its locks are held until the last
// call has run on the server.
crate::sql::batch_calls!(sqlx::MySql, 64, "BEGIN", |_sql, _c| async { Ok(()) });

impl Backend for MysqlBackend {
    fn max_batch(&self) -> usize {
        <Sql as crate::sql::BatchCalls>::MAX
    }

    fn execute_batch<'a>(
        &'a self,
        calls: Vec<Command>,
        _metadata: &'a SessionMetadata,
    ) -> BoxFuture<'a, Vec<Input>> {
        self.batch(calls).boxed()
    }

    crate::sql::sql_backend_common!(pool_call, pool_call);

    fn open_session_with<'a>(
        &'a self,
        lease_duration: Duration,
        metadata: &'a SessionMetadata,
    ) -> BoxFuture<'a, Result<SessionGrant, BackendError>> {
        async move {
            let sk = &self.sql.sk;
            let mut c = sk.conn(&self.pool, "open session").await?;
            if self.wake.own_pool {
                // Calls time out after a renewal period (a third of the
                // lease, S2.4): so does a wait for a lock, on this
                // connection now and on every one opened later.
                let secs = lease_duration.as_secs_f64() / 3.0;
                let secs = (secs.ceil() as u64).max(1);
                let old = self.wake.lock_wait_s.swap(secs, Ordering::Relaxed);
                if old != secs {
                    // Every pooled connection made before now has the old
                    // bound: each is replaced at its next use, this one now
                    // (a new connection's `after_connect` sets the bound).
                    *self
                        .wake
                        .lock_wait_changed
                        .lock()
                        .unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
                    // Closing only ends a connection nobody will use again:
                    // its failure costs nothing.
                    let _ = c.close().await;
                    c = sk.conn(&self.pool, "open session").await?;
                }
            }
            let grant = sk.open(&mut c, lease_duration, metadata).await?;
            {
                let mut open = self.wake.sessions.lock().unwrap_or_else(|p| p.into_inner());
                if open.len() < SESSIONS_MAX {
                    open.insert(hex_id(grant.session));
                }
            }
            self.wake.open.fetch_add(1, Ordering::Relaxed);
            self.wake.closed.store(false, Ordering::Relaxed);
            Ok(grant)
        }
        .boxed()
    }

    fn acquire<'a>(
        &'a self,
        session: SessionId,
        name: &'a LeaseName,
    ) -> BoxFuture<'a, Result<AcquireOutcome, BackendError>> {
        async move {
            let mut c = self.sql.sk.conn(&self.pool, "acquire").await?;
            // InnoDB may pick this transaction as a deadlock victim when
            // acquires of one name race: it is rolled back whole (nothing
            // was written), so trying again is safe. A few tries, then the
            // error is the caller's.
            let mut tries = 0;
            loop {
                match acquire_on(&self.sql, &mut c, session, name).await {
                    Err(e) if tries < 3 && is_deadlock(&e) => tries += 1,
                    other => {
                        self.wake.note(name, &other);
                        return other;
                    }
                }
            }
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
            let wake = (&*self.wake, self.mariadb);
            pool_call!(self, "release", |c| release_on(
                &self.sql, c, session, name, token, wake
            ))
        }
        .boxed()
    }

    fn close_session(&self, session: SessionId) -> BoxFuture<'_, Result<(), BackendError>> {
        async move {
            let mut c = self.sql.sk.conn(&self.pool, "close session").await?;
            close_on(&self.sql, &mut c, session, (&self.wake, self.mariadb)).await?;
            self.wake
                .sessions
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&hex_id(session));
            // The waker's connection goes with the backend's last session:
            // the server ends the connection itself (`KILL` of its id), so a
            // sleep that starts just after `closed` is set cannot outlive the
            // node (a `KILL QUERY` that arrived before the waker's `SLEEP`
            // left a server thread sleeping for up to `WAKER_SLEEP_S`, over
            // the connection budget). The waker then delivers the freed
            // names and holds no connection until a session opens again.
            let before = self
                .wake
                .open
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| Some(n.saturating_sub(1)))
                .unwrap_or(0);
            if before > 1 {
                // Another session of this backend still waits on releases.
                return Ok(());
            }
            self.wake.closed.store(true, Ordering::Relaxed);
            let sleeper = self.wake.sleeper.load(Ordering::Relaxed);
            if sleeper != 0 {
                let kill = format!("KILL {sleeper}");
                if let Err(e) = sqlx::Executor::execute(&mut *c, kill.as_str()).await {
                    tracing::debug!(backend = NAME, error = %e, "cannot end the release waker's connection");
                }
            }
            Ok(())
        }
        .boxed()
    }

    fn subscribe_releases(
        &self,
    ) -> BoxFuture<'_, Result<Option<BoxStream<'static, LeaseName>>, BackendError>> {
        async move {
            if !self.wake.listen {
                return Ok(None);
            }
            let opts = (*self.pool.connect_options()).clone();
            let mut conn = sqlx::MySqlConnection::connect_with(&opts)
                .await
                .map_err(|e| map_err(NAME, "release waker", e))?;
            let id = connection_id(&mut conn).await;
            self.wake.sleeper.store(id, Ordering::Relaxed);
            self.wake.subscribed.store(true, Ordering::Relaxed);
            // One request waits at most: it covers every release committed
            // before the waker takes it.
            // MySQL: the waker wakes the others for its node (MariaDB's
            // wakers are not woken, `Sql::sleep_stmt`).
            let (kick, kicks) = futures::channel::mpsc::channel(0);
            if self.sql.kills {
                *self.wake.kick.lock().unwrap_or_else(|p| p.into_inner()) = Some(kick);
            }
            let (nudge, nudges) = futures::channel::mpsc::channel(0);
            *self.wake.nudge.lock().unwrap_or_else(|p| p.into_inner()) = Some(nudge);
            let waker = Waker {
                conn: Some(conn),
                sleeping: None,
                opts,
                wake: Arc::clone(&self.wake),
                sql: self.sql.clone(),
                pending: VecDeque::new(),
                // At the start, the waited names already free count too.
                woken: true,
                kicks,
                kicks_open: true,
                nudges,
                nudges_open: true,
                kick_conn: None,
                kicking: None,
                kick_again: false,
                kicked_at: Instant::now(),
                waited_free: BTreeSet::new(),
                group_free: BTreeSet::new(),
                watch: None,
                members: BTreeMap::new(),
                log_after: None,
                log_gaps: BTreeMap::new(),
                heard: HashMap::new(),
            };
            let stream = futures::stream::unfold(waker, |mut w| async move {
                loop {
                    if let Some(name) = w.pending.pop_front() {
                        return Some((name, w));
                    }
                    w.round().await;
                }
            });
            Ok(Some(futures::StreamExt::boxed(stream)))
        }
        .boxed()
    }

    fn broadcasts_releases(&self) -> bool {
        self.wake.listen
    }
}

/// The server's id of connection `c` (0 if it cannot be read: the waker
/// then cannot be interrupted at a close, and its sleep ends on its own).
async fn connection_id(c: &mut sqlx::MySqlConnection) -> u64 {
    sqlx::query_scalar::<_, u64>("SELECT CONNECTION_ID()")
        .fetch_one(c)
        .await
        .unwrap_or(0)
}

/// The waker's running sleep: it owns the connection until the statement
/// answers, so the waker can yield its own node's freed names and wake the
/// other nodes meanwhile.
type Sleeping = BoxFuture<
    'static,
    (
        sqlx::MySqlConnection,
        Result<Vec<sqlx::mysql::MySqlRow>, sqlx::Error>,
    ),
>;

/// A running wake-up of the other nodes: it gives back its connection, or
/// `None` if it failed.
type Kicking = BoxFuture<'static, Option<sqlx::MySqlConnection>>;

/// One thing the sleeping waker attends to.
enum Step {
    /// The sleep answered (`None`: no answer within its limit).
    Slept(
        Option<(
            sqlx::MySqlConnection,
            Result<Vec<sqlx::mysql::MySqlRow>, sqlx::Error>,
        )>,
    ),
    /// A request to wake the others (`false`: the channel closed).
    Asked(bool),
    /// Its node freed names (`false`: the channel closed).
    Nudged(bool),
    /// Time to look whether the waking connection is idle.
    Idle,
    /// The running wake-up ended.
    Kicked(Option<sqlx::MySqlConnection>),
}

/// A node's waker: its own connection, sleeping until a release wakes it
/// (see [`Wake`]).
struct Waker {
    /// The connection while no sleep runs on it.
    conn: Option<sqlx::MySqlConnection>,
    /// The sleep running on the connection, and when it is presumed dead
    /// (no answer within [`WAKER_SLEEP_S`] and 5 s more).
    sleeping: Option<(Sleeping, Instant)>,
    opts: MySqlConnectOptions,
    wake: Arc<Wake>,
    sql: Sql,
    /// Freed names not yet yielded.
    pending: VecDeque<LeaseName>,
    /// Interrupted (or reconnected): read which waited names are free.
    woken: bool,
    /// Requests to wake the other nodes ([`Wake::request_kick`]).
    kicks: futures::channel::mpsc::Receiver<()>,
    kicks_open: bool,
    /// Names this node freed wait in `Wake::freed` ([`Wake::freed`]).
    nudges: futures::channel::mpsc::Receiver<()>,
    nudges_open: bool,
    /// The connection that wakes the others, opened at a request and
    /// closed [`KICK_IDLE`] after the last.
    kick_conn: Option<sqlx::MySqlConnection>,
    /// The wake-up running on that connection (it holds the connection
    /// meanwhile), and how many requests it covers: it runs beside the
    /// waker's own sleep and reads, so a wake-up that stalls (see
    /// [`Waker::start_kick`]) never delays
    /// what the node hears.
    kicking: Option<(Kicking, u64)>,
    /// A request came while a wake-up ran: one more after it.
    kick_again: bool,
    /// When the last wake-up ran.
    kicked_at: Instant,
    /// The free waited names that the last read found (and yielded if
    /// they were new), with their latest token.
    waited_free: BTreeSet<(String, i64)>,
    /// The free partitions of the node's groups that the last read found
    /// (and yielded if they were new), with their latest token.
    group_free: BTreeSet<(String, i64)>,
    /// The groups its node's sessions joined, with the fingerprint of
    /// their members at the last read.
    members: BTreeMap<String, String>,
    /// The scope of the last read, and the query of its fingerprint
    /// (`Sql::fingerprint`) with the value it had then (`Sql::sleep_stmt`;
    /// `None` if it watches none or the fingerprint could not be read);
    /// `None` before a read or if it failed.
    watch: Option<(Scope, Option<(String, String)>)>,
    /// The release log's last `seq` read (`None`: not read yet; the first
    /// read takes the latest, as releases before it count only if their
    /// lease is still free).
    log_after: Option<i64>,
    /// The `seq`s at or below `log_after` that no read found yet, and when
    /// each was first missed: a release that took one may not have
    /// committed (a `seq` is taken at the insert, and seen at the commit);
    /// read again for [`LOG_GAP_MS`].
    log_gaps: BTreeMap<i64, Instant>,
    /// Per lease, the latest token whose end the waker yielded: a release
    /// read both in the log and as a free lease is yielded once.
    heard: HashMap<String, i64>,
}

/// The waker's second connection, which interrupts the other nodes'
/// wakers, closes once no release asked for this long.
const KICK_IDLE: Duration = Duration::from_secs(30);

impl Waker {
    /// The connection is presumed broken: dropped (with its sleep, if one
    /// runs), reconnected next round.
    fn lose_conn(&mut self) {
        self.conn = None;
        self.sleeping = None;
        self.wake.sleeper.store(0, Ordering::Relaxed);
    }

    /// Takes every pending message of `rx`: whether any was.
    fn take_all(rx: &mut futures::channel::mpsc::Receiver<()>) -> bool {
        let mut any = false;
        while let Ok(()) = rx.try_recv() {
            any = true;
        }
        any
    }

    /// Starts waking every sleeping waker of the table prefix but this
    /// node's own (its node's freed names reach it through `Wake::freed`),
    /// on a connection of its own: every release that committed before
    /// this runs is covered; a request while one runs starts one more after
    /// it. MySQL only (MariaDB's wakers are not interrupted: a `KILL QUERY`
    /// there stalled 2 s, [`Sql::sleep_stmt`]). It never runs on the pooled
    /// connection that renewals wait for, and it runs beside the waker's
    /// own sleep and reads, so a wake-up that stalls never delays what the
    /// node hears. A failure is logged (a wake is only a hint).
    fn start_kick(&mut self) {
        Self::take_all(&mut self.kicks);
        if self.kicking.is_some() {
            self.kick_again = true;
            return;
        }
        let asked = self.wake.kicks_asked.load(Ordering::Relaxed);
        let conn = self.kick_conn.take();
        let opts = self.opts.clone();
        let kick = self.wake.without_self(&self.sql.kick);
        let run = async move {
            let mut conn = match conn {
                Some(c) => Some(c),
                None => match sqlx::MySqlConnection::connect_with(&opts).await {
                    Ok(c) => Some(c),
                    Err(e) => {
                        tracing::debug!(backend = NAME, error = %e, "release wake-up cannot connect");
                        None
                    }
                },
            };
            if let Some(c) = conn.as_mut() {
                if !kick_on(&kick, c).await {
                    conn = None;
                }
            }
            conn
        };
        self.kicking = Some((run.boxed(), asked));
    }

    /// The running wake-up ended, giving back its connection (`None` if
    /// it failed); starts the next if a request came meanwhile.
    fn kicked(&mut self, conn: Option<sqlx::MySqlConnection>) {
        if let Some((_, asked)) = self.kicking.take() {
            self.wake.kicks_done.fetch_max(asked, Ordering::Relaxed);
        }
        self.kick_conn = conn;
        self.kicked_at = Instant::now();
        if std::mem::take(&mut self.kick_again) {
            self.start_kick();
        }
    }

    /// Closes the waking connection.
    async fn close_kick_conn(&mut self) {
        if let Some(c) = self.kick_conn.take() {
            let _ = sqlx::Connection::close(c).await;
        }
    }

    /// Moves the names its own node freed to `pending`.
    fn take_freed(&mut self) {
        for n in self.wake.take_freed() {
            if let Ok(name) = LeaseName::new(&n) {
                self.pending.push_back(name);
            }
        }
    }

    /// One step: wake the others if asked, yield the names its node freed,
    /// reconnect, or read the free waited names after a wake, or sleep
    /// until woken (or for [`WAKER_SLEEP_S`]), waking the others meanwhile
    /// if asked, and returning (the sleep still running) when its node
    /// freed names.
    async fn round(&mut self) {
        use futures::future::{select, Either};
        if Self::take_all(&mut self.kicks) {
            self.start_kick();
        }
        Self::take_all(&mut self.nudges);
        self.take_freed();
        if !self.pending.is_empty() {
            return;
        }
        if self.wake.closed.load(Ordering::Relaxed) {
            // No session open: no connection until one opens again (the
            // close ended the sleeping connection on the server).
            self.kicking = None;
            self.kick_again = false;
            self.close_kick_conn().await;
            self.sleeping = None;
            if let Some(conn) = self.conn.take() {
                let _ = sqlx::Connection::close(conn).await;
            }
            self.wake.sleeper.store(0, Ordering::Relaxed);
            futures_timer::Delay::new(Duration::from_millis(250)).await;
            return;
        }
        if self.sleeping.is_none() {
            if self.conn.is_none() {
                match sqlx::MySqlConnection::connect_with(&self.opts).await {
                    Ok(mut c) => {
                        let id = connection_id(&mut c).await;
                        self.wake.sleeper.store(id, Ordering::Relaxed);
                        self.conn = Some(c);
                        // Releases while it was down were not seen.
                        self.woken = true;
                    }
                    Err(e) => {
                        tracing::debug!(backend = NAME, error = %e, "release waker cannot connect");
                        futures_timer::Delay::new(Duration::from_millis(250)).await;
                    }
                }
                return;
            }
            if std::mem::take(&mut self.woken) {
                self.read_free_beside_kick().await;
                #[cfg(feature = "testkit")]
                self.wake.pause_after_read().await;
                return;
            }
            // What it watches changed since its read (a name found held
            // since, a session opened or closed): read again first.
            let scope = Scope::of(&self.wake);
            let watch = match &self.watch {
                Some((read, fp)) if *read == scope => fp.clone(),
                _ => {
                    self.woken = true;
                    return;
                }
            };
            let Some(mut conn) = self.conn.take() else {
                return;
            };
            let stmt = self
                .sql
                .sleep_stmt(watch.as_ref().map(|(f, fp)| (f.as_str(), fp.as_str())));
            let sleep: Sleeping = async move {
                let r = sqlx::Executor::fetch_all(&mut conn, stmt.as_str()).await;
                (conn, r)
            }
            .boxed();
            let until = Instant::now() + Duration::from_secs(WAKER_SLEEP_S + 5);
            self.sleeping = Some((sleep, until));
        }
        let slept = loop {
            use futures::future::{pending, select_all};
            let Some((sleep, until)) = self.sleeping.as_mut() else {
                return;
            };
            let limit = futures_timer::Delay::new(until.saturating_duration_since(Instant::now()));
            // While the waking connection is open: closed when idle.
            let idle = match self.kick_conn {
                Some(_) => KICK_IDLE.saturating_sub(self.kicked_at.elapsed()),
                None => Duration::from_secs(WAKER_SLEEP_S + 5),
            };
            let (kicks_open, nudges_open) = (self.kicks_open, self.nudges_open);
            let (kicks, nudges) = (&mut self.kicks, &mut self.nudges);
            let kicking = &mut self.kicking;
            type Waiting<'w> =
                std::pin::Pin<Box<dyn std::future::Future<Output = Step> + Send + 'w>>;
            let steps: Vec<Waiting<'_>> = vec![
                Box::pin(select(sleep, limit).map(|e| match e {
                    Either::Left((r, _)) => Step::Slept(Some(r)),
                    Either::Right(_) => Step::Slept(None),
                })),
                Box::pin(async move {
                    if kicks_open {
                        Step::Asked(futures::StreamExt::next(kicks).await.is_some())
                    } else {
                        pending().await
                    }
                }),
                Box::pin(async move {
                    if nudges_open {
                        Step::Nudged(futures::StreamExt::next(nudges).await.is_some())
                    } else {
                        pending().await
                    }
                }),
                Box::pin(futures_timer::Delay::new(idle).map(|()| Step::Idle)),
                Box::pin(async move {
                    match kicking.as_mut() {
                        Some((run, _)) => Step::Kicked(run.await),
                        None => pending().await,
                    }
                }),
            ];
            let (step, _, _) = select_all(steps).await;
            match step {
                Step::Slept(r) => break r,
                // Asked to wake the others.
                Step::Asked(true) => self.start_kick(),
                Step::Asked(false) => self.kicks_open = false,
                // Its node freed names: yielded at once, the sleep runs on.
                Step::Nudged(true) => {
                    if Self::take_all(&mut self.kicks) {
                        self.start_kick();
                    }
                    return;
                }
                Step::Nudged(false) => self.nudges_open = false,
                Step::Kicked(conn) => self.kicked(conn),
                Step::Idle => {
                    if self.kicking.is_none()
                        && self.kick_conn.is_some()
                        && self.kicked_at.elapsed() >= KICK_IDLE
                    {
                        self.close_kick_conn().await;
                    }
                }
            }
        };
        self.sleeping = None;
        match slept {
            // 1 if interrupted or what it watches changed, 0 if it slept
            // its time (`Sql::sleep_stmt`).
            Some((conn, Ok(rows))) => {
                self.conn = Some(conn);
                self.woken = rows
                    .first()
                    .and_then(|r| r.try_get::<i64, _>(1).ok())
                    .is_none_or(|v| v != 0);
            }
            // MariaDB answers an interrupted sleep with error 1317
            // (SQLSTATE 70100): the connection is fine.
            Some((conn, Err(e))) => {
                if is_interrupted(&e) {
                    self.conn = Some(conn);
                } else {
                    tracing::debug!(backend = NAME, error = %e, "release waker failed");
                    self.lose_conn();
                }
                self.woken = true;
            }
            // No answer: the connection is presumed dead.
            None => {
                self.lose_conn();
                self.woken = true;
            }
        }
    }

    /// [`Waker::read_free`], while the running wake-up of the others goes
    /// on: a waker that reads again and again (what it watches changing
    /// under a busy rebalance) never reaches its sleep, where the wake-up
    /// is otherwise driven, and a leaver's wake-up of the others then
    /// waited for that (the members heard its releases a renewal later).
    async fn read_free_beside_kick(&mut self) {
        use futures::future::{select, Either};
        let mut kick = self.kicking.take();
        let ended = match kick.as_mut() {
            None => {
                self.read_free().await;
                None
            }
            Some((run, _)) => {
                let read = std::pin::pin!(self.read_free());
                match select(read, run).await {
                    Either::Left(((), _)) => None,
                    Either::Right((conn, read)) => {
                        read.await;
                        Some(conn)
                    }
                }
            }
        };
        self.kicking = kick;
        if let Some(conn) = ended {
            self.kicked(conn);
        }
    }

    /// Queues the name of each group whose members changed since the last
    /// read (S10.5: its members renew at once); a group first read is not
    /// announced (its node's own session just joined it). `now`: each
    /// group its node's sessions joined, with its members' fingerprint.
    fn members_changed(&mut self, now: BTreeMap<String, String>) {
        for (group, fp) in &now {
            let changed = self.members.get(group).is_some_and(|before| before != fp);
            if changed {
                if let Ok(name) = LeaseName::new(group) {
                    if !self.pending.contains(&name) {
                        self.pending.push_back(name);
                    }
                }
            }
        }
        self.members = now;
    }

    /// Queues `name` as freed from the term of `token`, unless that term's
    /// end (or a later one's) was yielded already. Every term's end is one
    /// broadcast, even while the name of an earlier one still waits to be
    /// yielded: a partition handed to a joiner and released again by it
    /// (it left) within one read reached the members once, and one that
    /// had counted it as the join's hand-over split the leave from a list
    /// without it and asked for its part a pause late (S10.2; MariaDB, 8
    /// partitions: 102 ms in one bench run of 20).
    fn yield_freed(&mut self, name: &str, token: i64) {
        if self.heard.get(name).is_some_and(|t| *t >= token) {
            return;
        }
        if self.heard.len() >= HEARD_MAX {
            self.heard.clear();
        }
        self.heard.insert(name.to_owned(), token);
        if let Ok(name) = LeaseName::new(name) {
            self.pending.push_back(name);
        }
    }

    /// The release log's rows of this read (`seq`, name, token, session),
    /// oldest first: queues each release by another node of a name it
    /// waits for or of a partition of a group in `groups`, and moves
    /// `log_after` and the missing `seq`s on (`Waker::log_gaps`).
    fn read_log(
        &mut self,
        after: i64,
        rows: Vec<sqlx::mysql::MySqlRow>,
        groups: &BTreeMap<String, String>,
    ) {
        if rows.len() >= LOG_READ_MAX {
            self.woken = true;
        }
        let waited: BTreeSet<String> = self.wake.waited().into_iter().collect();
        let mut seen = BTreeSet::new();
        for row in rows {
            let (Ok(seq), Ok(name), Ok(token), Ok(own)) = (
                row.try_get::<i64, _>(0),
                row.try_get::<String, _>(1),
                row.try_get::<i64, _>(2),
                row.try_get::<i64, _>(3).map(|o| o != 0),
            ) else {
                continue;
            };
            seen.insert(seq);
            self.log_gaps.remove(&seq);
            let ours = waited.contains(&name)
                || name
                    .rsplit_once(":p")
                    .is_some_and(|(group, _)| groups.contains_key(group));
            if ours && !own {
                self.yield_freed(&name, token);
            }
        }
        // The `seq`s skipped (the latest ones, if more than the gaps kept).
        let last = seen.last().copied().unwrap_or(after).max(after);
        let now = Instant::now();
        let from = (after + 1).max(last - i64::try_from(LOG_GAPS_MAX).unwrap_or(i64::MAX));
        for seq in from..last {
            if !seen.contains(&seq) {
                self.log_gaps.entry(seq).or_insert(now);
            }
        }
        let keep = Duration::from_millis(LOG_GAP_MS);
        self.log_gaps.retain(|_, at| now.duration_since(*at) < keep);
        while self.log_gaps.len() > LOG_GAPS_MAX {
            self.log_gaps.pop_first();
        }
        self.log_after = Some(last);
    }

    /// The missing `seq`s of the release log, as a list (`-1` if none).
    fn gaps(&self) -> String {
        if self.log_gaps.is_empty() {
            "-1".to_owned()
        } else {
            self.log_gaps
                .keys()
                .map(i64::to_string)
                .collect::<Vec<_>>()
                .join(",")
        }
    }

    /// After a wake: reads which waited names, and which partitions of its
    /// node's groups, are free, and the release log since the last read;
    /// queues the releases by other nodes that the log lists, oldest first
    /// (the order every node reads), then the waited names and partitions
    /// newly free since the last read that the log did not list (a lease
    /// whose holder expired, or one freed since the log's read); keeps the
    /// fingerprint of what it watches, read first (a release between the
    /// two reads is then read and also makes the next sleep return at
    /// once: one read more, never one missed).
    async fn read_free(&mut self) {
        self.watch = None;
        if self.conn.is_none() {
            return;
        }
        let scope = Scope::of(&self.wake);
        let log_after = match self.log_after {
            Some(after) => after,
            None => {
                // The first read: from the log's latest `seq` (a release
                // before it counts only if its lease is still free).
                let Some(conn) = self.conn.as_mut() else {
                    return;
                };
                match sqlx::query_scalar::<_, i64>(&self.sql.log_last)
                    .fetch_one(conn)
                    .await
                {
                    Ok(last) => {
                        self.log_after = Some(last);
                        last
                    }
                    Err(e) if is_interrupted(&e) => {
                        self.woken = true;
                        return;
                    }
                    Err(e) => {
                        tracing::debug!(backend = NAME, error = %e, "release waker failed");
                        self.lose_conn();
                        return;
                    }
                }
            }
        };
        let gaps = self.gaps();
        let fingerprint = self.sql.fingerprint(&scope, log_after, &gaps);
        let mut stmts = vec![fingerprint.clone()];
        if !scope.names.is_empty() {
            stmts.push(self.sql.free.replace("@names@", &scope.names));
        }
        if !scope.sessions.is_empty() {
            stmts.push(self.sql.group_free.replace("@sessions@", &scope.sessions));
            stmts.push(
                self.sql
                    .group_members
                    .replace("@sessions@", &scope.sessions),
            );
        }
        // Last: a release that commits after the free leases' read is in
        // the log's.
        stmts.push(
            self.sql
                .log_read
                .replace("@after@", &log_after.to_string())
                .replace("@gaps@", &gaps),
        );
        let Some(conn) = self.conn.as_mut() else {
            return;
        };
        match run_multi(conn, &stmts.join("; ")).await {
            Ok(results) => {
                let mut rows = results.into_iter().map(|(_, rows)| rows);
                let fp = rows
                    .next()
                    .and_then(|r| r.first().and_then(|r| r.try_get::<String, _>(0).ok()));
                let pairs = |rows: Vec<sqlx::mysql::MySqlRow>| -> BTreeSet<(String, i64)> {
                    rows.into_iter()
                        .filter_map(|r| Some((r.try_get::<String, _>(0).ok()?, r.try_get(1).ok()?)))
                        .collect()
                };
                let waited_free = if scope.names.is_empty() {
                    BTreeSet::new()
                } else {
                    pairs(rows.next().unwrap_or_default())
                };
                let (group_free, groups) = if scope.sessions.is_empty() {
                    (BTreeSet::new(), BTreeMap::new())
                } else {
                    let free = pairs(rows.next().unwrap_or_default());
                    let groups: BTreeMap<String, String> = rows
                        .next()
                        .unwrap_or_default()
                        .into_iter()
                        .filter_map(|r| Some((r.try_get::<String, _>(0).ok()?, r.try_get(1).ok()?)))
                        .collect();
                    (free, groups)
                };
                self.read_log(log_after, rows.next().unwrap_or_default(), &groups);
                // Only the leases free since the last read: one still free
                // was yielded then (a joiner of 1,000 partitions waits for
                // hundreds, and yielding every free one at every wake
                // flooded its engine until its renewals starved). One taken
                // and freed again since has a later token: it is newly free
                // (a member that joined and left between two reads frees
                // the partitions the last read found free).
                let newly: Vec<(String, i64)> = waited_free
                    .difference(&self.waited_free)
                    .chain(group_free.difference(&self.group_free))
                    .cloned()
                    .collect();
                for (n, t) in newly {
                    self.yield_freed(&n, t);
                }
                self.waited_free = waited_free;
                self.group_free = group_free;
                self.members_changed(groups);
                // A fingerprint that cannot be read: the next sleep is a
                // plain one.
                self.watch = Some((scope, fp.map(|fp| (fingerprint, fp))));
            }
            // An interruption meant for the sleep before (MariaDB, error
            // 1317): the connection is fine; read again.
            Err(e) if is_interrupted(&e) => self.woken = true,
            Err(e) => {
                tracing::debug!(backend = NAME, error = %e, "release waker failed");
                self.lose_conn();
            }
        }
    }
}

/// Whether `e` is MariaDB's answer to an interrupted statement (error
/// 1317, SQLSTATE 70100): the connection is fine.
fn is_interrupted(e: &sqlx::Error) -> bool {
    e.as_database_error()
        .and_then(|d| d.code())
        .is_some_and(|c| c == "70100")
}

#[cfg(feature = "testkit")]
pub use hold::MysqlHold;

#[cfg(feature = "testkit")]
mod hold {
    use super::{acquire_on, map_err, renew_on, MysqlBackend, Sql, NAME};
    use crate::sql::await_waiters;
    use crate::testkit::{Hold, WaitSeen};
    use futures::future::{BoxFuture, FutureExt};
    use futures::TryFutureExt;
    use simba_core::{BackendError, BackendErrorKind, LeaseName, SessionId, Token};
    use sqlx::mysql::MySqlPool;

    /// The conformance suite's interleaving hook on MySQL / MariaDB
    /// ([`crate::testkit::Hold`]): a blocker transaction on a connection of
    /// its own; waits behind it are read from InnoDB's lock-wait view
    /// (`information_schema.INNODB_LOCK_WAITS`, MariaDB).
    pub struct MysqlHold {
        tx: sqlx::Transaction<'static, sqlx::MySql>,
        pool: MySqlPool,
        id: u64,
        sql: Sql,
    }

    impl MysqlBackend {
        /// Opens a [`MysqlHold`] on this backend's tables (feature `testkit`).
        ///
        /// # Errors
        /// A [`BackendError`] if the connection or `BEGIN` failed.
        pub async fn hold(&self) -> Result<MysqlHold, BackendError> {
            let err = |e| map_err(NAME, "test hold", e);
            let (pool, mut tx) = self.sql.sk.hold(&self.pool, 2, None).await?;
            // The acquire procedure then runs inside this transaction
            // instead of one of its own (it neither starts nor ends one
            // with autocommit off). The connection is closed on commit.
            sqlx::query("SET autocommit = 0")
                .execute(&mut *tx)
                .await
                .map_err(err)?;
            let id: u64 = sqlx::query_scalar("SELECT CONNECTION_ID()")
                .fetch_one(&mut *tx)
                .await
                .map_err(err)?;
            Ok(MysqlHold {
                tx,
                pool,
                id,
                sql: self.sql.clone(),
            })
        }
    }

    impl Hold for MysqlHold {
        crate::sql::hold_calls!();
        fn waiters(&mut self, n: usize) -> BoxFuture<'_, Result<WaitSeen, BackendError>> {
            let (pool, id) = (&self.pool, self.id);
            let tables = format!("%{}%", self.sql.sk.t.prefix);
            async move {
                let err = |e| map_err(NAME, "test hold", e);
                // InnoDB's lock-wait view; MariaDB does not list a wait
                // inside the optimizer's read of a const row (state
                // `Statistics`), so a statement on our tables running for a
                // second or more counts too.
                let seen = await_waiters(n, || {
                    sqlx::query_scalar(
                        "SELECT CAST(GREATEST( \
                           (SELECT COUNT(*) FROM information_schema.INNODB_LOCK_WAITS w \
                            JOIN information_schema.INNODB_TRX b ON b.trx_id = w.blocking_trx_id \
                            WHERE b.trx_mysql_thread_id = ?), \
                           (SELECT COUNT(*) FROM information_schema.PROCESSLIST p \
                            WHERE p.ID <> ? AND p.COMMAND IN ('Query', 'Execute') AND p.TIME >= 1 \
                              AND p.INFO LIKE ?)) AS SIGNED)",
                    )
                    .bind(id)
                    .bind(id)
                    .bind(tables.as_str())
                    .fetch_one(pool)
                    .map_err(err)
                });
                if seen.await? {
                    return Ok(WaitSeen::Seen);
                }
                let trx: Vec<(String, String, i64, String)> = sqlx::query_as(
                    "SELECT CAST(trx_id AS CHAR), CAST(trx_state AS CHAR), \
                     CAST(trx_mysql_thread_id AS SIGNED), CAST(COALESCE(trx_query, '') AS CHAR) \
                     FROM information_schema.INNODB_TRX \
                 UNION ALL SELECT CAST(ID AS CHAR), CAST(STATE AS CHAR), CAST(TIME AS SIGNED), \
                 CAST(COALESCE(LEFT(INFO, 60), COMMAND) AS CHAR) FROM information_schema.PROCESSLIST \
                 WHERE DB = DATABASE() AND COMMAND <> 'Sleep'",
                )
                .fetch_all(pool)
                .await
                .map_err(err)?;
                Err(BackendError::new(
                    BackendErrorKind::Other,
                    format!(
                        "no {n} call(s) waited behind the hold (thread {id}) within 10 s; \
                         transactions: {trx:?}"
                    ),
                ))
            }
            .boxed()
        }
    }
}
