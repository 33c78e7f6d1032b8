//! Partitioned groups (S10.2, S10.3): 3 → 4 → 3 members and a crash, on one
//! backend. For each change, how many partitions moved against the minimum
//! (the joiner's share; the partitions of the member who went), and how long
//! each moved partition was unowned: from its old owner's `on_revoked` to its
//! new owner's `on_elected` (a join, a graceful leave), or from the cut to
//! `on_elected` (a crash, bounded by the lease).

use crate::measure::config;
use crate::report::{Figure, Row};
use crate::stats::{fmt_secs, Stat};
use crate::{Plan, Target};
use simba_client::testkit::Severable;
use simba_tokio::{GroupListener, GroupTask, RevokeReason, Simba, Term};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One partition event: when, which member, which partition, gained or not.
type Event = (Instant, usize, u32, bool);

/// Records every member's gains and losses.
#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<Event>>>);

impl Log {
    fn push(&self, e: Event) {
        if let Ok(mut l) = self.0.lock() {
            l.push(e);
        }
    }

    fn since(&self, t: Instant) -> Vec<Event> {
        self.0
            .lock()
            .map(|l| l.iter().filter(|e| e.0 >= t).copied().collect())
            .unwrap_or_default()
    }

    /// Partitions owned per member now.
    fn owned(&self, members: usize) -> Vec<usize> {
        let mut owner: std::collections::BTreeMap<u32, (usize, bool)> = Default::default();
        if let Ok(l) = self.0.lock() {
            for &(_, m, p, gained) in l.iter() {
                if gained {
                    owner.insert(p, (m, true));
                } else if owner.get(&p).is_some_and(|o| o.0 == m) {
                    owner.remove(&p);
                }
            }
        }
        let mut counts = vec![0; members];
        for (m, _) in owner.values() {
            if let Some(c) = counts.get_mut(*m) {
                *c += 1;
            }
        }
        counts
    }
}

struct Member(usize, Log);

impl GroupListener for Member {
    fn on_elected(&self, partition: u32, _term: &Term) {
        self.1.push((Instant::now(), self.0, partition, true));
    }
    fn on_revoked(&self, partition: u32, _term: &Term, _reason: RevokeReason) {
        self.1.push((Instant::now(), self.0, partition, false));
    }
}

/// Waits until the members in `live` hold all `partitions` with max − min
/// ≤ 1 and the others none.
async fn balanced(
    log: &Log,
    live: &[usize],
    partitions: u32,
    limit: Duration,
) -> Result<(), String> {
    let start = Instant::now();
    loop {
        let counts = log.owned(4);
        let mine: Vec<usize> = live.iter().map(|&i| counts[i]).collect();
        let others: usize = (0..4)
            .filter(|i| !live.contains(i))
            .map(|i| counts[i])
            .sum();
        let (min, max) = (
            mine.iter().min().copied().unwrap_or(0),
            mine.iter().max().copied().unwrap_or(0),
        );
        if others == 0 && max - min <= 1 && mine.iter().sum::<usize>() == partitions as usize {
            return Ok(());
        }
        if start.elapsed() > limit {
            return Err(format!("not balanced after {limit:?}: {counts:?}"));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Moves and unowned times since `t`: every gain since `t` is a move; its
/// unowned time runs from the partition's last loss before the gain, or
/// from `t` when there was none. A crashed member's losses (its own
/// deadline passing, after the cut) do not count: its partitions were
/// unowned for the others from the cut on.
fn moves(log: &Log, t: Instant, crashed: Option<usize>) -> (usize, Vec<Duration>) {
    let events = log.since(t);
    let mut lost_at: std::collections::BTreeMap<u32, Instant> = Default::default();
    let mut gaps = Vec::new();
    for &(at, m, p, gained) in &events {
        if Some(m) == crashed {
            continue;
        }
        if gained {
            let from = lost_at.remove(&p).unwrap_or(t);
            gaps.push(at.saturating_duration_since(from));
        } else {
            lost_at.insert(p, at);
        }
    }
    (gaps.len(), gaps)
}

fn row(
    t: &Target,
    partitions: u32,
    what: &str,
    min: usize,
    r: Result<(usize, Vec<Duration>), String>,
) -> Row {
    let name = t.kind.name();
    let what = format!("group of {partitions}: {what}, unowned time per moved partition");
    match r {
        Ok((moved, gaps)) => {
            let max = gaps.iter().max().copied().unwrap_or_default();
            let Some(stat) = Stat::of_durations(&gaps) else {
                let mut r = Row::new(name, &what, Figure::Value("nothing moved".into()));
                r.relative = format!("moved {moved} (minimum {min})");
                return r;
            };
            let mut r = Row::new(name, &what, Figure::Time(stat));
            r.relative = format!(
                "moved {moved} (minimum {min}); max {}",
                fmt_secs(max.as_secs_f64())
            );
            r
        }
        Err(why) => Row::new(name, &what, Figure::Missing(why)),
    }
}

async fn member(
    url: &str,
    plan: &Plan,
    group: &str,
    partitions: u32,
    i: usize,
    log: &Log,
) -> Result<Running, String> {
    let backend = crate::calls::wrap(crate::measure::connect(url).await?, i);
    let sev = Severable::new(backend);
    let simba = simba_tokio::builder_dyn(sev.clone())
        .config(config(plan)?)
        .build()
        .map_err(|e| e.to_string())?;
    let failures = Failures::default();
    let mut events = simba.events();
    let counts = failures.clone();
    tokio::spawn(async move {
        use futures::StreamExt as _;
        while let Some(e) = events.next().await {
            if let simba_tokio::ClientEvent::BackendFailed { command, error } = e {
                let mut why = error.to_string();
                why.truncate(60);
                if let Ok(mut c) = counts.0.lock() {
                    *c.entry(format!("{command}: {why}")).or_default() += 1;
                }
            }
        }
    });
    let task = simba
        .group(group, partitions)
        .listener(Member(i, log.clone()))
        .run_per_partition(|_, term| async move {
            term.revoked().await;
        })
        .await
        .map_err(|e| e.to_string())?;
    Ok((simba, task, sev, failures))
}

/// A member's failed backend calls, by command and error.
#[derive(Clone, Default)]
struct Failures(Arc<Mutex<std::collections::BTreeMap<String, usize>>>);

impl Failures {
    fn summary(&self) -> String {
        self.0
            .lock()
            .map(|c| {
                c.iter()
                    .take(3)
                    .map(|(k, n)| format!("{n}× {k}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default()
    }
}

/// The groups section for one backend: 3 members settle; a fourth joins;
/// it closes; then a member is cut off. With 8 and 1,000 partitions.
pub async fn rows(t: &Target, plan: &Plan) -> Vec<Row> {
    let mut out = Vec::new();
    for partitions in [8u32, 1000] {
        match scenario(t, plan, partitions).await {
            Ok(rows) => out.extend(rows),
            Err(why) => out.push(Row::new(
                t.kind.name(),
                &format!("group of {partitions}"),
                Figure::Missing(why),
            )),
        }
    }
    out
}

/// What each member's engine says of the group, for a run that did not
/// balance: its members, target and owned partitions, the first
/// partitions it wants but does not own (with its entry's state of each),
/// and the partitions no member owns nor targets.
async fn views(members: &[&Running], group: &str, partitions: u32) -> String {
    let mut out = Vec::new();
    let mut targeted = std::collections::BTreeSet::new();
    let mut owned = std::collections::BTreeSet::new();
    let mut states = Vec::new();
    for (i, (simba, task, _, failures)) in members.iter().enumerate() {
        let entries: std::collections::BTreeMap<String, String> = match simba.snapshot().await {
            Ok(s) => s
                .entries
                .into_iter()
                .map(|e| (e.name.to_string(), format!("{:?}", e.status)))
                .collect(),
            Err(_) => Default::default(),
        };
        let state = move |p: u32| {
            entries
                .get(&format!("{group}:p{p}"))
                .cloned()
                .unwrap_or_else(|| "none".into())
        };
        match task.snapshot().await {
            Ok(Some(s)) => {
                targeted.extend(s.target.iter().copied());
                owned.extend(s.owned.iter().copied());
                let wanted: Vec<String> = s
                    .target
                    .iter()
                    .filter(|p| !s.owned.contains(p))
                    .take(4)
                    .map(|&p| format!("{p} {}", state(p)))
                    .collect();
                out.push(format!(
                    "m{i}: {} members, target {}, owned {}, wants [{}], failed [{}]",
                    s.members.len(),
                    s.target.len(),
                    s.owned.len(),
                    wanted.join(", "),
                    failures.summary()
                ));
            }
            Ok(None) => out.push(format!("m{i}: left")),
            Err(e) => out.push(format!("m{i}: {e}")),
        }
        states.push(state);
    }
    let unowned: Vec<u32> = (0..partitions).filter(|p| !owned.contains(p)).collect();
    let untargeted = unowned.iter().filter(|p| !targeted.contains(p)).count();
    let shown: Vec<String> = unowned
        .iter()
        .take(4)
        .map(|&p| {
            let at: Vec<String> = states.iter().map(|st| st(p)).collect();
            format!("{p} [{}]", at.join(" "))
        })
        .collect();
    out.push(format!(
        "{} unowned ({}{}), {untargeted} of them in no target",
        unowned.len(),
        shown.join(", "),
        if unowned.len() > 4 { " …" } else { "" }
    ));
    out.join("; ")
}

/// [`balanced`], and on failure what the members' engines say.
async fn settle(
    log: &Log,
    live: &[usize],
    partitions: u32,
    limit: Duration,
    members: &[&Running],
    group: &str,
) -> Result<(), String> {
    match balanced(log, live, partitions, limit).await {
        Ok(()) => Ok(()),
        Err(why) => Err(format!(
            "{why} ({})",
            views(members, group, partitions).await
        )),
    }
}

/// A member: its client, its group and the switch that cuts it off.
type Running = (Simba, GroupTask, Arc<Severable>, Failures);

async fn scenario(t: &Target, plan: &Plan, partitions: u32) -> Result<Vec<Row>, String> {
    let group = format!("bench.group.{partitions}.{}", crate::tag());
    let log = Log::default();
    let mut members = Vec::new();
    let mut result = Ok(Vec::new());
    for i in 0..3 {
        match member(&t.url, plan, &group, partitions, i, &log).await {
            Ok(m) => members.push(m),
            Err(e) => {
                result = Err(e);
                break;
            }
        }
    }
    if result.is_ok() {
        result = changes(t, plan, partitions, &group, &log, &members).await;
    }
    // Closed whatever happened: members left running would load the
    // backends and the machine under the runs that follow.
    for (simba, task, _, _) in members {
        task.stop().await;
        simba.close().await;
    }
    result
}

/// The three changes, once `members` (three of them) are running.
async fn changes(
    t: &Target,
    plan: &Plan,
    partitions: u32,
    group: &str,
    log: &Log,
    members: &[Running],
) -> Result<Vec<Row>, String> {
    let limit = plan.lease * 10 + Duration::from_secs(30);
    let three: Vec<&Running> = members.iter().collect();
    settle(log, &[0, 1, 2], partitions, limit, &three, group).await?;
    let mut rows = Vec::new();
    // Join.
    let t0 = Instant::now();
    let joiner = member(&t.url, plan, group, partitions, 3, log).await?;
    let mut four = three.clone();
    four.push(&joiner);
    let r = settle(log, &[0, 1, 2, 3], partitions, limit, &four, group)
        .await
        .map(|()| moves(log, t0, None));
    let min = log.owned(4)[3];
    rows.push(row(t, partitions, "join 3 → 4", min, r));
    // Graceful leave of the joiner.
    let min = log.owned(4)[3];
    let t0 = Instant::now();
    joiner.1.stop().await;
    let r = settle(log, &[0, 1, 2], partitions, limit, &three, group)
        .await
        .map(|()| moves(log, t0, None));
    rows.push(row(t, partitions, "graceful leave 4 → 3", min, r));
    joiner.0.close().await;
    // Crash of member 2: its backend is cut, nothing is released.
    let min = log.owned(4)[2];
    let t0 = Instant::now();
    members[2].2.cut();
    let r = settle(log, &[0, 1], partitions, limit, &three[..2], group)
        .await
        .map(|()| moves(log, t0, Some(2)));
    rows.push(row(
        t,
        partitions,
        &format!("crash 3 → 2 (lease {})", fmt_secs(plan.lease.as_secs_f64())),
        min,
        r,
    ));
    Ok(rows)
}
