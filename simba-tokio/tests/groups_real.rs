//! Partitioned groups (S10) on real backends, SQLite, PostgreSQL, Redis,
//! etcd and ZooKeeper (through `simba_backends::connect`): 3 members share 12 partitions
//! 4/4/4; a fourth joins (3/3/3/3: only partitions that go to it move,
//! S10.2) and closes again (4/4/4: only its partitions move, revoked as
//! `Stopped`); then one is cut off from the backend as a crashed process
//! would be (no close, no release) and the other two take its partitions
//! over once its session has expired, 6/6 (only its partitions move), with
//! strictly increasing tokens per partition and the hand-over order of
//! S10.3 (a partition's old task stops before its new one starts).
//!
//! These backends implement groups from the `groups-backends` branch on; on a
//! backend without them the join fails with `Unsupported` and this test says so.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use simba_client::testkit::{self, GroupLog, Severable};
use simba_tokio::{Backend, ClientEvent, Simba, TokioRuntime};
use std::sync::Arc;
use std::time::{Duration, Instant};

async fn rebalance_after_a_crash(url: String) {
    // Its own group: runs on a shared server must not meet.
    let group = format!("real.group.{}", std::process::id());
    let runtime: Arc<dyn simba_tokio::AsyncRuntime> =
        Arc::new(TokioRuntime::try_current().unwrap());
    let log = Arc::new(GroupLog::default());
    let mut members = Vec::new();
    let mut cuts = Vec::new();
    for i in 0..3 {
        let backend: Arc<dyn Backend> = match simba_backends::connect(&url).await {
            Ok(b) => Arc::from(b),
            Err(e) => {
                let what = simba_backends::redact(&url);
                let kind = match url.split(':').next().unwrap_or("sqlite") {
                    "zk" => "zookeeper",
                    other => other,
                };
                simba_backends::test_servers::missing_server(kind, &what, "groups_real", &e);
                return;
            }
        };
        let sev = Severable::new(backend);
        cuts.push(sev.clone());
        let simba = Simba::builder_dyn(sev)
            .config(testkit::config())
            .runtime(runtime.clone())
            .build()
            .unwrap();
        let mut events = simba.events();
        let task = testkit::join_member(
            &simba,
            &group,
            12,
            i,
            &log,
            Duration::from_millis(20),
            runtime.clone(),
        )
        .await;
        if i == 0 {
            // Fail fast and clearly on a backend without groups.
            let start = Instant::now();
            loop {
                let next = tokio::time::timeout(Duration::from_secs(5), futures_next(&mut events))
                    .await
                    .ok()
                    .flatten();
                match next {
                    Some(ClientEvent::BackendFailed {
                        command: "join_group",
                        error,
                    }) => {
                        panic!("{url}: the backend cannot join a group: {error}")
                    }
                    Some(ClientEvent::GroupChanged { .. }) => break,
                    _ if start.elapsed() > testkit::PATIENCE => panic!("never joined"),
                    _ => {}
                }
            }
        }
        members.push((simba, task));
    }
    let inspector: Arc<dyn Backend> = Arc::from(simba_backends::connect(&url).await.unwrap());
    let tasks = |ms: &[usize]| -> Vec<&simba_tokio::GroupTask> {
        ms.iter().map(|&m| &members[m].1).collect()
    };
    wait(
        &log,
        &[0, 1, 2],
        &[4, 4, 4],
        &tasks(&[0, 1, 2]),
        &*inspector,
    )
    .await;
    // A fourth member joins, then closes.
    let settled = log.lengths();
    let joined_at = Instant::now();
    let simba = Simba::builder_dyn(simba_backends::connect(&url).await.map(Arc::from).unwrap())
        .config(testkit::config())
        .runtime(runtime.clone())
        .build()
        .unwrap();
    let task = testkit::join_member(
        &simba,
        &group,
        12,
        3,
        &log,
        Duration::from_millis(20),
        runtime.clone(),
    )
    .await;
    let mut all = tasks(&[0, 1, 2]);
    all.push(&task);
    wait(&log, &[0, 1, 2, 3], &[3, 3, 3, 3], &all, &*inspector).await;
    let join_took = joined_at.elapsed();
    log.assert_only_moved_to(&settled, 3);
    let settled = log.lengths();
    let left_at = Instant::now();
    task.stop().await;
    wait(
        &log,
        &[0, 1, 2],
        &[4, 4, 4],
        &tasks(&[0, 1, 2]),
        &*inspector,
    )
    .await;
    let leave_took = left_at.elapsed();
    log.assert_only_moved_from(&settled, 3);
    simba.close().await;
    let settled = log.lengths();
    let cut_at = Instant::now();
    cuts[2].cut();
    wait(&log, &[0, 1], &[6, 6], &tasks(&[0, 1]), &*inspector).await;
    log.assert_only_moved_from(&settled, 2);
    let took = cut_at.elapsed();
    assert!(
        took >= testkit::LEASE / 2,
        "partitions moved {took:?} after the crash: before the session could expire"
    );
    log.assert_consistent();
    for (p, evs) in log.events.lock().unwrap().iter() {
        use testkit::PartitionEvent::*;
        // Member 2 died: its tasks were dropped, nothing of it runs after
        // another member's task starts.
        if let Some(started) = evs
            .iter()
            .rposition(|e| matches!(e, TaskStarted { member, .. } if *member != 2))
        {
            assert!(
                !evs[started..]
                    .iter()
                    .any(|e| matches!(e, TaskStarted { member: 2, .. })),
                "partition {p}: {evs:?}"
            );
        }
    }
    println!(
        "{}: 3/3/3/3 {join_took:?} after a join, 4/4/4 {leave_took:?} after a leave, \
         6/6 {took:?} after a crash",
        simba_backends::redact(&url)
    );
    for (simba, _) in &members {
        simba.close().await;
    }
}

async fn futures_next(
    s: &mut futures::stream::BoxStream<'static, ClientEvent>,
) -> Option<ClientEvent> {
    use futures::StreamExt;
    s.next().await
}

/// Waits until the members own `want` partitions each; past
/// [`testkit::PATIENCE`] fails with what each member and the backend say.
async fn wait(
    log: &GroupLog,
    members: &[usize],
    want: &[usize],
    tasks: &[&simba_tokio::GroupTask],
    backend: &dyn Backend,
) {
    let start = Instant::now();
    loop {
        let counts = log.counts(members);
        if counts == want {
            return;
        }
        if start.elapsed() >= testkit::PATIENCE {
            let mut seen = String::new();
            for (i, t) in tasks.iter().enumerate() {
                let snap = t.snapshot().await;
                seen.push_str(&format!("\n member {i}: {snap:?}"));
            }
            let group = tasks
                .first()
                .map(|t| t.name().to_owned())
                .unwrap_or_default();
            match backend.inspect(Some(&group)).await {
                Ok(ins) => {
                    for l in ins.leases {
                        seen.push_str(&format!(
                            "\n lease {}: holder {:?} token {:?}",
                            l.name.as_str(),
                            l.holder,
                            l.token
                        ));
                    }
                    seen.push_str(&format!("\n sessions: {:?}", ins.sessions));
                }
                Err(e) => seen.push_str(&format!("\n inspect failed: {e}")),
            }
            panic!("partitions per member {counts:?}, want {want:?}; {seen}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn block_on<F: std::future::Future<Output = ()>>(f: F) {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

#[test]
fn sqlite_three_members_twelve_partitions_join_leave_crash() {
    let path = std::env::temp_dir().join(format!("simba-groups-real-{}.db", std::process::id()));
    let _ = std::fs::remove_file(&path);
    block_on(rebalance_after_a_crash(format!(
        "sqlite://{}",
        path.display()
    )));
}

#[test]
fn postgres_three_members_twelve_partitions_join_leave_crash() {
    let base = std::env::var("SIMBA_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
    let sep = if base.contains('?') { '&' } else { '?' };
    let prefix = format!("sg{}_", std::process::id());
    let url = format!("{base}{sep}simba_table_prefix={prefix}");
    block_on(rebalance_after_a_crash(url.clone()));
    // The suite leaves no tables behind.
    block_on(async {
        let config = simba_tokio::BackendConfig::parse(&url).unwrap();
        let b = simba_tokio::backends::postgres::PgBackend::connect(&config)
            .await
            .unwrap();
        b.drop_tables().await.unwrap();
    });
}

#[test]
fn redis_three_members_twelve_partitions_join_leave_crash() {
    let url = std::env::var("SIMBA_TEST_REDIS_URL")
        .unwrap_or_else(|_| "redis://127.0.0.1:6379/".to_owned());
    block_on(rebalance_after_a_crash(url));
}

/// etcd: a waiting acquire leaves a place in the partition's queue, and its
/// withdraw is seen by every member as a release (S10.2).
#[cfg(feature = "etcd")]
#[test]
fn etcd_three_members_twelve_partitions_join_leave_crash() {
    let base =
        std::env::var("SIMBA_TEST_ETCD_URL").unwrap_or_else(|_| "etcd://127.0.0.1:2379".to_owned());
    let base = base.trim_end_matches('/');
    block_on(rebalance_after_a_crash(format!(
        "{base}/simba-groups-real-{}",
        std::process::id()
    )));
}

/// ZooKeeper: as etcd, a waiting acquire leaves a znode whose withdraw the
/// other members' watches see as a release (S10.2).
#[cfg(feature = "zookeeper")]
#[test]
fn zookeeper_three_members_twelve_partitions_join_leave_crash() {
    let base = std::env::var("SIMBA_TEST_ZOOKEEPER_URL")
        .unwrap_or_else(|_| "zk://127.0.0.1:2181".to_owned());
    let base = base.trim_end_matches('/');
    block_on(rebalance_after_a_crash(format!(
        "{base}/simba-groups-real-{}",
        std::process::id()
    )));
}
