//! The simulation's backend: a shell over Simba's one sequential lease model,
//! [`simba_core::model::LeaseModel`], which owns the semantics of the real
//! backends (expiry measured by the backend's own clock, per-name strictly
//! increasing tokens, token-conditional release, optional release broadcasts
//! on release and on expiry as ZooKeeper and etcd delete ephemeral keys,
//! optional granted-lease shortening like ZooKeeper's `maxSessionTimeout`,
//! and a millisecond clock as Redis's `mstime()`). The shell adds what only
//! a simulation needs: virtual time in nanoseconds, session ids drawn from
//! the seed, and restarts that keep or lose the state.
//!
//! Every method takes the backend clock's reading `now`; nothing reads a clock.

use simba_core::model::{LeaseModel, ModelOptions};
use simba_core::{
    AcquireOutcome, BackendError, Calls, LeaseName, RenewError, Renewal, SessionGrant, SessionId,
    SlotClaim, Timestamp, Token,
};
use std::time::Duration;

/// How the simulated backend behaves: the model's options.
pub type BackendOptions = ModelOptions;

/// The simulated backend's state.
#[derive(Clone, Debug)]
pub struct SimBackend {
    model: LeaseModel,
    rng: fastrand::Rng,
}

fn at(now: u64) -> Timestamp {
    Timestamp::from_nanos(now)
}

impl SimBackend {
    /// An empty backend; `seed` draws the session ids (128 random bits, S1.3).
    pub fn new(options: BackendOptions, seed: u64) -> SimBackend {
        SimBackend {
            model: LeaseModel::new(options),
            rng: fastrand::Rng::with_seed(seed),
        }
    }

    /// The options it runs with.
    pub fn options(&self) -> &BackendOptions {
        self.model.options()
    }

    /// Expires every session whose time is up at backend time `now`, freeing
    /// its leases. Called by every operation; the driver also calls it at
    /// [`SimBackend::next_expiry`] so expiry broadcasts go out on time.
    pub fn expire(&mut self, now: u64) {
        self.model.expire(at(now));
    }

    /// Makes `session` a member of `group` (S10.1); joining twice is a
    /// no-op, and so is joining with a session that is not live (its next
    /// renewal says `Expired`), as on every real backend.
    ///
    /// # Errors
    /// None: the model never fails a join (the network may lose it).
    pub fn join_group(
        &mut self,
        now: u64,
        session: SessionId,
        group: &LeaseName,
    ) -> Result<(), BackendError> {
        self.model.join_group(at(now), session, group);
        Ok(())
    }

    /// Ends `session`'s membership of `group`; a no-op if it is not a member.
    pub fn leave_group(&mut self, now: u64, session: SessionId, group: &LeaseName) {
        self.model.leave_group(at(now), session, group);
    }

    /// The live members of `group` (for checkers and tests).
    pub fn group_members(&self, group: &LeaseName) -> Vec<SessionId> {
        self.model.group_members(group)
    }

    /// The backend-clock instant of the next session expiry, if any session lives.
    pub fn next_expiry(&self) -> Option<u64> {
        self.model.next_expiry().map(Timestamp::as_nanos)
    }

    /// Opens a new session (S1.1) with the requested timeout, capped at
    /// `max_grant` (S8.4).
    ///
    /// # Errors
    /// [`simba_core::BackendErrorKind::Rejected`] for a lease duration outside
    /// 1 ms ..= 366 days, as the real backends.
    pub fn open_session(
        &mut self,
        now: u64,
        lease_duration: Duration,
    ) -> Result<SessionGrant, BackendError> {
        simba_core::model::check_lease_duration(lease_duration)?;
        self.model.expire(at(now));
        let mut id = SessionId::from_u128(self.rng.u128(1..));
        while self.model.has_session(id) {
            id = SessionId::from_u128(self.rng.u128(1..));
        }
        self.model.open_session(at(now), id, lease_duration, ())
    }

    /// Renews `session` (S1.1): its expiry moves to `now + timeout`. The reply
    /// lists every lease it owns (S3.4 `TakenOver`).
    ///
    /// # Errors
    /// [`RenewError::Expired`] once the session has expired or was never known (S1.2).
    pub fn renew(&mut self, now: u64, session: SessionId) -> Result<Renewal, RenewError> {
        self.model.renew(at(now), session)
    }

    /// Tries to acquire `name` for `session` (S3.1): a free name gets the next
    /// token; the owner gets its own token again; anyone else gets `Held`.
    ///
    /// # Errors
    /// [`simba_core::BackendErrorKind::Malformed`] if the name's token would
    /// overflow.
    pub fn acquire(
        &mut self,
        now: u64,
        session: SessionId,
        name: &LeaseName,
    ) -> Result<AcquireOutcome, BackendError> {
        self.model.acquire(at(now), session, name)
    }

    /// Releases `name` if `session` owns it with `token` (S3.5); a no-op
    /// otherwise. Returns whether it released.
    pub fn release(
        &mut self,
        now: u64,
        session: SessionId,
        name: &LeaseName,
        token: Token,
    ) -> bool {
        self.model.release(at(now), session, name, token)
    }

    /// Closes `session`, releasing its leases at once (S1.4). A no-op if it is gone.
    pub fn close_session(&mut self, now: u64, session: SessionId) {
        self.model.close_session(at(now), session);
    }

    /// An outside actor removes the lease of `name` from its live holder
    /// (an operator's delete, a Redis eviction), keeping the token counter
    /// ([`LeaseModel::remove_lease`]). Returns the holder and its token, or
    /// `None` if the name had no live holder at backend time `now`.
    pub fn remove_lease(&mut self, now: u64, name: &LeaseName) -> Option<(SessionId, Token)> {
        self.model.remove_lease(at(now), name)
    }

    /// A restart: keeping state (a persistent store; expiry times are absolute
    /// and keep running), or losing it all, token counters included (Redis
    /// without persistence).
    pub fn restart(&mut self, keep_state: bool) {
        if keep_state {
            self.model.take_announcements();
        } else {
            self.model.clear();
        }
    }

    /// The names freed since the last call, to broadcast (S4.2).
    pub fn take_broadcasts(&mut self) -> Vec<LeaseName> {
        self.model.take_announcements()
    }

    /// The current owner of `name`, if any (for checkers and tests).
    pub fn owner(&self, name: &LeaseName) -> Option<(SessionId, Token)> {
        self.model.owner(name)
    }

    /// What `inspect` shows at backend time `now`: every name that was ever
    /// acquired whose name starts with `prefix`, in name order, as
    /// `(name, holder, last token, holder's remaining)`; and every live
    /// session as `(id, granted timeout, remaining)`.
    #[allow(clippy::type_complexity)]
    pub fn inspect(
        &mut self,
        now: u64,
        prefix: Option<&str>,
    ) -> (
        Vec<(LeaseName, Option<SessionId>, Token, Option<Duration>)>,
        Vec<(SessionId, Duration, Duration)>,
    ) {
        let seen = self.model.inspect(at(now), prefix);
        let leases = seen
            .leases
            .into_iter()
            .map(|l| (l.name, l.holder, l.token, l.remaining))
            .collect();
        let sessions = seen
            .sessions
            .into_iter()
            .map(|s| (s.session, s.granted, s.remaining))
            .collect();
        (leases, sessions)
    }

    /// How many sessions are alive (for tests).
    pub fn session_count(&self) -> usize {
        self.model.session_count()
    }

    /// Records `slot` of the schedule `name` as claimed, in one step, only
    /// if `session` owns `name` with `token` and `slot` is later than the
    /// last claimed slot of `name` (S11.1).
    pub fn claim_slot(
        &mut self,
        now: u64,
        session: SessionId,
        name: &LeaseName,
        token: Token,
        slot: u64,
    ) -> SlotClaim {
        self.model.claim_slot(at(now), session, name, token, slot)
    }

    /// The backend-clock instant (ns) at which `session` expires, while the
    /// backend knows it (for checkers).
    pub fn expires_at(&self, session: SessionId) -> Option<u64> {
        self.model.expires_at(session).map(Timestamp::as_nanos)
    }

    /// Whether `session` is live at backend time `now`, exactly as the next
    /// call at `now` would judge it (for checkers).
    pub fn live_at(&self, session: SessionId, now: u64) -> bool {
        self.model.live_at(session, at(now))
    }
}

/// The simulated backend at backend-clock reading `now`, as the core's
/// command mapping ([`Command::call`](simba_core::Command::call)) calls it.
pub struct At<'a> {
    /// The backend.
    pub backend: &'a mut SimBackend,
    /// The backend clock's reading, in nanoseconds.
    pub now: u64,
}

impl Calls for At<'_> {
    fn open_session(&mut self, lease_duration: Duration) -> Result<SessionGrant, BackendError> {
        self.backend.open_session(self.now, lease_duration)
    }

    fn renew(&mut self, session: SessionId) -> Result<Renewal, RenewError> {
        self.backend.renew(self.now, session)
    }

    fn acquire(
        &mut self,
        session: SessionId,
        name: &LeaseName,
    ) -> Result<AcquireOutcome, BackendError> {
        self.backend.acquire(self.now, session, name)
    }

    fn release(
        &mut self,
        session: SessionId,
        name: &LeaseName,
        token: Token,
    ) -> Result<(), BackendError> {
        self.backend.release(self.now, session, name, token);
        Ok(())
    }

    // The simulated backend keeps nothing for a `Held` acquire, so there is
    // no place to withdraw (S4.5): the provided `withdraw` answers `Ok`.

    fn close_session(&mut self, session: SessionId) -> Result<(), BackendError> {
        self.backend.close_session(self.now, session);
        Ok(())
    }

    fn join_group(&mut self, session: SessionId, group: &LeaseName) -> Result<(), BackendError> {
        self.backend.join_group(self.now, session, group)
    }

    fn leave_group(&mut self, session: SessionId, group: &LeaseName) -> Result<(), BackendError> {
        self.backend.leave_group(self.now, session, group);
        Ok(())
    }

    fn claim_slot(
        &mut self,
        session: SessionId,
        name: &LeaseName,
        token: Token,
        slot: u64,
    ) -> Result<SlotClaim, BackendError> {
        Ok(self
            .backend
            .claim_slot(self.now, session, name, token, slot))
    }
}
