//! Terms (S3.2), the cooperative cancellation token of blocking leader tasks,
//! and the "am I inside a callback or leader task" marker (S7.5, S7.6).

use crate::error::TermError;
use crate::runtime::AsyncRuntime;
use crate::suspend::SuspendClock;
use futures::channel::oneshot;
use futures::future::{AbortHandle, Abortable, BoxFuture, FutureExt, Shared};
use simba_core::{term_is_valid, term_remaining, LeaseName, RevokeReason, Timestamp, Token};
use std::cell::Cell;
use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

const REASONS: [RevokeReason; 6] = [
    RevokeReason::Stopped,
    RevokeReason::SteppedDown,
    RevokeReason::DeadlinePassed,
    RevokeReason::SessionExpired,
    RevokeReason::TakenOver,
    RevokeReason::Rebalanced,
];

/// The local deadline of one session, shared by the driver (which moves it
/// on every `DeadlineChanged`) and every term of that session (S2.1, S3.3).
#[derive(Debug)]
pub(crate) struct SessionDeadline(AtomicU64);

impl SessionDeadline {
    pub(crate) fn new(deadline: Timestamp) -> Arc<Self> {
        Arc::new(SessionDeadline(AtomicU64::new(deadline.as_nanos())))
    }
    pub(crate) fn set(&self, deadline: Timestamp) {
        self.0.store(deadline.as_nanos(), Ordering::Release);
    }
    fn get(&self) -> Timestamp {
        Timestamp::from_nanos(self.0.load(Ordering::Acquire))
    }
}

/// The clock of one client: its runtime, the instant its timestamps count
/// from, and the host's suspended time since then, which the runtime's
/// monotonic clock may not count (Linux `CLOCK_MONOTONIC`): timestamps and
/// term validity (S3.3) include it, so a term never reads valid after a
/// suspend that outlasted it.
#[derive(Clone)]
pub(crate) struct Clock {
    pub(crate) runtime: Arc<dyn AsyncRuntime>,
    pub(crate) base: Instant,
    suspend: Arc<dyn SuspendClock>,
    /// `suspend.suspended()` when the clock was made.
    suspend_base: Duration,
    /// The largest suspended time seen since then (ns): the clock never goes back.
    suspend_seen: Arc<AtomicU64>,
}

impl Clock {
    pub(crate) fn new(runtime: Arc<dyn AsyncRuntime>, suspend: Arc<dyn SuspendClock>) -> Clock {
        Clock {
            base: runtime.now(),
            runtime,
            suspend_base: suspend.suspended(),
            suspend,
            suspend_seen: Arc::new(AtomicU64::new(0)),
        }
    }

    /// The host's suspended time since the clock was made.
    fn suspended(&self) -> Duration {
        let now = self.suspend.suspended().saturating_sub(self.suspend_base);
        let ns = u64::try_from(now.as_nanos()).unwrap_or(u64::MAX);
        let seen = self.suspend_seen.fetch_max(ns, Ordering::AcqRel);
        Duration::from_nanos(seen.max(ns))
    }

    pub(crate) fn now(&self) -> Timestamp {
        let running = self.runtime.now().saturating_duration_since(self.base);
        Timestamp::from_duration(running.saturating_add(self.suspended()))
    }

    /// The runtime instant at which the clock reads `at` (assuming no
    /// further suspend), for the runtime's timers.
    pub(crate) fn instant(&self, at: Timestamp) -> Instant {
        self.base + at.as_duration().saturating_sub(self.suspended())
    }
}

struct TermInner {
    name: LeaseName,
    token: Token,
    deadline: Arc<SessionDeadline>,
    revoked: AtomicBool,
    /// The revoke reason as `1 + index` in [`REASONS`], 0 while live.
    reason_code: AtomicU8,
    reason: Shared<oneshot::Receiver<RevokeReason>>,
    clock: Clock,
    tracker: Arc<Tracker>,
    /// After a voluntary revoke: the session's deadline as of the revoke
    /// (ns), until which the hand-over waits for the task (S6.1 step 3).
    finish_by: AtomicU64,
}

/// The work a term's holder spawned through [`Term::spawn`]: interrupted
/// and awaited with the leader task (S6.1), never running after the release.
#[derive(Default)]
pub(crate) struct Tracker {
    state: Mutex<TrackerState>,
}

#[derive(Default)]
struct TrackerState {
    closed: bool,
    aborted: bool,
    children: Vec<(AbortHandle, oneshot::Receiver<()>)>,
}

impl Tracker {
    fn lock(&self) -> std::sync::MutexGuard<'_, TrackerState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn spawn(&self, runtime: &Arc<dyn AsyncRuntime>, work: BoxFuture<'static, ()>) -> bool {
        let mut st = self.lock();
        if st.closed || st.aborted {
            return false;
        }
        st.children
            .retain_mut(|(_, done)| matches!(done.try_recv(), Ok(None)));
        let (abort, reg) = AbortHandle::new_pair();
        let (done_tx, done_rx) = oneshot::channel::<()>();
        st.children.push((abort, done_rx));
        drop(st);
        let work = Abortable::new(InContext(Box::pin(work)), reg);
        runtime.spawn(Box::pin(async move {
            // Dropped when the work ends or is dropped: resolves `done_rx`.
            let _done = done_tx;
            if AssertUnwindSafe(work).catch_unwind().await.is_err() {
                tracing::error!("work spawned by a leader task panicked");
            }
        }));
        true
    }

    /// Drops every piece of spawned work (at its next poll); refuses new work.
    pub(crate) fn abort_all(&self) {
        let mut st = self.lock();
        st.aborted = true;
        for (abort, _) in &st.children {
            abort.abort();
        }
    }

    /// Refuses new work; returns what resolves once each piece has ended.
    pub(crate) fn close(&self) -> Vec<oneshot::Receiver<()>> {
        let mut st = self.lock();
        st.closed = true;
        st.children.drain(..).map(|(_, done)| done).collect()
    }
}

/// One period in which this client owns a lease (S3.2).
///
/// Cheap to clone. `is_valid()` and `remaining()` read the runtime's
/// monotonic clock and the session's shared local deadline, so they need no
/// background task and turn false at once after a long pause (S3.3). An ended
/// term never becomes valid again, even if the client is elected again: the
/// next term is a different `Term` with a higher [`token`](Term::token).
#[derive(Clone)]
pub struct Term {
    inner: Arc<TermInner>,
}

/// The driver's side of a term: it revokes it.
pub(crate) struct TermControl {
    pub(crate) term: Term,
    reason_tx: Option<oneshot::Sender<RevokeReason>>,
}

impl TermControl {
    /// S6.1 step 1: `is_valid()` turns false, `revoked()` resolves.
    pub(crate) fn revoke(&mut self, reason: RevokeReason) {
        let code = REASONS
            .iter()
            .position(|r| *r == reason)
            .map_or(0, |i| i + 1);
        let _ = self.term.inner.reason_code.compare_exchange(
            0,
            u8::try_from(code).unwrap_or(0),
            Ordering::AcqRel,
            Ordering::Acquire,
        );
        if reason.is_voluntary() && !self.term.inner.revoked.load(Ordering::Acquire) {
            let deadline = self.term.inner.deadline.get();
            self.term
                .inner
                .finish_by
                .store(deadline.as_nanos(), Ordering::Release);
        }
        self.term.inner.revoked.store(true, Ordering::Release);
        if let Some(tx) = self.reason_tx.take() {
            let _ = tx.send(reason);
        }
    }
}

impl Term {
    pub(crate) fn create(
        name: LeaseName,
        token: Token,
        deadline: Arc<SessionDeadline>,
        clock: Clock,
    ) -> TermControl {
        let (tx, rx) = oneshot::channel();
        TermControl {
            term: Term {
                inner: Arc::new(TermInner {
                    name,
                    token,
                    deadline,
                    revoked: AtomicBool::new(false),
                    reason_code: AtomicU8::new(0),
                    reason: rx.shared(),
                    clock,
                    tracker: Arc::default(),
                    finish_by: AtomicU64::new(0),
                }),
            },
            reason_tx: Some(tx),
        }
    }

    /// The lease name.
    pub fn name(&self) -> &str {
        self.inner.name.as_str()
    }

    /// The fencing token: > 0, constant within the term, strictly increasing
    /// across the terms of one name (S3.2). Send it with every write to a
    /// fenced resource; the helpers of [`fencing`](crate::fencing) take
    /// this value or the term itself (`fence.admit_in(&mut tx, "ledger", &term)`).
    pub fn token(&self) -> u64 {
        self.inner.token.get()
    }

    /// The fencing token as the `i64` every SQL driver binds (`BIGINT`):
    /// `.bind(term.token_i64())`, no cast. Every backend hands out tokens of
    /// at most `i64::MAX` (they are counters in 64-bit signed columns or
    /// server revisions), so the value is the token itself.
    ///
    /// ```
    /// # fn demo(term: &simba_client::Term) {
    /// let token: i64 = term.token_i64();
    /// assert_eq!(u64::try_from(token).ok(), Some(term.token()));
    /// # }
    /// ```
    pub fn token_i64(&self) -> i64 {
        i64::try_from(self.inner.token.get()).unwrap_or(i64::MAX)
    }

    /// The fencing token as `simba-core`'s [`Token`].
    #[deprecated(
        since = "0.1.0",
        note = "use `token()`; the fencing helpers take the term itself (`&term`) or `term.token()`"
    )]
    pub fn fencing_token(&self) -> Token {
        self.inner.token
    }

    /// Not revoked, and the session's local deadline has not passed (S3.3).
    pub fn is_valid(&self) -> bool {
        let i = &self.inner;
        term_is_valid(
            i.deadline.get(),
            i.revoked.load(Ordering::Acquire),
            i.clock.now(),
        )
    }

    /// Time until the local deadline; zero once the term is over (S3.2).
    pub fn remaining(&self) -> Duration {
        let i = &self.inner;
        term_remaining(
            i.deadline.get(),
            i.revoked.load(Ordering::Acquire),
            i.clock.now(),
        )
    }

    /// How long the term's holder may still take to finish its work: while
    /// the term is valid, [`Term::remaining`]; after a voluntary revoke
    /// (`stop()`, `step_down()`, close: S6.1), the time until the term's
    /// local deadline as of the revoke, when a leader task still running is
    /// dropped and the lease released; zero after an involuntary loss (S6.3)
    /// or once that deadline has passed. A task stopping a child process
    /// caps its grace period with it.
    pub fn handover_remaining(&self) -> Duration {
        let i = &self.inner;
        if !i.revoked.load(Ordering::Acquire) {
            return self.remaining();
        }
        let by = Timestamp::from_nanos(i.finish_by.load(Ordering::Acquire));
        term_remaining(by, false, i.clock.now())
    }

    /// `Ok` only if the term stays valid for more than `min_remaining` (S3.2).
    ///
    /// # Errors
    /// [`TermError::TermExpired`] otherwise.
    pub fn ensure_valid(&self, min_remaining: Duration) -> Result<(), TermError> {
        let remaining = self.remaining();
        if remaining > min_remaining {
            Ok(())
        } else {
            Err(TermError::TermExpired {
                name: self.name().to_owned(),
                token: self.token(),
                remaining,
                required: min_remaining,
            })
        }
    }

    /// A future that resolves, with the reason, once the term has ended
    /// (S3.2, S3.4). Every call returns a future resolving to the same reason.
    /// If the client is gone without revoking the term, it resolves with
    /// [`RevokeReason::Stopped`].
    pub fn revoked(&self) -> impl Future<Output = RevokeReason> + Send + 'static {
        let reason = self.inner.reason.clone();
        async move { reason.await.unwrap_or(RevokeReason::Stopped) }
    }

    /// Runs `work` on the runtime as part of this term's leader task (S6.1):
    /// on a voluntary hand-over it sees [`Term::revoked`] resolve and the
    /// hand-over waits for it as for the task itself (at most until the
    /// term's local deadline); on an involuntary loss, or once that deadline
    /// has passed, it is dropped before the lease is released. Returns
    /// `false`, without running `work`, once the task has ended or the term
    /// is over. On a term without a leader task (a lock, a listener's term)
    /// the work is dropped when the term ends.
    pub fn spawn<F>(&self, work: F) -> bool
    where
        F: Future<Output = ()> + Send + 'static,
    {
        if self.revoke_reason().is_some_and(|r| !r.is_voluntary()) {
            return false;
        }
        self.inner
            .tracker
            .spawn(&self.inner.clock.runtime, Box::pin(work))
    }

    /// The fencing token as `simba-core`'s [`Token`], for the driver.
    pub(crate) fn core_token(&self) -> Token {
        self.inner.token
    }

    pub(crate) fn tracker(&self) -> Arc<Tracker> {
        self.inner.tracker.clone()
    }

    /// The reason, once the term has been revoked (no waiting needed).
    pub fn revoke_reason(&self) -> Option<RevokeReason> {
        let code = usize::from(self.inner.reason_code.load(Ordering::Acquire));
        code.checked_sub(1).and_then(|i| REASONS.get(i).copied())
    }
}

impl fmt::Debug for Term {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Term")
            .field("name", &self.name())
            .field("token", &self.token())
            .field("valid", &self.is_valid())
            .finish()
    }
}

impl PartialEq for Term {
    fn eq(&self, other: &Term) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}
impl Eq for Term {}

/// The cooperative cancellation signal of a blocking leader task
/// ([`crate::ElectionBuilder::run_blocking_while_leader`]): the task should
/// return soon after [`is_cancelled`](CancelSignal::is_cancelled) turns true.
/// (Named apart from tokio-util's `CancellationToken`, which an application
/// may use beside it.)
///
/// ```
/// use simba_client::CancelSignal;
/// use std::time::Duration;
/// let token = CancelSignal::new();
/// assert!(!token.sleep(Duration::from_millis(1)));
/// token.cancel();
/// assert!(token.is_cancelled());
/// assert!(token.sleep(Duration::from_secs(3600))); // returns at once
/// ```
#[derive(Clone, Debug, Default)]
pub struct CancelSignal {
    inner: Arc<(Mutex<CancelState>, Condvar)>,
}

#[derive(Debug, Default)]
struct CancelState {
    cancelled: bool,
    wakers: Vec<Waker>,
}

impl CancelSignal {
    /// A token not yet cancelled.
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, CancelState> {
        self.inner.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Cancels the token and wakes every [`sleep`](CancelSignal::sleep)
    /// and [`cancelled`](CancelSignal::cancelled).
    pub fn cancel(&self) {
        let wakers = {
            let mut st = self.state();
            st.cancelled = true;
            std::mem::take(&mut st.wakers)
        };
        self.inner.1.notify_all();
        for w in wakers {
            w.wake();
        }
    }

    /// Whether the token was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.state().cancelled
    }

    /// Blocks the thread for `d` or until cancelled; returns whether it was cancelled.
    pub fn sleep(&self, d: Duration) -> bool {
        let (lock, cv) = &*self.inner;
        let guard = lock.lock().unwrap_or_else(|p| p.into_inner());
        let (guard, _) = cv
            .wait_timeout_while(guard, d, |st| !st.cancelled)
            .unwrap_or_else(|p| p.into_inner());
        guard.cancelled
    }

    /// A future that resolves once the token is cancelled (for `select!`).
    pub fn cancelled(&self) -> impl Future<Output = ()> + Send + 'static {
        let token = self.clone();
        futures::future::poll_fn(move |cx| {
            let mut st = token.state();
            if st.cancelled {
                return Poll::Ready(());
            }
            if !st.wakers.iter().any(|w| w.will_wake(cx.waker())) {
                st.wakers.push(cx.waker().clone());
            }
            Poll::Pending
        })
    }
}

/// What a leader task returns: `()`, or `Result<(), E>` for any error
/// that displays, so `?` works inside the task. An `Err` counts as a failed
/// task under the election's [`TaskExitPolicy`](crate::TaskExitPolicy) (S6.5).
///
/// ```
/// use simba_client::TaskOutput;
/// assert_eq!(().into_task_result(), Ok(()));
/// let failed: Result<(), std::io::Error> = Err(std::io::Error::other("disk full"));
/// assert_eq!(failed.into_task_result(), Err("disk full".to_owned()));
/// ```
pub trait TaskOutput: Send + 'static {
    /// `Ok` for a normal return, `Err(message)` for a failure.
    fn into_task_result(self) -> Result<(), String>;
}

impl TaskOutput for () {
    fn into_task_result(self) -> Result<(), String> {
        Ok(())
    }
}

impl<E: fmt::Display + Send + 'static> TaskOutput for Result<(), E> {
    fn into_task_result(self) -> Result<(), String> {
        self.map_err(|e| e.to_string())
    }
}

thread_local! {
    static IN_SIMBA_CONTEXT: Cell<u32> = const { Cell::new(0) };
}

/// Whether the current thread is running a Simba callback or leader task,
/// where a blocking wait on the client would wait on itself (S7.5, S7.6).
pub fn in_callback_or_task() -> bool {
    IN_SIMBA_CONTEXT.with(|c| c.get() > 0)
}

/// Marks the current thread as inside a callback or leader task while alive.
pub(crate) struct ContextGuard(());

impl ContextGuard {
    pub(crate) fn enter() -> ContextGuard {
        IN_SIMBA_CONTEXT.with(|c| c.set(c.get() + 1));
        ContextGuard(())
    }
}

impl Drop for ContextGuard {
    fn drop(&mut self) {
        IN_SIMBA_CONTEXT.with(|c| c.set(c.get().saturating_sub(1)));
    }
}

/// A future that marks every poll of its inner future as leader-task context.
pub(crate) struct InContext<F>(pub(crate) Pin<Box<F>>);

impl<F: Future> Future for InContext<F> {
    type Output = F::Output;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let _guard = ContextGuard::enter();
        self.0.as_mut().poll(cx)
    }
}

impl simba_backends::fencing::AsToken for Term {
    fn token_value(&self) -> u64 {
        self.token()
    }
}
