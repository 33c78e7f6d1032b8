//! MySQL / MariaDB release wake-ups (S4.2, `docs/BACKENDS.md`, "MySQL /
//! MariaDB"): a release or close that frees a lease writes a row to the
//! release log and wakes the waker of every other node of the same table
//! prefix (MariaDB: the waker reads the log while it waits; MySQL: the
//! release interrupts it, if its user may see it), and the woken node's
//! stream yields the releases and the waited names that are free; nothing
//! else is interrupted; a release taken again before the waker reads is
//! still heard; without the privilege to see another user's waker a
//! release still succeeds (and on MariaDB is still heard).
//! MariaDB at 127.0.0.1:3306 is required unless `SIMBA_TEST_SKIP_SERVERS`
//! lists `mysql`.
#![cfg(all(feature = "mysql", feature = "testkit"))]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![allow(unused_imports, dead_code)]

mod common;

use common::*;
use futures::stream::BoxStream;
use futures::StreamExt;
use simba_backends::mysql::MysqlBackend;
use simba_backends::testkit::Hold;
use simba_backends::Backend;
use simba_core::{AcquireOutcome, LeaseName, Token};
use std::time::{Duration, Instant};

const LONG: Duration = Duration::from_secs(60);

async fn backend(url: &str, tag: &str) -> MysqlBackend {
    MysqlBackend::connect(&config(url, tag, "w")).await.unwrap()
}

async fn won(b: &MysqlBackend, s: simba_core::SessionId, n: &LeaseName) -> Token {
    match b.acquire(s, n).await.unwrap() {
        AcquireOutcome::Won { token, .. } => token,
        other => panic!("expected a win of `{n}`, got {other:?}"),
    }
}

/// The next name within `limit`, if any.
async fn next_within(
    stream: &mut BoxStream<'static, LeaseName>,
    limit: Duration,
) -> Option<LeaseName> {
    tokio::time::timeout(limit, stream.next())
        .await
        .ok()
        .flatten()
}

/// Polls a fresh stream for a moment: its waker starts sleeping (a stream
/// is lazy, as every stream; the client polls its own throughout).
async fn prime(stream: &mut BoxStream<'static, LeaseName>) {
    let _ = next_within(stream, Duration::from_millis(300)).await;
}

/// Waits until the waker of `user` sleeps, so a wake cannot fall between
/// two of its sleeps.
async fn waker_sleeping(admin: &sqlx::MySqlPool, prefix: &str) {
    wakers_sleeping(admin, prefix, 1).await;
}

/// A run tag, the waker prefix of its namespace "w" and an admin pool on
/// the MySQL test server; `None` when the test is to be skipped.
async fn wake_setup() -> Option<(String, String, sqlx::MySqlPool)> {
    if !mysql_available().await {
        return None;
    }
    let tag = tag();
    let prefix = format!("{tag}_w_");
    let admin = sqlx::MySqlPool::connect(MYSQL_URL).await.unwrap();
    Some((tag, prefix, admin))
}

/// `s`'s acquire of `n` on `b` is answered `Held`.
async fn assert_held(b: &MysqlBackend, s: simba_core::SessionId, n: &LeaseName) {
    assert!(matches!(
        b.acquire(s, n).await.unwrap(),
        AcquireOutcome::Held { .. }
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s4_2_mysql_release_and_close_wake_a_waiting_node() {
    let Some((tag, prefix, admin)) = wake_setup().await else {
        return;
    };
    let a = backend(MYSQL_URL, &tag).await;
    let b = backend(MYSQL_URL, &tag).await;
    assert!(b.broadcasts_releases());
    let mut stream = b.subscribe_releases().await.unwrap().unwrap();
    prime(&mut stream).await;
    let n = LeaseName::new("woken").unwrap();
    let sa = session(&a, LONG).await;
    let sb = session(&b, LONG).await;
    let t = won(&a, sa, &n).await;
    assert_held(&b, sb, &n).await;
    // A plain sleep of the same user, and a waker's text of another prefix:
    // neither may be interrupted.
    let bystander = admin.clone();
    let other = format!("SELECT 'simba-waker:{tag}_other_', CAST(SLEEP(3) AS SIGNED)");
    let plain = tokio::spawn(async move {
        let a: i64 = sqlx::query_scalar("SELECT SLEEP(3)")
            .fetch_one(&bystander)
            .await
            .unwrap();
        let b: (String, i64) = sqlx::query_as(&other).fetch_one(&bystander).await.unwrap();
        (a, b.1)
    });
    waker_sleeping(&admin, &prefix).await;
    a.release(sa, &n, t).await.unwrap();
    let got = next_within(&mut stream, Duration::from_secs(5)).await;
    assert_eq!(got.as_ref(), Some(&n), "the release woke the waiting node");
    won(&b, sb, &n).await;
    // The close of the holder frees it too.
    assert_held(&a, sa, &n).await;
    let mut own = a.subscribe_releases().await.unwrap().unwrap();
    prime(&mut own).await;
    waker_sleeping(&admin, &prefix).await;
    b.close_session(sb).await.unwrap();
    let mut seen = Vec::new();
    while let Some(x) = next_within(&mut own, Duration::from_secs(5)).await {
        seen.push(x);
        if seen.contains(&n) {
            break;
        }
    }
    assert!(
        seen.contains(&n),
        "the close woke the waiting node: {seen:?}"
    );
    won(&a, sa, &n).await;
    assert_eq!(
        plain.await.unwrap(),
        (0, 0),
        "a statement that is not a waker of this prefix was interrupted"
    );
    a.close_session(sa).await.unwrap();
    drop_mysql_tables(&tag).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_release_without_privilege_to_wake_still_succeeds() {
    let Some((tag, prefix, admin)) = wake_setup().await else {
        return;
    };
    // A user of its own without PROCESS: it sees only its own connections.
    let user = format!("sw_{tag}");
    create_mysql_user(&admin, &user, &[]).await;
    let releaser = backend(&format!("mysql://{user}@127.0.0.1:3306/test"), &tag).await;
    let waiter = backend(MYSQL_URL, &tag).await;
    let mut stream = waiter.subscribe_releases().await.unwrap().unwrap();
    prime(&mut stream).await;
    let n = LeaseName::new("unseen").unwrap();
    let sa = session(&releaser, LONG).await;
    let sb = session(&waiter, LONG).await;
    let t = won(&releaser, sa, &n).await;
    assert_held(&waiter, sb, &n).await;
    waker_sleeping(&admin, &prefix).await;
    releaser.release(sa, &n, t).await.unwrap();
    let mariadb: String = sqlx::query_scalar("SELECT VERSION()")
        .fetch_one(&admin)
        .await
        .unwrap();
    if mariadb.to_ascii_lowercase().contains("mariadb") {
        // MariaDB's wakers read the release log, whoever wrote it: no
        // privilege is needed to be heard (20 s: twice a waker's longest
        // wait, 4,000 times the 5 ms between two of its looks).
        assert_eq!(
            next_within(&mut stream, Duration::from_secs(20)).await,
            Some(n.clone()),
            "a release by another user was not heard"
        );
    } else {
        assert_eq!(
            next_within(&mut stream, Duration::from_millis(1500)).await,
            None,
            "a user without PROCESS woke another user's waker"
        );
    }
    // The retry takes it, as without wake-ups.
    won(&waiter, sb, &n).await;
    waiter.close_session(sb).await.unwrap();
    releaser.close_session(sa).await.unwrap();
    drop(releaser);
    drop_mysql_tables(&tag).await;
    drop_mysql_user(&admin, &user).await;
}

/// When the running statement of the sleeping waker of `prefix` (exactly
/// one) began, in the server's milliseconds: the same while one statement
/// waits (on MariaDB its query id changes at each of its looks, as each
/// statement inside its block gets one).
async fn waker_started(admin: &sqlx::MySqlPool, prefix: &str) -> f64 {
    for _ in 0..500 {
        let started: Vec<f64> = sqlx::query_scalar(
            "SELECT CAST(UNIX_TIMESTAMP(NOW(6)) * 1000 - TIME_MS AS DOUBLE) \
             FROM information_schema.PROCESSLIST WHERE STATE = 'User sleep' AND INFO LIKE ?",
        )
        .bind(format!("%simba-waker:{prefix}%"))
        .fetch_all(admin)
        .await
        .unwrap();
        assert!(started.len() <= 1, "one waker of `{prefix}`: {started:?}");
        if let Some(t) = started.first() {
            return *t;
        }
        // Between two of its looks (MariaDB).
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("no waker of `{prefix}` sleeps");
}

/// S4.2, issue 30: a node's own release reaches its own stream without
/// ending its own waker's wait: the same statement runs on (MySQL: no
/// interruption of its own waker, as a `KILL QUERY` of a second sleep right
/// after the first could stall 2 s; MariaDB: its waker does not count its
/// own node's rows of the release log).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s4_2_mysql_own_release_reaches_own_stream_without_interrupting_its_waker() {
    let Some((tag, prefix, admin)) = wake_setup().await else {
        return;
    };
    let a = backend(MYSQL_URL, &tag).await;
    let mut own = a.subscribe_releases().await.unwrap().unwrap();
    prime(&mut own).await;
    let n = LeaseName::new("own").unwrap();
    let sa = session(&a, LONG).await;
    let t = won(&a, sa, &n).await;
    waker_sleeping(&admin, &prefix).await;
    let before = waker_started(&admin, &prefix).await;
    // A statement begun after the release would begin at least this much
    // later than this one.
    tokio::time::sleep(Duration::from_millis(100)).await;
    a.release(sa, &n, t).await.unwrap();
    let got = next_within(&mut own, Duration::from_secs(5)).await;
    assert_eq!(
        got.as_ref(),
        Some(&n),
        "the node's own stream yields its release"
    );
    let after = waker_started(&admin, &prefix).await;
    assert!(
        (after - before).abs() < 50.0,
        "the node's own release ended its own waker's wait: its statement began \
         at {before} ms, then at {after} ms"
    );
    a.close_session(sa).await.unwrap();
    drop_mysql_tables(&tag).await;
}

/// S4.2, issue 30: a release that commits after a waker's read of the free
/// names and before its next sleep, so that its interruption finds no
/// sleeping waker of that node, still reaches the node's stream: the next
/// sleep answers at once, as what the waker watches changed since its read.
/// Before, such a wake was lost: the node learned of the release only at
/// another release (a renewal later, in a group) or never.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s4_2_mysql_a_release_between_a_wakers_read_and_its_sleep_is_not_lost() {
    let Some((tag, prefix, admin)) = wake_setup().await else {
        return;
    };
    let mut p = paused_after_a_release(&tag, &prefix, &admin).await;
    // The waker stands between its read and its next sleep: this release
    // interrupts no waker of `b`.
    p.a.release(p.sa, &p.second, p.t2).await.unwrap();
    p.go_on.take().unwrap().send(()).unwrap();
    let seen = p.heard_until_second(LONG).await;
    assert!(
        seen.contains(&p.second),
        "the release between the waker's read and its sleep was lost: {seen:?}"
    );
    p.a.close_session(p.sa).await.unwrap();
    p.b.close_session(p.sb).await.unwrap();
    drop_mysql_tables(&tag).await;
}

/// Two nodes of one prefix: `a` held `first` and holds `second`, `b`
/// waits for both, its stream polled throughout (as the client polls its
/// own); `first`'s release woke `b`'s waker, which read and now stands
/// after its read until `go_on` is sent.
struct Paused {
    a: MysqlBackend,
    b: MysqlBackend,
    sa: simba_core::SessionId,
    sb: simba_core::SessionId,
    first: LeaseName,
    second: LeaseName,
    t2: Token,
    rx: tokio::sync::mpsc::UnboundedReceiver<LeaseName>,
    go_on: Option<futures::channel::oneshot::Sender<()>>,
}

async fn paused_after_a_release(tag: &str, prefix: &str, admin: &sqlx::MySqlPool) -> Paused {
    let a = backend(MYSQL_URL, tag).await;
    let b = backend(MYSQL_URL, tag).await;
    let stream = b.subscribe_releases().await.unwrap().unwrap();
    let first = LeaseName::new("first").unwrap();
    let second = LeaseName::new("second").unwrap();
    let sa = session(&a, LONG).await;
    let sb = session(&b, LONG).await;
    let t1 = won(&a, sa, &first).await;
    let t2 = won(&a, sa, &second).await;
    assert_held(&b, sb, &first).await;
    assert_held(&b, sb, &second).await;
    let rx = pump(stream);
    waker_sleeping(admin, prefix).await;
    let (read, go_on) = b.pause_waker_after_next_read();
    a.release(sa, &first, t1).await.unwrap();
    tokio::time::timeout(LONG, read)
        .await
        .expect("the first release woke the waker and it read")
        .unwrap();
    Paused {
        a,
        b,
        sa,
        sb,
        first,
        second,
        t2,
        rx,
        go_on: Some(go_on),
    }
}

impl Paused {
    /// `a` releases `second` and a third node of `tag` takes it: returns
    /// that node, its session and its token.
    async fn second_taken_by_another(
        &self,
        tag: &str,
    ) -> (MysqlBackend, simba_core::SessionId, Token) {
        let c = backend(MYSQL_URL, tag).await;
        let sc = session(&c, LONG).await;
        self.a
            .release(self.sa, &self.second, self.t2)
            .await
            .unwrap();
        let t = won(&c, sc, &self.second).await;
        (c, sc, t)
    }

    /// Closes the sessions of `a`, `b` and the third node `c`; drops the
    /// tables of `tag`.
    async fn end(&self, c: &MysqlBackend, sc: simba_core::SessionId, tag: &str) {
        self.a.close_session(self.sa).await.unwrap();
        self.b.close_session(self.sb).await.unwrap();
        c.close_session(sc).await.unwrap();
        drop_mysql_tables(tag).await;
    }

    /// What `b`'s stream yields until it yields `second` or `limit` passed;
    /// `first` must be among it.
    async fn heard_until_second(&mut self, limit: Duration) -> Vec<LeaseName> {
        let until = Instant::now() + limit;
        let mut seen = Vec::new();
        while !seen.contains(&self.second) {
            let left = until.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, self.rx.recv()).await {
                Ok(Some(n)) => seen.push(n),
                _ => break,
            }
        }
        assert!(seen.contains(&self.first), "the first release: {seen:?}");
        seen
    }
}

/// Waits until `n` wakers of `prefix` sleep.
async fn wakers_sleeping(admin: &sqlx::MySqlPool, prefix: &str, n: i64) {
    for _ in 0..250 {
        let sleeping: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM information_schema.PROCESSLIST \
             WHERE STATE = 'User sleep' AND INFO LIKE ?",
        )
        .bind(format!("%simba-waker:{prefix}%"))
        .fetch_one(admin)
        .await
        .unwrap();
        if sleeping >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("not {n} wakers of `{prefix}` sleeping within 5 s");
}

/// Polls `stream` on a task of its own, as the client polls its own, and
/// hands on what it yields.
fn pump(
    mut stream: BoxStream<'static, LeaseName>,
) -> tokio::sync::mpsc::UnboundedReceiver<LeaseName> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(n) = stream.next().await {
            if tx.send(n).is_err() {
                break;
            }
        }
    });
    rx
}

/// S10.5 on MySQL/MariaDB: a join wakes the other nodes' wakers, and a
/// node with a session in the group yields the group's name (its members
/// renew at once); a join of a member already listed announces nothing,
/// and a release of a partition yields the partition's name, not the
/// group's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s10_5_mysql_announces_a_join_to_the_groups_members() {
    let Some((tag, prefix, admin)) = wake_setup().await else {
        return;
    };
    let a = backend(MYSQL_URL, &tag).await;
    let b = backend(MYSQL_URL, &tag).await;
    let group = LeaseName::new("announced").unwrap();
    let sb = session(&b, LONG).await;
    b.join_group(sb, &group).await.unwrap();
    let mut hints = pump(b.subscribe_releases().await.unwrap().unwrap());
    let _own = pump(a.subscribe_releases().await.unwrap().unwrap());
    wakers_sleeping(&admin, &prefix, 2).await;
    let sa = session(&a, LONG).await;
    a.join_group(sa, &group).await.unwrap();
    // Without the interruption, the waker sleeping since just now would
    // see the join only when its 10 s sleep ends (it then finds the
    // members changed): half of that tells the two apart, however slow
    // the machine (the interruption takes a few round trips).
    let got = tokio::time::timeout(Duration::from_secs(5), hints.recv()).await;
    assert_eq!(
        got.ok().flatten().as_ref(),
        Some(&group),
        "the join was not announced to the group's member"
    );
    a.join_group(sa, &group).await.unwrap();
    let partition = LeaseName::new("announced:p0").unwrap();
    let t = won(&a, sa, &partition).await;
    a.release(sa, &partition, t).await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(10), hints.recv()).await;
    assert_eq!(
        got.ok().flatten().as_ref(),
        Some(&partition),
        "a join of a member was announced again, or the release was not"
    );
    a.close_session(sa).await.unwrap();
    b.close_session(sb).await.unwrap();
    drop_mysql_tables(&tag).await;
}

/// S4.2, issue 30: a release whose lease another node takes again before
/// a waker reads still reaches that waker's stream, from the release log.
/// Before, a woken waker read only which leases were free: a partition
/// released and taken again between two reads of a member was never heard
/// by it, and in a 1,000-partition leave such a member split the leave's
/// releases differently from the others (S10.2) and left its part
/// unowned for a renewal period (7 of 19 bench runs, 733–890 ms).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s4_2_mysql_a_release_taken_again_before_the_wakers_read_is_heard() {
    let Some((tag, prefix, admin)) = wake_setup().await else {
        return;
    };
    let mut p = paused_after_a_release(&tag, &prefix, &admin).await;
    // While the waker stands after its read: released, and taken again by
    // another node, so no read of the free leases finds it free.
    let (c, sc, _) = p.second_taken_by_another(&tag).await;
    p.go_on.take().unwrap().send(()).unwrap();
    // The waker reads again at once (its fingerprint counts the log's rows
    // of other nodes' releases); 20 s is 4,000 times its 5 ms wait between
    // two looks and twice its longest wait (10 s), so a loaded machine
    // cannot make it miss a heard release, and a lost one fails.
    let seen = p.heard_until_second(Duration::from_secs(20)).await;
    assert!(
        seen.contains(&p.second),
        "a release taken again before the waker's read was lost: {seen:?}"
    );
    p.end(&c, sc, &tag).await;
}

/// S4.2, S10.2: two terms of one lease that end between two reads of a
/// waker are two names on its stream, one per release. Before, a name
/// still waiting to be yielded was not queued again: a partition handed to
/// a joiner and released again by it (it left) within one read reached
/// the members once, and a member that had counted it as the join's
/// hand-over split the leave from a list without it and asked for its
/// part a pause late (MariaDB, 8 partitions: 102 ms in one bench run of
/// 20).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s4_2_mysql_two_terms_ended_before_the_wakers_read_are_two_names() {
    let Some((tag, prefix, admin)) = wake_setup().await else {
        return;
    };
    let mut p = paused_after_a_release(&tag, &prefix, &admin).await;
    // While the waker stands after its read: `second` released by `a`,
    // taken by `c` and released again, two terms ended.
    let (c, sc, t3) = p.second_taken_by_another(&tag).await;
    c.release(sc, &p.second, t3).await.unwrap();
    p.go_on.take().unwrap().send(()).unwrap();
    // Both come from one read of the log (20 s: see the test above); a
    // lost one waits the whole limit and fails.
    let until = Instant::now() + Duration::from_secs(20);
    let mut seen = Vec::new();
    while seen.iter().filter(|n| **n == p.second).count() < 2 {
        let left = until.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, p.rx.recv()).await {
            Ok(Some(n)) => seen.push(n),
            _ => break,
        }
    }
    assert_eq!(
        seen.iter().filter(|n| **n == p.second).count(),
        2,
        "two ended terms of `second`, heard: {seen:?}"
    );
    p.end(&c, sc, &tag).await;
}

/// The release log keeps its rows 60 s: a node deletes older ones after
/// a release that wrote one (at most every 30 s), whether or not a waker
/// reads them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_the_release_log_drops_rows_older_than_a_minute() {
    let Some((tag, prefix, admin)) = wake_setup().await else {
        return;
    };
    let a = backend(MYSQL_URL, &tag).await;
    let n = LeaseName::new("logged").unwrap();
    let sa = session(&a, LONG).await;
    let log = format!("{prefix}releases");
    // A row of two minutes ago, and one of now.
    for age_s in [120, 0] {
        sqlx::query(&format!(
            "INSERT INTO {log} (name, token, session, node, at_us) \
             VALUES ('old', 1, X'00', X'00', CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS SIGNED) - ?)"
        ))
        .bind(age_s * 1_000_000_i64)
        .execute(&admin)
        .await
        .unwrap();
    }
    let t = won(&a, sa, &n).await;
    a.release(sa, &n, t).await.unwrap();
    let rows: Vec<String> = sqlx::query_scalar(&format!(
        "SELECT CAST(name AS CHAR) FROM {log} ORDER BY seq"
    ))
    .fetch_all(&admin)
    .await
    .unwrap();
    assert_eq!(
        rows,
        vec!["old".to_owned(), n.as_str().to_owned()],
        "{rows:?}"
    );
    a.close_session(sa).await.unwrap();
    drop_mysql_tables(&tag).await;
}
