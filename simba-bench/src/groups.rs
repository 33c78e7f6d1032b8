//! Partitioned groups (S10.2, S10.3): 3 → 4 → 3 members and a crash, on one
//! backend. For each change, how many partitions moved against the minimum
//! (the joiner's share; the partitions of the member who went), and how long
//! each moved partition was unowned: from its old owner's `on_revoked` to its
//! new owner's `on_elected` (a join, a graceful leave), or from the cut to
//! `on_elected` (a crash, bounded by the lease). For a join and a leave
//! also from the old owner's release (where S10.3 counts a graceful move
//! from), against the backend's own calls measured on the same server: a
//! release, a renewal and an acquire; and the path of each moved partition
//! from its release: the round trips on it (the release, then the new
//! owner's acquires of the partition up to the one that won it) and the
//! time on it that no call was running ([`crate::calls::Path`]). And
//! how soon a lone first member owns its first and all partitions (S10.2).

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
struct Log {
    events: Arc<Mutex<Vec<Event>>>,
    /// Each owned partition's owner, kept as events come: `balanced` reads
    /// it every 5 ms, and replaying every event under the lock instead
    /// took the members' CPU and held up their callbacks.
    owners: Arc<Mutex<std::collections::BTreeMap<u32, usize>>>,
    /// When the members sent their releases.
    releases: crate::calls::Releases,
    /// The group's name.
    group: String,
}

impl Log {
    fn push(&self, e: Event) {
        // The owners change under the events' lock, in the events' order.
        let Ok(mut l) = self.events.lock() else {
            return;
        };
        l.push(e);
        let (_, m, p, gained) = e;
        if let Ok(mut owners) = self.owners.lock() {
            if gained {
                owners.insert(p, m);
            } else if owners.get(&p) == Some(&m) {
                owners.remove(&p);
            }
        }
    }

    /// The first gain at or after `t`, if any.
    fn first_gain(&self, t: Instant) -> Option<Instant> {
        self.since(t).iter().find(|e| e.3).map(|e| e.0)
    }

    fn since(&self, t: Instant) -> Vec<Event> {
        self.events
            .lock()
            .map(|l| l.iter().filter(|e| e.0 >= t).copied().collect())
            .unwrap_or_default()
    }

    /// Partitions owned per member now.
    fn owned(&self, members: usize) -> Vec<usize> {
        let mut counts = vec![0; members];
        if let Ok(owners) = self.owners.lock() {
            for m in owners.values() {
                if let Some(c) = counts.get_mut(*m) {
                    *c += 1;
                }
            }
        }
        counts
    }
}

struct Member(usize, Log);

impl GroupListener for Member {
    fn on_elected(&self, partition: u32, term: &Term) {
        self.1.push((Instant::now(), self.0, partition, true));
        crate::calls::event(self.0, "elected", term.name());
    }
    fn on_revoked(&self, partition: u32, term: &Term, _reason: RevokeReason) {
        self.1.push((Instant::now(), self.0, partition, false));
        crate::calls::event(self.0, "revoked", term.name());
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
fn moves(log: &Log, t: Instant, crashed: Option<usize>) -> Moves {
    let events = log.since(t);
    let mut lost_at: std::collections::BTreeMap<u32, Instant> = Default::default();
    let mut out = Moves::default();
    for &(at, m, p, gained) in &events {
        if Some(m) == crashed {
            continue;
        }
        if gained {
            let from = lost_at.remove(&p).unwrap_or(t);
            out.gaps.push(at.saturating_duration_since(from));
            let name = format!("{}:p{p}", log.group);
            if let Some(r) = log.releases.last(&name).filter(|r| *r >= t && *r <= at) {
                out.from_release.push(at.saturating_duration_since(r));
                out.paths.extend(log.releases.path(&name, m, at));
            }
        } else {
            lost_at.insert(p, at);
        }
    }
    out
}

/// What moved in one membership change.
#[derive(Default)]
struct Moves {
    /// Per moved partition: from its old owner's `on_revoked` (or the
    /// change) to its new owner's `on_elected`.
    gaps: Vec<Duration>,
    /// Per moved partition that was released: from the release being sent
    /// to the new owner's `on_elected`.
    from_release: Vec<Duration>,
    /// Per moved partition that was released: the backend calls on its
    /// path, from that release to the gain.
    paths: Vec<crate::calls::Path>,
}

/// Medians of the backend calls a graceful move waits for, on a session
/// of its own: a release, a renewal, an acquire (and a session opening and
/// a group join, which a first member waits for).
#[derive(Clone, Copy, Debug)]
struct Calls {
    open: Duration,
    join: Duration,
    renew: Duration,
    acquire: Duration,
    release: Duration,
}

impl Calls {
    /// S10.3's three round trips: release, renewal, acquire.
    fn move_floor(&self) -> Duration {
        self.release + self.renew + self.acquire
    }

    /// A first member's path: open, join, renewal, acquire.
    fn first_floor(&self) -> Duration {
        self.open + self.join + self.renew + self.acquire
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

/// Measures [`Calls`] with 20 rounds on a session of its own.
async fn calls(url: &str, group: &str) -> Result<Calls, String> {
    use simba_core::LeaseName;
    let b = crate::measure::connect(url).await?;
    let lease = Duration::from_secs(10);
    let name = LeaseName::new(format!("{group}.probe")).map_err(|e| e.to_string())?;
    let probe_group = LeaseName::new(format!("{group}.probe.group")).map_err(|e| e.to_string())?;
    let (mut open, mut join, mut renew, mut acquire, mut release) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..5 {
        let t = Instant::now();
        let g = b.open_session(lease).await.map_err(|e| e.to_string())?;
        open.push(t.elapsed());
        let _ = b.close_session(g.session).await;
    }
    let session = b
        .open_session(lease)
        .await
        .map_err(|e| e.to_string())?
        .session;
    let mut r = Ok(());
    for _ in 0..20 {
        let t = Instant::now();
        let token = match b.acquire(session, &name).await {
            Ok(simba_core::AcquireOutcome::Won { token, .. }) => token,
            other => {
                r = Err(format!("probe acquire: {other:?}"));
                break;
            }
        };
        acquire.push(t.elapsed());
        let t = Instant::now();
        if let Err(e) = b.release(session, &name, token).await {
            r = Err(format!("probe release: {e}"));
            break;
        }
        release.push(t.elapsed());
        let t = Instant::now();
        if let Err(e) = b.renew(session).await {
            r = Err(format!("probe renewal: {e:?}"));
            break;
        }
        renew.push(t.elapsed());
        let t = Instant::now();
        if let Err(e) = b.join_group(session, &probe_group).await {
            r = Err(format!("probe join: {e}"));
            break;
        }
        join.push(t.elapsed());
        let _ = b.leave_group(session, &probe_group).await;
    }
    let _ = b.close_session(session).await;
    r?;
    Ok(Calls {
        open: median(open),
        join: median(join),
        renew: median(renew),
        acquire: median(acquire),
        release: median(release),
    })
}

fn row(
    t: &Target,
    partitions: u32,
    what: &str,
    min: usize,
    r: Result<Moves, String>,
    calls: Option<&Calls>,
) -> Row {
    let name = t.kind.name();
    let what = format!("group of {partitions}: {what}, unowned time per moved partition");
    match r {
        Ok(m) => {
            let moved = m.gaps.len();
            let max = m.gaps.iter().max().copied().unwrap_or_default();
            let Some(stat) = Stat::of_durations(&m.gaps) else {
                let mut r = Row::new(name, &what, Figure::Value("nothing moved".into()));
                r.relative = format!("moved {moved} (minimum {min})");
                return r;
            };
            let mut r = Row::new(name, &what, Figure::Time(stat));
            r.relative = format!(
                "moved {moved} (minimum {min}); max {}",
                fmt_secs(max.as_secs_f64())
            );
            if let (Some(c), Some(from)) = (calls, Stat::of_durations(&m.from_release)) {
                let floor = c.move_floor().as_secs_f64();
                r.relative.push_str(&format!(
                    "; from the old owner's release p50 {} ({:.2}×), max {} ({:.2}×) the medians of a release, a renewal and an acquire ({}, n={})",
                    fmt_secs(from.median),
                    from.median / floor,
                    fmt_secs(from.p99),
                    from.p99 / floor,
                    fmt_secs(floor),
                    from.n,
                ));
            }
            if let Some(p) = paths(&m.paths) {
                r.relative.push_str(&p);
            }
            r
        }
        Err(why) => Row::new(name, &what, Figure::Missing(why)),
    }
}

/// The round trips on the moved partitions' paths (S10.3: at most three
/// from the old owner's release, counted in calls), and the time on those
/// paths that no call was running.
fn paths(paths: &[crate::calls::Path]) -> Option<String> {
    let mut trips: Vec<usize> = paths.iter().map(|p| p.round_trips).collect();
    trips.sort_unstable();
    let p50 = *trips.get(trips.len() / 2)?;
    let max = *trips.last()?;
    let within = trips.iter().filter(|&&n| n <= 3).count();
    let idle: Vec<Duration> = paths.iter().map(|p| p.idle).collect();
    let idle_max = idle.iter().max().copied().unwrap_or_default();
    let idle = Stat::of_durations(&idle)?;
    Some(format!(
        "; round trips from the release (it, then the new owner's acquires of the partition up to the one that won it) p50 {p50}, max {max}, within 3 for {within} of {}; time on that path with no call running p50 {}, max {}",
        trips.len(),
        fmt_secs(idle.median),
        fmt_secs(idle_max.as_secs_f64()),
    ))
}

/// The row of a lone first member: from `run_per_partition` to its first
/// partition and to all of them.
fn first_row(
    t: &Target,
    partitions: u32,
    first: Result<(Duration, Duration), String>,
    calls: Option<&Calls>,
) -> Row {
    let name = t.kind.name();
    let what = format!(
        "group of {partitions}: a lone first member, run_per_partition → its first on_elected"
    );
    match first {
        Ok((first, all)) => {
            let mut r = Row::new(name, &what, Figure::Value(fmt_secs(first.as_secs_f64())));
            r.relative = format!(
                "all {partitions} owned after {}",
                fmt_secs(all.as_secs_f64())
            );
            if let Some(c) = calls {
                let floor = c.first_floor().as_secs_f64();
                r.relative.push_str(&format!(
                    "; the first {:.2}× the medians of a session opening, a join, a renewal and an acquire ({})",
                    first.as_secs_f64() / floor,
                    fmt_secs(floor)
                ));
            }
            r.goal = "S10.2: the first target one round trip after the join".into();
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
) -> Result<(Running, Instant), String> {
    let backend = crate::calls::wrap(crate::measure::connect(url).await?, i, log.releases.clone());
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
            if let simba_tokio::ClientEvent::GroupChanged {
                group,
                members,
                target,
            } = &e
            {
                crate::calls::target(i, group, *members, target);
            }
            if let simba_tokio::ClientEvent::BackendFailed { command, error } = e {
                let mut why = error.to_string();
                why.truncate(60);
                if let Ok(mut c) = counts.0.lock() {
                    *c.entry(format!("{command}: {why}")).or_default() += 1;
                }
            }
        }
    });
    let started = Instant::now();
    let task = simba
        .group(group, partitions)
        .listener(Member(i, log.clone()))
        .run_per_partition(|_, term| async move {
            term.revoked().await;
        })
        .await
        .map_err(|e| e.to_string())?;
    Ok(((simba, task, sev, failures), started))
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
    let probe = format!("bench.group.calls.{}", crate::tag());
    let calls = match calls(&t.url, &probe).await {
        Ok(c) => {
            out.push(Row::new(
                t.kind.name(),
                "groups: the backend's own calls, medians of 20 (5 openings) on a session of its own",
                Figure::Value(format!(
                    "release {}, renewal {}, acquire {}, session opening {}, join {}",
                    fmt_secs(c.release.as_secs_f64()),
                    fmt_secs(c.renew.as_secs_f64()),
                    fmt_secs(c.acquire.as_secs_f64()),
                    fmt_secs(c.open.as_secs_f64()),
                    fmt_secs(c.join.as_secs_f64()),
                )),
            ));
            Some(c)
        }
        Err(why) => {
            out.push(Row::new(
                t.kind.name(),
                "groups: the backend's own calls",
                Figure::Missing(why),
            ));
            None
        }
    };
    for partitions in [8u32, 1000] {
        match scenario(t, plan, partitions, calls.as_ref()).await {
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
type Running = (
    Simba,
    GroupTask,
    Arc<simba_backends::Layered<Severable>>,
    Failures,
);

async fn scenario(
    t: &Target,
    plan: &Plan,
    partitions: u32,
    calls: Option<&Calls>,
) -> Result<Vec<Row>, String> {
    let group = format!("bench.group.{partitions}.{}", crate::tag());
    let log = Log {
        group: group.clone(),
        ..Log::default()
    };
    let limit = plan.lease * 10 + Duration::from_secs(30);
    let mut members = Vec::new();
    let mut result = Ok(Vec::new());
    for i in 0..3 {
        match member(&t.url, plan, &group, partitions, i, &log).await {
            Ok((m, started)) => {
                members.push(m);
                if i == 0 {
                    // A lone first member: how soon it owns its partitions.
                    let first = match settle(&log, &[0], partitions, limit, &[], &group).await {
                        Ok(()) => {
                            let all = started.elapsed();
                            log.first_gain(started)
                                .map(|f| (f.saturating_duration_since(started), all))
                                .ok_or_else(|| "no partition gained".to_string())
                        }
                        Err(why) => Err(why),
                    };
                    let row = first_row(t, partitions, first, calls);
                    if let Ok(rows) = result.as_mut() {
                        rows.push(row);
                    }
                }
            }
            Err(e) => {
                result = Err(e);
                break;
            }
        }
    }
    if let Ok(first) = result {
        result = changes(t, plan, partitions, &group, &log, &members, calls)
            .await
            .map(|rows| first.into_iter().chain(rows).collect());
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
    calls: Option<&Calls>,
) -> Result<Vec<Row>, String> {
    let limit = plan.lease * 10 + Duration::from_secs(30);
    let three: Vec<&Running> = members.iter().collect();
    settle(log, &[0, 1, 2], partitions, limit, &three, group).await?;
    let mut rows = Vec::new();
    // Join.
    let t0 = Instant::now();
    let (joiner, _) = member(&t.url, plan, group, partitions, 3, log).await?;
    let mut four = three.clone();
    four.push(&joiner);
    let r = settle(log, &[0, 1, 2, 3], partitions, limit, &four, group)
        .await
        .map(|()| moves(log, t0, None));
    let min = log.owned(4)[3];
    let mut joined = row(t, partitions, "join 3 → 4", min, r, calls);
    // S10.5: how soon the joiner works, from its creation (its connection,
    // session and join included): the members who give it partitions learn
    // of the join at their next renewal, or at once where it is announced.
    let first = log
        .since(t0)
        .iter()
        .find(|e| e.1 == 3 && e.3)
        .map(|e| e.0.saturating_duration_since(t0));
    if let Some(first) = first {
        joined.relative.push_str(&format!(
            "; the joiner's first partition {} after its creation",
            fmt_secs(first.as_secs_f64())
        ));
    }
    rows.push(joined);
    // Graceful leave of the joiner.
    let min = log.owned(4)[3];
    let t0 = Instant::now();
    joiner.1.stop().await;
    let r = settle(log, &[0, 1, 2], partitions, limit, &three, group)
        .await
        .map(|()| moves(log, t0, None));
    rows.push(row(t, partitions, "graceful leave 4 → 3", min, r, calls));
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
        None,
    ));
    Ok(rows)
}
