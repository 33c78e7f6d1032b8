//! # simba-sim: your leader code under a deterministic simulation
//!
//! Add it as a dev-dependency and test your own code: N nodes, each running
//! your async function against a real [`simba_client::Simba`] handle and
//! simulated fenced resources ([`FencedRegister`], [`FencedMap`]), under
//! faults drawn from a seed (latency, loss, partitions, hung calls, paused
//! nodes, crashes and restarts, clock drift, backend restarts, leases
//! removed from outside; backend state loss on request). Every run is
//! deterministic by seed: a seed replays bit for bit, and the harness
//! checks it by running seeds twice and comparing a hash of the event
//! trace.
//!
//! Time is tokio's paused clock on a current-thread runtime: your
//! `tokio::time::sleep` and `timeout` run on simulated time (why this
//! mechanism: `docs/SIMULATION.md`). Spawn your tasks with
//! [`Node::spawn`] (or `Term::spawn` inside a leader task), so they are
//! paused with their node and dropped at its crash: a bare `tokio::spawn`
//! is reported as [`Escape::BareSpawn`], as real threads, real sockets
//! and real-time blocking are reported as escapes of their own.
//!
//! ```
//! use simba_sim::{Fence, Sim};
//! use std::time::Duration;
//!
//! let sim = Sim::new(3).duration(Duration::from_secs(20));
//! let summary = sim.run(0..4, |node| async move {
//!     let ledger = node.map("ledger");
//!     let task = node
//!         .simba()
//!         .run_while_leader("ledger", move |term| {
//!             let ledger = ledger.clone();
//!             async move {
//!                 while term.is_valid() {
//!                     let next = ledger.len();
//!                     tokio::time::sleep(Duration::from_millis(50)).await;
//!                     if term.is_valid() {
//!                         let _ = ledger.put(&Fence::from(&term), format!("{next:08}"), "entry");
//!                     }
//!                 }
//!             }
//!         })
//!         .await
//!         .map_err(|e| e.to_string())?;
//!     std::future::pending::<()>().await;
//!     drop(task);
//!     Ok::<(), String>(())
//! });
//! assert!(summary.is_ok(), "{}", summary.unwrap_err());
//! ```
#![forbid(unsafe_code)]

mod faults;
mod journal;
mod node;
mod rng;
mod trace;
mod world;

pub use faults::{Fault, FaultKind, Faults};
pub use journal::Violation;
pub use trace::Event;
pub use world::{Fence, FencedMap, FencedRegister, StaleFence, World, Write};

use futures::future::BoxFuture;
use futures::FutureExt;
use journal::{lock, Journal};
use node::{NoSuspend, NodeCell, SimBackend, SimRuntime, Tasks};
use rng::Rng;
use simba_backends::{Backend, MemoryBackend};
use simba_client::{Simba, SimbaBuilder, SimbaConfig};
use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use world::WorldInner;

/// The environment variable that replays one seed: `run` then runs only it.
pub const SEED_VAR: &str = "SIMBA_SIM_SEED";
/// The environment variable that keeps only some faults of a seed's plan
/// (comma-separated indices, as a shrunk failure prints them).
pub const FAULTS_VAR: &str = "SIMBA_SIM_FAULTS";

type App = Arc<dyn Fn(Node) -> BoxFuture<'static, Result<(), String>> + Send + Sync>;
type Invariant = Arc<dyn Fn(&World) -> Result<(), String> + Send + Sync>;
type ClientHook = Arc<dyn Fn(SimbaBuilder) -> SimbaBuilder + Send + Sync>;

/// One node incarnation, as the application's function sees it.
#[derive(Clone)]
pub struct Node {
    id: usize,
    incarnation: u64,
    seed: u64,
    simba: Simba,
    cell: Arc<NodeCell>,
    world: Arc<WorldInner>,
}

impl fmt::Debug for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Node")
            .field("id", &self.id)
            .field("incarnation", &self.incarnation)
            .finish_non_exhaustive()
    }
}

impl Node {
    /// The node's number, from 0.
    pub fn id(&self) -> usize {
        self.id
    }

    /// How many times the node has restarted (0 for the first run).
    pub fn incarnation(&self) -> u64 {
        self.incarnation
    }

    /// The seed of the run: an application may draw from it what its nodes
    /// do (the same draw on every node and in every replay).
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// State shared by every node of this run (one value per type,
    /// created with `T::default()` on first use and dropped with the run):
    /// what an application's own checks remember across nodes.
    ///
    /// ```
    /// # fn f(node: simba_sim::Node) {
    /// use std::sync::Mutex;
    /// let runs = node.shared::<Mutex<Vec<u64>>>();
    /// runs.lock().unwrap_or_else(|p| p.into_inner()).push(7);
    /// # }
    /// ```
    pub fn shared<T: Default + Send + Sync + 'static>(&self) -> Arc<T> {
        self.world.shared::<T>()
    }

    /// Reports a broken invariant of the application's own, found by the
    /// node (the run fails with it as if a [`Sim::invariant`] had).
    pub fn violation(&self, what: impl Into<String>) {
        self.world.violate(Some(self.id), what.into());
    }

    /// The node's client: a real [`Simba`] over the simulated backend.
    pub fn simba(&self) -> &Simba {
        &self.simba
    }

    /// The shared fenced register `name`.
    pub fn register(&self, name: &str) -> FencedRegister {
        self.world.register(name, self.id)
    }

    /// The shared fenced map `name`.
    pub fn map(&self, name: &str) -> FencedMap {
        self.world.map(name, self.id)
    }

    /// Spawns `task` as one of the node's tasks: paused with the node and
    /// dropped at its crash (a bare `tokio::spawn` is neither).
    pub fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        self.cell.spawn(self.incarnation, Box::pin(task));
    }

    /// Adds a line to the trace (and to a failure's timeline).
    pub fn log(&self, text: impl Into<String>) {
        self.world.record(Some(self.id), text.into());
    }

    /// Simulated time since the start of the run.
    pub fn now(&self) -> Duration {
        self.world.now()
    }
}

/// Why a simulation did not pass.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SimError {
    /// A simulation needs at least one node.
    #[error("a simulation needs at least one node (got 0)")]
    NoNodes,
    /// The seed list was empty.
    #[error("no seeds to run")]
    NoSeeds,
    /// A seed broke an invariant or a checker.
    #[error("{0}")]
    Failed(Box<Failure>),
    /// A seed ran twice gave two different traces.
    #[error("non-deterministic: seed {seed}: {detail}")]
    NonDeterministic {
        /// The seed.
        seed: u64,
        /// The first difference, and what usually causes it.
        detail: String,
    },
    /// Code under test escaped the simulation: simulated time, the
    /// simulated network, or the harness's control of a node's tasks.
    #[error("seed {seed}: the code under test escaped the simulation: {what}")]
    Escaped {
        /// The seed.
        seed: u64,
        /// What escaped.
        kind: Escape,
        /// What escaped, where and when, and what to do instead.
        what: String,
    },
    /// An invariant panicked instead of returning an error.
    #[error("invariant {name:?} panicked at seed {seed}: {message}")]
    InvariantPanicked {
        /// The invariant.
        name: String,
        /// The seed.
        seed: u64,
        /// The panic's message.
        message: String,
    },
    /// An environment variable that replays a run ([`SEED_VAR`],
    /// [`FAULTS_VAR`]) holds what it cannot mean.
    #[error("{var}={value:?}: {why}")]
    BadReplay {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// What it should hold.
        why: &'static str,
    },
    /// The runtime could not be built, or worker threads could not start.
    #[error("could not build the simulation's runtime: {0}")]
    Runtime(#[from] std::io::Error),
}

/// What escaped the simulation ([`SimError::Escaped`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Escape {
    /// A task spawned on the run's runtime around the harness (a bare
    /// `tokio::spawn`, `tokio::task::spawn`, `Handle::spawn`): it runs on
    /// simulated time, but it is neither paused with its node nor dropped
    /// at its crash, so the run does not model those faults for it. Spawn
    /// it with [`Node::spawn`], or `Term::spawn` inside a leader task; or
    /// allow it with [`Sim::allow_bare_spawns`].
    BareSpawn {
        /// The node whose code spawned it (`None`: an invariant).
        node: Option<usize>,
        /// When it was first seen, in simulated time since the run's start.
        at: Duration,
    },
    /// Real threads alive after the run: `std::thread::spawn`, or
    /// tokio's blocking pool (`tokio::task::spawn_blocking`) or another
    /// runtime. They run on real time.
    Thread,
    /// Real sockets opened during the run: real I/O, not simulated.
    Socket,
    /// The run took far more real time than simulated time: the code
    /// blocks on real time (`std::thread::sleep`, blocking I/O).
    RealTime,
}

/// A failing seed: what broke first, the timeline before it, the fault
/// plan (and a shrunk one) and the command that replays it.
#[derive(Debug)]
pub struct Failure {
    /// The seed.
    pub seed: u64,
    /// The first broken invariant or checker.
    pub violation: Violation,
    /// The last events of each node before the end of the run.
    pub timeline: String,
    /// The seed's fault plan.
    pub faults: Vec<Fault>,
    /// The indices of a smaller plan that still fails, if shrinking found one.
    pub shrunk: Option<Vec<usize>>,
    /// The one-line replay command.
    pub replay: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = &self.violation;
        writeln!(f, "simulation failed at seed {}", self.seed)?;
        let who = v.node.map_or(String::new(), |n| format!(" (node {n})"));
        writeln!(
            f,
            "first broken invariant, at {:.3}s{who}: {}",
            v.at.as_secs_f64(),
            v.what
        )?;
        writeln!(f, "faults drawn:")?;
        for (i, fault) in self.faults.iter().enumerate() {
            writeln!(f, "  #{i} {fault}")?;
        }
        if let Some(kept) = &self.shrunk {
            let list: Vec<String> = kept.iter().map(ToString::to_string).collect();
            writeln!(
                f,
                "shrunk: still fails with only faults [{}]",
                list.join(",")
            )?;
        }
        writeln!(f, "timeline (last events per node):")?;
        write!(f, "{}", self.timeline)?;
        write!(f, "replay: {}", self.replay)
    }
}

/// What a passing [`Sim::run`] ran.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Summary {
    /// Seeds run.
    pub seeds: usize,
    /// Seeds run twice to compare traces.
    pub rechecked: usize,
    /// Simulated time over all seeds.
    pub simulated: Duration,
    /// Trace events over all seeds.
    pub events: u64,
}

/// The outcome of one run of one seed.
struct SeedRun {
    hash: u64,
    events: Vec<Event>,
    violation: Option<Violation>,
    panicked: Option<(String, String)>,
    timeline: String,
    faults: Vec<Fault>,
    escaped: Option<(Escape, String)>,
}

/// A simulation: nodes, duration, client configuration, faults and
/// invariants. See the crate documentation for an example.
#[derive(Clone)]
pub struct Sim {
    nodes: usize,
    duration: Duration,
    config: SimbaConfig,
    faults: Faults,
    invariants: Vec<(String, Invariant)>,
    threads: usize,
    recheck_every: usize,
    per_node: usize,
    shrink: bool,
    allow_bare_spawns: bool,
    client: Option<ClientHook>,
}

impl fmt::Debug for Sim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sim")
            .field("nodes", &self.nodes)
            .field("duration", &self.duration)
            .field("faults", &self.faults)
            .finish_non_exhaustive()
    }
}

impl Sim {
    /// A simulation of `nodes` nodes, 60 simulated seconds each run, the
    /// default client configuration and [`Faults::default`].
    ///
    /// ```
    /// let sim = simba_sim::Sim::new(3);
    /// # drop(sim);
    /// ```
    pub fn new(nodes: usize) -> Sim {
        Sim {
            nodes,
            duration: Duration::from_secs(60),
            config: SimbaConfig::default(),
            faults: Faults::default(),
            invariants: Vec::new(),
            threads: std::thread::available_parallelism().map_or(1, usize::from),
            recheck_every: 0,
            per_node: 8,
            shrink: true,
            allow_bare_spawns: false,
            client: None,
        }
    }

    /// Simulated time per run.
    #[must_use]
    pub fn duration(mut self, d: Duration) -> Sim {
        self.duration = d;
        self
    }

    /// The clients' configuration (its seed is replaced per node).
    #[must_use]
    pub fn config(mut self, config: SimbaConfig) -> Sim {
        self.config = config;
        self
    }

    /// The faults seeds may draw.
    #[must_use]
    pub fn faults(mut self, faults: Faults) -> Sim {
        self.faults = faults;
        self
    }

    /// Adds an invariant over the world, checked every simulated second and
    /// at the end of each run. A panic in it is reported as
    /// [`SimError::InvariantPanicked`].
    #[must_use]
    pub fn invariant(
        mut self,
        name: impl Into<String>,
        check: impl Fn(&World) -> Result<(), String> + Send + Sync + 'static,
    ) -> Sim {
        self.invariants.push((name.into(), Arc::new(check)));
        self
    }

    /// Threads that run seeds in parallel (default: the CPUs available).
    #[must_use]
    pub fn threads(mut self, n: usize) -> Sim {
        self.threads = n.max(1);
        self
    }

    /// Also run every `n`-th seed twice and compare traces (0, the default:
    /// only the first seed and failing seeds).
    #[must_use]
    pub fn recheck_every(mut self, n: usize) -> Sim {
        self.recheck_every = n;
        self
    }

    /// Adjusts every node's client builder before it is built (after the
    /// harness has set the backend, runtime and configuration): metadata,
    /// a callback executor, an event queue size.
    ///
    /// ```
    /// use simba_client::CallbackExecutor;
    /// let sim = simba_sim::Sim::new(3)
    ///     .client(|b| b.callback_executor(CallbackExecutor::Inline));
    /// # drop(sim);
    /// ```
    #[must_use]
    pub fn client(
        mut self,
        hook: impl Fn(SimbaBuilder) -> SimbaBuilder + Send + Sync + 'static,
    ) -> Sim {
        self.client = Some(Arc::new(hook));
        self
    }

    /// Whether a task spawned around the harness (a bare `tokio::spawn`,
    /// say by a library the code under test uses) is allowed (default
    /// off: it is reported as [`Escape::BareSpawn`]). Such a task still
    /// runs on simulated time and deterministically, but it goes on while
    /// its node is paused and after its node crashed: those faults are not
    /// modelled for it.
    #[must_use]
    pub fn allow_bare_spawns(mut self, allow: bool) -> Sim {
        self.allow_bare_spawns = allow;
        self
    }

    /// Whether to shrink a failing seed's fault plan (default on).
    #[must_use]
    pub fn shrink(mut self, on: bool) -> Sim {
        self.shrink = on;
        self
    }

    /// Runs `app` on every node for each seed (or only the seed in
    /// [`SEED_VAR`], if set), stopping at the first failure.
    ///
    /// # Errors
    /// [`SimError`]: bad input, a failing seed (with its report), a seed
    /// that does not replay identically, code that escaped the simulation,
    /// or a panicking invariant.
    pub fn run<S, F, Fut, E>(&self, seeds: S, app: F) -> Result<Summary, SimError>
    where
        S: IntoIterator<Item = u64>,
        S::IntoIter: Send,
        F: Fn(Node) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: fmt::Display + 'static,
    {
        if self.nodes == 0 {
            return Err(SimError::NoNodes);
        }
        let replay = replay_seed()?;
        let keep = replay_faults()?;
        // Seeds are drawn one at a time as workers free up, never
        // collected: a long (or endless) seed list runs, it does not
        // exhaust memory first.
        let mut seeds = seeds
            .into_iter()
            .take_while(move |_| replay.is_none())
            .chain(replay)
            .peekable();
        if seeds.peek().is_none() {
            return Err(SimError::NoSeeds);
        }
        let workers = self.threads.min(seeds.size_hint().1.unwrap_or(usize::MAX));
        let app: App = Arc::new(move |node| {
            let fut = app(node);
            Box::pin(async move { fut.await.map_err(|e| e.to_string()) })
        });
        let test = std::thread::current()
            .name()
            .filter(|n| *n != "main")
            .map(str::to_owned);
        let next = Mutex::new((0usize, seeds));
        let stop = AtomicBool::new(false);
        let found: Mutex<Vec<(usize, SimError)>> = Mutex::default();
        let totals = Mutex::new((0usize, 0usize, Duration::ZERO, 0u64));
        let handed = AtomicUsize::new(0);
        std::thread::scope(|scope| {
            for _ in 0..workers {
                // A name of its own (at most 15 bytes, Linux's limit): a
                // thread the code under test starts inherits it.
                static WORKERS: AtomicUsize = AtomicUsize::new(0);
                let k = WORKERS.fetch_add(1, Ordering::SeqCst);
                let worker = std::thread::Builder::new().name(format!("simsim-{k:x}"));
                let _ = worker.spawn_scoped(scope, || {
                    escapes::await_own_name();
                    loop {
                        if stop.load(Ordering::SeqCst) {
                            break;
                        }
                        let (i, seed) = {
                            let mut n = lock(&next);
                            let Some(seed) = n.1.next() else { break };
                            n.0 += 1;
                            (n.0 - 1, seed)
                        };
                        let _ = handed.fetch_add(1, Ordering::SeqCst);
                        let recheck =
                            i == 0 || (self.recheck_every > 0 && i % self.recheck_every == 0);
                        match self.check_seed(seed, keep.as_deref(), &app, recheck, test.as_deref())
                        {
                            Ok(events) => {
                                let mut t = lock(&totals);
                                t.0 += 1;
                                t.1 += usize::from(recheck);
                                t.2 += self.duration;
                                t.3 += events;
                            }
                            Err(e) => {
                                lock(&found).push((i, e));
                                stop.store(true, Ordering::SeqCst);
                            }
                        }
                    }
                });
            }
        });
        let mut found = found.into_inner().unwrap_or_else(|p| p.into_inner());
        found.sort_by_key(|(i, _)| *i);
        if let Some((_, e)) = found.into_iter().next() {
            return Err(e);
        }
        let t = totals.into_inner().unwrap_or_else(|p| p.into_inner());
        let (handed, left) = (handed.into_inner(), lock(&next).1.peek().is_some());
        if t.0 != handed || left {
            return Err(SimError::Runtime(std::io::Error::other(format!(
                "only {} of the seeds ran: worker threads could not start or stopped",
                t.0
            ))));
        }
        Ok(Summary {
            seeds: t.0,
            rechecked: t.1,
            simulated: t.2,
            events: t.3,
        })
    }

    /// One seed: run (twice if `recheck`), judge, report.
    fn check_seed(
        &self,
        seed: u64,
        keep: Option<&[usize]>,
        app: &App,
        recheck: bool,
        test: Option<&str>,
    ) -> Result<u64, SimError> {
        let first = self.run_once(seed, keep, app)?;
        if let Some((kind, what)) = first.escaped.clone() {
            return Err(SimError::Escaped { seed, kind, what });
        }
        if let Some((name, message)) = first.panicked.clone() {
            return Err(SimError::InvariantPanicked {
                name,
                seed,
                message,
            });
        }
        let failed = first.violation.is_some();
        if recheck || failed {
            let second = self.run_once(seed, keep, app)?;
            if second.hash != first.hash {
                return Err(SimError::NonDeterministic {
                    seed,
                    detail: first_difference(&first.events, &second.events),
                });
            }
        }
        let Some(violation) = first.violation else {
            return Ok(first.events.len() as u64);
        };
        let shrunk = if self.shrink && keep.is_none() {
            self.shrink_plan(seed, app, first.faults.len())
        } else {
            None
        };
        Err(SimError::Failed(Box::new(Failure {
            seed,
            violation,
            timeline: first.timeline,
            faults: first.faults,
            shrunk,
            replay: replay_command(seed, test),
        })))
    }

    /// Greedy shrinking: drop each fault in turn while the seed still
    /// fails without it.
    fn shrink_plan(&self, seed: u64, app: &App, n: usize) -> Option<Vec<usize>> {
        let mut kept: Vec<usize> = (0..n).collect();
        let mut i = 0;
        while i < kept.len() {
            let mut trial = kept.clone();
            let _ = trial.remove(i);
            match self.run_once(seed, Some(&trial), app) {
                Ok(r) if r.violation.is_some() => kept = trial,
                _ => i += 1,
            }
        }
        (kept.len() < n).then_some(kept)
    }

    /// One run of one seed on a fresh current-thread runtime with paused
    /// time.
    fn run_once(&self, seed: u64, keep: Option<&[usize]>, app: &App) -> Result<SeedRun, SimError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()?;
        let before = escapes::snapshot();
        let real = std::time::Instant::now();
        let mut run = rt.block_on(self.world(seed, keep, app.clone()));
        let mut after = escapes::snapshot();
        let elapsed = real.elapsed();
        if run.escaped.is_none() {
            run.escaped = escapes::compare(&before, &after, elapsed, self.duration);
        }
        // A thread that starts with the worker's name and names itself a
        // moment later (one of its own) passes through the name. A thread
        // the code under test started is still there, by the same thread
        // id, after a few short waits (real time, only on suspicion); one
        // passing through the name is not.
        for wait_ms in [50, 200, 750] {
            if !matches!(run.escaped, Some((Escape::Thread, _))) {
                break;
            }
            std::thread::sleep(Duration::from_millis(wait_ms));
            after = escapes::lasting(&before, &after);
            run.escaped = escapes::compare(&before, &after, elapsed, self.duration);
        }
        drop(rt);
        Ok(run)
    }

    async fn world(&self, seed: u64, keep: Option<&[usize]>, app: App) -> SeedRun {
        let start = tokio::time::Instant::now();
        let backend = MemoryBackend::with_clock(move || tokio::time::Instant::now() - start)
            .session_ids_from(seed);
        let journal = Arc::new(Journal::new(start));
        let tasks = Arc::new(Tasks::new(journal.clone(), self.allow_bare_spawns));
        let cells: Vec<Arc<NodeCell>> = (0..self.nodes)
            .map(|i| {
                Arc::new(NodeCell::new(
                    i,
                    Rng::new(seed, 1 + i as u64),
                    tasks.clone(),
                ))
            })
            .collect();
        let world = Arc::new(WorldInner::new(journal, backend, cells, tasks));
        let mut plan_rng = Rng::new(seed, 0);
        let mut faults = faults::draw(
            &self.faults,
            &mut plan_rng,
            self.nodes,
            self.duration,
            self.config.lease_duration(),
            self.config.drift(),
        );
        if let Some(keep) = keep {
            faults = faults
                .into_iter()
                .enumerate()
                .filter(|(i, _)| keep.contains(i))
                .map(|(_, f)| f)
                .collect();
        }
        // Continuous conditions first, then the nodes, then the events.
        for f in &faults {
            apply_condition(&world, &f.kind);
        }
        let sim = Arc::new(self.clone());
        for cell in &world.nodes {
            start_node(&sim, &world, cell, &app, seed);
        }
        let events: Vec<Fault> = faults
            .iter()
            .filter(|f| !is_condition(&f.kind))
            .cloned()
            .collect();
        {
            let world = world.clone();
            let sim = sim.clone();
            let app = app.clone();
            let mut rng = Rng::new(seed, u64::MAX);
            let tasks = world.tasks.clone();
            tasks.spawn(async move {
                for f in events {
                    tokio::time::sleep_until(world.start + f.at).await;
                    inject(&sim, &world, &app, seed, &f.kind, &mut rng);
                }
            });
        }
        // Run, checking the invariants every simulated second.
        let mut panicked = None;
        let end = start + self.duration;
        loop {
            let step = (tokio::time::Instant::now() + Duration::from_secs(1)).min(end);
            tokio::time::sleep_until(step).await;
            if let Some(p) = self.check_invariants(&world) {
                panicked = Some(p);
                break;
            }
            world.tasks.check(None);
            if !lock(&world.journal.violations).is_empty()
                || world.tasks.bare().is_some()
                || step >= end
            {
                break;
            }
        }
        for cell in &world.nodes {
            cell.crash();
        }
        let trace = std::mem::take(&mut *lock(&world.journal.trace));
        let violation = lock(&world.journal.violations).first().cloned();
        let escaped = world.tasks.bare().map(|b| {
            let who = b.node.map_or_else(
                || "an invariant".to_owned(),
                |n| format!("a task of node {n}"),
            );
            let what = format!(
                "{} task(s) spawned around the harness (a bare tokio::spawn, tokio::task::spawn \
                 or Handle::spawn) by {who}, first seen at {:.3}s of simulated time: such a \
                 task is neither paused with its node nor dropped at its crash, so the run \
                 does not model those faults for it; spawn it with Node::spawn (or Term::spawn \
                 inside a leader task), or allow it with Sim::allow_bare_spawns(true)",
                b.count,
                b.at.as_secs_f64()
            );
            (
                Escape::BareSpawn {
                    node: b.node,
                    at: b.at,
                },
                what,
            )
        });
        SeedRun {
            hash: trace.hash(),
            timeline: trace.timeline(self.nodes, self.per_node),
            events: trace.events,
            violation,
            panicked,
            faults,
            escaped,
        }
    }

    /// Runs every invariant; a failing one becomes a violation, a panicking
    /// one is returned as (name, message).
    fn check_invariants(&self, world: &Arc<WorldInner>) -> Option<(String, String)> {
        let view = World {
            inner: world.clone(),
        };
        for (name, check) in &self.invariants {
            match std::panic::catch_unwind(AssertUnwindSafe(|| check(&view))) {
                Ok(Ok(())) => {}
                Ok(Err(why)) => {
                    world.violate(None, format!("invariant {name:?}: {why}"));
                    return None;
                }
                Err(panic) => return Some((name.clone(), panic_message(&*panic))),
            }
        }
        None
    }
}

/// The seed [`SEED_VAR`] replays, if it is set (and not empty).
fn replay_seed() -> Result<Option<u64>, SimError> {
    let Ok(value) = std::env::var(SEED_VAR) else {
        return Ok(None);
    };
    if value.trim().is_empty() {
        return Ok(None);
    }
    value
        .trim()
        .parse()
        .map(Some)
        .map_err(|_| SimError::BadReplay {
            var: SEED_VAR,
            value,
            why: "a seed is a number from 0 to 2^64 - 1",
        })
}

/// The fault indices [`FAULTS_VAR`] keeps, if it is set.
fn replay_faults() -> Result<Option<Vec<usize>>, SimError> {
    let Ok(value) = std::env::var(FAULTS_VAR) else {
        return Ok(None);
    };
    let mut keep = Vec::new();
    for x in value.split(',').map(str::trim).filter(|x| !x.is_empty()) {
        match x.parse() {
            Ok(i) => keep.push(i),
            Err(_) => {
                return Err(SimError::BadReplay {
                    var: FAULTS_VAR,
                    value,
                    why:
                        "comma-separated fault indices, as a shrunk failure prints them (e.g. 0,5)",
                })
            }
        }
    }
    Ok(Some(keep))
}

pub(crate) fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".to_owned())
}

fn is_condition(kind: &FaultKind) -> bool {
    matches!(
        kind,
        FaultKind::Latency { .. }
            | FaultKind::Loss { .. }
            | FaultKind::Timeouts { .. }
            | FaultKind::Drift { .. }
    )
}

fn apply_condition(world: &WorldInner, kind: &FaultKind) {
    let cell = |n: &usize| world.nodes.get(*n);
    match kind {
        FaultKind::Latency { node, base } => {
            if let Some(c) = cell(node) {
                lock(&c.conditions).latency = *base;
            }
        }
        FaultKind::Loss { node, rate } => {
            if let Some(c) = cell(node) {
                lock(&c.conditions).loss = *rate;
            }
        }
        FaultKind::Timeouts { node, rate } => {
            if let Some(c) = cell(node) {
                lock(&c.conditions).hang = *rate;
            }
        }
        FaultKind::Drift {
            node,
            rate,
            wall_offset_ms,
        } => {
            if let Some(c) = cell(node) {
                let mut k = lock(&c.conditions);
                k.drift = *rate;
                k.wall_offset_ms = *wall_offset_ms;
            }
        }
        _ => {}
    }
}

/// Starts a new incarnation of `cell`: a new client (a new session) and
/// the application's function.
fn start_node(sim: &Arc<Sim>, world: &Arc<WorldInner>, cell: &Arc<NodeCell>, app: &App, seed: u64) {
    let generation = cell.generation.load(Ordering::SeqCst);
    let conditions = lock(&cell.conditions).clone();
    let node_seed = Rng::new(seed, 1000 + cell.id as u64 * 1000 + generation).next_u64();
    let runtime = SimRuntime {
        cell: cell.clone(),
        generation,
        start: world.start,
        drift: conditions.drift,
        wall_offset_ms: conditions.wall_offset_ms,
        seed: node_seed,
    };
    let backend = simba_backends::Layered(SimBackend {
        inner: world.backend.clone(),
        cell: cell.clone(),
        generation,
        journal: world.journal.clone(),
        backend_down: world.backend_down.clone(),
        hang: sim.config.lease_duration(),
        batch: if Rng::new(seed, 0xBA7C).below(2) == 0 {
            1
        } else {
            world.backend.max_batch()
        },
    });
    let config = sim
        .config
        .to_builder()
        .seed(node_seed)
        .build()
        .unwrap_or_else(|_| sim.config.clone());
    world.record(Some(cell.id), format!("starts (incarnation {generation})"));
    let mut builder = Simba::builder(backend)
        .runtime(Arc::new(runtime))
        .config(config)
        .suspend_clock(Arc::new(NoSuspend));
    if let Some(hook) = &sim.client {
        match std::panic::catch_unwind(AssertUnwindSafe(|| hook(builder))) {
            Ok(b) => builder = b,
            Err(p) => {
                world.violate(
                    Some(cell.id),
                    format!(
                        "the client hook (Sim::client) panicked: {}",
                        panic_message(&*p)
                    ),
                );
                return;
            }
        }
    }
    let built = builder.build();
    let simba = match built {
        Ok(s) => s,
        Err(e) => {
            world.violate(Some(cell.id), format!("the client did not build: {e}"));
            return;
        }
    };
    *lock(&cell.client) = Some(simba.clone());
    let node = Node {
        id: cell.id,
        incarnation: generation,
        seed,
        simba,
        cell: cell.clone(),
        world: world.clone(),
    };
    // The application's function up to its first `.await` runs here.
    let fut = match std::panic::catch_unwind(AssertUnwindSafe(|| app(node))) {
        Ok(fut) => fut,
        Err(p) => {
            world.violate(
                Some(cell.id),
                format!("the application panicked: {}", panic_message(&*p)),
            );
            return;
        }
    };
    world.tasks.check(Some(cell.id));
    let w = world.clone();
    let id = cell.id;
    cell.spawn(
        generation,
        Box::pin(async move {
            match AssertUnwindSafe(fut).catch_unwind().await {
                Ok(Ok(())) => w.record(Some(id), "application function returned".to_owned()),
                Ok(Err(e)) => {
                    w.violate(Some(id), format!("the application returned an error: {e}"))
                }
                Err(p) => w.violate(
                    Some(id),
                    format!("the application panicked: {}", panic_message(&*p)),
                ),
            }
        }),
    );
}

/// Applies one discrete fault.
fn inject(
    sim: &Arc<Sim>,
    world: &Arc<WorldInner>,
    app: &App,
    seed: u64,
    kind: &FaultKind,
    rng: &mut Rng,
) {
    let later = |after: Duration, f: Box<dyn FnOnce() + Send>| {
        world.tasks.spawn(async move {
            tokio::time::sleep(after).await;
            f();
        });
    };
    match kind {
        FaultKind::Pause { node, span } => {
            let Some(cell) = world.nodes.get(*node).cloned() else {
                return;
            };
            world.record(Some(*node), format!("PAUSED for {span:?}"));
            cell.gate.pause();
            let w = world.clone();
            let n = *node;
            later(
                *span,
                Box::new(move || {
                    w.record(Some(n), "resumed".to_owned());
                    cell.gate.resume();
                }),
            );
        }
        FaultKind::Crash { node, down } => {
            let Some(cell) = world.nodes.get(*node).cloned() else {
                return;
            };
            world.record(Some(*node), format!("CRASHED, down for {down:?}"));
            cell.crash();
            let (w, s, a) = (world.clone(), sim.clone(), app.clone());
            later(*down, Box::new(move || start_node(&s, &w, &cell, &a, seed)));
        }
        FaultKind::Partition { node, span } => {
            let Some(cell) = world.nodes.get(*node).cloned() else {
                return;
            };
            world.record(Some(*node), format!("PARTITIONED for {span:?}"));
            cell.partitioned.store(true, Ordering::SeqCst);
            let w = world.clone();
            let n = *node;
            later(
                *span,
                Box::new(move || {
                    w.record(Some(n), "partition healed".to_owned());
                    cell.partitioned.store(false, Ordering::SeqCst);
                }),
            );
        }
        FaultKind::BackendRestart { down } => {
            world.record(None, format!("BACKEND RESTARTS, down for {down:?}"));
            world.backend_down.store(true, Ordering::SeqCst);
            world.backend.drop_subscriptions();
            let w = world.clone();
            later(
                *down,
                Box::new(move || {
                    w.record(None, "backend back".to_owned());
                    w.backend_down.store(false, Ordering::SeqCst);
                }),
            );
        }
        FaultKind::StateLoss => {
            world.record(None, "BACKEND LOSES ITS STATE".to_owned());
            world.backend.lose_state();
        }
        FaultKind::RemoveLease => {
            let seen = world.backend.held_leases();
            if seen.is_empty() {
                world.record(None, "no lease held to remove".to_owned());
                return;
            }
            let i = usize::try_from(rng.below(seen.len() as u64)).unwrap_or(0);
            let name = &seen[i];
            let removed = world.backend.remove_lease(name);
            world.record(
                None,
                format!(
                    "LEASE {name} REMOVED from outside (token {})",
                    removed.map_or("-".to_owned(), |(_, t)| t.to_string())
                ),
            );
        }
        _ => {}
    }
}

fn first_difference(a: &[Event], b: &[Event]) -> String {
    let i = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let show = |e: Option<&Event>| e.map_or("(end of trace)".to_owned(), ToString::to_string);
    format!(
        "the traces of two runs differ at event {i}: first run `{}`, second run `{}` \
         (usual causes: tokio::select! without `biased;`, HashMap iteration, \
         std::time or OS randomness, real threads or sockets in the code under test)",
        show(a.get(i)).trim(),
        show(b.get(i)).trim()
    )
}

/// The one-line command that replays `seed` under the current test.
fn replay_command(seed: u64, test: Option<&str>) -> String {
    let pkg = std::env::var("CARGO_PKG_NAME").ok();
    let mut cmd = format!("{SEED_VAR}={seed} cargo test");
    if let Some(p) = pkg {
        cmd.push_str(&format!(" -p {p}"));
    }
    if let Some(t) = test {
        cmd.push_str(&format!(" -- --exact {t}"));
    }
    cmd
}

/// Detecting code that escaped the simulation: real threads, sockets and
/// real time.
mod escapes {
    use super::Escape;
    use std::collections::BTreeSet;
    use std::time::Duration;

    #[derive(Clone)]
    pub(super) struct Snapshot {
        /// Threads named as tokio names its blocking pool and workers.
        tokio: Option<usize>,
        /// Threads with the calling worker's name, by thread id: a thread
        /// started from it without a name of its own inherits it (Linux).
        unnamed: Option<BTreeSet<u64>>,
        sockets: Option<usize>,
    }

    fn sockets() -> Option<usize> {
        let entries = std::fs::read_dir("/proc/self/fd").ok()?;
        Some(
            entries
                .filter_map(Result::ok)
                .filter(|e| {
                    std::fs::read_link(e.path())
                        .is_ok_and(|t| t.to_string_lossy().starts_with("socket:"))
                })
                .count(),
        )
    }

    /// The name Linux shows for the calling thread once it is named: its
    /// std name cut to 15 bytes (Linux's limit), as `/proc` lists it.
    fn own_name() -> Option<String> {
        let name = std::thread::current().name()?.to_owned();
        let mut end = name.len().min(15);
        while !name.is_char_boundary(end) {
            end -= 1;
        }
        Some(format!("{}\n", &name[..end]))
    }

    /// The calling thread's id (its entry under `/proc/self/task`).
    fn own_tid() -> Option<u64> {
        let stat = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
        stat.split(' ').next()?.parse().ok()
    }

    /// Waits (up to 2 s of real time) until Linux shows the calling
    /// worker by its name: the name may be set a moment after the thread
    /// starts, and until then a thread it starts inherits the name of the
    /// thread that started the worker, so the escape check would miss it.
    /// Before this wait, a worker's first run saw its own thread "start"
    /// (its name appeared during the run): an escape reported in about
    /// one run of 80 of a test on a loaded machine.
    pub(super) fn await_own_name() {
        let Some(name) = own_name() else { return };
        for _ in 0..2000 {
            if std::fs::read_to_string("/proc/thread-self/comm").map_or(true, |c| c == name) {
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    fn threads() -> (Option<usize>, Option<BTreeSet<u64>>) {
        // The worker's own name, not what `/proc` shows for it now: the
        // two differ until the name is set (see `await_own_name`).
        let name = own_name().or_else(|| std::fs::read_to_string("/proc/thread-self/comm").ok());
        let (Some(name), Some(me)) = (name, own_tid()) else {
            return (None, None);
        };
        let Ok(entries) = std::fs::read_dir("/proc/self/task") else {
            return (None, None);
        };
        let (mut tokio, mut unnamed) = (0, BTreeSet::new());
        for e in entries.filter_map(Result::ok) {
            let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
            let tid = e.file_name().to_str().and_then(|t| t.parse::<u64>().ok());
            if comm.starts_with("tokio-runtime") {
                tokio += 1;
            } else if comm == name && tid != Some(me) {
                // The worker itself is never an escape.
                if let Some(tid) = tid {
                    let _ = unnamed.insert(tid);
                }
            }
        }
        (Some(tokio), Some(unnamed))
    }

    /// The threads of `after` with the worker's name that `before` did not
    /// have, which are still there with that name now: a thread that was
    /// only passing through the name (one being started by a thread of
    /// this name before it names itself, or one already ending) is not.
    pub(super) fn lasting(before: &Snapshot, after: &Snapshot) -> Snapshot {
        let now = snapshot();
        let unnamed = match (&before.unnamed, &after.unnamed, &now.unnamed) {
            (Some(a), Some(b), Some(n)) => Some(
                a.iter()
                    .copied()
                    .chain(b.difference(a).copied().filter(|t| n.contains(t)))
                    .collect(),
            ),
            _ => now.unnamed.clone(),
        };
        Snapshot { unnamed, ..now }
    }

    pub(super) fn snapshot() -> Snapshot {
        let (tokio, unnamed) = threads();
        Snapshot {
            tokio,
            unnamed,
            sockets: sockets(),
        }
    }

    pub(super) fn compare(
        before: &Snapshot,
        after: &Snapshot,
        real: Duration,
        simulated: Duration,
    ) -> Option<(Escape, String)> {
        if let (Some(a), Some(b)) = (before.tokio, after.tokio) {
            if b > 0 {
                return Some((
                    Escape::Thread,
                    format!(
                        "{b} tokio thread(s) alive at the end of the run ({a} at its start): \
                     tokio::task::spawn_blocking or a multi-thread runtime, running on real time"
                    ),
                ));
            }
        }
        if let (Some(a), Some(b)) = (&before.unnamed, &after.unnamed) {
            let new: Vec<u64> = b.difference(a).copied().collect();
            if !new.is_empty() {
                return Some((
                    Escape::Thread,
                    format!(
                        "{} real thread(s) started during the run (std::thread::spawn; \
                     thread ids {new:?}): they run on real time",
                        new.len()
                    ),
                ));
            }
        }
        if let (Some(a), Some(b)) = (before.sockets, after.sockets) {
            if b > a {
                return Some((
                    Escape::Socket,
                    format!(
                        "{} real socket(s) opened during the run: real I/O is not simulated",
                        b - a
                    ),
                ));
            }
        }
        if real > simulated * 2 + Duration::from_secs(10) {
            return Some((
                Escape::RealTime,
                format!(
                    "the run took {real:?} of real time for {simulated:?} of simulated time: \
                 the code under test blocks on real time (std::thread::sleep, blocking I/O)"
                ),
            ));
        }
        None
    }
}

// The guide, docs/SIMULATION.md: its Rust snippets compile as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../docs/SIMULATION.md")]
struct GuideSnippets;
