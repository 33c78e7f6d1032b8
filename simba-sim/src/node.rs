//! One simulated node: its pause gate, its tasks (dropped at a crash), its
//! runtime (tokio's paused clock, drifted) and its faulty view of the
//! backend.

use crate::journal::{lock, Journal};
use crate::panic_message;
use crate::rng::Rng;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use simba_backends::{Backend, Call, Layer, MemoryBackend, Reply};
use simba_client::{AsyncRuntime, Simba, SuspendClock};
use simba_core::{
    AcquireOutcome, BackendError, BackendErrorKind, Command, Input, LeaseName, SessionId,
};
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The wall clock's origin in every run: 2026-01-01T00:00:00Z.
const WALL_ORIGIN_SECS: u64 = 1_767_225_600;

/// A node's pause switch: while paused, none of its tasks is polled.
#[derive(Default)]
pub(crate) struct Gate {
    paused: AtomicBool,
    waiting: Mutex<Vec<Waker>>,
}

impl Gate {
    pub(crate) fn pause(&self) {
        self.paused.store(true, Ordering::SeqCst);
    }

    pub(crate) fn resume(&self) {
        self.paused.store(false, Ordering::SeqCst);
        for w in std::mem::take(&mut *lock(&self.waiting)) {
            w.wake();
        }
    }
}

/// A task spawned on the run's runtime around the harness (a bare
/// `tokio::spawn`, `tokio::task::spawn`, `Handle::spawn`): the first one
/// seen, and who was running when it appeared.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct BareSpawn {
    /// The node whose task was being polled, if it was a node's.
    pub(crate) node: Option<usize>,
    /// Simulated time since the start of the run.
    pub(crate) at: Duration,
    /// Tasks alive that the harness does not own.
    pub(crate) count: usize,
}

/// The tasks the harness owns on a run's runtime: the nodes' (spawned
/// through [`NodeCell::spawn`]: the client's, the application's, those of
/// `Node::spawn`) and its own (the fault plan's timers). Any other task
/// alive on the runtime was spawned around the harness: it is neither
/// paused with its node nor dropped at its crash, so the run would not
/// model those faults for it. tokio counts the runtime's live tasks
/// (`RuntimeMetrics::num_alive_tasks`); the harness counts its own, and
/// compares the two after every poll of a node's task (naming the node
/// that spawned it) and every simulated second.
pub(crate) struct Tasks {
    owned: AtomicUsize,
    start: tokio::time::Instant,
    allow_bare: bool,
    bare: Mutex<Option<BareSpawn>>,
    /// Where a node task's panic is reported.
    journal: Arc<Journal>,
    /// The run's runtime's counts (`None` outside a runtime).
    metrics: Option<tokio::runtime::RuntimeMetrics>,
}

impl Tasks {
    /// Called inside the run's runtime.
    pub(crate) fn new(journal: Arc<Journal>, allow_bare: bool) -> Tasks {
        Tasks {
            owned: AtomicUsize::new(0),
            start: journal.start,
            allow_bare,
            bare: Mutex::new(None),
            journal,
            metrics: tokio::runtime::Handle::try_current()
                .ok()
                .map(|h| h.metrics()),
        }
    }

    /// A node's task panicked (tokio would swallow it): a violation.
    fn panicked(&self, node: usize, message: &str) {
        self.journal.violate(
            Some(node),
            format!("a task of node {node} panicked: {message}"),
        );
    }

    /// Counts one more owned task until the returned guard is dropped (with
    /// the task's future: when it ends or is aborted).
    fn own(self: &Arc<Self>) -> Owned {
        let _ = self.owned.fetch_add(1, Ordering::SeqCst);
        Owned(self.clone())
    }

    /// Spawns one of the harness's own tasks.
    pub(crate) fn spawn(self: &Arc<Self>, task: impl Future<Output = ()> + Send + 'static) {
        let owned = self.own();
        drop(tokio::spawn(async move {
            let _owned = owned;
            task.await;
        }));
    }

    /// Compares the runtime's live tasks with the harness's; `node`: whose
    /// task has just been polled (or `None`).
    pub(crate) fn check(&self, node: Option<usize>) {
        if self.allow_bare {
            return;
        }
        let Some(metrics) = &self.metrics else {
            return;
        };
        let alive = metrics.num_alive_tasks();
        let owned = self.owned.load(Ordering::SeqCst);
        if alive > owned {
            let mut bare = lock(&self.bare);
            if bare.is_none() {
                *bare = Some(BareSpawn {
                    node,
                    at: tokio::time::Instant::now() - self.start,
                    count: alive - owned,
                });
            }
        }
    }

    /// The first task spawned around the harness, if any was.
    pub(crate) fn bare(&self) -> Option<BareSpawn> {
        lock(&self.bare).clone()
    }
}

/// One owned task, counted while its future lives.
struct Owned(Arc<Tasks>);

impl Drop for Owned {
    fn drop(&mut self) {
        let _ = self.0.owned.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A task of a node: not polled while the node is paused.
struct Pausable {
    gate: Arc<Gate>,
    task: BoxFuture<'static, ()>,
    node: usize,
    tasks: Arc<Tasks>,
    _owned: Owned,
}

impl Future for Pausable {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.gate.paused.load(Ordering::SeqCst) {
            lock(&self.gate.waiting).push(cx.waker().clone());
            return Poll::Pending;
        }
        let polled =
            match std::panic::catch_unwind(AssertUnwindSafe(|| self.task.as_mut().poll(cx))) {
                Ok(p) => p,
                Err(panic) => {
                    self.tasks.panicked(self.node, &panic_message(&*panic));
                    Poll::Ready(())
                }
            };
        // Only this task ran since the last check: a task that appeared
        // meanwhile was spawned by it.
        self.tasks.check(Some(self.node));
        polled
    }
}

/// The per-node conditions the fault plan sets.
#[derive(Clone, Debug, Default)]
pub(crate) struct Conditions {
    pub(crate) latency: Duration,
    pub(crate) loss: f64,
    pub(crate) hang: f64,
    pub(crate) drift: f64,
    pub(crate) wall_offset_ms: i64,
}

/// One node across its incarnations.
pub(crate) struct NodeCell {
    pub(crate) id: usize,
    /// Bumped at each crash: tasks, runtimes and backend handles of an
    /// older incarnation are dead.
    pub(crate) generation: AtomicU64,
    pub(crate) gate: Arc<Gate>,
    tasks: Mutex<Vec<tokio::task::AbortHandle>>,
    pub(crate) partitioned: AtomicBool,
    pub(crate) conditions: Mutex<Conditions>,
    pub(crate) rng: Mutex<Rng>,
    pub(crate) client: Mutex<Option<Simba>>,
    tasks_of_run: Arc<Tasks>,
}

impl NodeCell {
    pub(crate) fn new(id: usize, rng: Rng, tasks_of_run: Arc<Tasks>) -> NodeCell {
        NodeCell {
            tasks_of_run,
            id,
            generation: AtomicU64::new(0),
            gate: Arc::default(),
            tasks: Mutex::default(),
            partitioned: AtomicBool::new(false),
            conditions: Mutex::default(),
            rng: Mutex::new(rng),
            client: Mutex::new(None),
        }
    }

    pub(crate) fn alive(&self, generation: u64) -> bool {
        self.generation.load(Ordering::SeqCst) == generation
    }

    /// Spawns `task` as one of this node's tasks of incarnation
    /// `generation` (dropped if that incarnation has crashed).
    pub(crate) fn spawn(&self, generation: u64, task: BoxFuture<'static, ()>) {
        if !self.alive(generation) {
            return;
        }
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let join = handle.spawn(Pausable {
            gate: self.gate.clone(),
            task,
            node: self.id,
            tasks: self.tasks_of_run.clone(),
            _owned: self.tasks_of_run.own(),
        });
        let mut tasks = lock(&self.tasks);
        if tasks.len() >= 256 {
            tasks.retain(|t| !t.is_finished());
        }
        tasks.push(join.abort_handle());
    }

    /// The crash: every task of the current incarnation is dropped and its
    /// client forgotten without a goodbye to the backend.
    pub(crate) fn crash(&self) {
        let _ = self.generation.fetch_add(1, Ordering::SeqCst);
        for t in std::mem::take(&mut *lock(&self.tasks)) {
            t.abort();
        }
        drop(lock(&self.client).take());
        self.gate.resume();
    }
}

/// The runtime of one node incarnation: tokio's (paused) clock, run at the
/// node's drift rate, and the node's tasks.
pub(crate) struct SimRuntime {
    pub(crate) cell: Arc<NodeCell>,
    pub(crate) generation: u64,
    pub(crate) start: tokio::time::Instant,
    pub(crate) drift: f64,
    pub(crate) wall_offset_ms: i64,
    pub(crate) seed: u64,
}

impl SimRuntime {
    fn local_elapsed(&self) -> Duration {
        (tokio::time::Instant::now() - self.start).mul_f64(1.0 + self.drift)
    }
}

impl AsyncRuntime for SimRuntime {
    fn spawn(&self, task: BoxFuture<'static, ()>) {
        self.cell.spawn(self.generation, task);
    }

    /// Blocking work runs as a task of the node: the simulation has one
    /// thread, and a real thread would escape simulated time.
    fn spawn_blocking(&self, work: Box<dyn FnOnce() + Send>) {
        self.cell
            .spawn(self.generation, Box::pin(async move { work() }));
    }

    fn sleep_until(&self, at: Instant) -> BoxFuture<'static, ()> {
        let local = at.saturating_duration_since(self.start.into_std());
        let shared = local.div_f64(1.0 + self.drift) + Duration::from_micros(1);
        Box::pin(tokio::time::sleep_until(self.start + shared))
    }

    fn now(&self) -> Instant {
        self.start.into_std() + self.local_elapsed()
    }

    fn blocking_would_deadlock(&self) -> bool {
        true
    }

    fn wall_clock(&self) -> SystemTime {
        let origin = UNIX_EPOCH + Duration::from_secs(WALL_ORIGIN_SECS);
        let offset = Duration::from_millis(self.wall_offset_ms.unsigned_abs());
        let t = origin + self.local_elapsed();
        if self.wall_offset_ms >= 0 {
            t + offset
        } else {
            t - offset
        }
    }

    fn seed(&self) -> u64 {
        self.seed
    }
}

/// No host suspend in a simulation (pauses are the simulated kind).
pub(crate) struct NoSuspend;
impl SuspendClock for NoSuspend {
    fn suspended(&self) -> Duration {
        Duration::ZERO
    }
}

/// What the fault draw decided for one call.
enum Fate {
    Deliver,
    LoseRequest,
    LoseReply,
    Hang,
}

/// One node incarnation's view of the shared backend, with its faults at
/// the call boundary.
pub(crate) struct SimBackend {
    pub(crate) inner: MemoryBackend,
    pub(crate) cell: Arc<NodeCell>,
    pub(crate) generation: u64,
    /// Where the calls are recorded and the token check runs.
    pub(crate) journal: Arc<Journal>,
    /// Whether the backend is restarting (it refuses every call meanwhile).
    pub(crate) backend_down: Arc<AtomicBool>,
    /// How long a lost call hangs before it fails (longer than the client's
    /// call timeout, which cancels it first).
    pub(crate) hang: Duration,
    /// How many calls one batch carries (S4.7): drawn per run, 1 (each call
    /// its own) in about half of the runs and the memory backend's own in
    /// the others, so both ways go through the checkers.
    pub(crate) batch: usize,
}

fn unavailable(what: &str) -> BackendError {
    BackendError::new(BackendErrorKind::Unavailable, format!("simulated: {what}"))
}

impl SimBackend {
    fn draw(&self) -> (Duration, Duration, Fate) {
        let c = lock(&self.cell.conditions).clone();
        let mut rng = lock(&self.cell.rng);
        let mut lat = || c.latency + rng_between(&mut rng, c.latency);
        let (a, b) = (lat(), lat());
        let x = rng.unit();
        let fate = if x < c.hang {
            Fate::Hang
        } else if x < c.hang + c.loss / 2.0 {
            Fate::LoseRequest
        } else if x < c.hang + c.loss {
            Fate::LoseReply
        } else {
            Fate::Deliver
        };
        (a, b, fate)
    }

    fn cut_off(&self) -> bool {
        self.cell.partitioned.load(Ordering::SeqCst) || !self.cell.alive(self.generation)
    }

    async fn lost(&self) -> BackendError {
        tokio::time::sleep(self.hang).await;
        BackendError::new(BackendErrorKind::Timeout, "simulated: no reply")
    }

    /// One call through the faults: latency, loss, partition, backend
    /// down, then `op` on the shared backend, then the reply's way back.
    async fn through_faults<'a, T, E>(
        &self,
        what: String,
        op: impl FnOnce() -> BoxFuture<'a, Result<T, E>>,
        show: impl FnOnce(&Result<T, E>) -> String,
    ) -> Result<T, E>
    where
        E: From<BackendError>,
    {
        let node = Some(self.cell.id);
        if !self.cell.alive(self.generation) {
            return Err(unavailable("node crashed").into());
        }
        let (there, back, fate) = self.draw();
        tokio::time::sleep(there).await;
        if self.backend_down.load(Ordering::SeqCst) {
            self.journal
                .record(node, format!("{what} → refused (backend restarting)"));
            return Err(unavailable("backend restarting").into());
        }
        if self.cut_off() || matches!(fate, Fate::LoseRequest | Fate::Hang) {
            self.journal.record(node, format!("{what} → request lost"));
            return Err(self.lost().await.into());
        }
        let result = op().await;
        self.journal
            .record(node, format!("{what} → {}", show(&result)));
        if matches!(fate, Fate::LoseReply) {
            self.journal.record(node, format!("{what}: reply lost"));
            return Err(self.lost().await.into());
        }
        tokio::time::sleep(back).await;
        if self.cut_off() {
            return Err(self.lost().await.into());
        }
        result
    }
}

fn rng_between(rng: &mut Rng, up_to: Duration) -> Duration {
    rng.between(Duration::ZERO, up_to)
}

fn short<T: std::fmt::Debug, E: std::fmt::Display>(r: &Result<T, E>) -> String {
    match r {
        Ok(v) => format!("{v:?}"),
        Err(e) => format!("error: {e}"),
    }
}

fn ok_or_err<T, E: std::fmt::Display>(r: &Result<T, E>) -> String {
    match r {
        Ok(_) => "ok".to_owned(),
        Err(e) => format!("error: {e}"),
    }
}

fn sid(s: SessionId) -> String {
    let s = s.to_string();
    s.chars().take(8).collect()
}

/// How the journal names a call.
fn describe(call: &Call<'_>) -> String {
    match *call {
        Call::OpenSession { .. } => "open_session".to_owned(),
        Call::Renew { session } => format!("renew {}", sid(session)),
        Call::Acquire { name, .. } => format!("acquire {name}"),
        Call::Release { name, token, .. } => format!("release {name} token {token}"),
        Call::Withdraw { name, .. } => format!("withdraw {name}"),
        Call::CloseSession { session } => format!("close_session {}", sid(session)),
        Call::JoinGroup { group, .. } => format!("join_group {group}"),
        Call::LeaveGroup { group, .. } => format!("leave_group {group}"),
        Call::ClaimSlot {
            name, token, slot, ..
        } => format!("claim_slot {name} token {token} slot {slot}"),
        Call::Inspect { .. } => "inspect".to_owned(),
        Call::Holder { name } => format!("holder {name}"),
        Call::Batch { calls, .. } => {
            let each: Vec<String> = calls
                .iter()
                .map(|c| match c {
                    Command::Acquire { name, .. } => format!("acquire {name}"),
                    Command::Release { name, token, .. } => format!("release {name} token {token}"),
                    Command::Withdraw { name, .. } => format!("withdraw {name}"),
                    other => other.label().to_owned(),
                })
                .collect();
            format!("batch [{}]", each.join(", "))
        }
    }
}

/// How the journal shows a reply.
fn show(reply: &Reply) -> String {
    match reply {
        Reply::Opened(Ok(g)) => format!("session {}", sid(g.session)),
        Reply::Acquired(Ok(AcquireOutcome::Won { token, .. })) => format!("won, token {token}"),
        Reply::Acquired(Ok(AcquireOutcome::Held { token, .. })) => {
            format!("held by another, token {token:?}")
        }
        Reply::Acquired(r) => short(r),
        Reply::Claimed(r) => short(r),
        Reply::Holder(r) => short(r),
        other => match other.error() {
            Some(e) => format!("error: {e}"),
            None => "ok".to_owned(),
        },
    }
}

impl Layer for SimBackend {
    fn inner(&self) -> &dyn Backend {
        &self.inner
    }

    fn call<'a>(&'a self, call: Call<'a>) -> BoxFuture<'a, Reply> {
        async move {
            let reply = self
                .through_faults(
                    describe(&call),
                    || call.run(&self.inner).map(Ok).boxed(),
                    |r: &Result<Reply, BackendError>| {
                        // The token check runs when the backend decides, not
                        // when (or whether) the reply arrives.
                        if let (
                            Call::Acquire { session, name },
                            Ok(Reply::Acquired(Ok(AcquireOutcome::Won { token, .. }))),
                        ) = (call, r)
                        {
                            self.journal.token_won(name, session, *token);
                        }
                        if let (Call::Batch { calls, .. }, Ok(Reply::Batch(replies))) = (call, r) {
                            for reply in replies {
                                let Input::AcquireReplied {
                                    op,
                                    result: Ok(AcquireOutcome::Won { token, .. }),
                                } = reply
                                else {
                                    continue;
                                };
                                let asked = calls.iter().find_map(|c| match c {
                                    Command::Acquire {
                                        op: o,
                                        session,
                                        name,
                                    } if o == op => Some((session, name)),
                                    _ => None,
                                });
                                if let Some((session, name)) = asked {
                                    self.journal.token_won(name, *session, *token);
                                }
                            }
                        }
                        match r {
                            Ok(reply) => show(reply),
                            Err(e) => format!("error: {e}"),
                        }
                    },
                )
                .await;
            reply.unwrap_or_else(|e| call.failed(e))
        }
        .boxed()
    }

    fn subscribe_releases(
        &self,
    ) -> BoxFuture<'_, Result<Option<BoxStream<'static, LeaseName>>, BackendError>> {
        let inner = self.inner.clone();
        let cell = self.cell.clone();
        let generation = self.generation;
        async move {
            let stream = self
                .through_faults(
                    "subscribe_releases".to_owned(),
                    move || async move { inner.subscribe_releases().await }.boxed(),
                    ok_or_err,
                )
                .await?;
            // A cut-off node hears no broadcast.
            Ok(stream.map(|s| {
                s.filter(move |_| {
                    let heard = !cell.partitioned.load(Ordering::SeqCst) && cell.alive(generation);
                    futures::future::ready(heard)
                })
                .boxed()
            }))
        }
        .boxed()
    }

    fn max_batch(&self) -> usize {
        self.batch
    }

    fn name(&self) -> &'static str {
        "simulated"
    }
}
