//! The application API: the client, elections, leader tasks and locks.

use crate::driver::{forward_releases, Driver, LockFailure, Msg, Spec, TaskFactory};
use crate::error::{BuildError, ClientError, ElectionError, LockError};
use crate::runtime::Runtime;
use crate::term::{in_callback_or_task, CancellationToken, Clock, Term};
use futures::channel::{mpsc, oneshot};
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::StreamExt;
use simba_backends::Backend;
use simba_core::{
    ApiError, BackendError, BackendProfile, Engine, EntrySnapshot, LeaseName, RevokeReason,
    SessionState, SimbaConfig, Snapshot,
};
use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Where election callbacks run (S7.2). Callbacks of one election always run
/// one at a time, in order; the engine never waits for them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum CallbackExecutor {
    /// One serial worker task per election on the runtime (the default).
    #[default]
    Spawned,
    /// As `Spawned`, but an `on_elected` is refused while `n` callbacks of
    /// that election are still waiting to run: the term then ends silently
    /// and the election steps down for one lease duration (S7.7).
    SpawnedBounded(usize),
    /// Callbacks run on the driver loop itself (S7.6): keep them short, and
    /// only chain on the futures the client returns; blocking calls made
    /// there are refused with a `WouldWaitOnItself` error.
    Inline,
}

/// An event of the client, for observability ([`Simba::events`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClientEvent {
    /// This client won a term of `name`.
    Elected {
        /// The lease name.
        name: String,
        /// The term's fencing token.
        token: u64,
    },
    /// A term of `name` ended (S3.4).
    Revoked {
        /// The lease name.
        name: String,
        /// The term's fencing token.
        token: u64,
        /// Why it ended.
        reason: RevokeReason,
    },
    /// The session state changed (S1.5).
    SessionState {
        /// The new state.
        state: SessionState,
    },
    /// The backend grants a shorter lease than configured (S8.4).
    SessionLeaseShortened {
        /// The local validity one renewal proves.
        validity: Duration,
        /// The renewal period now in force.
        renew_period: Duration,
    },
    /// A backend call failed; the engine has already reacted.
    BackendFailed {
        /// `open`, `renew`, `acquire`, `release` or `close`.
        command: &'static str,
        /// The failure.
        error: BackendError,
    },
    /// The client is closed (S1.4).
    Closed,
}

/// What an election tells the application (S7.1): every `on_elected(term)`
/// is followed by exactly one `on_revoked(term, reason)` for the same term.
/// Callbacks of one election run one at a time on the callback executor (S7.2).
pub trait ElectionListener: Send + Sync + 'static {
    /// This client won `term`.
    fn on_elected(&self, term: &Term) {
        let _ = term;
    }
    /// `term` ended for `reason`; it is already invalid.
    fn on_revoked(&self, term: &Term, reason: RevokeReason) {
        let _ = (term, reason);
    }
}

/// A listener that ignores everything (for leader tasks without callbacks).
#[derive(Clone, Copy, Debug, Default)]
pub struct NoListener;
impl ElectionListener for NoListener {}

pub(crate) struct ClientInner {
    tx: mpsc::UnboundedSender<Msg>,
    next_entry: AtomicU64,
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
}

/// Builds a [`Simba`] client (see [`Simba::builder`]).
pub struct SimbaBuilder {
    backend: Arc<dyn Backend>,
    config: SimbaConfig,
    executor: CallbackExecutor,
    runtime: Option<Arc<dyn Runtime>>,
}

impl fmt::Debug for SimbaBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimbaBuilder")
            .field("backend", &self.backend.name())
            .field("config", &self.config)
            .field("executor", &self.executor)
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
    pub fn runtime(mut self, runtime: Arc<dyn Runtime>) -> Self {
        self.runtime = Some(runtime);
        self
    }

    /// Starts the client: spawns its driver, which opens the session at once.
    ///
    /// # Errors
    /// [`BuildError::NoRuntime`] if no runtime was given.
    pub fn build(self) -> Result<Simba, BuildError> {
        let runtime = self.runtime.ok_or(BuildError::NoRuntime)?;
        let clock = Clock {
            base: runtime.now(),
            runtime: runtime.clone(),
        };
        let profile = BackendProfile {
            renewal_proves: self.backend.renewal_proves(),
        };
        let engine = Engine::new(self.config, profile, clock.now());
        let (tx, rx) = mpsc::unbounded();
        let (exit, driver_exit) = oneshot::channel();
        let driver = Driver::new(
            engine,
            self.backend.clone(),
            clock,
            tx.clone(),
            self.executor,
            exit,
        );
        runtime.spawn(Box::pin(driver.run(rx)));
        runtime.spawn(forward_releases(self.backend, tx.clone(), driver_exit));
        Ok(Simba {
            inner: Arc::new(ClientInner {
                tx,
                next_entry: AtomicU64::new(1),
            }),
        })
    }
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
        }
    }

    /// An election on `name`; start it with a listener or a leader task.
    pub fn election(&self, name: impl AsRef<str>) -> ElectionBuilder {
        ElectionBuilder {
            client: self.clone(),
            name: name.as_ref().to_owned(),
            listener: None,
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
    ) -> Result<LeaderTask, ElectionError>
    where
        F: Fn(Term) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.election(name).run_while_leader(task).await
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
    /// [`ClientError::Closed`] once the client is closed.
    pub async fn snapshot(&self) -> Result<Snapshot, ClientError> {
        let (reply, rx) = oneshot::channel();
        if !self.inner.send(Msg::Snapshot { reply }) {
            return Err(ClientError::Closed);
        }
        rx.await.map_err(|_| ClientError::Closed)
    }

    /// A stream of the client's events from now on: terms, session state,
    /// shortened leases, backend failures. It starts with the session state
    /// current when the subscription reaches the driver, so no transition is
    /// missed, and ends when the client closes.
    pub fn events(&self) -> BoxStream<'static, ClientEvent> {
        let (tx, rx) = mpsc::unbounded();
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
    /// [`ClientError::WouldWaitOnItself`] when called from a callback or a
    /// leader task (S7.5, S7.6): the close is started but not awaited.
    pub fn close_blocking(&self) -> Result<(), ClientError> {
        if in_callback_or_task() {
            let _ = self.inner.send(Msg::Close { done: None });
            return Err(ClientError::WouldWaitOnItself);
        }
        futures::executor::block_on(self.close());
        Ok(())
    }

    fn next_entry(&self) -> u64 {
        self.inner.next_entry.fetch_add(1, Ordering::Relaxed)
    }

    async fn start(&self, name: LeaseName, spec: Spec) -> Result<u64, ApiError> {
        let entry = self.next_entry();
        let (reply, rx) = oneshot::channel();
        if !self.inner.send(Msg::Start {
            name,
            entry,
            spec,
            reply,
        }) {
            return Err(ApiError::Closed);
        }
        match rx.await {
            Ok(Ok(())) => Ok(entry),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(ApiError::Closed),
        }
    }
}

fn election_error(e: ApiError) -> ElectionError {
    match e {
        ApiError::AlreadyStarted(n) => ElectionError::AlreadyStarted(n.to_string()),
        ApiError::NotStarted(n) => ElectionError::Stopped(n.to_string()),
        ApiError::WrongKind { name, .. } => ElectionError::AlreadyStarted(name.to_string()),
        _ => ElectionError::Closed,
    }
}

/// Starts an election ([`Simba::election`]).
pub struct ElectionBuilder {
    client: Simba,
    name: String,
    listener: Option<Arc<dyn ElectionListener>>,
}

impl fmt::Debug for ElectionBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ElectionBuilder")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl ElectionBuilder {
    /// Also deliver `on_elected`/`on_revoked` to `listener` (for the
    /// leader-task variants; [`ElectionBuilder::start`] takes one directly).
    pub fn listener(mut self, listener: impl ElectionListener) -> Self {
        self.listener = Some(Arc::new(listener));
        self
    }

    /// Starts competing (S4.1), telling `listener` about every term (S7.1).
    ///
    /// # Errors
    /// [`ElectionError::InvalidName`] (S3.1), [`ElectionError::AlreadyStarted`]
    /// (S7.4), [`ElectionError::Closed`].
    pub async fn start(self, listener: impl ElectionListener) -> Result<Election, ElectionError> {
        let listener: Arc<dyn ElectionListener> = Arc::new(listener);
        self.start_spec(Some(listener), None).await
    }

    /// Runs `task(term)` only while this client is leader (S6): the future
    /// starts with each term and is cancelled (dropped) when the term is
    /// revoked; on `stop()`/`step_down()` the lease is handed over only
    /// after the future has been dropped (S6.1).
    ///
    /// # Errors
    /// As [`ElectionBuilder::start`].
    pub async fn run_while_leader<F, Fut>(self, task: F) -> Result<LeaderTask, ElectionError>
    where
        F: Fn(Term) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let factory = TaskFactory::Async(Arc::new(move |term| -> BoxFuture<'static, ()> {
            Box::pin(task(term))
        }));
        let listener = self.listener.clone();
        let election = self.start_spec(listener, Some(factory)).await?;
        Ok(LeaderTask { election })
    }

    /// Runs blocking or CPU-bound `task(term, token)` on a blocking thread
    /// while leader. On revocation the `token` is cancelled; the task should
    /// return soon. One that ignores it delays a voluntary handover by at
    /// most the term's remaining time (S6.2).
    ///
    /// # Errors
    /// As [`ElectionBuilder::start`].
    pub async fn run_blocking_while_leader<F>(self, task: F) -> Result<LeaderTask, ElectionError>
    where
        F: Fn(Term, CancellationToken) + Send + Sync + 'static,
    {
        let factory = TaskFactory::Blocking(Arc::new(task));
        let listener = self.listener.clone();
        let election = self.start_spec(listener, Some(factory)).await?;
        Ok(LeaderTask { election })
    }

    async fn start_spec(
        self,
        listener: Option<Arc<dyn ElectionListener>>,
        task: Option<TaskFactory>,
    ) -> Result<Election, ElectionError> {
        let name = LeaseName::new(&self.name)?;
        let entry = self
            .client
            .start(name.clone(), Spec::Election { listener, task })
            .await
            .map_err(election_error)?;
        Ok(Election {
            client: self.client,
            name,
            entry,
        })
    }
}

/// A started election (S5). Dropping the handle does not stop it; dropping
/// every handle of the client closes the client.
#[derive(Clone)]
pub struct Election {
    client: Simba,
    name: LeaseName,
    entry: u64,
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
    /// [`ElectionError::WouldWaitOnItself`] from a callback or leader task
    /// (S7.5): the stop is started but not awaited.
    pub fn stop_blocking(&self) -> Result<(), ElectionError> {
        if in_callback_or_task() {
            let _ = self.client.inner.send(Msg::Stop {
                name: self.name.clone(),
                entry: self.entry,
                done: None,
            });
            return Err(ElectionError::WouldWaitOnItself);
        }
        futures::executor::block_on(self.stop());
        Ok(())
    }

    /// Hands leadership over as `stop()` does, then stays out of the
    /// competition for `cooldown` counted from now (S6.4). Resolves after
    /// the last `on_revoked` has run (S7.3).
    ///
    /// # Errors
    /// [`ElectionError::Stopped`] if the election was stopped,
    /// [`ElectionError::Closed`] if the client is closed.
    pub async fn step_down(&self, cooldown: Duration) -> Result<(), ElectionError> {
        let (done, rx) = oneshot::channel();
        if !self.client.inner.send(Msg::StepDown {
            name: self.name.clone(),
            entry: self.entry,
            cooldown,
            done,
        }) {
            return Err(ElectionError::Closed);
        }
        match rx.await {
            Ok(r) => r.map_err(election_error),
            Err(_) => Err(ElectionError::Closed),
        }
    }

    /// The election's state (S5.1) and term, or `None` once stopped.
    ///
    /// # Errors
    /// [`ElectionError::Closed`] once the client is closed.
    pub async fn snapshot(&self) -> Result<Option<EntrySnapshot>, ElectionError> {
        let snap = self
            .client
            .snapshot()
            .await
            .map_err(|_| ElectionError::Closed)?;
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
    /// The election behind the task.
    pub fn election(&self) -> &Election {
        &self.election
    }

    /// Stops the task's election in the handover order of S6.1.
    pub async fn stop(&self) {
        self.election.stop().await
    }

    /// [`LeaderTask::stop`], blocking the thread.
    ///
    /// # Errors
    /// As [`Election::stop_blocking`].
    pub fn stop_blocking(&self) -> Result<(), ElectionError> {
        self.election.stop_blocking()
    }

    /// Steps down for `cooldown` (S6.4).
    ///
    /// # Errors
    /// As [`Election::step_down`].
    pub async fn step_down(&self, cooldown: Duration) -> Result<(), ElectionError> {
        self.election.step_down(cooldown).await
    }

    /// As [`Election::snapshot`].
    ///
    /// # Errors
    /// As [`Election::snapshot`].
    pub async fn snapshot(&self) -> Result<Option<EntrySnapshot>, ElectionError> {
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
    entry: Option<u64>,
}

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        if let Some(entry) = self.entry {
            let _ = self.client.inner.send(Msg::Stop {
                name: self.name.clone(),
                entry,
                done: None,
            });
        }
    }
}

impl Lock {
    /// Waits until the lock is acquired.
    ///
    /// # Errors
    /// [`LockError::InvalidName`], [`LockError::AlreadyStarted`], [`LockError::Closed`].
    pub async fn acquire(&self) -> Result<LockTerm, LockError> {
        self.acquire_with(Some(None)).await
    }

    /// One attempt, once a session is open.
    ///
    /// # Errors
    /// [`LockError::Held`] if another session holds it, and as [`Lock::acquire`].
    pub async fn try_acquire(&self) -> Result<LockTerm, LockError> {
        self.acquire_with(None).await
    }

    /// Keeps trying for `timeout`.
    ///
    /// # Errors
    /// [`LockError::TimedOut`], and as [`Lock::acquire`].
    pub async fn acquire_timeout(&self, timeout: Duration) -> Result<LockTerm, LockError> {
        self.acquire_with(Some(Some(timeout))).await
    }

    async fn acquire_with(&self, wait: Option<Option<Duration>>) -> Result<LockTerm, LockError> {
        let name = LeaseName::new(&self.name)?;
        let (reply, rx) = oneshot::channel();
        let entry = self
            .client
            .start(name.clone(), Spec::Lock { wait, reply })
            .await
            .map_err(|e| match e {
                ApiError::AlreadyStarted(n) | ApiError::WrongKind { name: n, .. } => {
                    LockError::AlreadyStarted(n.to_string())
                }
                _ => LockError::Closed,
            })?;
        let mut guard = StopOnDrop {
            client: &self.client,
            name: name.clone(),
            entry: Some(entry),
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
                })
            }
            Ok(Err(failure)) => {
                guard.entry = None;
                Err(match failure {
                    LockFailure::Held => LockError::Held(self.name.clone()),
                    LockFailure::TimedOut => LockError::TimedOut {
                        name: self.name.clone(),
                        timeout: wait.flatten().unwrap_or_default(),
                    },
                    LockFailure::Closed => LockError::Closed,
                })
            }
            Err(_) => Err(LockError::Closed),
        }
    }
}

/// A held lock: its [`Term`] (S3.2) until released. Released on
/// [`release`](LockTerm::release) or drop (S5.3); if the term is lost
/// (deadline, expiry, takeover) the lock is gone for good.
pub struct LockTerm {
    client: Simba,
    name: LeaseName,
    entry: u64,
    term: Term,
    released: bool,
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
    /// [`LockError::WouldWaitOnItself`] from a callback or leader task
    /// (S7.5): the release is started but not awaited.
    pub fn release_blocking(self) -> Result<(), LockError> {
        if in_callback_or_task() {
            drop(self);
            return Err(LockError::WouldWaitOnItself);
        }
        futures::executor::block_on(self.release());
        Ok(())
    }
}

impl Drop for LockTerm {
    fn drop(&mut self) {
        if !self.released {
            let _ = self.client.inner.send(Msg::Stop {
                name: self.name.clone(),
                entry: self.entry,
                done: None,
            });
        }
    }
}

impl simba_backends::fencing::AsToken for LockTerm {
    fn token_value(&self) -> u64 {
        self.term().token()
    }
}
