//! A sans-IO model of a Simba backend, with exactly the semantics of the real
//! ones: expiry measured by the backend's own clock, per-name strictly
//! increasing tokens, token-conditional release, optional release broadcasts
//! (on release and on expiry, as ZooKeeper and etcd delete ephemeral keys),
//! optional granted-lease shortening (ZooKeeper-like `maxSessionTimeout`), and
//! a millisecond clock as Redis's `mstime()`.
//!
//! Every method takes the backend clock's reading `now`; nothing reads a clock.

use simba_core::{
    AcquireOutcome, BackendError, BackendErrorKind, GroupView, LeaseName, RenewError, Renewal,
    SessionGrant, SessionId, SlotClaim, Token,
};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// How the simulated backend behaves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackendOptions {
    /// Broadcast a release to every node when a lease is released or its
    /// session closed (Redis pub/sub, ZooKeeper watches, etcd watches).
    pub broadcast_release: bool,
    /// Broadcast also when a session expires (ZooKeeper and etcd delete the
    /// ephemeral keys and the watchers fire).
    pub broadcast_expiry: bool,
    /// Read the clock with millisecond granularity, truncating (Redis `mstime()`).
    pub millisecond_clock: bool,
    /// Report `remaining` rounded up to whole milliseconds, as a server may.
    pub round_remaining_up: bool,
    /// Grant at most this session timeout (ZooKeeper's `maxSessionTimeout`).
    pub max_grant: Option<Duration>,
}

impl Default for BackendOptions {
    fn default() -> Self {
        BackendOptions {
            broadcast_release: true,
            broadcast_expiry: false,
            millisecond_clock: false,
            round_remaining_up: false,
            max_grant: None,
        }
    }
}

#[derive(Clone, Debug)]
struct Session {
    /// Backend-clock instant (ns) at which the session expires.
    expires_at: u64,
    /// The granted timeout.
    timeout: Duration,
}

/// The simulated backend's state.
#[derive(Clone, Debug)]
pub struct SimBackend {
    options: BackendOptions,
    sessions: BTreeMap<SessionId, Session>,
    leases: BTreeMap<LeaseName, (SessionId, Token)>,
    /// The last token handed out per name; kept forever (unless state is lost).
    last_token: BTreeMap<LeaseName, u64>,
    /// Partitioned groups (S10.1): each group's member sessions; a member
    /// leaves with its session (close or expiry).
    groups: BTreeMap<LeaseName, BTreeSet<SessionId>>,
    /// Names freed since the last [`SimBackend::take_broadcasts`], to broadcast.
    freed: Vec<LeaseName>,
    /// The last claimed slot per schedule name (S11.1); kept across leases
    /// and sessions (unless state is lost).
    slots: BTreeMap<LeaseName, u64>,
    rng: fastrand::Rng,
}

const MS: u64 = 1_000_000;

impl SimBackend {
    /// An empty backend; `seed` draws the session ids (128 random bits, S1.3).
    pub fn new(options: BackendOptions, seed: u64) -> SimBackend {
        SimBackend {
            options,
            sessions: BTreeMap::new(),
            leases: BTreeMap::new(),
            last_token: BTreeMap::new(),
            groups: BTreeMap::new(),
            freed: Vec::new(),
            slots: BTreeMap::new(),
            rng: fastrand::Rng::with_seed(seed),
        }
    }

    /// The options it runs with.
    pub fn options(&self) -> &BackendOptions {
        &self.options
    }

    fn read(&self, now: u64) -> u64 {
        if self.options.millisecond_clock {
            now / MS * MS
        } else {
            now
        }
    }

    fn remaining(&self, expires_at: u64, now: u64) -> Duration {
        let r = expires_at.saturating_sub(now);
        let r = if self.options.round_remaining_up {
            r.div_ceil(MS) * MS
        } else {
            r
        };
        Duration::from_nanos(r)
    }

    /// Expires every session whose time is up at backend time `now`, freeing
    /// its leases. Called by every operation; the driver also calls it at
    /// [`SimBackend::next_expiry`] so expiry broadcasts go out on time.
    pub fn expire(&mut self, now: u64) {
        let now = self.read(now);
        let expired: Vec<SessionId> = self
            .sessions
            .iter()
            .filter(|(_, s)| s.expires_at <= now)
            .map(|(id, _)| *id)
            .collect();
        for id in expired {
            self.sessions.remove(&id);
            let broadcast = self.options.broadcast_expiry;
            self.drop_leases_of(id, broadcast);
            self.leave_groups_of(id, broadcast);
        }
    }

    fn drop_leases_of(&mut self, session: SessionId, broadcast: bool) {
        let names: Vec<LeaseName> = self
            .leases
            .iter()
            .filter(|(_, (s, _))| *s == session)
            .map(|(n, _)| n.clone())
            .collect();
        for name in names {
            self.leases.remove(&name);
            if broadcast {
                self.freed.push(name);
            }
        }
    }

    /// Ends every group membership of `session`; with `broadcast`, announces
    /// each group's change with its name (S10.5).
    fn leave_groups_of(&mut self, session: SessionId, broadcast: bool) {
        let mut changed = Vec::new();
        for (group, members) in self.groups.iter_mut() {
            if members.remove(&session) {
                changed.push(group.clone());
            }
        }
        self.groups.retain(|_, m| !m.is_empty());
        if broadcast {
            self.freed.extend(changed);
        }
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
        self.expire(now);
        if !self.sessions.contains_key(&session) {
            return Ok(());
        }
        if self
            .groups
            .entry(group.clone())
            .or_default()
            .insert(session)
            && self.options.broadcast_release
        {
            self.freed.push(group.clone());
        }
        Ok(())
    }

    /// Ends `session`'s membership of `group`; a no-op if it is not a member.
    pub fn leave_group(&mut self, now: u64, session: SessionId, group: &LeaseName) {
        self.expire(now);
        let left = self
            .groups
            .get_mut(group)
            .is_some_and(|m| m.remove(&session));
        if left {
            self.groups.retain(|_, m| !m.is_empty());
            if self.options.broadcast_release {
                self.freed.push(group.clone());
            }
        }
    }

    /// The live members of `group` (for checkers and tests).
    pub fn group_members(&self, group: &LeaseName) -> Vec<SessionId> {
        self.groups
            .get(group)
            .map(|m| m.iter().copied().collect())
            .unwrap_or_default()
    }

    /// The backend-clock instant of the next session expiry, if any session lives.
    pub fn next_expiry(&self) -> Option<u64> {
        self.sessions.values().map(|s| s.expires_at).min()
    }

    /// Opens a new session (S1.1) with the requested timeout, capped at
    /// `max_grant` (S8.4).
    ///
    /// # Errors
    /// [`BackendErrorKind::Rejected`] for a lease duration outside
    /// 1 ms ..= 366 days, as the real backends.
    pub fn open_session(
        &mut self,
        now: u64,
        lease_duration: Duration,
    ) -> Result<SessionGrant, BackendError> {
        const MAX: Duration = Duration::from_secs(366 * 24 * 3600);
        if lease_duration < Duration::from_millis(1) || lease_duration > MAX {
            return Err(BackendError::new(
                BackendErrorKind::Rejected,
                format!("lease duration {lease_duration:?} is outside 1 ms ..= 366 days"),
            ));
        }
        self.expire(now);
        let now = self.read(now);
        let timeout = match self.options.max_grant {
            Some(max) => lease_duration.min(max),
            None => lease_duration,
        };
        let mut id = SessionId::from_u128(self.rng.u128(1..));
        while self.sessions.contains_key(&id) {
            id = SessionId::from_u128(self.rng.u128(1..));
        }
        let expires_at = now.saturating_add(nanos(timeout));
        self.sessions.insert(
            id,
            Session {
                expires_at,
                timeout,
            },
        );
        Ok(SessionGrant {
            session: id,
            remaining: self.remaining(expires_at, now),
        })
    }

    /// Renews `session` (S1.1): its expiry moves to `now + timeout`. The reply
    /// lists every lease it owns (S3.4 `TakenOver`).
    ///
    /// # Errors
    /// [`RenewError::Expired`] once the session has expired or was never known (S1.2).
    pub fn renew(&mut self, now: u64, session: SessionId) -> Result<Renewal, RenewError> {
        self.expire(now);
        let now = self.read(now);
        let Some(s) = self.sessions.get_mut(&session) else {
            return Err(RenewError::Expired);
        };
        s.expires_at = now.saturating_add(nanos(s.timeout));
        let expires_at = s.expires_at;
        let owned = self
            .leases
            .iter()
            .filter(|(_, (s, _))| *s == session)
            .map(|(n, (_, t))| (n.clone(), *t))
            .collect();
        let groups = self
            .groups
            .iter()
            .filter(|(_, m)| m.contains(&session))
            .map(|(g, m)| GroupView {
                group: g.clone(),
                members: m.iter().copied().collect(),
            })
            .collect();
        Ok(Renewal {
            groups,
            remaining: self.remaining(expires_at, now),
            owned,
        })
    }

    /// Tries to acquire `name` for `session` (S3.1): a free name gets the next
    /// token; the owner gets its own token again; anyone else gets `Held`.
    pub fn acquire(&mut self, now: u64, session: SessionId, name: &LeaseName) -> AcquireOutcome {
        self.expire(now);
        let now = self.read(now);
        let Some(s) = self.sessions.get(&session) else {
            return AcquireOutcome::Expired;
        };
        let remaining = self.remaining(s.expires_at, now);
        match self.leases.get(name) {
            Some((owner, token)) if *owner == session => AcquireOutcome::Won {
                token: *token,
                remaining,
            },
            Some((owner, token)) => AcquireOutcome::Held {
                holder: Some(*owner),
                token: Some(*token),
                // `expire` ran first: the owner is live.
                holder_remaining: self
                    .sessions
                    .get(owner)
                    .map(|h| self.remaining(h.expires_at, now)),
            },
            None => {
                let next = self.last_token.get(name).copied().unwrap_or(0) + 1;
                self.last_token.insert(name.clone(), next);
                let Some(token) = Token::new(next) else {
                    // `next` is at least 1.
                    return AcquireOutcome::Expired;
                };
                self.leases.insert(name.clone(), (session, token));
                AcquireOutcome::Won { token, remaining }
            }
        }
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
        self.expire(now);
        if self.leases.get(name) == Some(&(session, token)) {
            self.leases.remove(name);
            if self.options.broadcast_release {
                self.freed.push(name.clone());
            }
            true
        } else {
            false
        }
    }

    /// Closes `session`, releasing its leases at once (S1.4). A no-op if it is gone.
    pub fn close_session(&mut self, now: u64, session: SessionId) {
        self.expire(now);
        if self.sessions.remove(&session).is_some() {
            let broadcast = self.options.broadcast_release;
            self.drop_leases_of(session, broadcast);
            self.leave_groups_of(session, broadcast);
        }
    }

    /// A restart: keeping state (a persistent store; expiry times are absolute
    /// and keep running), or losing it all, token counters included (Redis
    /// without persistence).
    pub fn restart(&mut self, keep_state: bool) {
        if !keep_state {
            self.sessions.clear();
            self.leases.clear();
            self.last_token.clear();
            self.groups.clear();
            self.slots.clear();
        }
        self.freed.clear();
    }

    /// The names freed since the last call, to broadcast (S4.2).
    pub fn take_broadcasts(&mut self) -> Vec<LeaseName> {
        std::mem::take(&mut self.freed)
    }

    /// The current owner of `name`, if any (for checkers and tests).
    pub fn owner(&self, name: &LeaseName) -> Option<(SessionId, Token)> {
        self.leases.get(name).copied()
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
        self.expire(now);
        let now = self.read(now);
        let leases = self
            .last_token
            .iter()
            .filter(|(n, _)| prefix.is_none_or(|p| n.as_str().starts_with(p)))
            .filter_map(|(n, t)| {
                let token = Token::new(*t)?;
                let held = self.leases.get(n).map(|(s, _)| *s);
                let remaining = held
                    .and_then(|s| self.sessions.get(&s))
                    .map(|s| self.remaining(s.expires_at, now));
                Some((n.clone(), held, token, remaining))
            })
            .collect();
        let sessions = self
            .sessions
            .iter()
            .map(|(id, s)| (*id, s.timeout, self.remaining(s.expires_at, now)))
            .collect();
        (leases, sessions)
    }

    /// How many sessions are alive (for tests).
    pub fn session_count(&self) -> usize {
        self.sessions.len()
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
        self.expire(now);
        if self.leases.get(name) != Some(&(session, token)) {
            return SlotClaim::NotHolder;
        }
        match self.slots.get(name) {
            Some(&last) if last >= slot => SlotClaim::AlreadyClaimed { last },
            _ => {
                self.slots.insert(name.clone(), slot);
                SlotClaim::Claimed
            }
        }
    }

    /// The backend-clock instant (ns) at which `session` expires, while the
    /// backend knows it (for checkers).
    pub fn expires_at(&self, session: SessionId) -> Option<u64> {
        self.sessions.get(&session).map(|s| s.expires_at)
    }

    /// Whether `session` is live at backend time `now`, exactly as the next
    /// call at `now` would judge it (for checkers).
    pub fn live_at(&self, session: SessionId, now: u64) -> bool {
        let now = self.read(now);
        self.sessions
            .get(&session)
            .is_some_and(|s| s.expires_at > now)
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
