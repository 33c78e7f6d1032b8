//! The application API: the client, elections, leader tasks and locks.

use crate::driver::{forward_releases, Driver, LockFailure, Msg, Spec, TaskFactory};
use crate::error::Error;
use crate::listener::CurrentTerm;
pub use crate::listener::{
    CallbackExecutor, ClientEvent, ElectionListener, NoListener, CALLBACK_QUEUE, EVENT_QUEUE,
};
use crate::mutant::Selected;
use crate::runtime::AsyncRuntime;
use crate::suspend::{HostSuspendClock, SuspendClock};
use crate::term::{in_callback_or_task, CancelSignal, Clock, TaskOutput, Term};
use crate::turns::{Turn, Turns};
use futures::channel::{mpsc, oneshot};
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::StreamExt;
use simba_backends::{Backend, LeaseHolder, MetadataError, SessionMetadata};
use simba_core::{
    ApiError, BackendProfile, Engine, EntryId, EntrySnapshot, LeaseName, LockWait, SimbaConfig,
    Snapshot, TaskExitPolicy,
};
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Weak};
use std::time::Duration;

/// Two listeners told of each event in turn (`.listener(a).start(b)`).
struct BothListeners(Arc<dyn ElectionListener>, Arc<dyn ElectionListener>);

impl ElectionListener for BothListeners {
    fn on_elected(&self, term: &Term) {
        self.0.on_elected(term);
        self.1.on_elected(term);
    }
    fn on_revoked(&self, term: &Term, reason: simba_core::RevokeReason) {
        self.0.on_revoked(term, reason);
        self.1.on_revoked(term, reason);
    }
}
pub(crate) struct ClientInner {
    tx: mpsc::UnboundedSender<Msg>,
    runtime: Arc<dyn AsyncRuntime>,
    event_queue: usize,
    /// For leader observation, which reads the backend directly.
    backend: Arc<dyn Backend>,
    /// How often [`Simba::observe`] polls: the renewal interval.
    observe_every: Duration,
    /// Same-name locks wait their turn here.
    turns: Arc<Turns>,
    /// The deliberate bug it runs with, if any (feature `mutants`).
    mutant: Selected,
}

impl Drop for ClientInner {
    /// Dropping the last handle closes the client: its session is closed and
    /// every lease released (S1.4), so another client takes over at once.
    fn drop(&mut self) {
        let _ = self.tx.unbounded_send(Msg::Close { done: None });
    }
}

impl ClientInner {
    fn send(&self, msg: Msg) -> bool {
        self.tx.unbounded_send(msg).is_ok()
    }

    /// Whether a blocking wait on this thread could deadlock (S7.5, S7.6).
    fn must_not_block(&self) -> Option<BlockRefusal> {
        if in_callback_or_task() {
            Some(BlockRefusal::OnItself)
        } else if self.runtime.blocking_would_deadlock() {
            Some(BlockRefusal::RuntimeThread)
        } else {
            None
        }
    }
}

#[derive(Clone, Copy)]
enum BlockRefusal {
    OnItself,
    RuntimeThread,
}

/// Builds a [`Simba`] client (see [`Simba::builder`]).
pub struct SimbaBuilder {
    backend: Arc<dyn Backend>,
    config: SimbaConfig,
    executor: CallbackExecutor,
    runtime: Option<Arc<dyn AsyncRuntime>>,
    event_queue: usize,
    metadata: SessionMetadata,
    metadata_error: Option<MetadataError>,
    suspend: Arc<dyn SuspendClock>,
    mutant: Selected,
}

impl fmt::Debug for SimbaBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimbaBuilder")
            .field("backend", &self.backend.name())
            .field("config", &self.config)
            .field("executor", &self.executor)
            .field("metadata", &self.metadata)
            .finish()
    }
}

impl SimbaBuilder {
    /// The timing parameters (S8); default: [`SimbaConfig::default`].
    pub fn config(mut self, config: SimbaConfig) -> Self {
        self.config = config;
        self
    }

    /// Where callbacks run (S7.2, S7.6, S7.7); default: spawned tasks.
    pub fn callback_executor(mut self, executor: CallbackExecutor) -> Self {
        self.executor = executor;
        self
    }

    /// The runtime to drive the client on (the adapters set it).
    pub fn runtime(mut self, runtime: Arc<dyn AsyncRuntime>) -> Self {
        self.runtime = Some(runtime);
        self
    }

    /// How many events each [`Simba::events`] subscriber may leave unread
    /// (default [`EVENT_QUEUE`], at least 1). When a subscriber's queue is
    /// full, new events are dropped for it and counted; it then receives
    /// [`ClientEvent::Lagged`] with the count before the next event that fits.
    pub fn event_queue(mut self, n: usize) -> Self {
        self.event_queue = n.max(1);
        self
    }

    /// Attaches `key = value` to the session this client opens, for anyone
    /// watching a lease it holds ([`Simba::leader`], [`Simba::observe`],
    /// `simba status`): say, `metadata("addr", "10.0.0.7:8443")` so that
    /// followers know where to forward requests. Added to
    /// [`default_metadata`] (`host`, `pid`, `app`), whose entries it may
    /// replace. Keys are 1–64 characters of `[a-z0-9_.-]`, values have no
    /// control characters, and the whole stays within
    /// [`MAX_METADATA_LEN`](simba_backends::MAX_METADATA_LEN) bytes.
    ///
    /// A refused entry makes [`SimbaBuilder::build`] fail with
    /// [`Error::Metadata`].
    pub fn metadata(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        if let Err(e) = self.metadata.insert(key, value) {
            self.metadata_error.get_or_insert(e);
        }
        self
    }

    /// Where the client reads the host's suspended time, which it adds to
    /// its runtime's monotonic clock so that term validity (S3.3) and the
    /// engine's deadlines count a host suspend as the backend does. The
    /// default, [`HostSuspendClock`], reads `CLOCK_BOOTTIME` on Linux; tests
    /// inject a clock that jumps.
    pub fn suspend_clock(mut self, clock: Arc<dyn SuspendClock>) -> Self {
        self.suspend = clock;
        self
    }

    /// Runs the client with a deliberate bug (feature `mutants`, for the
    /// simulation's campaign only; `None`, the default, runs it correct).
    ///
    /// ```
    /// use simba_client::{ClientMutant, MemoryBackend, Simba};
    /// let builder = Simba::builder(MemoryBackend::new())
    ///     .mutant(Some(ClientMutant::TaskStartsBeforeStop));
    /// # drop(builder);
    /// ```
    #[cfg(feature = "mutants")]
    pub fn mutant(mut self, mutant: Option<crate::ClientMutant>) -> Self {
        self.mutant = Selected(mutant);
        self
    }

    /// Replaces the whole session metadata (the defaults included) with
    /// `metadata`; [`SessionMetadata::new`] attaches nothing.
    pub fn session_metadata(mut self, metadata: SessionMetadata) -> Self {
        self.metadata = metadata;
        self
    }

    /// Starts the client: spawns its driver, which opens the session at once.
    ///
    /// # Errors
    /// [`Error::NoRuntime`] if no runtime was given,
    /// [`Error::Metadata`] if a [`SimbaBuilder::metadata`] entry was refused.
    pub fn build(self) -> Result<Simba, Error> {
        if let Some(e) = self.metadata_error {
            return Err(Error::Metadata(e));
        }
        let runtime = self.runtime.ok_or(Error::NoRuntime)?;
        let observe_every = self.config.renew_interval();
        let clock = Clock::new(runtime.clone(), self.suspend);
        let profile = BackendProfile {
            renewal_proves: self.backend.renewal_proves(),
            call_slots: self.backend.max_concurrent_calls(),
            batch: self.backend.max_batch(),
        };
        let config = with_process_seed(self.config, &*runtime);
        let engine = Engine::new(config, profile, clock.now());
        let (tx, rx) = mpsc::unbounded();
        let (exit, driver_exit) = oneshot::channel();
        let driver = Driver::new(
            engine,
            self.backend.clone(),
            clock,
            tx.clone(),
            self.executor,
            exit,
            Arc::new(self.metadata),
        )
        .with_mutant(self.mutant);
        let (subscribed, subscription_made) = oneshot::channel();
        runtime.spawn(Box::pin(driver.run(rx, subscription_made)));
        runtime.spawn(forward_releases(
            self.backend.clone(),
            tx.clone(),
            driver_exit,
            subscribed,
        ));
        Ok(Simba {
            inner: Arc::new(ClientInner {
                tx,
                runtime,
                event_queue: self.event_queue,
                backend: self.backend,
                observe_every,
                turns: Arc::new(Turns::default()),
                mutant: self.mutant,
            }),
        })
    }
}

/// The metadata every client attaches to its session unless told otherwise
/// ([`SimbaBuilder::session_metadata`]): `host` (the host name), `pid` (the
/// process id) and `app` (the executable's name), where they can be read.
pub fn default_metadata() -> SessionMetadata {
    let mut m = SessionMetadata::new();
    if let Some(host) = host_name() {
        let _ = m.insert("host", host);
    }
    let _ = m.insert("pid", std::process::id().to_string());
    let app = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()));
    if let Some(app) = app {
        let _ = m.insert("app", app);
    }
    m
}

fn host_name() -> Option<String> {
    #[cfg(unix)]
    {
        let uname = rustix::system::uname();
        let name = uname.nodename().to_string_lossy().into_owned();
        if !name.is_empty() {
            return Some(name);
        }
    }
    ["HOSTNAME", "COMPUTERNAME"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|h| !h.is_empty()))
}

/// The configuration with its retry-jitter seed (S4.1) drawn from the
/// runtime ([`AsyncRuntime::seed`]: the OS by default), unless an explicit seed
/// was set: so candidates in different processes never retry on one
/// schedule.
pub(crate) fn with_process_seed(config: SimbaConfig, runtime: &dyn AsyncRuntime) -> SimbaConfig {
    if config.explicit_seed().is_some() {
        return config;
    }
    let seed = runtime.seed();
    config.to_builder().seed(seed).build().unwrap_or(config)
}

/// A Simba client: one session on the backend (S1) shared by every election,
/// lock and leader task started on it.
///
/// Cheap to clone. Dropping the last handle (this, and every [`Election`],
/// [`LeaderTask`] and [`LockTerm`] of it) closes the client.
#[derive(Clone)]
pub struct Simba {
    inner: Arc<ClientInner>,
}

impl fmt::Debug for Simba {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Simba").finish_non_exhaustive()
    }
}

impl Simba {
    /// A builder for a client over `backend`. The runtime adapters offer
    /// `simba_tokio::builder(backend)` and `simba_async_std::builder(backend)`,
    /// which also set the runtime.
    pub fn builder(backend: impl Backend) -> SimbaBuilder {
        Self::builder_dyn(Arc::new(backend))
    }

    /// As [`Simba::builder`], for a shared or boxed backend.
    pub fn builder_dyn(backend: Arc<dyn Backend>) -> SimbaBuilder {
        SimbaBuilder {
            backend,
            config: SimbaConfig::default(),
            executor: CallbackExecutor::default(),
            runtime: None,
            event_queue: EVENT_QUEUE,
            metadata: default_metadata(),
            metadata_error: None,
            suspend: Arc::new(HostSuspendClock),
            mutant: Selected::default(),
        }
    }

    /// An election on `name`; start it with a listener or a leader task.
    pub fn election(&self, name: impl AsRef<str>) -> ElectionBuilder {
        ElectionBuilder {
            client: self.clone(),
            name: name.as_ref().to_owned(),
            listener: None,
            policy: TaskExitPolicy::default(),
        }
    }

    /// Shortcut for `election(name).run_while_leader(task)`.
    ///
    /// # Errors
    /// As [`ElectionBuilder::run_while_leader`].
    pub async fn run_while_leader<F, Fut>(
        &self,
        name: impl AsRef<str>,
        task: F,
    ) -> Result<LeaderTask, Error>
    where
        F: FnMut(Term) -> Fut + Send + 'static,
        Fut: Future + Send + 'static,
        Fut::Output: TaskOutput,
    {
        self.election(name).run_while_leader(task).await
    }

    /// The driver's inbox, for schedules (which must not hold the client
    /// handle itself, or it would never close, S1.4).
    pub(crate) fn msg_sender(&self) -> mpsc::UnboundedSender<Msg> {
        self.inner.tx.clone()
    }

    /// The client's runtime.
    pub(crate) fn runtime(&self) -> Arc<dyn AsyncRuntime> {
        self.inner.runtime.clone()
    }

    pub(crate) fn mutant(&self) -> Selected {
        self.inner.mutant
    }

    /// A lock on `name` (S5.3): one term only.
    pub fn lock(&self, name: impl AsRef<str>) -> Lock {
        Lock {
            client: self.clone(),
            name: name.as_ref().to_owned(),
        }
    }

    /// A picture of the session and every election and lock (S1.5).
    ///
    /// # Errors
    /// [`Error::Closed`] once the client is closed.
    pub async fn snapshot(&self) -> Result<Snapshot, Error> {
        let (reply, rx) = oneshot::channel();
        if !self.inner.send(Msg::Snapshot { reply }) {
            return Err(Error::Closed);
        }
        rx.await.map_err(|_| Error::Closed)
    }

    /// Who holds `name` now (leader observation, like etcd's `Leader` or
    /// Curator's `getLeader`): the holder's session, the term's fencing
    /// token, its remaining time and the metadata the holder attached to
    /// its session ([`SimbaBuilder::metadata`]); `None` if nobody holds it.
    /// Any client may ask, whether or not it takes part in the election.
    /// One backend call ([`Backend::holder`]).
    ///
    /// # Errors
    /// [`Error::InvalidName`] (S3.1), [`Error::Backend`] if the
    /// call failed.
    pub async fn leader(&self, name: impl AsRef<str>) -> Result<Option<LeaseHolder>, Error> {
        let name = LeaseName::new(name.as_ref())?;
        Ok(self.inner.backend.holder(&name).await?)
    }

    /// Watches who holds `name` (like etcd's `Observe` or client-go's
    /// `OnNewLeader`): the stream yields the current holder (or `None`)
    /// first, then each change — a new term (another session, or a new
    /// token), a lease that became free — as `Option<LeaseHolder>`.
    ///
    /// It polls [`Backend::holder`] once per renewal interval (S8), so a
    /// change is seen within one interval plus one call, and a term shorter
    /// than that may be missed; release broadcasts are not used. A failed
    /// poll is logged (`tracing`, warn) and retried at the next interval,
    /// without an item. The stream ends when it is dropped or the client
    /// closes; it does not keep the client open.
    ///
    /// # Errors
    /// [`Error::InvalidName`] (S3.1), [`Error::Closed`].
    pub fn observe(
        &self,
        name: impl AsRef<str>,
    ) -> Result<BoxStream<'static, Option<LeaseHolder>>, Error> {
        let name = LeaseName::new(name.as_ref())?;
        if self.inner.tx.is_closed() {
            return Err(Error::Closed);
        }
        let (tx, rx) = mpsc::channel(4);
        let client = Arc::downgrade(&self.inner);
        let backend = self.inner.backend.clone();
        let runtime = self.inner.runtime.clone();
        let every = self.inner.observe_every;
        self.inner.runtime.spawn(Box::pin(observe_loop(
            client, backend, runtime, every, name, tx,
        )));
        Ok(rx.boxed())
    }

    /// A stream of the client's events from now on: terms, session state,
    /// shortened leases, backend failures, leader tasks that ended. It
    /// starts with the session state current when the subscription reaches
    /// the driver, so no transition is missed, and ends when the client
    /// closes. Its queue is bounded ([`SimbaBuilder::event_queue`]): a
    /// subscriber that does not keep up is told how many events it missed
    /// ([`ClientEvent::Lagged`]) instead of growing memory without end.
    pub fn events(&self) -> BoxStream<'static, ClientEvent> {
        // The channel holds `buffer + 1` (one sender): `event_queue` in all.
        let (tx, rx) = mpsc::channel(self.inner.event_queue.saturating_sub(1));
        let _ = self.inner.send(Msg::Subscribe { tx });
        rx.boxed()
    }

    /// Closes the client (S1.4): stops every election and lock (each
    /// handing over in the order of S6), closes the session, releasing all
    /// its leases at once, and resolves once every `on_revoked` has run.
    /// Closing a closed client returns at once.
    pub async fn close(&self) {
        let (done, rx) = oneshot::channel();
        if self.inner.send(Msg::Close { done: Some(done) }) {
            let _ = rx.await;
        }
    }

    /// Closes the client and blocks the thread until it is closed. Call it
    /// from a thread that may block (not from inside an async task).
    ///
    /// # Errors
    /// [`Error::WouldWaitOnItself`] when called from a callback or a
    /// leader task (S7.5, S7.6), [`Error::WouldBlockRuntime`] on an
    /// async runtime thread: the close is started but not awaited.
    pub fn close_blocking(&self) -> Result<(), Error> {
        if let Some(refusal) = self.inner.must_not_block() {
            let _ = self.inner.send(Msg::Close { done: None });
            return Err(match refusal {
                BlockRefusal::OnItself => Error::WouldWaitOnItself,
                BlockRefusal::RuntimeThread => Error::WouldBlockRuntime,
            });
        }
        futures::executor::block_on(self.close());
        Ok(())
    }

    pub(crate) fn send(&self, msg: Msg) -> bool {
        self.inner.send(msg)
    }

    /// Why a blocking call must not wait here (S7.5, S7.6), if it must not.
    pub(crate) fn blocking_refusal(&self) -> Option<bool> {
        self.inner
            .must_not_block()
            .map(|r| matches!(r, BlockRefusal::OnItself))
    }

    /// Starts `spec` on `name`; the engine's id of the new entry, which
    /// the handle names in what it asks later.
    pub(crate) async fn start(&self, name: LeaseName, spec: Spec) -> Result<EntryId, ApiError> {
        let (reply, rx) = oneshot::channel();
        if !self.inner.send(Msg::Start { name, spec, reply }) {
            return Err(ApiError::Closed);
        }
        match rx.await {
            Ok(Ok(entry)) => Ok(entry),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(ApiError::Closed),
        }
    }
}

/// Polls the holder of `name` until the stream or the client is gone.
async fn observe_loop(
    client: Weak<ClientInner>,
    backend: Arc<dyn Backend>,
    runtime: Arc<dyn AsyncRuntime>,
    every: Duration,
    name: LeaseName,
    mut tx: mpsc::Sender<Option<LeaseHolder>>,
) {
    use futures::SinkExt;
    let mut last: Option<Option<(simba_core::SessionId, simba_core::Token)>> = None;
    loop {
        let open = client.upgrade().is_some_and(|c| !c.tx.is_closed());
        if !open || tx.is_closed() {
            return;
        }
        let next = runtime.now() + every;
        match backend.holder(&name).await {
            Ok(holder) => {
                let key = holder.as_ref().map(|h| (h.session, h.token));
                if last != Some(key) {
                    last = Some(key);
                    if tx.send(holder).await.is_err() {
                        return;
                    }
                }
            }
            Err(error) => {
                tracing::warn!(name = %name, %error, "observing the holder failed; retrying");
            }
        }
        runtime.sleep_until(next).await;
    }
}

fn election_error(e: ApiError) -> Error {
    match e {
        ApiError::AlreadyStarted(n) => Error::AlreadyStarted(n.to_string()),
        ApiError::NotStarted(n) => Error::Stopped(n.to_string()),
        ApiError::WrongKind { name, .. } => Error::AlreadyStarted(name.to_string()),
        _ => Error::Closed,
    }
}

/// Starts an election ([`Simba::election`]).
pub struct ElectionBuilder {
    client: Simba,
    name: String,
    listener: Option<Arc<dyn ElectionListener>>,
    policy: TaskExitPolicy,
}

impl fmt::Debug for ElectionBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ElectionBuilder")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl ElectionBuilder {
    /// Also deliver `on_elected`/`on_revoked` to `listener`: with the
    /// leader-task variants, and with [`ElectionBuilder::start`], whose own
    /// listener then hears each event right after this one (both, in that
    /// order, S7.2). Calling it again replaces the earlier one.
    pub fn listener(mut self, listener: impl ElectionListener) -> Self {
        self.listener = Some(Arc::new(listener));
        self
    }

    pub(crate) fn listener_arc(mut self, listener: Arc<dyn ElectionListener>) -> Self {
        self.listener = Some(listener);
        self
    }

    /// What a leader task that ends on its own does to its term (S6.5).
    /// The default, [`TaskExitPolicy::GiveUpTerm`]: a task that returns
    /// gives the term up (revoke, release, compete again after one retry
    /// delay); one that returns an error or panics gives it up and steps
    /// down for a back-off that doubles from one renewal interval with each
    /// failure in a row, up to 32 intervals (reset after a clean return or
    /// a term of at least one lease duration). Opt-in:
    /// [`TaskExitPolicy::KeepTerm`], [`TaskExitPolicy::StopElection`].
    pub fn on_task_exit(mut self, policy: TaskExitPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Starts competing (S4.1), telling `listener` about every term (S7.1).
    /// A listener set earlier with [`ElectionBuilder::listener`] is told
    /// too, first: each event goes to that one, then to `listener`.
    ///
    /// # Errors
    /// [`Error::InvalidName`] (S3.1), [`Error::AlreadyStarted`]
    /// (S7.4), [`Error::Closed`].
    pub async fn start(self, listener: impl ElectionListener) -> Result<Election, Error> {
        let given: Arc<dyn ElectionListener> = Arc::new(listener);
        let listener: Arc<dyn ElectionListener> = match &self.listener {
            Some(earlier) => Arc::new(BothListeners(earlier.clone(), given)),
            None => given,
        };
        self.start_spec(Some(listener), None).await
    }

    /// Runs `task(term)` only while this client is leader (S6). The future
    /// starts with each term and may return `()` or `Result<(), E>`
    /// ([`TaskOutput`]); how its own end affects the term is the
    /// election's [`on_task_exit`](ElectionBuilder::on_task_exit) policy (S6.5).
    ///
    /// On a voluntary hand-over (`stop()`, `step_down()`, close) the task is
    /// interrupted cooperatively (S6.1 steps 2–3): [`Term::revoked`]
    /// resolves and `is_valid()` turns false, and the lease is kept until
    /// the future returns (say, after rolling back or finishing a write) or
    /// the term's local deadline passes; then the future, if still running,
    /// is dropped, and only then is the lease released. On an involuntary
    /// loss (S6.3) the future is dropped at once. Work spawned with
    /// [`Term::spawn`] is interrupted and awaited with the task.
    ///
    /// ```no_run
    /// # use simba_client::{Simba, Term};
    /// # async fn next_batch() -> Result<Vec<u8>, std::io::Error> { Ok(vec![]) }
    /// # async fn post(_: Vec<u8>, _token: u64) -> Result<(), std::io::Error> { Ok(()) }
    /// # async fn rollback() -> Result<(), std::io::Error> { Ok(()) }
    /// # async fn demo(simba: Simba) -> Result<(), Box<dyn std::error::Error>> {
    /// use futures::FutureExt;
    ///
    /// let mut terms = 0u64; // the factory is `FnMut`: it may keep state
    /// let job = simba
    ///     .election("ledger")
    ///     .run_while_leader(move |term: Term| {
    ///         terms += 1;
    ///         println!("term {terms}, token {}", term.token());
    ///         async move {
    ///             loop {
    ///                 futures::select! {
    ///                     _ = term.revoked().fuse() => return rollback().await,
    ///                     batch = next_batch().fuse() => post(batch?, term.token()).await?,
    ///                 }
    ///             }
    ///         }
    ///     })
    ///     .await?;
    /// # job.stop().await;
    /// # Ok(()) }
    /// ```
    ///
    /// The factory (`FnMut`) is called once per term and may keep state
    /// between terms; state a term's future uses is moved or cloned into it
    /// (clone-per-term), since the future outlives the call.
    ///
    /// # Errors
    /// As [`ElectionBuilder::start`].
    pub async fn run_while_leader<F, Fut>(self, task: F) -> Result<LeaderTask, Error>
    where
        F: FnMut(Term) -> Fut + Send + 'static,
        Fut: Future + Send + 'static,
        Fut::Output: TaskOutput,
    {
        let task = crate::driver::shared_factory(task);
        let factory = TaskFactory::Async(Arc::new(
            move |term| -> BoxFuture<'static, Result<(), String>> {
                let fut = task(term);
                Box::pin(async move { fut.await.into_task_result() })
            },
        ));
        let listener = self.listener.clone();
        let election = self.start_spec(listener, Some(factory)).await?;
        Ok(LeaderTask { election })
    }

    /// Runs blocking or CPU-bound `task(term, token)` on a blocking thread
    /// while leader; it may return `()` or `Result<(), E>` ([`TaskOutput`]),
    /// and its own end is handled by the
    /// [`on_task_exit`](ElectionBuilder::on_task_exit) policy (S6.5). On
    /// revocation the `token` is cancelled; the task should return soon. One
    /// that ignores it delays a voluntary handover by at most the term's
    /// remaining time (S6.2).
    ///
    /// # Errors
    /// As [`ElectionBuilder::start`].
    pub async fn run_blocking_while_leader<F, R>(self, task: F) -> Result<LeaderTask, Error>
    where
        // `Fn`, not `FnMut`: the job runs inside the call, so a `FnMut`
        // (behind a lock) would make a job still running after its term
        // delay the next term's; move or clone state into each call.
        F: Fn(Term, CancelSignal) -> R + Send + Sync + 'static,
        R: TaskOutput,
    {
        let factory = TaskFactory::Blocking(Arc::new(move |term, token| {
            task(term, token).into_task_result()
        }));
        let listener = self.listener.clone();
        let election = self.start_spec(listener, Some(factory)).await?;
        Ok(LeaderTask { election })
    }

    async fn start_spec(
        self,
        listener: Option<Arc<dyn ElectionListener>>,
        task: Option<TaskFactory>,
    ) -> Result<Election, Error> {
        let name = LeaseName::new(&self.name)?;
        let current = CurrentTerm::default();
        let entry = self
            .client
            .start(
                name.clone(),
                Spec::Election {
                    listener,
                    task,
                    policy: self.policy,
                    current: current.clone(),
                },
            )
            .await
            .map_err(election_error)?;
        Ok(Election {
            client: self.client,
            name,
            entry,
            current,
        })
    }
}

/// A started election (S5). Dropping the handle does not stop it; dropping
/// every handle of the client closes the client.
#[derive(Clone)]
pub struct Election {
    client: Simba,
    name: LeaseName,
    entry: EntryId,
    current: CurrentTerm,
}

impl fmt::Debug for Election {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Election")
            .field("name", &self.name.as_str())
            .finish_non_exhaustive()
    }
}

impl Election {
    /// The election's name.
    pub fn name(&self) -> &str {
        self.name.as_str()
    }

    /// Whether this client leads the election now: it holds a term that is
    /// valid (S3.3) — not revoked and before its local deadline. No backend
    /// call, no waiting; true from the `on_elected` of a term until it is
    /// revoked or its deadline passes.
    pub fn is_leader(&self) -> bool {
        self.term().is_some()
    }

    /// The current term while [`Election::is_leader`] (for its token).
    pub fn term(&self) -> Option<Term> {
        let current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        current.as_ref().filter(|t| t.is_valid()).cloned()
    }

    /// The client's events that concern this election, from now on: its
    /// terms' `Elected` and `Revoked`, its leader task's `TaskExited`, and
    /// the stream's `Lagged` and `Closed` ([`Simba::events`], filtered).
    ///
    /// ```no_run
    /// use futures::StreamExt;
    /// # async fn demo(simba: simba_client::Simba) -> Result<(), simba_client::Error> {
    /// let election = simba.election("billing").start(simba_client::NoListener).await?;
    /// let mut events = election.events();
    /// while let Some(event) = events.next().await {
    ///     println!("billing: {event:?}");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn events(&self) -> BoxStream<'static, ClientEvent> {
        let name = self.name.as_str().to_owned();
        self.client
            .events()
            .filter(move |e| std::future::ready(e.concerns_lease(&name)))
            .boxed()
    }

    /// Ends the election (S6.1, S6.4): revokes any term, interrupts its
    /// task, releases the lease once the task has exited, and resolves after
    /// the last `on_revoked` has run (S7.3). After that the listener receives
    /// nothing more. Stopping twice, or after close, resolves at once.
    pub async fn stop(&self) {
        let (done, rx) = oneshot::channel();
        if self.client.inner.send(Msg::Stop {
            name: self.name.clone(),
            entry: self.entry,
            done: Some(done),
        }) {
            let _ = rx.await;
        }
    }

    /// [`Election::stop`], blocking the thread until it completes.
    ///
    /// # Errors
    /// [`Error::WouldWaitOnItself`] from a callback or leader task
    /// (S7.5), [`Error::WouldBlockRuntime`] on an async runtime
    /// thread: the stop is started but not awaited.
    pub fn stop_blocking(&self) -> Result<(), Error> {
        if let Some(refusal) = self.client.inner.must_not_block() {
            let _ = self.client.inner.send(Msg::Stop {
                name: self.name.clone(),
                entry: self.entry,
                done: None,
            });
            return Err(match refusal {
                BlockRefusal::OnItself => Error::WouldWaitOnItself,
                BlockRefusal::RuntimeThread => Error::WouldBlockRuntime,
            });
        }
        futures::executor::block_on(self.stop());
        Ok(())
    }

    /// Hands leadership over as `stop()` does, then stays out of the
    /// competition for `cooldown` counted from now (S6.4). Resolves after
    /// the last `on_revoked` has run (S7.3).
    ///
    /// # Errors
    /// [`Error::Stopped`] if the election was stopped,
    /// [`Error::Closed`] if the client is closed.
    pub async fn step_down(&self, cooldown: Duration) -> Result<(), Error> {
        let (done, rx) = oneshot::channel();
        if !self.client.inner.send(Msg::StepDown {
            name: self.name.clone(),
            entry: self.entry,
            cooldown,
            done,
        }) {
            return Err(Error::Closed);
        }
        match rx.await {
            Ok(r) => r.map_err(election_error),
            Err(_) => Err(Error::Closed),
        }
    }

    /// The election's state (S5.1) and term, or `None` once stopped.
    ///
    /// # Errors
    /// [`Error::Closed`] once the client is closed.
    pub async fn snapshot(&self) -> Result<Option<EntrySnapshot>, Error> {
        let snap = self.client.snapshot().await.map_err(|_| Error::Closed)?;
        Ok(snap.entries.into_iter().find(|e| e.name == self.name))
    }
}

/// A started leader task ([`ElectionBuilder::run_while_leader`]): an
/// election whose terms each run the task.
#[derive(Clone, Debug)]
pub struct LeaderTask {
    election: Election,
}

impl LeaderTask {
    /// The task's election name.
    pub fn name(&self) -> &str {
        self.election.name()
    }

    /// The election behind the task.
    pub fn election(&self) -> &Election {
        &self.election
    }

    /// The client's events that concern the task's election
    /// ([`Election::events`]).
    pub fn events(&self) -> BoxStream<'static, ClientEvent> {
        self.election.events()
    }

    /// Stops the task's election in the handover order of S6.1.
    pub async fn stop(&self) {
        self.election.stop().await
    }

    /// [`LeaderTask::stop`], blocking the thread.
    ///
    /// # Errors
    /// As [`Election::stop_blocking`].
    pub fn stop_blocking(&self) -> Result<(), Error> {
        self.election.stop_blocking()
    }

    /// Steps down for `cooldown` (S6.4).
    ///
    /// # Errors
    /// As [`Election::step_down`].
    pub async fn step_down(&self, cooldown: Duration) -> Result<(), Error> {
        self.election.step_down(cooldown).await
    }

    /// As [`Election::snapshot`].
    ///
    /// # Errors
    /// As [`Election::snapshot`].
    pub async fn snapshot(&self) -> Result<Option<EntrySnapshot>, Error> {
        self.election.snapshot().await
    }
}

/// A lock on one name (S5.3), from [`Simba::lock`].
#[derive(Clone, Debug)]
pub struct Lock {
    client: Simba,
    name: String,
}

/// Stops a lock attempt whose caller went away before it finished.
struct StopOnDrop<'a> {
    client: &'a Simba,
    name: LeaseName,
    entry: Option<EntryId>,
    turn: Option<Turn>,
}

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        if let Some(entry) = self.entry {
            stop_then_pass(self.client, &self.name, entry, self.turn.take());
        }
    }
}

/// Stops lock `entry` of `name` without waiting, and hands the name's turn
/// to the next same-name lock of this client only once the driver has
/// forgotten the entry (so the next one never meets `AlreadyStarted`).
fn stop_then_pass(client: &Simba, name: &LeaseName, entry: EntryId, turn: Option<Turn>) {
    let (done, rx) = oneshot::channel();
    let sent = client.inner.send(Msg::Stop {
        name: name.clone(),
        entry,
        done: Some(done),
    });
    if let (true, Some(turn)) = (sent, turn) {
        client.inner.runtime.spawn(Box::pin(async move {
            let _ = rx.await;
            drop(turn);
        }));
    }
}

impl Lock {
    /// Waits until the lock is acquired.
    ///
    /// Locks of one name on one client take turns, first come first served:
    /// while this client holds (or is acquiring) the name, a second
    /// `acquire` of it waits in a local queue until the first is released,
    /// then competes for the lease. Dropping the waiting future leaves the
    /// queue.
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::AlreadyStarted`] (an
    /// election of that name runs on this client), [`Error::Closed`].
    pub async fn acquire(&self) -> Result<LockTerm, Error> {
        self.acquire_with(LockWait::Forever).await
    }

    /// One attempt, once a session is open.
    ///
    /// # Errors
    /// [`Error::Held`] if another session holds it, or a lock of that
    /// name on this client holds or waits for it; and as [`Lock::acquire`].
    pub async fn try_acquire(&self) -> Result<LockTerm, Error> {
        self.acquire_with(LockWait::Try).await
    }

    /// Keeps trying for `timeout`, the wait for a same-name lock of this
    /// client included (see [`Lock::acquire`]).
    ///
    /// # Errors
    /// [`Error::TimedOut`], and as [`Lock::acquire`].
    pub async fn acquire_timeout(&self, timeout: Duration) -> Result<LockTerm, Error> {
        self.acquire_with(LockWait::For(timeout)).await
    }

    async fn acquire_with(&self, wait: LockWait) -> Result<LockTerm, Error> {
        let name = LeaseName::new(&self.name)?;
        let requested = wait;
        let turns = self.client.inner.turns.clone();
        let (turn, wait) = match wait {
            LockWait::Try => match turns.try_take(&name) {
                Some(turn) => (turn, LockWait::Try),
                None => return Err(Error::Held(self.name.clone())),
            },
            LockWait::For(timeout) => {
                let runtime = &self.client.inner.runtime;
                let start = runtime.now();
                let take = turns.take(&name);
                let sleep = runtime.sleep_until(start + timeout);
                futures::pin_mut!(take);
                match futures::future::select(take, sleep).await {
                    futures::future::Either::Left((turn, _)) => {
                        let left = timeout.saturating_sub(runtime.now() - start);
                        (turn, LockWait::For(left))
                    }
                    futures::future::Either::Right(_) => {
                        return Err(Error::TimedOut {
                            name: self.name.clone(),
                            timeout,
                        })
                    }
                }
            }
            forever => (turns.take(&name).await, forever),
        };
        let (reply, rx) = oneshot::channel();
        let entry = self
            .client
            .start(name.clone(), Spec::Lock { wait, reply })
            .await
            .map_err(|e| match e {
                ApiError::AlreadyStarted(n) | ApiError::WrongKind { name: n, .. } => {
                    Error::AlreadyStarted(n.to_string())
                }
                _ => Error::Closed,
            })?;
        let mut guard = StopOnDrop {
            client: &self.client,
            name: name.clone(),
            entry: Some(entry),
            turn: Some(turn),
        };
        let result = rx.await;
        match result {
            Ok(Ok(term)) => {
                guard.entry = None;
                Ok(LockTerm {
                    client: self.client.clone(),
                    name,
                    entry,
                    term,
                    released: false,
                    turn: guard.turn.take(),
                })
            }
            Ok(Err(failure)) => {
                guard.entry = None;
                Err(match failure {
                    LockFailure::Held => Error::Held(self.name.clone()),
                    LockFailure::TimedOut => Error::TimedOut {
                        name: self.name.clone(),
                        timeout: match requested {
                            LockWait::For(timeout) => timeout,
                            _ => Duration::ZERO,
                        },
                    },
                    LockFailure::Closed => Error::Closed,
                })
            }
            Err(_) => Err(Error::Closed),
        }
    }
}

/// A held lock: its [`Term`] (S3.2) until released. Released on
/// [`release`](LockTerm::release) or drop (S5.3); if the term is lost
/// (deadline, expiry, takeover) the lock is gone for good.
pub struct LockTerm {
    client: Simba,
    name: LeaseName,
    entry: EntryId,
    term: Term,
    released: bool,
    /// This client's turn for the name, passed on once the lock is gone.
    turn: Option<Turn>,
}

impl fmt::Debug for LockTerm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockTerm")
            .field("term", &self.term)
            .finish()
    }
}

impl std::ops::Deref for LockTerm {
    type Target = Term;
    fn deref(&self) -> &Term {
        &self.term
    }
}

impl LockTerm {
    /// The lock's term.
    pub fn term(&self) -> &Term {
        &self.term
    }

    /// Releases the lock (revoke, then release with the term's token, S3.5)
    /// and resolves once the release is sent.
    pub async fn release(mut self) {
        self.released = true;
        let (done, rx) = oneshot::channel();
        if self.client.inner.send(Msg::Stop {
            name: self.name.clone(),
            entry: self.entry,
            done: Some(done),
        }) {
            let _ = rx.await;
        }
    }

    /// [`LockTerm::release`], blocking the thread.
    ///
    /// # Errors
    /// [`Error::WouldWaitOnItself`] from a callback or leader task
    /// (S7.5), [`Error::WouldBlockRuntime`] on an async runtime thread:
    /// the release is started but not awaited.
    pub fn release_blocking(self) -> Result<(), Error> {
        if let Some(refusal) = self.client.inner.must_not_block() {
            drop(self);
            return Err(match refusal {
                BlockRefusal::OnItself => Error::WouldWaitOnItself,
                BlockRefusal::RuntimeThread => Error::WouldBlockRuntime,
            });
        }
        futures::executor::block_on(self.release());
        Ok(())
    }
}

impl Drop for LockTerm {
    fn drop(&mut self) {
        if !self.released {
            stop_then_pass(&self.client, &self.name, self.entry, self.turn.take());
        }
    }
}

impl simba_backends::fencing::AsToken for LockTerm {
    fn token_value(&self) -> u64 {
        self.term().token()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::with_process_seed;
    use crate::AsyncRuntime;
    use futures::future::BoxFuture;
    use std::time::Instant;

    /// A runtime that only answers the seed seam's default (OS randomness).
    struct OsSeed;
    impl AsyncRuntime for OsSeed {
        fn spawn(&self, _task: BoxFuture<'static, ()>) {}
        fn spawn_blocking(&self, _work: Box<dyn FnOnce() + Send>) {}
        fn sleep_until(&self, _at: Instant) -> BoxFuture<'static, ()> {
            Box::pin(futures::future::pending())
        }
        fn now(&self) -> Instant {
            Instant::now()
        }
    }

    use simba_core::{
        AcquireOutcome, BackendProfile, Command, Engine, Input, LeaseName, Output, Renewal,
        SessionGrant, SessionId, SimbaConfig, Timestamp,
    };

    /// When a candidate that always finds the lease held sends its acquires.
    fn acquire_times(config: SimbaConfig) -> Vec<Timestamp> {
        let lease = config.lease_duration();
        let mut e = Engine::new(config, BackendProfile::default(), Timestamp::ZERO);
        let mut now = Timestamp::ZERO;
        e.start_election(now, LeaseName::new("jitter").unwrap(), false)
            .unwrap();
        let mut times = Vec::new();
        while times.len() < 8 {
            while let Some(out) = e.poll_output() {
                let reply = match out {
                    Output::Command(Command::OpenSession { op, .. }) => Input::SessionOpened {
                        op,
                        result: Ok(SessionGrant {
                            session: SessionId::from_u128(1),
                            remaining: lease,
                        }),
                    },
                    Output::Command(Command::Renew { op, .. }) => Input::RenewReplied {
                        op,
                        result: Ok(Renewal {
                            groups: Vec::new(),
                            remaining: lease,
                            owned: Vec::new(),
                        }),
                    },
                    Output::Command(Command::Acquire { op, .. }) => {
                        times.push(now);
                        Input::AcquireReplied {
                            op,
                            result: Ok(AcquireOutcome::Held {
                                holder: None,
                                token: None,
                                holder_remaining: None,
                            }),
                        }
                    }
                    _ => continue,
                };
                e.handle(now, reply);
            }
            now = e.poll_timeout().unwrap();
            e.handle_timeout(now);
        }
        times
    }

    /// S4.1: two clients without an explicit seed retry on different
    /// schedules; an explicit seed is kept (for reproducible tests).
    #[test]
    fn seeds_are_drawn_per_client_unless_set() {
        let a = with_process_seed(SimbaConfig::default(), &OsSeed);
        let b = with_process_seed(SimbaConfig::default(), &OsSeed);
        assert_ne!(a.seed(), b.seed(), "two clients, one jitter schedule");
        assert_ne!(
            acquire_times(a),
            acquire_times(b),
            "two clients retry on the same schedule"
        );
        let fixed = SimbaConfig::builder().seed(42).build().unwrap();
        assert_eq!(with_process_seed(fixed, &OsSeed).seed(), 42);
    }
}
