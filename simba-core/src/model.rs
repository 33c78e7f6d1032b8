//! The sequential lease model: what a backend does, one call at a time.
//!
//! [`LeaseModel`] owns the semantics every Simba backend promises (sessions
//! that expire by durations, leases, strictly increasing fencing tokens, the
//! last token kept for ever, groups and schedule slots) as a pure,
//! deterministic state machine. It never reads a clock: every call takes the
//! backend clock's reading `now` as a [`Timestamp`]. It serves three uses:
//!
//! * `simba_backends::MemoryBackend` is a shell over it (a mutex, the
//!   process's monotonic clock, release broadcasts, and the deliberate flaws
//!   its must-fail tests use);
//! * the `simulation` crate's backend is a shell over it (virtual time,
//!   session ids drawn from the seed, restarts that keep or lose the state);
//! * the history check of `simba_backends::testkit::history` runs the
//!   per-name transitions of [`LeaseState`] as the specification of a
//!   linearizable backend; it judges liveness itself (an expiry is known
//!   there only as a window of times) and passes its judgement in.
//!
//! Expiry is eager: every call first expires the sessions whose time is up
//! at `now` ([`LeaseModel::expire`]), which frees their leases and ends their
//! group memberships, so an expired session is simply unknown (S1.2).
//!
//! ```
//! use simba_core::model::{LeaseModel, ModelOptions};
//! use simba_core::{AcquireOutcome, LeaseName, SessionId, Timestamp};
//! use std::time::Duration;
//!
//! let mut m: LeaseModel = LeaseModel::new(ModelOptions::default());
//! let (a, b) = (SessionId::from_u128(1), SessionId::from_u128(2));
//! let name = LeaseName::new("ledger")?;
//! let t0 = Timestamp::ZERO;
//! m.open_session(t0, a, Duration::from_secs(1), ())?;
//! m.open_session(t0, b, Duration::from_secs(5), ())?;
//! assert!(matches!(m.acquire(t0, a, &name)?, AcquireOutcome::Won { .. }));
//! assert!(matches!(m.acquire(t0, b, &name)?, AcquireOutcome::Held { .. }));
//! // `a` never renews: after its lease duration `b` takes over with token 2.
//! let later = t0 + Duration::from_secs(2);
//! match m.acquire(later, b, &name)? {
//!     AcquireOutcome::Won { token, .. } => assert_eq!(token.get(), 2),
//!     other => panic!("{other:?}"),
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::{
    AcquireOutcome, BackendError, BackendErrorKind, GroupView, LeaseName, RenewError, Renewal,
    SessionGrant, SessionId, SlotClaim, Timestamp, Token,
};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// The shortest lease duration a backend accepts.
pub const MIN_LEASE_DURATION: Duration = Duration::from_millis(1);
/// The longest lease duration a backend accepts (366 days).
pub const MAX_LEASE_DURATION: Duration = Duration::from_secs(366 * 24 * 3600);

/// Checks that `lease_duration` lies in
/// [`MIN_LEASE_DURATION`]`..=`[`MAX_LEASE_DURATION`], as every backend does.
///
/// # Errors
/// [`BackendErrorKind::Rejected`] otherwise.
///
/// ```
/// use simba_core::model::check_lease_duration;
/// use std::time::Duration;
/// assert!(check_lease_duration(Duration::from_secs(10)).is_ok());
/// assert!(check_lease_duration(Duration::ZERO).is_err());
/// ```
pub fn check_lease_duration(lease_duration: Duration) -> Result<(), BackendError> {
    if lease_duration < MIN_LEASE_DURATION || lease_duration > MAX_LEASE_DURATION {
        return Err(BackendError::new(
            BackendErrorKind::Rejected,
            format!("lease duration {lease_duration:?} is outside 1 ms ..= 366 days"),
        ));
    }
    Ok(())
}

/// How a [`LeaseModel`] behaves where real backends differ.
///
/// ```
/// use simba_core::model::ModelOptions;
/// use std::time::Duration;
/// // ZooKeeper-like: grants at most 40 s and announces expiries.
/// let zk = ModelOptions {
///     broadcast_expiry: true,
///     max_grant: Some(Duration::from_secs(40)),
///     ..ModelOptions::default()
/// };
/// assert!(zk.broadcast_release);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelOptions {
    /// Announce a name when its lease is released or its session closed, and
    /// a group's name when its membership changes (Redis pub/sub, ZooKeeper
    /// and etcd watches, S4.2, S10.5).
    pub broadcast_release: bool,
    /// Announce also when a session expires (ZooKeeper and etcd delete the
    /// ephemeral keys and the watchers fire).
    pub broadcast_expiry: bool,
    /// Read the clock with millisecond granularity, truncating (Redis `mstime()`).
    pub millisecond_clock: bool,
    /// Report `remaining` rounded up to whole milliseconds, as a server may.
    pub round_remaining_up: bool,
    /// Grant at most this session timeout (ZooKeeper's `maxSessionTimeout`, S8.4).
    pub max_grant: Option<Duration>,
}

impl Default for ModelOptions {
    fn default() -> Self {
        ModelOptions {
            broadcast_release: true,
            broadcast_expiry: false,
            millisecond_clock: false,
            round_remaining_up: false,
            max_grant: None,
        }
    }
}

/// One name's record: its holder, and the last token ever granted for it
/// (kept after a release or an expiry, so tokens strictly increase, S3.2).
///
/// Its transitions take the holder's liveness as an input: [`LeaseModel`]
/// judges it from the session's expiry, the history checker from its expiry
/// windows.
///
/// ```
/// use simba_core::model::{Acquired, LeaseState};
/// use simba_core::SessionId;
/// let (a, b) = (SessionId::from_u128(1), SessionId::from_u128(2));
/// let mut lease = LeaseState::default();
/// assert!(matches!(lease.acquire(a, false, 0)?, Acquired::NewTerm { .. }));
/// assert!(matches!(lease.acquire(b, true, 0)?, Acquired::Held { .. }));
/// // The holder is judged dead: `b` takes over with a greater token.
/// match lease.acquire(b, false, 0)? {
///     Acquired::NewTerm { token, previous } => {
///         assert_eq!((token.get(), previous), (2, Some(a)));
///     }
///     other => panic!("{other:?}"),
/// }
/// # Ok::<(), simba_core::BackendError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LeaseState {
    holder: Option<SessionId>,
    token: u64,
}

/// What [`LeaseState::acquire`] decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Acquired {
    /// The caller already held the lease: it keeps its term and token.
    Kept(Token),
    /// A new term for the caller, with a token greater than every earlier one.
    NewTerm {
        /// The new term's token.
        token: Token,
        /// The holder it took the lease over from (judged dead), if any.
        previous: Option<SessionId>,
    },
    /// Another live session holds it.
    Held {
        /// The holder.
        holder: SessionId,
        /// The holder's token.
        token: Token,
    },
}

impl LeaseState {
    /// The holder, if any.
    ///
    /// ```
    /// assert_eq!(simba_core::model::LeaseState::default().holder(), None);
    /// ```
    pub fn holder(&self) -> Option<SessionId> {
        self.holder
    }

    /// The last token granted for the name (`None` before its first term).
    ///
    /// ```
    /// assert_eq!(simba_core::model::LeaseState::default().last_token(), None);
    /// ```
    pub fn last_token(&self) -> Option<Token> {
        Token::new(self.token)
    }

    /// The token `session` holds the name with, if it holds it.
    ///
    /// ```
    /// use simba_core::model::LeaseState;
    /// use simba_core::SessionId;
    /// let a = SessionId::from_u128(1);
    /// let mut lease = LeaseState::default();
    /// lease.acquire(a, false, 0)?;
    /// assert_eq!(lease.owned_by(a).map(|t| t.get()), Some(1));
    /// # Ok::<(), simba_core::BackendError>(())
    /// ```
    pub fn owned_by(&self, session: SessionId) -> Option<Token> {
        if self.holder == Some(session) {
            Token::new(self.token)
        } else {
            None
        }
    }

    /// `session` (live: the caller checks) asks for the name. The holder
    /// keeps its term; a holder judged live (`holder_live`) keeps the name
    /// from others; otherwise `session` starts a new term whose token is the
    /// larger of `proposed` and the last token plus one. A backend proposes
    /// 0 (the next integer); the history checker proposes the token the real
    /// backend answered, since revision-based tokens (etcd, ZooKeeper) skip
    /// values (S3.2 asks only for a greater token).
    ///
    /// # Errors
    /// [`BackendErrorKind::Malformed`] if the token would overflow.
    ///
    /// ```
    /// use simba_core::model::{Acquired, LeaseState};
    /// use simba_core::SessionId;
    /// let a = SessionId::from_u128(1);
    /// let mut lease = LeaseState::default();
    /// assert!(matches!(lease.acquire(a, false, 7)?, Acquired::NewTerm { .. }));
    /// assert_eq!(lease.last_token().map(|t| t.get()), Some(7));
    /// # Ok::<(), simba_core::BackendError>(())
    /// ```
    pub fn acquire(
        &mut self,
        session: SessionId,
        holder_live: bool,
        proposed: u64,
    ) -> Result<Acquired, BackendError> {
        let overflow = || BackendError::new(BackendErrorKind::Malformed, "token would overflow");
        match (self.holder, Token::new(self.token)) {
            (Some(h), Some(token)) if h == session => return Ok(Acquired::Kept(token)),
            (Some(holder), Some(token)) if holder_live => {
                return Ok(Acquired::Held { holder, token })
            }
            _ => {}
        }
        let next = self
            .token
            .checked_add(1)
            .ok_or_else(overflow)?
            .max(proposed);
        let token = Token::new(next).ok_or_else(overflow)?;
        let previous = self.holder.replace(session);
        self.token = next;
        Ok(Acquired::NewTerm { token, previous })
    }

    /// Releases the name if `session` holds it with `token` (S3.5); returns
    /// whether it did.
    ///
    /// ```
    /// use simba_core::model::LeaseState;
    /// use simba_core::SessionId;
    /// let a = SessionId::from_u128(1);
    /// let mut lease = LeaseState::default();
    /// lease.acquire(a, false, 0)?;
    /// let token = lease.owned_by(a).ok_or("not owned")?;
    /// assert!(lease.release(a, token));
    /// assert!(!lease.release(a, token));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn release(&mut self, session: SessionId, token: Token) -> bool {
        if self.owned_by(session) == Some(token) {
            self.holder = None;
            true
        } else {
            false
        }
    }

    /// Frees the name if `session` holds it (its session closed or expired);
    /// returns whether it did.
    ///
    /// ```
    /// use simba_core::model::LeaseState;
    /// use simba_core::SessionId;
    /// let a = SessionId::from_u128(1);
    /// let mut lease = LeaseState::default();
    /// lease.acquire(a, false, 0)?;
    /// assert!(lease.drop_holder(a));
    /// assert_eq!(lease.holder(), None);
    /// # Ok::<(), simba_core::BackendError>(())
    /// ```
    pub fn drop_holder(&mut self, session: SessionId) -> bool {
        if self.holder == Some(session) {
            self.holder = None;
            true
        } else {
            false
        }
    }
}

#[derive(Clone, Debug)]
struct Session<M> {
    /// Backend-clock instant (ns) at which the session expires.
    expires_at: u64,
    /// The granted timeout: each renewal moves the expiry this far ahead.
    timeout: Duration,
    /// The lease duration the client asked for.
    requested: Duration,
    data: M,
}

/// A live session, as [`LeaseModel::inspect`] shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionView<M> {
    /// Its id.
    pub session: SessionId,
    /// The lease duration it asked for.
    pub requested: Duration,
    /// The timeout it was granted (capped by [`ModelOptions::max_grant`]).
    pub granted: Duration,
    /// Its remaining time.
    pub remaining: Duration,
    /// What the shell stored with it (the session metadata of `MemoryBackend`).
    pub data: M,
}

/// A name that ever had a term, as [`LeaseModel::inspect`] shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseView {
    /// The name.
    pub name: LeaseName,
    /// Its live holder, if any.
    pub holder: Option<SessionId>,
    /// The last token granted.
    pub token: Token,
    /// The holder's remaining time.
    pub remaining: Option<Duration>,
}

/// What [`LeaseModel::inspect`] shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelInspection<M> {
    /// Every name that ever had a term and starts with the prefix, in name order.
    pub leases: Vec<LeaseView>,
    /// Every live session, in id order.
    pub sessions: Vec<SessionView<M>>,
}

/// The sequential lease model (see the [module docs](self)). `M` is data a
/// shell keeps with each session (the memory backend's session metadata).
///
/// ```
/// use simba_core::model::{LeaseModel, ModelOptions};
/// use simba_core::{RenewError, SessionId, Timestamp};
/// use std::time::Duration;
/// let mut m: LeaseModel = LeaseModel::new(ModelOptions::default());
/// let s = SessionId::from_u128(9);
/// m.open_session(Timestamp::ZERO, s, Duration::from_millis(10), ())?;
/// let late = Timestamp::ZERO + Duration::from_millis(10);
/// assert!(matches!(m.renew(late, s), Err(RenewError::Expired)));
/// # Ok::<(), simba_core::BackendError>(())
/// ```
#[derive(Clone, Debug)]
pub struct LeaseModel<M = ()> {
    options: ModelOptions,
    sessions: BTreeMap<SessionId, Session<M>>,
    leases: BTreeMap<LeaseName, LeaseState>,
    /// Partitioned groups (S10.1): each group's member sessions; a member
    /// leaves with its session (close or expiry).
    groups: BTreeMap<LeaseName, BTreeSet<SessionId>>,
    /// The last claimed slot per schedule name (S11.1); kept across leases
    /// and sessions.
    slots: BTreeMap<LeaseName, u64>,
    /// Names to broadcast since the last [`LeaseModel::take_announcements`].
    announced: Vec<LeaseName>,
}

const MS: u64 = 1_000_000;

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl<M: Clone> LeaseModel<M> {
    /// An empty model.
    ///
    /// ```
    /// use simba_core::model::{LeaseModel, ModelOptions};
    /// let m: LeaseModel = LeaseModel::new(ModelOptions::default());
    /// assert_eq!(m.session_count(), 0);
    /// ```
    pub fn new(options: ModelOptions) -> Self {
        LeaseModel {
            options,
            sessions: BTreeMap::new(),
            leases: BTreeMap::new(),
            groups: BTreeMap::new(),
            slots: BTreeMap::new(),
            announced: Vec::new(),
        }
    }

    /// The options it runs with.
    ///
    /// ```
    /// use simba_core::model::{LeaseModel, ModelOptions};
    /// let m: LeaseModel = LeaseModel::new(ModelOptions::default());
    /// assert!(m.options().broadcast_release);
    /// ```
    pub fn options(&self) -> &ModelOptions {
        &self.options
    }

    /// Forgets everything, token counters and slots included (a backend
    /// restarted without persistence).
    ///
    /// ```
    /// use simba_core::model::{LeaseModel, ModelOptions};
    /// use simba_core::{SessionId, Timestamp};
    /// use std::time::Duration;
    /// let mut m: LeaseModel = LeaseModel::new(ModelOptions::default());
    /// m.open_session(Timestamp::ZERO, SessionId::from_u128(1), Duration::from_secs(1), ())?;
    /// m.clear();
    /// assert_eq!(m.session_count(), 0);
    /// # Ok::<(), simba_core::BackendError>(())
    /// ```
    pub fn clear(&mut self) {
        self.sessions.clear();
        self.leases.clear();
        self.groups.clear();
        self.slots.clear();
        self.announced.clear();
    }

    fn read(&self, now: Timestamp) -> u64 {
        let now = now.as_nanos();
        if self.options.millisecond_clock {
            now / MS * MS
        } else {
            now
        }
    }

    fn remaining(&self, expires_at: u64, now: u64) -> Duration {
        let r = expires_at.saturating_sub(now);
        let r = if self.options.round_remaining_up {
            r.div_ceil(MS).saturating_mul(MS)
        } else {
            r
        };
        Duration::from_nanos(r)
    }

    fn announce(&mut self, name: LeaseName, broadcast: bool) {
        if broadcast {
            self.announced.push(name);
        }
    }

    /// Expires every session whose time is up at `now`, freeing its leases
    /// and ending its memberships (announced if
    /// [`ModelOptions::broadcast_expiry`]). Every call runs it first; a
    /// driver may also run it at [`LeaseModel::next_expiry`] so expiry
    /// broadcasts go out on time.
    ///
    /// ```
    /// use simba_core::model::{LeaseModel, ModelOptions};
    /// use simba_core::{SessionId, Timestamp};
    /// use std::time::Duration;
    /// let mut m: LeaseModel = LeaseModel::new(ModelOptions::default());
    /// m.open_session(Timestamp::ZERO, SessionId::from_u128(1), Duration::from_secs(1), ())?;
    /// m.expire(Timestamp::ZERO + Duration::from_secs(1));
    /// assert_eq!(m.session_count(), 0);
    /// # Ok::<(), simba_core::BackendError>(())
    /// ```
    pub fn expire(&mut self, now: Timestamp) {
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
        let mut freed = Vec::new();
        for (name, lease) in &mut self.leases {
            if lease.drop_holder(session) {
                freed.push(name.clone());
            }
        }
        for name in freed {
            self.announce(name, broadcast);
        }
    }

    fn leave_groups_of(&mut self, session: SessionId, broadcast: bool) {
        let mut changed = Vec::new();
        for (group, members) in &mut self.groups {
            if members.remove(&session) {
                changed.push(group.clone());
            }
        }
        self.groups.retain(|_, m| !m.is_empty());
        for group in changed {
            self.announce(group, broadcast);
        }
    }

    /// Opens session `session` (S1.1), as the client asked, with the timeout
    /// capped at [`ModelOptions::max_grant`] (S8.4); `data` is kept with it.
    /// The shell draws the id (S1.3).
    ///
    /// # Errors
    /// [`BackendErrorKind::Rejected`] for a lease duration outside
    /// 1 ms ..= 366 days ([`check_lease_duration`]) or an id already in use.
    ///
    /// ```
    /// use simba_core::model::{LeaseModel, ModelOptions};
    /// use simba_core::{SessionId, Timestamp};
    /// use std::time::Duration;
    /// let mut m: LeaseModel = LeaseModel::new(ModelOptions::default());
    /// let grant = m.open_session(Timestamp::ZERO, SessionId::from_u128(1), Duration::from_secs(3), ())?;
    /// assert_eq!(grant.remaining, Duration::from_secs(3));
    /// # Ok::<(), simba_core::BackendError>(())
    /// ```
    pub fn open_session(
        &mut self,
        now: Timestamp,
        session: SessionId,
        lease_duration: Duration,
        data: M,
    ) -> Result<SessionGrant, BackendError> {
        let granted = match self.options.max_grant {
            Some(max) => lease_duration.min(max),
            None => lease_duration,
        };
        self.open_session_granted(now, session, lease_duration, granted, data)
    }

    /// [`LeaseModel::open_session`] with the granted timeout chosen by the
    /// caller (a shell that grants differently, such as a deliberately broken
    /// backend that expires sessions early).
    ///
    /// # Errors
    /// As [`LeaseModel::open_session`].
    ///
    /// ```
    /// use simba_core::model::{LeaseModel, ModelOptions};
    /// use simba_core::{SessionId, Timestamp};
    /// use std::time::Duration;
    /// let mut m: LeaseModel = LeaseModel::new(ModelOptions::default());
    /// let s = SessionId::from_u128(1);
    /// let grant = m.open_session_granted(
    ///     Timestamp::ZERO, s, Duration::from_secs(3), Duration::from_secs(2), ())?;
    /// assert_eq!(grant.remaining, Duration::from_secs(2));
    /// # Ok::<(), simba_core::BackendError>(())
    /// ```
    pub fn open_session_granted(
        &mut self,
        now: Timestamp,
        session: SessionId,
        requested: Duration,
        granted: Duration,
        data: M,
    ) -> Result<SessionGrant, BackendError> {
        check_lease_duration(requested)?;
        self.expire(now);
        if self.sessions.contains_key(&session) {
            return Err(BackendError::new(
                BackendErrorKind::Rejected,
                format!("session id {session} is already in use"),
            ));
        }
        let now = self.read(now);
        let expires_at = now.saturating_add(nanos(granted));
        self.sessions.insert(
            session,
            Session {
                expires_at,
                timeout: granted,
                requested,
                data,
            },
        );
        Ok(SessionGrant {
            session,
            remaining: self.remaining(expires_at, now),
        })
    }

    /// Renews `session` (S1.1): its expiry moves to `now` plus its timeout.
    /// The reply lists every lease it owns (S3.4 `TakenOver`) and the members
    /// of every group it joined (S10.1).
    ///
    /// # Errors
    /// [`RenewError::Expired`] once the session has expired or was never known (S1.2).
    ///
    /// ```
    /// use simba_core::model::{LeaseModel, ModelOptions};
    /// use simba_core::{SessionId, Timestamp};
    /// use std::time::Duration;
    /// let mut m: LeaseModel = LeaseModel::new(ModelOptions::default());
    /// let s = SessionId::from_u128(1);
    /// m.open_session(Timestamp::ZERO, s, Duration::from_secs(3), ())?;
    /// let r = m.renew(Timestamp::ZERO + Duration::from_secs(2), s)?;
    /// assert_eq!(r.remaining, Duration::from_secs(3));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn renew(&mut self, now: Timestamp, session: SessionId) -> Result<Renewal, RenewError> {
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
            .filter_map(|(n, l)| Some((n.clone(), l.owned_by(session)?)))
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

    /// Tries to acquire `name` for `session` (S3.1, S3.2): a free name (or
    /// one whose holder expired) gets a new term with the next token; the
    /// holder keeps its term; anyone else gets `Held`; an expired caller
    /// gets `Expired` (S1.2).
    ///
    /// # Errors
    /// [`BackendErrorKind::Malformed`] if the name's token would overflow.
    ///
    /// ```
    /// use simba_core::model::{LeaseModel, ModelOptions};
    /// use simba_core::{AcquireOutcome, LeaseName, SessionId, Timestamp};
    /// use std::time::Duration;
    /// let mut m: LeaseModel = LeaseModel::new(ModelOptions::default());
    /// let s = SessionId::from_u128(1);
    /// let name = LeaseName::new("job")?;
    /// assert_eq!(m.acquire(Timestamp::ZERO, s, &name)?, AcquireOutcome::Expired);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn acquire(
        &mut self,
        now: Timestamp,
        session: SessionId,
        name: &LeaseName,
    ) -> Result<AcquireOutcome, BackendError> {
        self.acquire_judged(now, session, name, true)
    }

    /// [`LeaseModel::acquire`] that takes the name over without asking
    /// whether its holder is live: what a backend that skips the holder
    /// check does. For must-fail tests only (a checker must reject it).
    ///
    /// # Errors
    /// As [`LeaseModel::acquire`].
    ///
    /// ```
    /// use simba_core::model::{LeaseModel, ModelOptions};
    /// use simba_core::{AcquireOutcome, LeaseName, SessionId, Timestamp};
    /// use std::time::Duration;
    /// let mut m: LeaseModel = LeaseModel::new(ModelOptions::default());
    /// let (a, b) = (SessionId::from_u128(1), SessionId::from_u128(2));
    /// let name = LeaseName::new("job")?;
    /// for s in [a, b] {
    ///     m.open_session(Timestamp::ZERO, s, Duration::from_secs(1), ())?;
    ///     let won = m.acquire_ignoring_holder(Timestamp::ZERO, s, &name)?;
    ///     assert!(matches!(won, AcquireOutcome::Won { .. }));
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn acquire_ignoring_holder(
        &mut self,
        now: Timestamp,
        session: SessionId,
        name: &LeaseName,
    ) -> Result<AcquireOutcome, BackendError> {
        self.acquire_judged(now, session, name, false)
    }

    fn acquire_judged(
        &mut self,
        now: Timestamp,
        session: SessionId,
        name: &LeaseName,
        check_holder: bool,
    ) -> Result<AcquireOutcome, BackendError> {
        self.expire(now);
        let now = self.read(now);
        let Some(remaining) = self.session_remaining(session, now) else {
            return Ok(AcquireOutcome::Expired);
        };
        let lease = self.leases.get(name).copied().unwrap_or_default();
        // `expire` ran first: a holder still known is live.
        let holder_remaining = lease
            .holder()
            .filter(|_| check_holder)
            .and_then(|h| self.session_remaining(h, now));
        let mut lease = lease;
        let decided = lease.acquire(session, holder_remaining.is_some(), 0)?;
        self.leases.insert(name.clone(), lease);
        Ok(match decided {
            Acquired::Kept(token) | Acquired::NewTerm { token, .. } => {
                AcquireOutcome::Won { token, remaining }
            }
            Acquired::Held { holder, token } => AcquireOutcome::Held {
                holder: Some(holder),
                token: Some(token),
                holder_remaining,
            },
        })
    }

    fn session_remaining(&self, session: SessionId, now: u64) -> Option<Duration> {
        self.sessions
            .get(&session)
            .filter(|s| s.expires_at > now)
            .map(|s| self.remaining(s.expires_at, now))
    }

    /// Releases `name` if `session` owns it with `token` (S3.5), announcing
    /// it; a no-op otherwise. Returns whether it released.
    ///
    /// ```
    /// use simba_core::model::{LeaseModel, ModelOptions};
    /// use simba_core::{AcquireOutcome, LeaseName, SessionId, Timestamp};
    /// use std::time::Duration;
    /// let mut m: LeaseModel = LeaseModel::new(ModelOptions::default());
    /// let s = SessionId::from_u128(1);
    /// let name = LeaseName::new("job")?;
    /// m.open_session(Timestamp::ZERO, s, Duration::from_secs(1), ())?;
    /// if let AcquireOutcome::Won { token, .. } = m.acquire(Timestamp::ZERO, s, &name)? {
    ///     assert!(m.release(Timestamp::ZERO, s, &name, token));
    /// }
    /// assert_eq!(m.take_announcements(), vec![name]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn release(
        &mut self,
        now: Timestamp,
        session: SessionId,
        name: &LeaseName,
        token: Token,
    ) -> bool {
        self.expire(now);
        let released = self
            .leases
            .get_mut(name)
            .is_some_and(|l| l.release(session, token));
        if released {
            self.announce(name.clone(), self.options.broadcast_release);
        }
        released
    }

    /// Closes `session`, releasing its leases and ending its memberships at
    /// once (S1.4). A no-op if it is gone.
    ///
    /// ```
    /// use simba_core::model::{LeaseModel, ModelOptions};
    /// use simba_core::{SessionId, Timestamp};
    /// use std::time::Duration;
    /// let mut m: LeaseModel = LeaseModel::new(ModelOptions::default());
    /// let s = SessionId::from_u128(1);
    /// m.open_session(Timestamp::ZERO, s, Duration::from_secs(1), ())?;
    /// m.close_session(Timestamp::ZERO, s);
    /// assert_eq!(m.session_count(), 0);
    /// # Ok::<(), simba_core::BackendError>(())
    /// ```
    pub fn close_session(&mut self, now: Timestamp, session: SessionId) {
        self.expire(now);
        if self.sessions.remove(&session).is_some() {
            let broadcast = self.options.broadcast_release;
            self.drop_leases_of(session, broadcast);
            self.leave_groups_of(session, broadcast);
        }
    }

    /// Removes the lease of `name` from its holder from outside Simba: an
    /// operator deleting the row, key or znode, or Redis evicting the key
    /// under `maxmemory`. The holder's session lives on; the last token is
    /// kept, so the next term still gets a greater one (S3.2). The holder
    /// learns it from its next renewal, whose reply no longer lists the lease
    /// (S3.4 `TakenOver`); meanwhile another session may acquire it, which
    /// is what the fencing token is for. Announced like an expiry
    /// ([`ModelOptions::broadcast_expiry`]: the backends whose watchers see a
    /// key vanish). Returns the holder and its token, or `None` (and changes
    /// nothing) if the name had no live holder at `now`.
    ///
    /// A removal that also loses the token counter is a loss of state
    /// ([`LeaseModel::clear`]), outside Simba's guarantees.
    ///
    /// ```
    /// use simba_core::model::{LeaseModel, ModelOptions};
    /// use simba_core::{AcquireOutcome, LeaseName, SessionId, Timestamp};
    /// use std::time::Duration;
    /// let mut m: LeaseModel = LeaseModel::new(ModelOptions::default());
    /// let (a, b) = (SessionId::from_u128(1), SessionId::from_u128(2));
    /// let name = LeaseName::new("job")?;
    /// let t0 = Timestamp::ZERO;
    /// m.open_session(t0, a, Duration::from_secs(10), ())?;
    /// m.open_session(t0, b, Duration::from_secs(10), ())?;
    /// m.acquire(t0, a, &name)?;
    /// assert_eq!(m.remove_lease(t0, &name).map(|(s, t)| (s, t.get())), Some((a, 1)));
    /// // `a` is still live, but its renewal no longer lists the lease…
    /// assert!(m.renew(t0, a)?.owned.is_empty());
    /// // …and `b` takes it at once, with a greater token.
    /// match m.acquire(t0, b, &name)? {
    ///     AcquireOutcome::Won { token, .. } => assert_eq!(token.get(), 2),
    ///     other => panic!("{other:?}"),
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn remove_lease(&mut self, now: Timestamp, name: &LeaseName) -> Option<(SessionId, Token)> {
        self.expire(now);
        let (holder, token) = self.owner(name)?;
        if self.leases.get_mut(name)?.drop_holder(holder) {
            self.announce(name.clone(), self.options.broadcast_expiry);
        }
        Some((holder, token))
    }

    /// Makes `session` a member of `group` (S10.1); joining twice is a
    /// no-op, and so is joining with a session that is not live (its next
    /// renewal says `Expired`), as on every real backend.
    ///
    /// ```
    /// use simba_core::model::{LeaseModel, ModelOptions};
    /// use simba_core::{LeaseName, SessionId, Timestamp};
    /// use std::time::Duration;
    /// let mut m: LeaseModel = LeaseModel::new(ModelOptions::default());
    /// let s = SessionId::from_u128(1);
    /// let g = LeaseName::new("workers")?;
    /// m.open_session(Timestamp::ZERO, s, Duration::from_secs(1), ())?;
    /// m.join_group(Timestamp::ZERO, s, &g);
    /// assert_eq!(m.group_members(&g), vec![s]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn join_group(&mut self, now: Timestamp, session: SessionId, group: &LeaseName) {
        self.expire(now);
        if !self.sessions.contains_key(&session) {
            return;
        }
        if self
            .groups
            .entry(group.clone())
            .or_default()
            .insert(session)
        {
            self.announce(group.clone(), self.options.broadcast_release);
        }
    }

    /// Ends `session`'s membership of `group`; a no-op if it is not a member.
    ///
    /// ```
    /// use simba_core::model::{LeaseModel, ModelOptions};
    /// use simba_core::{LeaseName, SessionId, Timestamp};
    /// use std::time::Duration;
    /// let mut m: LeaseModel = LeaseModel::new(ModelOptions::default());
    /// let s = SessionId::from_u128(1);
    /// let g = LeaseName::new("workers")?;
    /// m.open_session(Timestamp::ZERO, s, Duration::from_secs(1), ())?;
    /// m.join_group(Timestamp::ZERO, s, &g);
    /// m.leave_group(Timestamp::ZERO, s, &g);
    /// assert!(m.group_members(&g).is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn leave_group(&mut self, now: Timestamp, session: SessionId, group: &LeaseName) {
        self.expire(now);
        let left = self
            .groups
            .get_mut(group)
            .is_some_and(|m| m.remove(&session));
        if left {
            self.groups.retain(|_, m| !m.is_empty());
            self.announce(group.clone(), self.options.broadcast_release);
        }
    }

    /// Records `slot` of the schedule `name` as claimed, in one step, only
    /// if `session` owns `name` with `token` and `slot` is later than the
    /// last claimed slot of `name` (S11.1). The holder check comes first: a
    /// session that does not own the lease learns nothing about the slots.
    ///
    /// ```
    /// use simba_core::model::{LeaseModel, ModelOptions};
    /// use simba_core::{LeaseName, SessionId, SlotClaim, Timestamp, Token};
    /// let mut m: LeaseModel = LeaseModel::new(ModelOptions::default());
    /// let name = LeaseName::new("nightly")?;
    /// let token = Token::new(1).ok_or("zero")?;
    /// let claim = m.claim_slot(Timestamp::ZERO, SessionId::from_u128(1), &name, token, 5);
    /// assert_eq!(claim, SlotClaim::NotHolder);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn claim_slot(
        &mut self,
        now: Timestamp,
        session: SessionId,
        name: &LeaseName,
        token: Token,
        slot: u64,
    ) -> SlotClaim {
        self.expire(now);
        if self.owner(name) != Some((session, token)) {
            return SlotClaim::NotHolder;
        }
        self.record_slot(name, slot, true)
    }

    /// Records `slot` of `name` with no holder check: if `only_later`, only
    /// when it is later than the last claimed slot (the second half of
    /// [`LeaseModel::claim_slot`]); otherwise always. For shells that break
    /// the rule on purpose (must-fail tests).
    ///
    /// ```
    /// use simba_core::model::{LeaseModel, ModelOptions};
    /// use simba_core::{LeaseName, SlotClaim};
    /// let mut m: LeaseModel = LeaseModel::new(ModelOptions::default());
    /// let name = LeaseName::new("nightly")?;
    /// assert_eq!(m.record_slot(&name, 5, true), SlotClaim::Claimed);
    /// assert_eq!(m.record_slot(&name, 5, true), SlotClaim::AlreadyClaimed { last: 5 });
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn record_slot(&mut self, name: &LeaseName, slot: u64, only_later: bool) -> SlotClaim {
        match self.slots.get(name) {
            Some(&last) if last >= slot && only_later => SlotClaim::AlreadyClaimed { last },
            _ => {
                self.slots.insert(name.clone(), slot);
                SlotClaim::Claimed
            }
        }
    }

    /// What `inspect` shows at `now`: every name that ever had a term and
    /// starts with `prefix`, and every live session.
    ///
    /// ```
    /// use simba_core::model::{LeaseModel, ModelOptions};
    /// use simba_core::{LeaseName, SessionId, Timestamp};
    /// use std::time::Duration;
    /// let mut m: LeaseModel = LeaseModel::new(ModelOptions::default());
    /// let s = SessionId::from_u128(1);
    /// m.open_session(Timestamp::ZERO, s, Duration::from_secs(1), ())?;
    /// m.acquire(Timestamp::ZERO, s, &LeaseName::new("a.x")?)?;
    /// let seen = m.inspect(Timestamp::ZERO, Some("a."));
    /// assert_eq!((seen.leases.len(), seen.sessions.len()), (1, 1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn inspect(&mut self, now: Timestamp, prefix: Option<&str>) -> ModelInspection<M> {
        self.expire(now);
        let now = self.read(now);
        let leases = self
            .leases
            .iter()
            .filter(|(n, _)| prefix.is_none_or(|p| n.as_str().starts_with(p)))
            .filter_map(|(n, l)| {
                let token = l.last_token()?;
                let holder = l.holder();
                let remaining = holder.and_then(|s| self.session_remaining(s, now));
                Some(LeaseView {
                    name: n.clone(),
                    holder,
                    token,
                    remaining,
                })
            })
            .collect();
        let sessions = self
            .sessions
            .iter()
            .map(|(id, s)| SessionView {
                session: *id,
                requested: s.requested,
                granted: s.timeout,
                remaining: self.remaining(s.expires_at, now),
                data: s.data.clone(),
            })
            .collect();
        ModelInspection { leases, sessions }
    }

    /// The names to broadcast since the last call (S4.2, S10.5), in the
    /// order they were freed or changed.
    ///
    /// ```
    /// use simba_core::model::{LeaseModel, ModelOptions};
    /// let mut m: LeaseModel = LeaseModel::new(ModelOptions::default());
    /// assert!(m.take_announcements().is_empty());
    /// ```
    pub fn take_announcements(&mut self) -> Vec<LeaseName> {
        std::mem::take(&mut self.announced)
    }

    /// The current owner of `name` and its token, if any (as of the last call).
    ///
    /// ```
    /// use simba_core::model::{LeaseModel, ModelOptions};
    /// use simba_core::LeaseName;
    /// let m: LeaseModel = LeaseModel::new(ModelOptions::default());
    /// assert_eq!(m.owner(&LeaseName::new("job")?), None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn owner(&self, name: &LeaseName) -> Option<(SessionId, Token)> {
        let lease = self.leases.get(name)?;
        let holder = lease.holder()?;
        Some((holder, lease.owned_by(holder)?))
    }

    /// The names of every lease that ever had a term, in name order.
    ///
    /// ```
    /// use simba_core::model::{LeaseModel, ModelOptions};
    /// let m: LeaseModel = LeaseModel::new(ModelOptions::default());
    /// assert!(m.lease_names().is_empty());
    /// ```
    pub fn lease_names(&self) -> Vec<LeaseName> {
        self.leases.keys().cloned().collect()
    }

    /// The record of `name` (holder and last token), if it ever had a term.
    ///
    /// ```
    /// use simba_core::model::{LeaseModel, ModelOptions};
    /// use simba_core::LeaseName;
    /// let m: LeaseModel = LeaseModel::new(ModelOptions::default());
    /// assert_eq!(m.lease(&LeaseName::new("job")?), None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn lease(&self, name: &LeaseName) -> Option<LeaseState> {
        self.leases.get(name).copied()
    }

    /// The members of `group` (as of the last call).
    ///
    /// ```
    /// use simba_core::model::{LeaseModel, ModelOptions};
    /// use simba_core::LeaseName;
    /// let m: LeaseModel = LeaseModel::new(ModelOptions::default());
    /// assert!(m.group_members(&LeaseName::new("g")?).is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn group_members(&self, group: &LeaseName) -> Vec<SessionId> {
        self.groups
            .get(group)
            .map(|m| m.iter().copied().collect())
            .unwrap_or_default()
    }

    /// The instant of the next session expiry, if any session lives.
    ///
    /// ```
    /// use simba_core::model::{LeaseModel, ModelOptions};
    /// let m: LeaseModel = LeaseModel::new(ModelOptions::default());
    /// assert_eq!(m.next_expiry(), None);
    /// ```
    pub fn next_expiry(&self) -> Option<Timestamp> {
        self.sessions
            .values()
            .map(|s| s.expires_at)
            .min()
            .map(Timestamp::from_nanos)
    }

    /// How many sessions it knows (live as of the last call).
    ///
    /// ```
    /// use simba_core::model::{LeaseModel, ModelOptions};
    /// let m: LeaseModel = LeaseModel::new(ModelOptions::default());
    /// assert_eq!(m.session_count(), 0);
    /// ```
    pub fn session_count(&self) -> usize {
        self.sessions.len()
    }

    /// Whether it knows `session` (live as of the last call).
    ///
    /// ```
    /// use simba_core::model::{LeaseModel, ModelOptions};
    /// use simba_core::SessionId;
    /// let m: LeaseModel = LeaseModel::new(ModelOptions::default());
    /// assert!(!m.has_session(SessionId::from_u128(1)));
    /// ```
    pub fn has_session(&self, session: SessionId) -> bool {
        self.sessions.contains_key(&session)
    }

    /// The instant at which `session` expires, while the model knows it.
    ///
    /// ```
    /// use simba_core::model::{LeaseModel, ModelOptions};
    /// use simba_core::{SessionId, Timestamp};
    /// use std::time::Duration;
    /// let mut m: LeaseModel = LeaseModel::new(ModelOptions::default());
    /// let s = SessionId::from_u128(1);
    /// m.open_session(Timestamp::ZERO, s, Duration::from_secs(1), ())?;
    /// assert_eq!(m.expires_at(s), Some(Timestamp::ZERO + Duration::from_secs(1)));
    /// # Ok::<(), simba_core::BackendError>(())
    /// ```
    pub fn expires_at(&self, session: SessionId) -> Option<Timestamp> {
        self.sessions
            .get(&session)
            .map(|s| Timestamp::from_nanos(s.expires_at))
    }

    /// Moves the expiry of `session` to `at` (a no-op for an unknown
    /// session): a clock jump on the backend host, or a deliberately broken
    /// backend whose renewal keeps the old expiry.
    ///
    /// ```
    /// use simba_core::model::{LeaseModel, ModelOptions};
    /// use simba_core::{SessionId, Timestamp};
    /// use std::time::Duration;
    /// let mut m: LeaseModel = LeaseModel::new(ModelOptions::default());
    /// let s = SessionId::from_u128(1);
    /// m.open_session(Timestamp::ZERO, s, Duration::from_secs(1), ())?;
    /// m.set_expiry(s, Timestamp::ZERO);
    /// assert!(!m.live_at(s, Timestamp::ZERO));
    /// # Ok::<(), simba_core::BackendError>(())
    /// ```
    pub fn set_expiry(&mut self, session: SessionId, at: Timestamp) {
        if let Some(s) = self.sessions.get_mut(&session) {
            s.expires_at = at.as_nanos();
        }
    }

    /// Whether `session` is live at `now`, exactly as the next call at `now`
    /// would judge it.
    ///
    /// ```
    /// use simba_core::model::{LeaseModel, ModelOptions};
    /// use simba_core::{SessionId, Timestamp};
    /// use std::time::Duration;
    /// let mut m: LeaseModel = LeaseModel::new(ModelOptions::default());
    /// let s = SessionId::from_u128(1);
    /// m.open_session(Timestamp::ZERO, s, Duration::from_secs(1), ())?;
    /// assert!(m.live_at(s, Timestamp::ZERO));
    /// # Ok::<(), simba_core::BackendError>(())
    /// ```
    pub fn live_at(&self, session: SessionId, now: Timestamp) -> bool {
        self.session_remaining(session, self.read(now)).is_some()
    }
}
