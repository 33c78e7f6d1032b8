//! An in-memory backend, for tests and single-process use: a shell over
//! Simba's one sequential lease model, [`simba_core::model::LeaseModel`],
//! which owns the semantics (sessions, leases, tokens, expiry, groups,
//! slots). The shell adds a mutex, the process's monotonic clock, release
//! broadcasts, injected failures and, for must-fail tests, deliberate flaws.

use crate::{
    check_lease_duration, check_prefix, random_session_id, Backend, Inspection, LeaseInfo,
    SessionInfo, SessionMetadata,
};
use futures::channel::mpsc;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use simba_core::model::{LeaseModel, ModelOptions};
use simba_core::{
    AcquireOutcome, BackendError, BackendErrorKind, LeaseName, RenewError, Renewal, SessionGrant,
    SessionId, SlotClaim, Timestamp, Token,
};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// An in-memory [`Backend`] whose clock is [`Instant`] (or an injected one,
/// [`MemoryBackend::with_clock`]). Clones share one state,
/// like clients of one server. It broadcasts releases, and can inject
/// failures ([`MemoryBackend::fail_next_calls`]) to test error paths.
///
/// Its semantics are those of [`simba_core::model::LeaseModel`], the model
/// the simulation's backend and the history checker also run; it passes the
/// same conformance suite as the SQL backends.
///
/// ```
/// use simba_backends::{Backend, MemoryBackend};
/// use simba_core::{AcquireOutcome, LeaseName};
/// use std::time::Duration;
/// # futures::executor::block_on(async {
/// let backend = MemoryBackend::new();
/// let grant = backend.open_session(Duration::from_secs(10)).await?;
/// let name = LeaseName::new("ledger")?;
/// let won = backend.acquire(grant.session, &name).await?;
/// assert!(matches!(won, AcquireOutcome::Won { .. }));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[derive(Clone, Default)]
pub struct MemoryBackend {
    state: Arc<Mutex<State>>,
}

struct State {
    model: LeaseModel<SessionMetadata>,
    /// The origin of the model's clock (the real clock's default).
    origin: Instant,
    /// An injected clock ([`MemoryBackend::with_clock`]): the time since an
    /// origin of the caller's choosing, read instead of `origin.elapsed()`.
    clock: Option<SimClock>,
    /// Session ids drawn from this seed ([`MemoryBackend::session_ids_from`])
    /// instead of the OS.
    ids: Option<u64>,
    subscribers: Vec<mpsc::UnboundedSender<LeaseName>>,
    fail_next: u32,
    /// A deliberate bug for must-fail tests: acquire ignores a live holder.
    skip_holder_check: bool,
    #[cfg(feature = "testkit")]
    flaw: Option<Flaw>,
}

impl Default for State {
    fn default() -> Self {
        State {
            // Releases and membership changes are broadcast; expiries are not.
            model: LeaseModel::new(ModelOptions::default()),
            origin: Instant::now(),
            clock: None,
            ids: None,
            subscribers: Vec::new(),
            fail_next: 0,
            skip_holder_check: false,
            #[cfg(feature = "testkit")]
            flaw: None,
        }
    }
}

/// An injected clock: the time since an origin of the caller's choosing.
type SimClock = Arc<dyn Fn() -> Duration + Send + Sync>;

/// Whether `$state` has the flaw `Flaw::$flaw` (always false without the
/// `testkit` feature).
macro_rules! flawed {
    ($state:expr, $flaw:ident) => {{
        #[cfg(feature = "testkit")]
        let on = $state.flaw == Some(Flaw::$flaw);
        #[cfg(not(feature = "testkit"))]
        let on = {
            let _ = &$state;
            false
        };
        on
    }};
}

/// A deliberate bug (feature `testkit`), so tests can show that the
/// conformance suite catches a backend that breaks the contract. Never use
/// one outside such a test.
#[cfg(feature = "testkit")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Flaw {
    /// Sessions expire at 90 % of the remaining time the backend reports.
    ExpireEarly,
    /// A renewal reports a full lease but keeps the old expiry.
    RenewKeepsExpiry,
    /// An acquire decides, lets other calls run, then writes (not atomic):
    /// concurrent acquires of a free lease each take a new term.
    SplitAcquire,
    /// `claim_slot` records the slot without checking that the session holds
    /// the lease with the token (S11.1).
    SlotIgnoresHolder,
    /// `claim_slot` records any slot, even one not later than the last.
    SlotRewinds,
}

impl State {
    /// The model's clock: the time since the backend was made.
    fn now(&self) -> Timestamp {
        let since = match &self.clock {
            Some(clock) => clock(),
            None => self.origin.elapsed(),
        };
        Timestamp::from_nanos(u64::try_from(since.as_nanos()).unwrap_or(u64::MAX))
    }

    /// A new session id: from the seeded sequence if one was set, else 128
    /// random bits from the OS (S1.3).
    fn session_id(&mut self) -> Result<SessionId, BackendError> {
        let Some(state) = self.ids.as_mut() else {
            return random_session_id();
        };
        // splitmix64, twice: distinct, well-spread ids from one seed.
        let mut next = || {
            *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = *state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        let (hi, lo) = (next(), next());
        Ok(SessionId::from_u128(
            (u128::from(hi) << 64) | u128::from(lo),
        ))
    }

    /// The remaining time reported for `true_remaining` (a lie under
    /// [`Flaw::ExpireEarly`]).
    fn reported(&self, true_remaining: Duration) -> Duration {
        if flawed!(self, ExpireEarly) {
            return true_remaining.mul_f64(10.0 / 9.0);
        }
        true_remaining
    }

    /// `outcome` with its remaining times as reported.
    fn report(&self, outcome: AcquireOutcome) -> AcquireOutcome {
        match outcome {
            AcquireOutcome::Won { token, remaining } => AcquireOutcome::Won {
                token,
                remaining: self.reported(remaining),
            },
            AcquireOutcome::Held {
                holder,
                token,
                holder_remaining,
            } => AcquireOutcome::Held {
                holder,
                token,
                holder_remaining: holder_remaining.map(|r| self.reported(r)),
            },
            other => other,
        }
    }

    fn injected_failure(&mut self) -> Result<(), BackendError> {
        if self.fail_next > 0 {
            self.fail_next -= 1;
            Err(BackendError::new(
                BackendErrorKind::Unavailable,
                "memory backend: injected connection failure",
            ))
        } else {
            Ok(())
        }
    }

    /// Broadcasts every name the model announced (S4.2, S10.5).
    fn broadcast(&mut self) {
        for name in self.model.take_announcements() {
            self.subscribers
                .retain(|tx| tx.unbounded_send(name.clone()).is_ok());
        }
    }
}

impl MemoryBackend {
    /// An empty backend.
    ///
    /// ```
    /// let backend = simba_backends::MemoryBackend::new();
    /// # drop(backend);
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty backend whose model reads `clock` (the time since an origin
    /// of the caller's choosing) instead of the process's monotonic clock:
    /// a simulation passes its simulated time, so sessions expire on it.
    ///
    /// ```
    /// use simba_backends::{Backend, MemoryBackend};
    /// use std::sync::atomic::{AtomicU64, Ordering};
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// let now_ms = Arc::new(AtomicU64::new(0));
    /// let read = now_ms.clone();
    /// let backend = MemoryBackend::with_clock(move || Duration::from_millis(read.load(Ordering::SeqCst)));
    /// # futures::executor::block_on(async {
    /// let grant = backend.open_session(Duration::from_secs(1)).await?;
    /// now_ms.store(2_000, Ordering::SeqCst); // two simulated seconds later
    /// assert!(backend.renew(grant.session).await.is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn with_clock(clock: impl Fn() -> Duration + Send + Sync + 'static) -> Self {
        let b = Self::default();
        b.lock().clock = Some(Arc::new(clock));
        b
    }

    /// Draws session ids from a sequence seeded by `seed` instead of the OS,
    /// so a simulation's sessions (and every order that depends on their
    /// ids) are the same on every run of a seed. Distinct, but predictable:
    /// for tests only.
    ///
    /// ```
    /// let backend = simba_backends::MemoryBackend::new().session_ids_from(7);
    /// # drop(backend);
    /// ```
    #[must_use]
    pub fn session_ids_from(self, seed: u64) -> Self {
        self.lock().ids = Some(seed);
        self
    }

    /// Loses every session, lease, group and slot, as a backend restarted
    /// without its data would (a fault for simulations: fencing tokens start
    /// again from 1, which a history checker must catch).
    ///
    /// ```
    /// use simba_backends::{Backend, MemoryBackend};
    /// use std::time::Duration;
    /// # futures::executor::block_on(async {
    /// let backend = MemoryBackend::new();
    /// let grant = backend.open_session(Duration::from_secs(10)).await?;
    /// backend.lose_state();
    /// assert!(backend.renew(grant.session).await.is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn lose_state(&self) {
        self.lock().model.clear();
    }

    /// Removes `name`'s holder from outside the clients (an operator deleting
    /// the row or key), broadcasting the release; returns the removed holder
    /// and token. The holder's session lives on; its next renewal no longer
    /// lists the lease.
    ///
    /// ```
    /// use simba_backends::{Backend, MemoryBackend};
    /// use simba_core::LeaseName;
    /// use std::time::Duration;
    /// # futures::executor::block_on(async {
    /// let backend = MemoryBackend::new();
    /// let grant = backend.open_session(Duration::from_secs(10)).await?;
    /// let name = LeaseName::new("ledger")?;
    /// backend.acquire(grant.session, &name).await?;
    /// assert!(backend.remove_lease(&name).is_some());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn remove_lease(&self, name: &LeaseName) -> Option<(SessionId, Token)> {
        let mut st = self.lock();
        let now = st.now();
        let removed = st.model.remove_lease(now, name);
        st.broadcast();
        removed
    }

    /// The live holder of `name` and its token by the backend's clock, read
    /// without side effects (no expiry is applied or broadcast): for
    /// checkers that ask "was this term live when it wrote?".
    ///
    /// ```
    /// use simba_core::LeaseName;
    /// let backend = simba_backends::MemoryBackend::new();
    /// assert_eq!(backend.live_owner(&LeaseName::new("ledger")?), None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn live_owner(&self, name: &LeaseName) -> Option<(SessionId, Token)> {
        let st = self.lock();
        let now = st.now();
        st.model
            .owner(name)
            .filter(|(session, _)| st.model.live_at(*session, now))
    }

    /// The names of every lease with a live holder, in name order, read
    /// without side effects (for a simulation that draws one to remove).
    ///
    /// ```
    /// assert!(simba_backends::MemoryBackend::new().held_leases().is_empty());
    /// ```
    pub fn held_leases(&self) -> Vec<LeaseName> {
        let st = self.lock();
        let now = st.now();
        st.model
            .lease_names()
            .into_iter()
            .filter(|n| {
                st.model
                    .owner(n)
                    .is_some_and(|(s, _)| st.model.live_at(s, now))
            })
            .collect()
    }

    /// Ends every release subscription, as a restarted server drops its
    /// connections; the state is kept.
    ///
    /// ```
    /// simba_backends::MemoryBackend::new().drop_subscriptions();
    /// ```
    pub fn drop_subscriptions(&self) {
        self.lock().subscribers.clear();
    }

    /// Makes the next `n` calls fail with [`BackendErrorKind::Unavailable`]
    /// without touching the state, as a broken connection would.
    ///
    /// ```
    /// use simba_backends::{Backend, MemoryBackend};
    /// use std::time::Duration;
    /// # futures::executor::block_on(async {
    /// let backend = MemoryBackend::new();
    /// backend.fail_next_calls(1);
    /// assert!(backend.open_session(Duration::from_secs(1)).await.is_err());
    /// assert!(backend.open_session(Duration::from_secs(1)).await.is_ok());
    /// # });
    /// ```
    pub fn fail_next_calls(&self, n: u32) {
        self.lock().fail_next = n;
    }

    /// A deliberately **broken** backend for must-fail tests (feature
    /// `testkit`): its acquire takes a lease over without checking whether
    /// the holder is live ([`LeaseModel::acquire_ignoring_holder`]). The
    /// history checker must reject its histories.
    ///
    /// ```
    /// let broken = simba_backends::MemoryBackend::broken_skipping_holder_check();
    /// # drop(broken);
    /// ```
    #[cfg(feature = "testkit")]
    pub fn broken_skipping_holder_check() -> Self {
        let b = Self::default();
        b.lock().skip_holder_check = true;
        b
    }

    /// A backend with a deliberate bug (feature `testkit`): for tests that
    /// show the conformance suite catches it.
    ///
    /// ```
    /// use simba_backends::Flaw;
    /// let broken = simba_backends::MemoryBackend::with_flaw(Flaw::SplitAcquire);
    /// # drop(broken);
    /// ```
    #[cfg(feature = "testkit")]
    pub fn with_flaw(flaw: Flaw) -> Self {
        let b = Self::default();
        b.lock().flaw = Some(flaw);
        b
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(feature = "testkit")]
impl MemoryBackend {
    /// [`Flaw::SplitAcquire`]: decide under the lock, let other calls run,
    /// then take a new term without looking again.
    async fn split_acquire(
        &self,
        session: SessionId,
        name: &LeaseName,
    ) -> Result<AcquireOutcome, BackendError> {
        let remaining = {
            let st = self.lock();
            let kept = st.model.lease(name).and_then(|l| l.owned_by(session));
            // Decide on a copy: nothing is written before the pause.
            let mut probe = st.model.clone();
            match probe.acquire(st.now(), session, name)? {
                AcquireOutcome::Won { token, remaining } if kept != Some(token) => remaining,
                decided => return Ok(st.report(decided)),
            }
        };
        futures_timer::Delay::new(Duration::from_millis(2)).await;
        let mut st = self.lock();
        let now = st.now();
        // Write without looking again: a new term even over the caller's own
        // (won meanwhile by a concurrent call): end that term first, without
        // a broadcast, then take the name whoever holds it.
        if let Some((holder, token)) = st.model.owner(name) {
            if holder == session {
                st.model.release(now, session, name, token);
                st.model.take_announcements();
            }
        }
        match st.model.acquire_ignoring_holder(now, session, name)? {
            AcquireOutcome::Won { token, .. } => Ok(AcquireOutcome::Won {
                token,
                remaining: st.reported(remaining),
            }),
            other => Ok(st.report(other)),
        }
    }
}

impl MemoryBackend {
    /// A call that reads or changes the model: fails as injected, else runs
    /// `f` on the state at the model's time and, once it succeeded, hands
    /// what it announced to the release subscribers (S4.2, S10.5).
    fn changing<T, E>(
        &self,
        f: impl FnOnce(&mut State, Timestamp) -> Result<T, E>,
    ) -> futures::future::Ready<Result<T, E>>
    where
        T: Send + 'static,
        E: From<BackendError> + Send + 'static,
    {
        let mut st = self.lock();
        let result = match st.injected_failure() {
            Ok(()) => {
                let now = st.now();
                f(&mut st, now)
            }
            Err(e) => Err(e.into()),
        };
        if result.is_ok() {
            st.broadcast();
        }
        futures::future::ready(result)
    }

    /// Joins (`join`) or leaves `group` for `session`; with a session that
    /// is not live a join is a no-op, as on every backend: the session's
    /// next renewal says `Expired`.
    fn membership(
        &self,
        join: bool,
        session: SessionId,
        group: &LeaseName,
    ) -> futures::future::Ready<Result<(), BackendError>> {
        self.changing(|st, now| {
            if join {
                st.model.join_group(now, session, group);
            } else {
                st.model.leave_group(now, session, group);
            }
            Ok(())
        })
    }
}

impl Backend for MemoryBackend {
    fn open_session_with<'a>(
        &'a self,
        lease_duration: Duration,
        metadata: &'a SessionMetadata,
    ) -> BoxFuture<'a, Result<SessionGrant, BackendError>> {
        let result = (|| {
            check_lease_duration(lease_duration)?;
            let mut st = self.lock();
            st.injected_failure()?;
            let session = st.session_id()?;
            let granted = if flawed!(st, ExpireEarly) {
                lease_duration.mul_f64(0.9)
            } else {
                lease_duration
            };
            let now = st.now();
            let mut grant = st.model.open_session_granted(
                now,
                session,
                lease_duration,
                granted,
                metadata.clone(),
            )?;
            grant.remaining = st.reported(grant.remaining);
            Ok(grant)
        })();
        futures::future::ready(result).boxed()
    }

    fn renew(&self, session: SessionId) -> BoxFuture<'_, Result<Renewal, RenewError>> {
        self.changing(|st, now| {
            let kept = if flawed!(st, RenewKeepsExpiry) {
                st.model.expires_at(session)
            } else {
                None
            };
            let mut renewal = st.model.renew(now, session)?;
            if let Some(at) = kept {
                st.model.set_expiry(session, at);
            }
            renewal.remaining = st.reported(renewal.remaining);
            Ok(renewal)
        })
        .boxed()
    }

    fn acquire<'a>(
        &'a self,
        session: SessionId,
        name: &'a LeaseName,
    ) -> BoxFuture<'a, Result<AcquireOutcome, BackendError>> {
        #[cfg(feature = "testkit")]
        if flawed!(self.lock(), SplitAcquire) {
            return self.split_acquire(session, name).boxed();
        }
        self.changing(|st, now| {
            let outcome = if st.skip_holder_check {
                st.model.acquire_ignoring_holder(now, session, name)?
            } else {
                st.model.acquire(now, session, name)?
            };
            Ok(st.report(outcome))
        })
        .boxed()
    }

    fn release<'a>(
        &'a self,
        session: SessionId,
        name: &'a LeaseName,
        token: Token,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        self.changing(|st, now| {
            st.model.release(now, session, name, token);
            Ok::<_, BackendError>(())
        })
        .boxed()
    }

    fn close_session(&self, session: SessionId) -> BoxFuture<'_, Result<(), BackendError>> {
        self.changing(|st, now| {
            st.model.close_session(now, session);
            Ok::<_, BackendError>(())
        })
        .boxed()
    }

    fn inspect<'a>(
        &'a self,
        prefix: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Inspection, BackendError>> {
        let prefix = prefix.unwrap_or("");
        if let Err(e) = check_prefix(prefix) {
            return futures::future::ready(Err(e)).boxed();
        }
        self.changing(|st, now| {
            let seen = st.model.inspect(now, Some(prefix));
            let sessions = seen
                .sessions
                .into_iter()
                .map(|s| SessionInfo {
                    session: s.session,
                    remaining: st.reported(s.remaining),
                    lease_duration: s.requested,
                    metadata: s.data,
                })
                .collect();
            let leases = seen
                .leases
                .into_iter()
                .map(|l| LeaseInfo {
                    name: l.name,
                    holder: l.holder,
                    token: Some(l.token),
                    remaining: l.remaining.map(|r| st.reported(r)),
                })
                .collect();
            Ok::<_, BackendError>(Inspection { leases, sessions })
        })
        .boxed()
    }

    fn subscribe_releases(
        &self,
    ) -> BoxFuture<'_, Result<Option<BoxStream<'static, LeaseName>>, BackendError>> {
        let (tx, rx) = mpsc::unbounded();
        self.lock().subscribers.push(tx);
        futures::future::ready(Ok(Some(rx.boxed()))).boxed()
    }

    fn broadcasts_releases(&self) -> bool {
        true
    }

    crate::forward::groups_by_membership!();

    fn claim_slot<'a>(
        &'a self,
        session: SessionId,
        name: &'a LeaseName,
        token: Token,
        slot: u64,
    ) -> BoxFuture<'a, Result<SlotClaim, BackendError>> {
        let result = (|| {
            let mut st = self.lock();
            st.injected_failure()?;
            let now = st.now();
            let any_holder = flawed!(st, SlotIgnoresHolder);
            let rewind = flawed!(st, SlotRewinds);
            if !any_holder && !rewind {
                return Ok(st.model.claim_slot(now, session, name, token, slot));
            }
            // A flawed claim: the model's two halves, one of them broken.
            st.model.expire(now);
            if !any_holder && st.model.owner(name) != Some((session, token)) {
                return Ok(SlotClaim::NotHolder);
            }
            Ok(st.model.record_slot(name, slot, !rewind))
        })();
        futures::future::ready(result).boxed()
    }

    /// Any number: the calls of a batch are answered one after the other,
    /// at once (S4.7).
    fn max_batch(&self) -> usize {
        64
    }

    fn name(&self) -> &'static str {
        "memory"
    }
}
