//! The driver: one task per client that owns the [`Engine`], runs its
//! commands against the backend, delivers its events and starts and
//! interrupts leader tasks. It holds no protocol logic: every decision is
//! the engine's; this file only carries facts in and orders out, following
//! the drive loop of the `simba-core` crate documentation.

use crate::listener::{
    CallbackExecutor, ClientEvent, CurrentTerm, ElectionListener, CALLBACK_QUEUE,
};
use crate::mutant::{ClientMutant, Selected};
use crate::observe;
use crate::term::{
    CancelSignal, Clock, ContextGuard, InContext, SessionDeadline, Term, TermControl, Tracker,
};
use futures::channel::{mpsc, oneshot};
use futures::future::{AbortHandle, Abortable, Aborted, BoxFuture, Either, FutureExt};
use futures::stream::FuturesUnordered;
use futures::StreamExt;
use simba_backends::{Backend, SessionMetadata};
use simba_core::{
    ApiError, BackendError, BackendErrorKind, Command, Engine, EntryId, Event, GroupSnapshot,
    Input, Kind, LeaseName, Level, LockWait, Output, RevokeReason, SessionId, SessionState,
    SlotClaim, Snapshot, TaskExitPolicy, TaskOrder, TaskOutcome, TermId, Timestamp, Token,
};
use std::collections::BTreeMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;
use tracing::Instrument;

/// An async leader task: called with each new term.
/// A task factory an application may write as `FnMut` (it may move a
/// counter or a connection between terms): kept behind a mutex, which is
/// held only while the factory builds the next term's future, never while
/// that future runs.
pub(crate) fn shared_factory<A, R, F>(f: F) -> impl Fn(A) -> R + Send + Sync + 'static
where
    F: FnMut(A) -> R + Send + 'static,
{
    let f = std::sync::Mutex::new(f);
    move |a| {
        let mut f = f.lock().unwrap_or_else(|p| p.into_inner());
        (*f)(a)
    }
}

pub(crate) type AsyncTask =
    Arc<dyn Fn(Term) -> BoxFuture<'static, Result<(), String>> + Send + Sync>;
/// A blocking leader task: called on a blocking thread with each new term.
pub(crate) type BlockingTask = Arc<dyn Fn(Term, CancelSignal) -> Result<(), String> + Send + Sync>;

#[derive(Clone)]
pub(crate) enum TaskFactory {
    Async(AsyncTask),
    Blocking(BlockingTask),
}

/// Why a lock attempt ended without a term.
#[derive(Clone, Copy, Debug)]
pub(crate) enum LockFailure {
    Held,
    TimedOut,
    Closed,
}

pub(crate) enum Spec {
    Election {
        listener: Option<Arc<dyn ElectionListener>>,
        task: Option<TaskFactory>,
        policy: TaskExitPolicy,
        current: CurrentTerm,
    },
    Lock {
        wait: LockWait,
        reply: oneshot::Sender<Result<Term, LockFailure>>,
    },
    /// A partitioned group (S10): its partitions' terms are delivered to
    /// `listener` and run `task`, like an election's.
    Group {
        partitions: u32,
        listener: Option<Arc<dyn ElectionListener>>,
        task: Option<TaskFactory>,
        policy: TaskExitPolicy,
    },
}

/// What the driver answers to a slot claim.
pub(crate) struct ClaimReply {
    /// The backend's answer, or why the call failed.
    pub(crate) result: Result<SlotClaim, BackendError>,
    /// `Claimed`, and the term still valid when the answer came (S11.1).
    pub(crate) run: bool,
}

/// Where the answer to a slot claim goes (S11.1).
pub(crate) type ClaimWaiter = oneshot::Sender<Result<ClaimReply, ApiError>>;

/// What the API handles and the spawned calls send to the driver.
pub(crate) enum Msg {
    /// Starts an election, lock or group; the reply is the engine's id of it.
    Start {
        name: LeaseName,
        spec: Spec,
        reply: oneshot::Sender<Result<EntryId, ApiError>>,
    },
    Stop {
        name: LeaseName,
        entry: EntryId,
        done: Option<oneshot::Sender<()>>,
    },
    StepDown {
        name: LeaseName,
        entry: EntryId,
        cooldown: Duration,
        done: oneshot::Sender<Result<(), ApiError>>,
    },
    Close {
        done: Option<oneshot::Sender<()>>,
    },
    Snapshot {
        reply: oneshot::Sender<Snapshot>,
    },
    GroupSnapshot {
        name: LeaseName,
        reply: oneshot::Sender<Option<GroupSnapshot>>,
    },
    Subscribe {
        tx: mpsc::Sender<ClientEvent>,
    },
    /// A leader task (and the work it spawned) ended.
    TaskExited {
        term: TermId,
        outcome: TaskOutcome,
        error: Option<String>,
    },
    /// A schedule claims a slot with its term's token (S11.1).
    ClaimSlot {
        name: LeaseName,
        token: Token,
        slot: u64,
        reply: ClaimWaiter,
    },
    Input(Input),
}

/// One [`crate::Simba::events`] subscriber: a bounded queue, and how many
/// events it missed since the last one that fitted.
struct Subscriber {
    tx: mpsc::Sender<ClientEvent>,
    missed: u64,
}

impl Subscriber {
    /// Queues `event`, or counts it as missed; `false` once the subscriber is gone.
    fn offer(&mut self, event: &ClientEvent) -> bool {
        if self.missed > 0 {
            match self.tx.try_send(ClientEvent::Lagged {
                missed: self.missed,
            }) {
                Ok(()) => self.missed = 0,
                Err(e) if e.is_disconnected() => return false,
                Err(_) => {
                    self.missed += 1;
                    return true;
                }
            }
        }
        match self.tx.try_send(event.clone()) {
            Ok(()) => true,
            Err(e) if e.is_full() => {
                self.missed += 1;
                true
            }
            Err(_) => false,
        }
    }
}

/// What to deliver to an election's listener.
enum What {
    Elected(Term),
    Revoked(Term, RevokeReason),
    Notify(oneshot::Sender<()>),
}

/// One callback, with its listener, for the serial queue (S7.2).
enum Job {
    Elected(Arc<dyn ElectionListener>, Term),
    Revoked(Arc<dyn ElectionListener>, Term, RevokeReason),
    Notify(oneshot::Sender<()>),
}

/// The serial callback queue of one election (S7.2).
struct Queue {
    tx: mpsc::UnboundedSender<Job>,
    pending: Arc<AtomicUsize>,
}

/// What the application handed in for one engine entry (an election, a
/// lock or a group): what it started, its callbacks, its task factory and
/// who waits on it. The entry's state is the engine's; the engine's
/// [`EntryId`] finds this.
struct AppEntry {
    listener: Option<Arc<dyn ElectionListener>>,
    queue: Option<Queue>,
    task: Option<TaskFactory>,
    lock_reply: Option<oneshot::Sender<Result<Term, LockFailure>>>,
    waiters: Vec<oneshot::Sender<()>>,
    /// An election's latest term, for `Election::is_leader`.
    current: Option<CurrentTerm>,
    /// How many more callbacks than the executor's bound may wait (S7.7):
    /// two per partition for a group, whose partitions are gained and lost
    /// in bursts (a lone member gains all of them at once).
    extra_queue: usize,
}

/// A leader task that runs, with its term and the work it spawned.
struct Running {
    term: Term,
    tracker: Arc<Tracker>,
    kind: RunningKind,
}

enum RunningKind {
    Async(AbortHandle),
    Blocking(CancelSignal),
}

impl Running {
    /// Drops the task (async) and everything it spawned, at their next poll.
    fn drop_now(&self) {
        if let RunningKind::Async(abort) = &self.kind {
            abort.abort();
        }
        self.tracker.abort_all();
    }
}

pub(crate) struct Driver {
    engine: Engine,
    backend: Arc<dyn Backend>,
    clock: Clock,
    tx: mpsc::UnboundedSender<Msg>,
    executor: CallbackExecutor,
    entries: BTreeMap<EntryId, AppEntry>,
    terms: BTreeMap<TermId, TermControl>,
    tasks: BTreeMap<TermId, Running>,
    deadline: Option<(SessionId, Arc<SessionDeadline>)>,
    subscribers: Vec<Subscriber>,
    /// The error message of the task exit being handled (for `TaskEnded`).
    last_task_error: Option<(TermId, String)>,
    close_waiters: Vec<oneshot::Sender<()>>,
    workers_done: Vec<oneshot::Receiver<()>>,
    closed: bool,
    /// Slot claims waiting for their answer (S11.1), by name, token and slot.
    claims: BTreeMap<(LeaseName, Token, u64), Vec<ClaimWaiter>>,
    /// Backend calls in flight, polled by the driver task itself (no task
    /// spawned per call: one wake-up less per renewal): each ends with its
    /// reply, or with none when dropped at its call timeout. How many run
    /// at once is the engine's to decide (S4.6).
    calls: FuturesUnordered<BoxFuture<'static, Option<Input>>>,
    /// Attached to every session this client opens.
    metadata: Arc<SessionMetadata>,
    /// The kind of the last backend failure, until a call succeeds again
    /// (so a failing backend is reported once per state change).
    backend_down: Option<BackendErrorKind>,
    span: tracing::Span,
    /// The deliberate bug it runs with, if any (feature `mutants`).
    mutant: Selected,
    /// Under [`ClientMutant::RevocationNotDelivered`]: terms whose revoke
    /// was withheld, kept so that dropping them does not resolve
    /// `revoked()` either.
    withheld: Vec<TermControl>,
    /// Dropped with the driver: ends the release-broadcast forwarding.
    _exit: oneshot::Sender<()>,
}

impl Driver {
    pub(crate) fn new(
        engine: Engine,
        backend: Arc<dyn Backend>,
        clock: Clock,
        tx: mpsc::UnboundedSender<Msg>,
        executor: CallbackExecutor,
        exit: oneshot::Sender<()>,
        metadata: Arc<SessionMetadata>,
    ) -> Driver {
        let span = tracing::info_span!("simba_client", backend = backend.name());
        Driver {
            engine,
            backend,
            clock,
            tx,
            executor,
            entries: BTreeMap::new(),
            terms: BTreeMap::new(),
            tasks: BTreeMap::new(),
            deadline: None,
            subscribers: Vec::new(),
            last_task_error: None,
            close_waiters: Vec::new(),
            workers_done: Vec::new(),
            closed: false,
            claims: BTreeMap::new(),
            calls: FuturesUnordered::new(),
            metadata,
            backend_down: None,
            span,
            mutant: Selected::default(),
            withheld: Vec::new(),
            _exit: exit,
        }
    }

    /// The driver with a deliberate bug (feature `mutants`), or none.
    pub(crate) fn with_mutant(mut self, mutant: Selected) -> Driver {
        self.mutant = mutant;
        self
    }

    /// The drive loop: drain outputs, sleep until the next deadline or
    /// message, tell the engine what happened, repeat until closed.
    ///
    /// It first waits for `subscribed` ([`forward_releases`] sends it once
    /// the release broadcasts are subscribed to, or cannot be), for at most
    /// a call timeout: a release that commits after this client's first
    /// call then reaches it (S4.2). Before, a member that joined a group
    /// opened its session and joined while its subscription was still being
    /// set up, and missed the releases its join caused (Redis, 1,000
    /// partitions, 3 → 4 members: 34 broadcasts missed, partitions unowned
    /// up to 2.1 s).
    pub(crate) async fn run(
        mut self,
        mut rx: mpsc::UnboundedReceiver<Msg>,
        subscribed: oneshot::Receiver<()>,
    ) {
        let runtime = self.clock.runtime.clone();
        let limit = runtime.now() + self.engine.call_timeout();
        let _ = futures::future::select(subscribed, runtime.sleep_until(limit)).await;
        let mut sleep: Option<(Timestamp, BoxFuture<'static, ()>)> = None;
        loop {
            {
                let _enter = self.span.clone().entered();
                self.drain();
            }
            if self.closed {
                break;
            }
            let next = self.engine.poll_timeout();
            match next {
                Some(at) if sleep.as_ref().map(|(t, _)| *t) != Some(at) => {
                    sleep = Some((at, runtime.sleep_until(self.clock.instant(at))));
                }
                None => sleep = None,
                _ => {}
            }
            let calls = &mut self.calls;
            let woke = futures::future::poll_fn(|cx| {
                // Requests first: they were sent before any reply now ready.
                if let Poll::Ready(msg) = rx.poll_next_unpin(cx) {
                    return Poll::Ready(Either::Left(msg));
                }
                if let Poll::Ready(Some(input)) = calls.poll_next_unpin(cx) {
                    return Poll::Ready(Either::Right(Some(input)));
                }
                if let Some((_, s)) = sleep.as_mut() {
                    if s.as_mut().poll(cx).is_ready() {
                        return Poll::Ready(Either::Right(None));
                    }
                }
                Poll::Pending
            })
            .await;
            let _enter = self.span.clone().entered();
            match woke {
                Either::Left(Some(msg)) => {
                    // Take whatever else is already queued before draining;
                    // broadcasts queued together are one batch.
                    let mut next = Some(msg);
                    while let Some(msg) = next.take() {
                        let Msg::Input(input) = msg else {
                            self.on_msg(msg);
                            next = rx.try_recv().ok();
                            if next.is_some() {
                                self.drain();
                            }
                            continue;
                        };
                        let mut batch = vec![input];
                        loop {
                            match rx.try_recv() {
                                Ok(Msg::Input(input)) => batch.push(input),
                                Ok(other) => {
                                    next = Some(other);
                                    break;
                                }
                                Err(_) => break,
                            }
                        }
                        self.engine.handle_all(self.clock.now(), batch);
                        if next.is_some() {
                            self.drain();
                        }
                    }
                }
                Either::Left(None) => break,
                Either::Right(Some(input)) => {
                    // Replies that are ready too are one batch: the engine
                    // computes each group's target once for all of them.
                    let mut batch: Vec<Input> = input.into_iter().collect();
                    while let Some(Some(more)) = self.calls.next().now_or_never() {
                        batch.extend(more);
                    }
                    self.engine.handle_all(self.clock.now(), batch);
                }
                Either::Right(None) => {
                    sleep = None;
                    self.engine.handle_timeout(self.clock.now());
                }
            }
        }
        // Calls still in flight (say, the release of an orphan grant) run to
        // their end on their own; nobody waits for their replies.
        for call in std::mem::take(&mut self.calls) {
            runtime.spawn(Box::pin(async move {
                let _ = call.await;
            }));
        }
        tracing::debug!(parent: &self.span, "simba driver stopped");
    }

    fn on_msg(&mut self, msg: Msg) {
        let now = self.clock.now();
        match msg {
            Msg::Input(input) => self.engine.handle(now, input),
            Msg::TaskExited {
                term,
                outcome,
                error,
            } => {
                self.tasks.remove(&term);
                self.last_task_error = error.map(|e| (term, e));
                self.engine.handle(now, Input::TaskExited { term, outcome });
            }
            Msg::Start { name, spec, reply } => self.start(now, name, spec, reply),
            Msg::Stop { name, entry, done } => {
                let Some(e) = self.entries.get_mut(&entry) else {
                    if let Some(done) = done {
                        let _ = done.send(());
                    }
                    return;
                };
                e.waiters.extend(done);
                let result = if self.engine.kind_of(entry) == Some(Kind::Partition) {
                    self.engine.leave_group(now, &name)
                } else {
                    self.engine.stop(now, &name)
                };
                if result.is_err() {
                    self.remove_entry(entry);
                }
            }
            Msg::StepDown {
                name,
                entry,
                cooldown,
                done,
            } => {
                let Some(e) = self.entries.get_mut(&entry) else {
                    let _ = done.send(Err(ApiError::NotStarted(name)));
                    return;
                };
                match self.engine.step_down(now, &name, cooldown) {
                    Ok(()) => {
                        let (tx, rx) = oneshot::channel();
                        e.waiters.push(tx);
                        self.clock.runtime.spawn(Box::pin(async move {
                            let _ = rx.await;
                            let _ = done.send(Ok(()));
                        }));
                    }
                    Err(err) => {
                        let _ = done.send(Err(err));
                    }
                }
            }
            Msg::Close { done } => {
                self.close_waiters.extend(done);
                tracing::info!("closing the Simba client");
                self.engine.close(now);
            }
            Msg::Snapshot { reply } => {
                let _ = reply.send(self.engine.snapshot(now));
            }
            Msg::GroupSnapshot { name, reply } => {
                let _ = reply.send(self.engine.group(&name));
            }
            Msg::ClaimSlot {
                name,
                token,
                slot,
                reply,
            } => match self.engine.claim_slot(now, &name, token, slot) {
                Ok(()) => self
                    .claims
                    .entry((name, token, slot))
                    .or_default()
                    .push(reply),
                Err(e) => {
                    let _ = reply.send(Err(e));
                }
            },
            Msg::Subscribe { tx } => {
                // A new subscriber first learns the state it joins in, so it
                // never misses a transition that happened before it came.
                let state = self.engine.session_state();
                let mut sub = Subscriber { tx, missed: 0 };
                if sub.offer(&ClientEvent::SessionState { state }) {
                    self.subscribers.push(sub);
                }
            }
        }
    }

    fn start(
        &mut self,
        now: Timestamp,
        name: LeaseName,
        spec: Spec,
        reply: oneshot::Sender<Result<EntryId, ApiError>>,
    ) {
        let result = match &spec {
            Spec::Election { task, policy, .. } => {
                if task.is_some() {
                    self.engine.start_task_election(now, name.clone(), *policy)
                } else {
                    self.engine.start_election(now, name.clone(), false)
                }
            }
            Spec::Lock { wait, .. } => self.engine.acquire_lock(now, name.clone(), *wait, false),
            Spec::Group {
                partitions,
                task,
                policy,
                ..
            } => self
                .engine
                .join_group(now, name.clone(), *partitions, task.is_some(), *policy),
        };
        let entry = match result {
            Ok(entry) => entry,
            Err(err) => {
                let _ = reply.send(Err(err));
                return;
            }
        };
        let d = match spec {
            Spec::Election {
                listener,
                task,
                current,
                ..
            } => {
                let queue = listener.as_ref().and_then(|_| self.new_queue(&name));
                AppEntry {
                    listener,
                    queue,
                    task,
                    lock_reply: None,
                    waiters: Vec::new(),
                    current: Some(current),
                    extra_queue: 0,
                }
            }
            Spec::Group {
                listener,
                task,
                partitions,
                ..
            } => {
                let queue = listener.as_ref().and_then(|_| self.new_queue(&name));
                AppEntry {
                    listener,
                    queue,
                    task,
                    lock_reply: None,
                    waiters: Vec::new(),
                    // A group holds many terms at once, not one.
                    current: None,
                    extra_queue: usize::try_from(partitions)
                        .unwrap_or(usize::MAX)
                        .saturating_mul(2),
                }
            }
            Spec::Lock { reply, .. } => AppEntry {
                listener: None,
                queue: None,
                task: None,
                lock_reply: Some(reply),
                waiters: Vec::new(),
                current: None,
                extra_queue: 0,
            },
        };
        tracing::info!(name = %name, %entry, kind = ?self.engine.kind_of(entry), "started");
        self.entries.insert(entry, d);
        let _ = reply.send(Ok(entry));
    }

    /// A serial callback worker for one election (S7.2), unless inline.
    fn new_queue(&mut self, name: &LeaseName) -> Option<Queue> {
        let (tx, mut rx) = mpsc::unbounded::<Job>();
        let pending = Arc::new(AtomicUsize::new(0));
        let (done_tx, done_rx) = oneshot::channel();
        let counter = pending.clone();
        let span = tracing::info_span!(parent: &self.span, "simba_callbacks", name = %name);
        match self.executor {
            CallbackExecutor::Inline => return None,
            CallbackExecutor::Spawned | CallbackExecutor::SpawnedBounded(_) => {}
        }
        self.workers_done
            .retain_mut(|rx| matches!(rx.try_recv(), Ok(None)));
        self.workers_done.push(done_rx);
        self.clock.runtime.spawn(Box::pin(async move {
            while let Some(job) = rx.next().await {
                let _enter = span.enter();
                run_job(job);
                counter.fetch_sub(1, Ordering::AcqRel);
            }
            let _ = done_tx.send(());
        }));
        Some(Queue { tx, pending })
    }

    /// Queues (or, inline, runs) one callback of `entry`'s election (or
    /// group).
    fn push(&mut self, entry: EntryId, what: What) {
        let Some(e) = self.entries.get(&entry) else {
            if let What::Notify(tx) = what {
                let _ = tx.send(());
            }
            return;
        };
        let job = match (what, e.listener.clone()) {
            (What::Notify(tx), _) => Job::Notify(tx),
            (_, None) => return,
            (What::Elected(t), Some(l)) => Job::Elected(l, t),
            (What::Revoked(t, r), Some(l)) => Job::Revoked(l, t, r),
        };
        match &e.queue {
            Some(q) => {
                q.pending.fetch_add(1, Ordering::AcqRel);
                if let Err(err) = q.tx.unbounded_send(job) {
                    run_job(err.into_inner());
                }
            }
            None => run_job(job),
        }
    }

    fn drain(&mut self) {
        while let Some(output) = self.engine.poll_output() {
            match output {
                Output::Command(cmd) => self.run_command(cmd),
                Output::Event(event) => self.on_event(event),
                Output::Task(order) => self.on_task(order),
            }
        }
        self.last_task_error = None;
    }

    /// S6.1: a task still running when its lease is released (its term's
    /// deadline passed during the hand-over) or its session ends is dropped
    /// first, with the work it spawned.
    fn drop_tasks(&mut self, matching: impl Fn(&Term) -> bool) {
        for running in self.tasks.values() {
            if running.term.revoke_reason().is_some() && matching(&running.term) {
                running.drop_now();
            }
        }
    }

    /// Runs one backend command ([`Backend::execute`]) as its own future,
    /// dropped after `call_timeout()` (S2.4) from when it is sent: the
    /// engine times the call out on its own clock, so nothing stands in for
    /// a reply that never came. The engine emits no more calls at once than
    /// the backend serves (S4.6).
    fn run_command(&mut self, cmd: Command) {
        let backend = self.backend.clone();
        let metadata = self.metadata.clone();
        tracing::trace!(command = ?cmd, "backend call");
        // A batch (S4.7) is looked into: each release it carries drops its
        // term's task as a release sent alone does.
        let each: &[Command] = match &cmd {
            Command::Batch { calls } => calls,
            one => std::slice::from_ref(one),
        };
        for one in each {
            match one {
                Command::Renew { .. } => observe::renewal(),
                Command::Release { name, token, .. } => {
                    let (name, token) = (name.as_str(), token.get());
                    self.drop_tasks(|t| t.name() == name && t.token() == token);
                }
                Command::CloseSession { .. } => self.drop_tasks(|_| true),
                _ => {}
            }
        }
        let runtime = &self.clock.runtime;
        let sleep = runtime.sleep_until(runtime.now() + self.engine.call_timeout());
        self.calls.push(Box::pin(async move {
            let call = backend.execute(cmd, &metadata);
            match futures::future::select(call, sleep).await {
                Either::Left((input, _)) => Some(input),
                Either::Right(((), _)) => None,
            }
        }));
    }

    fn publish(&mut self, event: ClientEvent) {
        self.subscribers.retain_mut(|s| s.offer(&event));
    }

    fn on_event(&mut self, event: Event) {
        match event {
            Event::Elected { term } => self.on_elected(term),
            Event::Revoked { term, reason } => {
                tracing::info!(name = %term.name, token = %term.token, %reason, "term revoked");
                observe::term_ended(term.name.as_str(), reason);
                if self.terms.contains_key(&term.id) {
                    let held = self.clock.now() - term.elected_at;
                    observe::leader_time(term.name.as_str(), held);
                }
                let withhold = self.mutant.is(ClientMutant::RevocationNotDelivered);
                let handle = self.terms.remove(&term.id).map(|mut control| {
                    if withhold {
                        // The mutant: the term never learns it ended.
                        let handle = control.term.clone();
                        self.withheld.push(control);
                        return handle;
                    }
                    control.revoke(reason);
                    control.term
                });
                if let Some(current) = self
                    .entries
                    .get(&term.entry)
                    .and_then(|e| e.current.as_ref())
                {
                    let mut current = current.lock().unwrap_or_else(|p| p.into_inner());
                    if current
                        .as_ref()
                        .is_some_and(|t| t.token() == term.token.get())
                    {
                        *current = None;
                    }
                }
                if let Some(h) = &handle {
                    if !self.tasks.contains_key(&term.id) {
                        // No leader task to wait for: spawned work ends now.
                        h.tracker().abort_all();
                    }
                }
                self.publish(ClientEvent::Revoked {
                    name: term.name.to_string(),
                    token: term.token.get(),
                    reason,
                });
                if let Some(handle) = handle {
                    self.push(term.entry, What::Revoked(handle, reason));
                }
            }
            Event::Completed {
                name,
                entry,
                handover,
            } => {
                if let Some(took) = handover {
                    observe::handover(name.as_str(), took);
                    tracing::debug!(name = %name, ?took, "handover complete");
                }
                let Some(e) = self.entries.get_mut(&entry) else {
                    return;
                };
                let waiters = std::mem::take(&mut e.waiters);
                // S6.1 step 5: resolve after the last on_revoked has run.
                for w in waiters {
                    self.push(entry, What::Notify(w));
                }
            }
            Event::Ended { name, entry } => {
                tracing::debug!(name = %name, %entry, "ended");
                self.remove_entry(entry);
            }
            Event::LockFailed { entry, tried, .. } => {
                let reply = self
                    .entries
                    .get_mut(&entry)
                    .and_then(|e| e.lock_reply.take());
                if let Some(reply) = reply {
                    let failure = if self.engine.session_state() == SessionState::Closed {
                        LockFailure::Closed
                    } else if tried {
                        LockFailure::Held
                    } else {
                        LockFailure::TimedOut
                    };
                    let _ = reply.send(Err(failure));
                }
            }
            Event::SessionStateChanged { state, session } => {
                if matches!(state, SessionState::Opening | SessionState::Closed) {
                    // The session is gone: no hand-over waits any more (S6.3).
                    self.drop_tasks(|_| true);
                }
                tracing::info!(%state, session = ?session, "session state changed");
                observe::session_state(state);
                self.publish(ClientEvent::SessionState { state });
            }
            Event::DeadlineChanged { session, deadline } => {
                if let Some(kind) = self.backend_down.take() {
                    tracing::info!(after = ?kind, "the backend answers again");
                }
                match &self.deadline {
                    Some((s, shared)) if *s == session => shared.set(deadline),
                    _ => self.deadline = Some((session, SessionDeadline::new(deadline))),
                }
            }
            Event::SessionLeaseShortened {
                session: _,
                validity,
                renew_period,
            } => {
                tracing::warn!(
                    ?validity,
                    ?renew_period,
                    "the backend grants a shortened lease (S8.4)"
                );
                self.publish(ClientEvent::SessionLeaseShortened {
                    validity,
                    renew_period,
                });
            }
            Event::SlotClaimed {
                name,
                token,
                slot,
                result,
                run,
            } => {
                tracing::debug!(name = %name, token = %token, slot, ?result, run, "slot claim answered");
                for reply in self.claims.remove(&(name, token, slot)).unwrap_or_default() {
                    let _ = reply.send(Ok(ClaimReply {
                        result: result.clone(),
                        run,
                    }));
                }
            }
            Event::BackendFailed { command, error } => {
                // Said once per state change: the first failure of a kind
                // is a warning, repeats (the engine retries with back-off)
                // are debug, and the next success says the backend is back.
                if self.backend_down == Some(error.kind) {
                    tracing::debug!(command, %error, "backend call failed again");
                } else {
                    tracing::warn!(
                        command,
                        %error,
                        "backend call failed; retrying with back-off until it answers"
                    );
                    self.backend_down = Some(error.kind);
                }
                observe::backend_failure(command);
                self.publish(ClientEvent::BackendFailed { command, error });
            }
            Event::Closed => {
                tracing::info!("Simba client closed");
                self.publish(ClientEvent::Closed);
                self.closed = true;
                // Lock attempts still waiting can never succeed now.
                let entries: Vec<EntryId> = self.entries.keys().copied().collect();
                for entry in entries {
                    self.remove_entry(entry);
                }
                let waiters = std::mem::take(&mut self.close_waiters);
                let workers = std::mem::take(&mut self.workers_done);
                // S7.3: resolve once every queued callback has run.
                self.clock.runtime.spawn(Box::pin(async move {
                    for w in workers {
                        let _ = w.await;
                    }
                    for w in waiters {
                        let _ = w.send(());
                    }
                }));
            }
            Event::TaskEnded {
                term,
                outcome,
                action,
            } => {
                let error = self
                    .last_task_error
                    .take()
                    .filter(|(t, _)| *t == term.id)
                    .map(|(_, e)| e);
                tracing::error!(
                    name = %term.name,
                    token = %term.token,
                    %outcome,
                    action = action.as_str(),
                    error = error.as_deref().unwrap_or(""),
                    "leader task ended while leader (S6.5)"
                );
                observe::task_exit(term.name.as_str(), outcome, action);
                self.publish(ClientEvent::TaskExited {
                    name: term.name.to_string(),
                    token: term.token.get(),
                    outcome,
                    action,
                    error,
                });
            }
            Event::GroupChanged {
                group,
                members,
                target,
            } => {
                tracing::info!(group = %group, members = members.len(), target = target.len(), "group membership changed (S10.2)");
                self.publish(ClientEvent::GroupChanged {
                    group: group.to_string(),
                    members: members.len(),
                    target,
                });
            }
            Event::GroupFailed { group, error } => {
                tracing::error!(group = %group, %error, "cannot join the group");
            }
            Event::Diagnostic { level, message } => match level {
                Level::Warn => tracing::warn!("{message}"),
                _ => tracing::error!("{message}"),
            },
        }
    }

    fn on_elected(&mut self, term: simba_core::Term) {
        let deadline = match &self.deadline {
            Some((s, d)) if *s == term.session => d.clone(),
            // Cannot happen (a session's deadline is known before any term
            // of it); an unknown deadline makes the term invalid, never valid.
            _ => SessionDeadline::new(Timestamp::ZERO),
        };
        let control = Term::create(term.name.clone(), term.token, deadline, self.clock.clone());
        let handle = control.term.clone();
        let Some(e) = self.entries.get_mut(&term.entry) else {
            return;
        };
        // S7.7: a callback queue that is full refuses the on_elected;
        // nobody learns of the term.
        let bound = match self.executor {
            CallbackExecutor::SpawnedBounded(max) => max,
            CallbackExecutor::Spawned => CALLBACK_QUEUE,
            CallbackExecutor::Inline => usize::MAX,
        }
        .saturating_add(e.extra_queue);
        if let Some(q) = &e.queue {
            if q.pending.load(Ordering::Acquire) >= bound {
                tracing::warn!(name = %term.name, token = %term.token, "callback executor refused on_elected (S7.7)");
                let mut control = control;
                control.revoke(RevokeReason::SteppedDown);
                let now = self.clock.now();
                self.engine
                    .handle(now, Input::ElectedRejected { term: term.id });
                return;
            }
        }
        if term.kind == Kind::Lock {
            let delivered = match e.lock_reply.take() {
                Some(reply) => reply.send(Ok(handle.clone())).is_ok(),
                None => false,
            };
            if !delivered {
                // Whoever asked is gone: give the lock straight back.
                let now = self.clock.now();
                let _ = self.engine.stop(now, &term.name);
            }
        }
        if let Some(current) = &e.current {
            *current.lock().unwrap_or_else(|p| p.into_inner()) = Some(handle.clone());
        }
        tracing::info!(name = %term.name, token = %term.token, "elected");
        observe::term_started(term.name.as_str());
        self.terms.insert(term.id, control);
        self.publish(ClientEvent::Elected {
            name: term.name.to_string(),
            token: term.token.get(),
        });
        self.push(term.entry, What::Elected(handle));
    }

    /// Reports the task of `term` as returned: none runs (nothing to run,
    /// or it already ended), so a hand-over never waits for it.
    fn no_task_runs(&mut self, term: TermId) {
        let now = self.clock.now();
        self.engine.handle(
            now,
            Input::TaskExited {
                term,
                outcome: TaskOutcome::Returned,
            },
        );
    }

    fn on_task(&mut self, order: TaskOrder) {
        match order {
            TaskOrder::Start { term } => {
                let factory = self.entries.get(&term.entry).and_then(|e| e.task.clone());
                let handle = self.terms.get(&term.id).map(|c| c.term.clone());
                let (Some(factory), Some(handle)) = (factory, handle) else {
                    // Nothing to run: report the exit so a handover never waits.
                    self.no_task_runs(term.id);
                    return;
                };
                let tx = self.tx.clone();
                let id = term.id;
                let tracker = handle.tracker();
                let span = tracing::info_span!(parent: &self.span, "simba_leader_task", name = %term.name, token = %term.token);
                match factory {
                    TaskFactory::Async(f) => {
                        let (abort, reg) = AbortHandle::new_pair();
                        let fut = Abortable::new(InContext(Box::pin(f(handle.clone()))), reg);
                        self.tasks.insert(
                            id,
                            Running {
                                term: handle,
                                tracker: tracker.clone(),
                                kind: RunningKind::Async(abort),
                            },
                        );
                        self.clock.runtime.spawn(Box::pin(
                            async move {
                                tracing::debug!("leader task started");
                                let run = AssertUnwindSafe(fut).catch_unwind().await;
                                let (outcome, error) = match run {
                                    Err(panic) => {
                                        (TaskOutcome::Panicked, Some(panic_message(&*panic)))
                                    }
                                    Ok(Err(Aborted)) => {
                                        // Dropped: so is everything it spawned.
                                        tracker.abort_all();
                                        (TaskOutcome::Returned, None)
                                    }
                                    Ok(Ok(Ok(()))) => (TaskOutcome::Returned, None),
                                    Ok(Ok(Err(e))) => (TaskOutcome::Failed, Some(e)),
                                };
                                // S6.1: the task has ended once its spawned work has.
                                for done in tracker.close() {
                                    let _ = done.await;
                                }
                                log_exit(outcome, error.as_deref());
                                let _ = tx.unbounded_send(Msg::TaskExited {
                                    term: id,
                                    outcome,
                                    error,
                                });
                            }
                            .instrument(span),
                        ));
                    }
                    TaskFactory::Blocking(f) => {
                        let token = CancelSignal::new();
                        self.tasks.insert(
                            id,
                            Running {
                                term: handle.clone(),
                                tracker: tracker.clone(),
                                kind: RunningKind::Blocking(token.clone()),
                            },
                        );
                        self.clock.runtime.spawn_blocking(Box::new(move || {
                            let _enter = span.enter();
                            let _ctx = ContextGuard::enter();
                            tracing::debug!("blocking leader task started");
                            let run =
                                std::panic::catch_unwind(AssertUnwindSafe(|| f(handle, token)));
                            let (outcome, error) = match run {
                                Err(panic) => (TaskOutcome::Panicked, Some(panic_message(&*panic))),
                                Ok(Ok(())) => (TaskOutcome::Returned, None),
                                Ok(Err(e)) => (TaskOutcome::Failed, Some(e)),
                            };
                            futures::executor::block_on(async {
                                for done in tracker.close() {
                                    let _ = done.await;
                                }
                            });
                            log_exit(outcome, error.as_deref());
                            let _ = tx.unbounded_send(Msg::TaskExited {
                                term: id,
                                outcome,
                                error,
                            });
                        }));
                    }
                }
            }
            TaskOrder::Interrupt { term } => {
                if self.mutant.is(ClientMutant::RevocationNotDelivered) {
                    // The mutant: the task is neither cancelled nor dropped.
                    return;
                }
                let partition = term.kind == Kind::Partition;
                let Some(running) = self.tasks.get(&term.id) else {
                    return;
                };
                let voluntary = running
                    .term
                    .revoke_reason()
                    .is_some_and(RevokeReason::is_voluntary);
                let early = if partition {
                    self.mutant.is(ClientMutant::PartitionStartsBeforeStop)
                } else {
                    self.mutant.is(ClientMutant::TaskStartsBeforeStop)
                };
                if voluntary && early {
                    // The mutant: the exit is reported now, while the task
                    // still runs (its own exit report comes later).
                    if let Some(running) = self.tasks.remove(&term.id) {
                        if let RunningKind::Blocking(token) = &running.kind {
                            token.cancel();
                        }
                    }
                    self.no_task_runs(term.id);
                    return;
                }
                if let RunningKind::Blocking(token) = &running.kind {
                    token.cancel();
                }
                if !voluntary {
                    // S6.3: lost involuntarily; nothing waits.
                    running.drop_now();
                }
                // S6.1 step 2 for a voluntary hand-over: the term is revoked
                // (`revoked()` has resolved); the task ends on its own, or is
                // dropped when its lease is released at the deadline.
            }
        }
    }

    /// Forgets an entry the engine no longer has, resolving what waits on it.
    fn remove_entry(&mut self, entry: EntryId) {
        if let Some(e) = self.entries.remove(&entry) {
            if let Some(reply) = e.lock_reply {
                let _ = reply.send(Err(LockFailure::Closed));
            }
            match e.queue {
                Some(q) => {
                    for w in e.waiters {
                        q.pending.fetch_add(1, Ordering::AcqRel);
                        if let Err(err) = q.tx.unbounded_send(Job::Notify(w)) {
                            run_job(err.into_inner());
                        }
                    }
                }
                None => {
                    for w in e.waiters {
                        let _ = w.send(());
                    }
                }
            }
        }
    }
}

/// The message of a panic payload.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-string payload".to_owned()
    }
}

fn log_exit(outcome: TaskOutcome, error: Option<&str>) {
    match outcome {
        TaskOutcome::Returned => tracing::debug!("leader task exited"),
        TaskOutcome::Failed => {
            tracing::error!(error = error.unwrap_or(""), "leader task failed");
        }
        TaskOutcome::Panicked => {
            tracing::error!(panic = error.unwrap_or(""), "leader task panicked");
        }
    }
}

/// Runs one callback job on the current thread, marked as callback context
/// (S7.5); a panicking listener is logged, never propagated.
fn run_job(job: Job) {
    let _ctx = ContextGuard::enter();
    let result = std::panic::catch_unwind(AssertUnwindSafe(|| match job {
        Job::Elected(l, t) => l.on_elected(&t),
        Job::Revoked(l, t, r) => l.on_revoked(&t, r),
        Job::Notify(tx) => {
            let _ = tx.send(());
        }
    }));
    if result.is_err() {
        tracing::error!("an election listener panicked");
    }
}

/// Subscribes to the backend's release broadcasts (S4.2) and forwards each
/// freed name to the driver until it stops.
///
/// `subscribed` is sent once the subscription is made, or has failed, or
/// the backend does not broadcast: the driver makes no call before it
/// ([`Driver::run`]).
pub(crate) fn forward_releases(
    backend: Arc<dyn Backend>,
    tx: mpsc::UnboundedSender<Msg>,
    driver_exit: oneshot::Receiver<()>,
    subscribed: oneshot::Sender<()>,
) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    Box::pin(async move {
        if !backend.broadcasts_releases() {
            let _ = subscribed.send(());
            return;
        }
        let stream = backend.subscribe_releases().await;
        let _ = subscribed.send(());
        match stream {
            Ok(Some(stream)) => {
                let mut stream = stream.take_until(driver_exit);
                while let Some(name) = stream.next().await {
                    if tx
                        .unbounded_send(Msg::Input(Input::ReleaseBroadcast { name }))
                        .is_err()
                    {
                        break;
                    }
                }
            }
            Ok(None) => {}
            Err(error) => {
                tracing::warn!(%error, "cannot subscribe to release broadcasts; candidates rely on retries (S4.1)")
            }
        }
    })
}
