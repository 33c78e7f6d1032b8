//! The client campaign: the real [`simba_client::Simba`] on three nodes,
//! run by [`simba_sim`] on tokio's paused clock under the faults it draws,
//! with workloads drawn per seed (swarm testing, as the engine campaign
//! does): elections whose leader tasks write a fenced register and may
//! return, fail or panic on their own; locks writing a fenced map;
//! a schedule; a partitioned group; and voluntary moves (`step_down`,
//! `stop`, a member leaving) at drawn times.
//!
//! Its checkers, besides `simba-sim`'s own (fenced register and map
//! histories, tokens never going backwards):
//!
//! | checker | rule | what it sees |
//! |---|---|---|
//! | `handover order (S6.1, S10.3)` | S6.1, S10.3 | a task still running after a voluntary revoke, within its hand-over time, once a later term of its lease has started a task |
//! | `revocation delivered (S3.4, S6.3)` | S3.4, S6.1, S6.3 | a task whose term is not revoked although its client has reported the revocation (`ClientEvent::Revoked`) |
//! | `slot at most once (S11.1)` | S11.1 | a schedule slot run twice |
//! | `term validity (S3.3)` | S3.3 | a term still valid while a later term of its lease has started |
//!
//! Each is shown to fire by a [`ClientMutant`] that breaks its rule
//! (`simulation/tests/client_campaign.rs`).
//!
//! ```no_run
//! use simulation::client::{hunt, Broken};
//! use simba_client::ClientMutant;
//! let caught = hunt(Some(Broken::Client(ClientMutant::SlotClaimedAfterRun)), 0, 100, 1);
//! assert!(matches!(caught, Ok(Some(_))));
//! ```

use check::{Checks, Seen};
use futures::StreamExt;
use simba_client::{
    CancelSignal, ClientEvent, ClientMutant, LeaderTask, MissedRuns, Schedule, ScheduledRun, Simba,
    SimbaConfig, TaskExitPolicy, Term,
};
use simba_core::Mutant;
use simba_sim::{Faults, Fence, Node, Sim, SimError, Summary};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, Once};
use std::time::Duration;

mod check;

/// Nodes per run.
pub const NODES: usize = 3;
/// Simulated time per run.
pub const DURATION: Duration = Duration::from_secs(30);
/// The lease duration of the campaign's clients (short, so that terms
/// move often within a run).
pub const LEASE: Duration = Duration::from_secs(3);
/// How often a leader task takes a step (a check and a fenced write).
const STEP: Duration = Duration::from_millis(50);
/// The message of the leader tasks' deliberate panics (kept off stderr).
const PANIC: &str = "simulated leader task panic";

/// A deliberately broken engine or client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Broken {
    /// A broken engine (`simba-core`'s `mutants` feature).
    Core(Mutant),
    /// A broken client (`simba-client`'s `mutants` feature).
    Client(ClientMutant),
}

impl Broken {
    /// The mutant of that name, engine or client.
    pub fn from_name(name: &str) -> Option<Broken> {
        Mutant::from_name(name)
            .map(Broken::Core)
            .or_else(|| ClientMutant::from_name(name).map(Broken::Client))
    }
}

impl fmt::Display for Broken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Broken::Core(m) => f.write_str(m.name()),
            Broken::Client(m) => f.write_str(m.name()),
        }
    }
}

/// What one seed runs: its swarm of workloads, the same on every node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Workloads {
    /// Election names with a leader task (0–2).
    pub elections: u8,
    /// Leader tasks may return, fail or panic on their own (S6.5).
    pub exits: bool,
    /// An election whose leader task is a blocking one
    /// (`run_blocking_while_leader`), with this exit policy (S6.5).
    pub blocking: Option<TaskExitPolicy>,
    /// A lock taken and released in turn.
    pub locks: bool,
    /// A schedule (every second), with its missed-runs policy.
    pub schedule: Option<MissedRuns>,
    /// A group of this many partitions, each running a task.
    pub group: Option<u32>,
    /// How long a task goes on after a voluntary revoke (within its
    /// hand-over time, S6.1).
    pub finish: Duration,
    /// The mean time between a node's voluntary moves of one workload.
    pub moves: Duration,
}

impl fmt::Display for Workloads {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut on = Vec::new();
        if self.elections > 0 {
            on.push(format!("elections {}", self.elections));
        }
        if self.exits {
            on.push("task exits".to_owned());
        }
        if let Some(policy) = self.blocking {
            on.push(format!("blocking election ({policy:?})"));
        }
        if self.locks {
            on.push("locks".to_owned());
        }
        if let Some(m) = self.schedule {
            on.push(format!("schedule ({m:?})"));
        }
        if let Some(p) = self.group {
            on.push(format!("group of {p}"));
        }
        write!(
            f,
            "{}; finish {:?}; moves every ~{:?}",
            on.join(", "),
            self.finish,
            self.moves
        )
    }
}

/// Draws seed `seed`'s workloads (at least one of elections, schedule and
/// group is on).
pub fn draw(seed: u64) -> Workloads {
    let mut rng = fastrand::Rng::with_seed(seed ^ 0x5eed_c11e_47ca_3a16);
    let mut w = Workloads {
        elections: if rng.f64() < 0.7 { rng.u8(1..=2) } else { 0 },
        exits: rng.f64() < 0.35,
        locks: rng.f64() < 0.4,
        schedule: (rng.f64() < 0.5).then(|| {
            if rng.bool() {
                MissedRuns::RunOnce
            } else {
                MissedRuns::Skip
            }
        }),
        group: (rng.f64() < 0.4).then(|| rng.u32(2..=6)),
        finish: Duration::from_millis(rng.u64(2..=12) * 50),
        moves: Duration::from_millis(rng.u64(2..=8) * 1000),
        blocking: None,
    };
    if w.elections == 0 && w.schedule.is_none() && w.group.is_none() {
        match rng.u8(0..3) {
            0 => w.elections = 1,
            1 => w.schedule = Some(MissedRuns::RunOnce),
            _ => w.group = Some(4),
        }
    }
    // Drawn last, so the rest of seed S is what it was before blocking
    // tasks joined the swarm.
    if rng.f64() < 0.3 {
        w.blocking = Some(if rng.bool() {
            TaskExitPolicy::GiveUpTerm
        } else {
            TaskExitPolicy::KeepTerm
        });
    }
    w
}

/// Every workload on: the speed figure's scenario.
pub fn everything() -> Workloads {
    Workloads {
        elections: 2,
        exits: true,
        blocking: Some(TaskExitPolicy::GiveUpTerm),
        locks: true,
        schedule: Some(MissedRuns::RunOnce),
        group: Some(4),
        finish: Duration::from_millis(300),
        moves: Duration::from_secs(4),
    }
}

/// How one leader task ends on its own, if it does (S6.5).
#[derive(Clone, Copy, Debug)]
enum Exit {
    Return,
    Fail,
    Panic,
}

fn draw_exit(rng: &mut fastrand::Rng, exits: bool) -> Option<(u32, Exit)> {
    if !exits || rng.f64() >= 0.3 {
        return None;
    }
    let how = match rng.u8(0..3) {
        0 => Exit::Return,
        1 => Exit::Fail,
        _ => Exit::Panic,
    };
    Some((rng.u32(5..=60), how))
}

/// One term's leader task (an election's or a partition's): fenced writes
/// every step while the term lasts; after a voluntary revoke, a few more
/// steps within the hand-over time.
async fn leader_task(
    node: Node,
    checks: Arc<Checks>,
    term: Term,
    exit: Option<(u32, Exit)>,
    finish: Duration,
) -> Result<(), String> {
    let (name, token) = (term.name().to_owned(), term.token());
    checks.observe(&node, Seen::Started { name: &name, token });
    node.log(format!("task of {name} token {token} starts"));
    let register = node.register(&name);
    let mut steps = 0u32;
    let reason = loop {
        tokio::select! {
            biased;
            r = term.revoked() => break r,
            () = tokio::time::sleep(STEP) => {}
        }
        checks.observe(&node, Seen::Step { term: &term });
        if term.is_valid() {
            let _ = register.write(&Fence::from(&term), format!("{}:{steps}", node.id()));
        }
        steps += 1;
        if let Some((after, how)) = exit {
            if steps == after {
                node.log(format!(
                    "task of {name} token {token} ends on its own: {how:?}"
                ));
                match how {
                    Exit::Return => return Ok(()),
                    Exit::Fail => return Err("simulated task failure".to_owned()),
                    #[allow(clippy::panic)]
                    Exit::Panic => panic!("{PANIC}"),
                }
            }
        }
    };
    if reason.is_voluntary() {
        let mut left = finish;
        while left > Duration::ZERO {
            tokio::time::sleep(STEP).await;
            left = left.saturating_sub(STEP);
            checks.observe(&node, Seen::FinishingStep { term: &term });
        }
    }
    node.log(format!("task of {name} token {token} returns ({reason})"));
    Ok(())
}

/// One term's blocking leader task (`run_blocking_while_leader`): a few
/// steps of CPU-bound work, each a fenced write while the term is valid,
/// then it returns, fails or panics (S6.5). The simulation runs blocking
/// work inline on its one thread (`simba-sim`'s runtime), so the task
/// cannot wait (no `CancelSignal::sleep`, which would block real time): it
/// checks its signal between steps, as CPU-bound work does.
fn blocking_task(
    node: &Node,
    checks: &Checks,
    term: &Term,
    cancel: &CancelSignal,
    steps: u32,
    how: Exit,
) -> Result<(), String> {
    let (name, token) = (term.name().to_owned(), term.token());
    checks.observe(node, Seen::Started { name: &name, token });
    node.log(format!(
        "blocking task of {name} token {token} starts: {steps} steps, then {how:?}"
    ));
    let register = node.register(&name);
    for step in 0..steps {
        if cancel.is_cancelled() {
            node.log(format!("blocking task of {name} token {token} cancelled"));
            return Ok(());
        }
        checks.observe(node, Seen::Step { term });
        if term.is_valid() {
            let _ = register.write(&Fence::from(term), format!("{}:b{step}", node.id()));
        }
    }
    match how {
        Exit::Return => Ok(()),
        Exit::Fail => Err("simulated blocking task failure".to_owned()),
        #[allow(clippy::panic)]
        Exit::Panic => panic!("{PANIC}"),
    }
}

fn node_rng(node: &Node, stream: u64) -> fastrand::Rng {
    let mix = node
        .seed()
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .wrapping_add((node.id() as u64) << 40)
        .wrapping_add(node.incarnation() << 20)
        .wrapping_add(stream);
    fastrand::Rng::with_seed(mix)
}

/// The election, schedule or group a node started, or `None` after logging
/// why `what` did not start.
fn started<T, E: fmt::Display>(node: &Node, result: Result<T, E>, what: &str) -> Option<T> {
    match result {
        Ok(t) => Some(t),
        Err(e) => {
            node.log(format!("{what} did not start: {e}"));
            None
        }
    }
}

fn pause_for(rng: &mut fastrand::Rng, mean: Duration) -> Duration {
    let ms = u64::try_from(mean.as_millis()).unwrap_or(u64::MAX).max(2);
    Duration::from_millis(rng.u64(ms / 2..=ms * 3 / 2))
}

/// One node of the campaign: the seed's workloads on its real client.
pub async fn node_main(node: Node) -> Result<(), String> {
    let w = draw(node.seed());
    node_run(node, w).await
}

/// One node running workloads `w` on its real client.
pub async fn node_run(node: Node, w: Workloads) -> Result<(), String> {
    let w = Arc::new(w);
    let checks = node.shared::<Checks>();
    let simba = node.simba().clone();
    {
        let mut events = simba.events();
        let (checks, n) = (checks.clone(), node.clone());
        node.spawn(async move {
            while let Some(e) = events.next().await {
                if let ClientEvent::Revoked { name, token, .. } = e {
                    checks.observe(&n, Seen::RevocationReported { name: &name, token });
                }
            }
        });
    }
    for i in 0..w.elections {
        node.spawn(election(
            node.clone(),
            simba.clone(),
            checks.clone(),
            w.clone(),
            format!("job{i}"),
            u64::from(i),
        ));
    }
    if let Some(policy) = w.blocking {
        node.spawn(blocking_election(
            node.clone(),
            simba.clone(),
            checks.clone(),
            w.clone(),
            policy,
        ));
    }
    if w.locks {
        node.spawn(locks(
            node.clone(),
            simba.clone(),
            checks.clone(),
            w.clone(),
        ));
    }
    if let Some(missed) = w.schedule {
        node.spawn(schedule(
            node.clone(),
            simba.clone(),
            checks.clone(),
            w.clone(),
            missed,
        ));
    }
    if let Some(partitions) = w.group {
        node.spawn(group(
            node.clone(),
            simba.clone(),
            checks.clone(),
            w.clone(),
            partitions,
        ));
    }
    std::future::pending::<()>().await;
    Ok(())
}

async fn election(
    node: Node,
    simba: Simba,
    checks: Arc<Checks>,
    w: Arc<Workloads>,
    name: String,
    stream: u64,
) {
    let mut rng = node_rng(&node, 10 + stream);
    loop {
        let mut task_rng = node_rng(&node, 20 + stream);
        let (n, c, wl) = (node.clone(), checks.clone(), w.clone());
        let task = simba
            .run_while_leader(&name, move |term| {
                let exit = draw_exit(&mut task_rng, wl.exits);
                leader_task(n.clone(), c.clone(), term, exit, wl.finish)
            })
            .await;
        let Some(task) = started(&node, task, &format!("election {name}")) else {
            return;
        };
        moves_until_stopped(&node, &mut rng, w.moves, &name, &task).await;
    }
}

/// An election's voluntary moves until it stops its task: after a pause
/// (mean `moves`), a stop (one time in four, then a pause) or a step-down
/// for up to 1.5 s.
async fn moves_until_stopped(
    node: &Node,
    rng: &mut fastrand::Rng,
    moves: Duration,
    name: &str,
    task: &LeaderTask,
) {
    loop {
        tokio::time::sleep(pause_for(rng, moves)).await;
        if rng.u8(0..4) == 0 {
            node.log(format!("stops election {name}"));
            task.stop().await;
            tokio::time::sleep(pause_for(rng, Duration::from_secs(1))).await;
            return;
        }
        let cooldown = Duration::from_millis(rng.u64(0..=1500));
        if task.election().is_leader() {
            node.log(format!("steps down from {name} for {cooldown:?}"));
        }
        let _ = task.step_down(cooldown).await;
    }
}

/// An election with a blocking leader task, under `policy` (S6.5), and
/// the same voluntary moves as [`election`]'s.
async fn blocking_election(
    node: Node,
    simba: Simba,
    checks: Arc<Checks>,
    w: Arc<Workloads>,
    policy: TaskExitPolicy,
) {
    let name = "blocking";
    let mut rng = node_rng(&node, 60);
    loop {
        let task_rng = Mutex::new(node_rng(&node, 61));
        let (n, c) = (node.clone(), checks.clone());
        let task = simba
            .election(name)
            .on_task_exit(policy)
            .run_blocking_while_leader(move |term, cancel| {
                let (steps, how) = {
                    let mut r = task_rng.lock().unwrap_or_else(|p| p.into_inner());
                    let how = match r.u8(0..3) {
                        0 => Exit::Return,
                        1 => Exit::Fail,
                        _ => Exit::Panic,
                    };
                    (r.u32(1..=5), how)
                };
                blocking_task(&n, &c, &term, &cancel, steps, how)
            })
            .await;
        let Some(task) = started(&node, task, &format!("election {name}")) else {
            return;
        };
        moves_until_stopped(&node, &mut rng, w.moves, name, &task).await;
    }
}

async fn locks(node: Node, simba: Simba, checks: Arc<Checks>, w: Arc<Workloads>) {
    let mut rng = node_rng(&node, 30);
    let map = node.map("locked");
    loop {
        tokio::time::sleep(pause_for(&mut rng, Duration::from_secs(1))).await;
        let Ok(held) = simba.lock("lock").acquire_timeout(LEASE).await else {
            continue;
        };
        let term = held.term().clone();
        checks.observe(
            &node,
            Seen::Started {
                name: term.name(),
                token: term.token(),
            },
        );
        let hold = pause_for(&mut rng, w.moves / 4);
        let mut left = hold;
        while left > Duration::ZERO && term.is_valid() {
            tokio::time::sleep(STEP).await;
            left = left.saturating_sub(STEP);
            checks.observe(&node, Seen::Step { term: &term });
            if term.is_valid() {
                let _ = map.put(&Fence::from(&term), format!("n{}", node.id()), "held");
            }
        }
        held.release().await;
    }
}

async fn schedule(
    node: Node,
    simba: Simba,
    checks: Arc<Checks>,
    w: Arc<Workloads>,
    missed: MissedRuns,
) {
    let mut rng = node_rng(&node, 40);
    loop {
        let mut job_rng = node_rng(&node, 41);
        let (n, c) = (node.clone(), checks.clone());
        let runs = node.map("runs");
        let job = simba
            .schedule("every-second", Schedule::every(Duration::from_secs(1)))
            .missed(missed)
            .run(move |run: ScheduledRun| {
                let (n, c, runs) = (n.clone(), c.clone(), runs.clone());
                let length = Duration::from_millis(job_rng.u64(100..=900));
                async move {
                    let term = run.term().clone();
                    c.observe(
                        &n,
                        Seen::SlotRun {
                            slot: run.slot(),
                            token: term.token(),
                        },
                    );
                    let _ = runs.put(
                        &Fence::from(&term),
                        run.slot().to_string(),
                        n.id().to_string(),
                    );
                    tokio::select! {
                        biased;
                        _ = term.revoked() => {}
                        () = tokio::time::sleep(length) => {}
                    }
                }
            })
            .await;
        let Some(job) = started(&node, job, "schedule") else {
            return;
        };
        loop {
            tokio::time::sleep(pause_for(&mut rng, w.moves)).await;
            if rng.u8(0..4) == 0 {
                node.log("stops the schedule".to_owned());
                job.stop().await;
                tokio::time::sleep(pause_for(&mut rng, Duration::from_secs(1))).await;
                break;
            }
            let _ = job
                .step_down(Duration::from_millis(rng.u64(0..=1500)))
                .await;
        }
    }
}

async fn group(node: Node, simba: Simba, checks: Arc<Checks>, w: Arc<Workloads>, partitions: u32) {
    let mut rng = node_rng(&node, 50);
    loop {
        let (n, c, wl) = (node.clone(), checks.clone(), w.clone());
        let tasks = simba
            .group("workers", partitions)
            .run_per_partition(move |_partition, term| {
                leader_task(n.clone(), c.clone(), term, None, wl.finish)
            })
            .await;
        let Some(tasks) = started(&node, tasks, "group") else {
            return;
        };
        tokio::time::sleep(pause_for(&mut rng, w.moves * 2)).await;
        node.log("leaves the group".to_owned());
        tasks.stop().await;
        tokio::time::sleep(pause_for(&mut rng, Duration::from_secs(1))).await;
    }
}

/// Keeps the leader tasks' deliberate panics off stderr.
fn quiet_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let payload = info.payload();
            let message = payload
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| payload.downcast_ref::<&str>().copied());
            if message != Some(PANIC) {
                previous(info);
            }
        }));
    });
}

/// The campaign's simulation: 3 nodes, [`DURATION`] each run, faults
/// drawn swarm-style from every kind a correct client must survive
/// ([`Faults::default`]), `broken` selected, on `threads` threads.
pub fn sim(broken: Option<Broken>, threads: usize) -> Sim {
    quiet_panics();
    let core = match broken {
        Some(Broken::Core(m)) => Some(m),
        _ => None,
    };
    let client = match broken {
        Some(Broken::Client(m)) => Some(m),
        _ => None,
    };
    let config = SimbaConfig::builder()
        .lease_duration(LEASE)
        .mutant(core)
        .build()
        .unwrap_or_default();
    Sim::new(NODES)
        .duration(DURATION)
        .config(config)
        .faults(Faults::default())
        .client(move |b| b.mutant(client))
        .threads(threads)
        .shrink(false)
}

/// Which checker a violation's text comes from (its prefix).
pub fn checker_of(what: &str) -> &str {
    let what = what.strip_prefix("invariant ").unwrap_or(what);
    match what.find(':') {
        Some(i) => &what[..i],
        None => what,
    }
}

/// Runs seeds `first..first + n` of the campaign, stopping at the first
/// that fails.
///
/// # Errors
/// The first failure (its seed, first broken invariant, timeline, faults
/// and replay command), or a seed that did not replay identically.
pub fn run(
    broken: Option<Broken>,
    first: u64,
    n: u64,
    threads: usize,
) -> Result<Summary, SimError> {
    quiet_panics();
    sim(broken, threads).run(first..first.saturating_add(n), node_main)
}

/// The first seed of `first..first + n` that fails, with its first
/// violation, or `None` if every seed passes.
///
/// # Errors
/// A failure that is not a broken invariant (a seed that did not replay
/// identically, code that escaped the simulation).
pub fn hunt(
    broken: Option<Broken>,
    first: u64,
    n: u64,
    threads: usize,
) -> Result<Option<(u64, String)>, SimError> {
    match run(broken, first, n, threads) {
        Ok(_) => Ok(None),
        Err(SimError::Failed(f)) => Ok(Some((f.seed, f.violation.what.clone()))),
        Err(e) => Err(e),
    }
}

/// Runs every seed of `first..first + n` and counts those that fail, by
/// the checker of their first violation.
///
/// # Errors
/// As [`hunt`].
pub fn count(
    broken: Option<Broken>,
    first: u64,
    n: u64,
    threads: usize,
) -> Result<BTreeMap<String, u64>, SimError> {
    let end = first.saturating_add(n);
    let mut next = first;
    let mut by = BTreeMap::new();
    while next < end {
        match hunt(broken, next, end - next, threads)? {
            None => break,
            Some((seed, what)) => {
                *by.entry(checker_of(&what).to_owned()).or_insert(0) += 1;
                next = seed + 1;
            }
        }
    }
    Ok(by)
}

/// Measures the campaign's speed: `seeds` runs of 3 nodes with every
/// workload on and faults on, on one thread. Returns (simulated seconds
/// per wall second per core, seeds, wall seconds).
///
/// # Errors
/// As [`run`].
pub fn speed(seeds: u64) -> Result<(f64, u64, f64), SimError> {
    quiet_panics();
    #[allow(clippy::disallowed_methods)] // wall-clock speed, reported only
    let started = std::time::Instant::now();
    let summary = sim(None, 1).run(0..seeds, |node| node_run(node, everything()))?;
    let wall = started.elapsed().as_secs_f64().max(1e-9);
    Ok((
        summary.simulated.as_secs_f64() / wall,
        summary.seeds as u64,
        wall,
    ))
}
