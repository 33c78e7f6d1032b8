//! An in-memory backend: the reference model of the contract, for tests and
//! single-process use. Its clock is the process's monotonic clock.

use crate::metadata::NO_METADATA;
use crate::{
    check_lease_duration, check_prefix, random_session_id, Backend, Inspection, LeaseInfo,
    SessionInfo, SessionMetadata,
};
use futures::channel::mpsc;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use simba_core::{
    AcquireOutcome, BackendError, BackendErrorKind, GroupView, LeaseName, RenewError, Renewal,
    SessionGrant, SessionId, SlotClaim, Token,
};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// An in-memory [`Backend`] whose clock is [`Instant`]. Clones share one state,
/// like clients of one server. It broadcasts releases, and can inject
/// failures ([`MemoryBackend::fail_next_calls`]) to test error paths.
///
/// It is the reference implementation of the contract: it runs the same
/// conformance suite as the SQL backends.
#[derive(Clone, Default)]
pub struct MemoryBackend {
    state: Arc<Mutex<State>>,
}

#[derive(Default)]
struct State {
    sessions: HashMap<SessionId, Session>,
    leases: BTreeMap<LeaseName, Lease>,
    /// Partitioned groups (S10.1): each group's member sessions, live or not
    /// (an expired member is left out of every listing).
    groups: BTreeMap<LeaseName, BTreeSet<SessionId>>,
    /// The last claimed schedule slot of each name (S11.1); never forgotten.
    slots: HashMap<LeaseName, u64>,
    subscribers: Vec<mpsc::UnboundedSender<LeaseName>>,
    fail_next: u32,
    /// A deliberate bug for must-fail tests: acquire ignores a live holder.
    skip_holder_check: bool,
    #[cfg(feature = "testkit")]
    flaw: Option<Flaw>,
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

struct Session {
    expires: Instant,
    lease_duration: Duration,
    metadata: SessionMetadata,
}

struct Lease {
    holder: Option<SessionId>,
    token: u64,
}

impl State {
    /// The remaining time of a live session; forgets it once expired (S1.2).
    fn live(&mut self, session: SessionId, now: Instant) -> Option<Duration> {
        let expires = self.sessions.get(&session)?.expires;
        if expires > now {
            Some(self.reported(expires - now))
        } else {
            self.sessions.remove(&session);
            None
        }
    }

    /// The remaining time reported for `true_remaining` (a lie under
    /// [`Flaw::ExpireEarly`]).
    #[allow(clippy::unused_self)]
    fn reported(&self, true_remaining: Duration) -> Duration {
        #[cfg(feature = "testkit")]
        if self.flaw == Some(Flaw::ExpireEarly) {
            return true_remaining.mul_f64(10.0 / 9.0);
        }
        true_remaining
    }

    /// The true expiry of a session granted `lease_duration` at `now`.
    #[allow(clippy::unused_self)]
    fn expiry(&self, now: Instant, lease_duration: Duration) -> Instant {
        #[cfg(feature = "testkit")]
        if self.flaw == Some(Flaw::ExpireEarly) {
            return now + lease_duration.mul_f64(0.9);
        }
        now + lease_duration
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

    /// The live members of every group `session` belongs to (S10.1).
    fn group_views(&self, session: SessionId, now: Instant) -> Vec<GroupView> {
        self.groups
            .iter()
            .filter(|(_, members)| members.contains(&session))
            .map(|(group, members)| GroupView {
                group: group.clone(),
                members: members
                    .iter()
                    .copied()
                    .filter(|m| self.sessions.get(m).is_some_and(|s| s.expires > now))
                    .collect(),
            })
            .collect()
    }

    /// Ends every membership of `session`, announcing each group's change
    /// with a broadcast of the group's name (S10.2).
    fn leave_all_groups(&mut self, session: SessionId) {
        let mut changed = Vec::new();
        for (group, members) in self.groups.iter_mut() {
            if members.remove(&session) {
                changed.push(group.clone());
            }
        }
        self.groups.retain(|_, members| !members.is_empty());
        for group in &changed {
            self.broadcast(group);
        }
    }

    fn broadcast(&mut self, name: &LeaseName) {
        self.subscribers
            .retain(|tx| tx.unbounded_send(name.clone()).is_ok());
    }
}

impl MemoryBackend {
    /// An empty backend.
    pub fn new() -> Self {
        Self::default()
    }

    /// Makes the next `n` calls fail with [`BackendErrorKind::Unavailable`]
    /// without touching the state, as a broken connection would.
    pub fn fail_next_calls(&self, n: u32) {
        self.lock().fail_next = n;
    }

    /// A deliberately **broken** backend for must-fail tests (feature
    /// `testkit`): its acquire takes a lease over without checking whether
    /// the holder is live. The history checker must reject its histories.
    #[cfg(feature = "testkit")]
    pub fn broken_skipping_holder_check() -> Self {
        let b = Self::default();
        b.lock().skip_holder_check = true;
        b
    }

    /// A backend with a deliberate bug (feature `testkit`): for tests that
    /// show the conformance suite catches it.
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
            let mut st = self.lock();
            let now = Instant::now();
            let Some(remaining) = st.live(session, now) else {
                return Ok(AcquireOutcome::Expired);
            };
            let holder = st.leases.get(name).and_then(|l| l.holder);
            let holder_remaining = holder
                .filter(|h| *h != session)
                .and_then(|h| st.live(h, now));
            match holder {
                Some(h) if h != session && holder_remaining.is_some() => {
                    let token = st.leases.get(name).and_then(|l| Token::new(l.token));
                    return Ok(AcquireOutcome::Held {
                        holder: Some(h),
                        token,
                        holder_remaining,
                    });
                }
                Some(h) if h == session => {
                    let token = st.leases.get(name).and_then(|l| Token::new(l.token));
                    if let Some(token) = token {
                        return Ok(AcquireOutcome::Won { token, remaining });
                    }
                }
                _ => {}
            }
            remaining
        };
        futures_timer::Delay::new(Duration::from_millis(2)).await;
        let mut st = self.lock();
        let lease = st.leases.entry(name.clone()).or_insert(Lease {
            holder: None,
            token: 0,
        });
        lease.holder = Some(session);
        lease.token = lease.token.saturating_add(1);
        let token = Token::new(lease.token)
            .ok_or_else(|| BackendError::new(BackendErrorKind::Malformed, "token 0"))?;
        Ok(AcquireOutcome::Won { token, remaining })
    }
}

impl Backend for MemoryBackend {
    fn open_session(
        &self,
        lease_duration: Duration,
    ) -> BoxFuture<'_, Result<SessionGrant, BackendError>> {
        self.open_session_with(lease_duration, &NO_METADATA)
    }

    fn open_session_with<'a>(
        &'a self,
        lease_duration: Duration,
        metadata: &'a SessionMetadata,
    ) -> BoxFuture<'a, Result<SessionGrant, BackendError>> {
        let result = (|| {
            check_lease_duration(lease_duration)?;
            let mut st = self.lock();
            st.injected_failure()?;
            let session = random_session_id()?;
            let now = Instant::now();
            st.sessions.retain(|_, s| s.expires > now);
            let expires = st.expiry(now, lease_duration);
            st.sessions.insert(
                session,
                Session {
                    expires,
                    lease_duration,
                    metadata: metadata.clone(),
                },
            );
            Ok(SessionGrant {
                session,
                remaining: lease_duration,
            })
        })();
        futures::future::ready(result).boxed()
    }

    fn renew(&self, session: SessionId) -> BoxFuture<'_, Result<Renewal, RenewError>> {
        let result = (|| {
            let mut st = self.lock();
            st.injected_failure()?;
            let now = Instant::now();
            if st.live(session, now).is_none() {
                return Err(RenewError::Expired);
            }
            #[cfg(feature = "testkit")]
            let keep = st.flaw == Some(Flaw::RenewKeepsExpiry);
            #[cfg(not(feature = "testkit"))]
            let keep = false;
            let Some(lease_duration) = st.sessions.get(&session).map(|s| s.lease_duration) else {
                return Err(RenewError::Expired);
            };
            let expires = st.expiry(now, lease_duration);
            let remaining = match st.sessions.get_mut(&session) {
                Some(s) => {
                    if !keep {
                        s.expires = expires;
                    }
                    s.lease_duration
                }
                None => return Err(RenewError::Expired),
            };
            let owned = st
                .leases
                .iter()
                .filter(|(_, l)| l.holder == Some(session))
                .filter_map(|(n, l)| Some((n.clone(), Token::new(l.token)?)))
                .collect();
            let groups = st.group_views(session, now);
            Ok(Renewal {
                remaining,
                owned,
                groups,
            })
        })();
        futures::future::ready(result).boxed()
    }

    fn acquire<'a>(
        &'a self,
        session: SessionId,
        name: &'a LeaseName,
    ) -> BoxFuture<'a, Result<AcquireOutcome, BackendError>> {
        #[cfg(feature = "testkit")]
        if self.lock().flaw == Some(Flaw::SplitAcquire) {
            return self.split_acquire(session, name).boxed();
        }
        let result = (|| {
            let mut st = self.lock();
            st.injected_failure()?;
            let now = Instant::now();
            let Some(remaining) = st.live(session, now) else {
                return Ok(AcquireOutcome::Expired);
            };
            let holder = st.leases.get(name).and_then(|l| l.holder);
            let holder_remaining = match holder {
                Some(h) if h != session && !st.skip_holder_check => st.live(h, now),
                _ => None,
            };
            let holder_live = holder_remaining.is_some();
            let lease = st.leases.entry(name.clone()).or_insert(Lease {
                holder: None,
                token: 0,
            });
            if lease.holder == Some(session) {
                // Idempotent: the owner acquiring again keeps its term.
            } else if holder_live {
                return Ok(AcquireOutcome::Held {
                    holder: lease.holder,
                    token: Token::new(lease.token),
                    holder_remaining,
                });
            } else {
                lease.holder = Some(session);
                lease.token = lease.token.checked_add(1).ok_or_else(|| {
                    BackendError::new(
                        BackendErrorKind::Malformed,
                        format!("token of lease `{name}` would overflow"),
                    )
                })?;
            }
            let token = Token::new(lease.token).ok_or_else(|| {
                BackendError::new(BackendErrorKind::Malformed, "token 0 for an owned lease")
            })?;
            Ok(AcquireOutcome::Won { token, remaining })
        })();
        futures::future::ready(result).boxed()
    }

    fn release<'a>(
        &'a self,
        session: SessionId,
        name: &'a LeaseName,
        token: Token,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        let result = (|| {
            let mut st = self.lock();
            st.injected_failure()?;
            let released = match st.leases.get_mut(name) {
                Some(l) if l.holder == Some(session) && l.token == token.get() => {
                    l.holder = None;
                    true
                }
                _ => false,
            };
            if released {
                st.broadcast(name);
            }
            Ok(())
        })();
        futures::future::ready(result).boxed()
    }

    fn close_session(&self, session: SessionId) -> BoxFuture<'_, Result<(), BackendError>> {
        let result = (|| {
            let mut st = self.lock();
            st.injected_failure()?;
            st.sessions.remove(&session);
            st.leave_all_groups(session);
            let mut freed = Vec::new();
            for (name, lease) in st.leases.iter_mut() {
                if lease.holder == Some(session) {
                    lease.holder = None;
                    freed.push(name.clone());
                }
            }
            for name in &freed {
                st.broadcast(name);
            }
            Ok(())
        })();
        futures::future::ready(result).boxed()
    }

    fn inspect<'a>(
        &'a self,
        prefix: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Inspection, BackendError>> {
        let result = (|| {
            let prefix = prefix.unwrap_or("");
            check_prefix(prefix)?;
            let mut st = self.lock();
            st.injected_failure()?;
            let now = Instant::now();
            st.sessions.retain(|_, s| s.expires > now);
            let mut sessions: Vec<SessionInfo> = st
                .sessions
                .iter()
                .map(|(id, s)| SessionInfo {
                    session: *id,
                    remaining: st.reported(s.expires - now),
                    lease_duration: s.lease_duration,
                    metadata: s.metadata.clone(),
                })
                .collect();
            sessions.sort_by_key(|s| s.session);
            let leases = st
                .leases
                .iter()
                .filter(|(n, _)| n.as_str().starts_with(prefix))
                .map(|(name, l)| {
                    let live = l.holder.and_then(|h| st.sessions.get(&h).map(|s| (h, s)));
                    LeaseInfo {
                        name: name.clone(),
                        holder: live.map(|(h, _)| h),
                        token: Token::new(l.token),
                        remaining: live.map(|(_, s)| st.reported(s.expires - now)),
                    }
                })
                .collect();
            Ok(Inspection { leases, sessions })
        })();
        futures::future::ready(result).boxed()
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

    fn join_group<'a>(
        &'a self,
        session: SessionId,
        group: &'a LeaseName,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        let result = (|| {
            let mut st = self.lock();
            st.injected_failure()?;
            if st.live(session, Instant::now()).is_none() {
                // A no-op, as on every backend: the session's next renewal
                // says `Expired`.
                return Ok(());
            }
            if st.groups.entry(group.clone()).or_default().insert(session) {
                st.broadcast(group);
            }
            Ok(())
        })();
        futures::future::ready(result).boxed()
    }

    fn leave_group<'a>(
        &'a self,
        session: SessionId,
        group: &'a LeaseName,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        let result = (|| {
            let mut st = self.lock();
            st.injected_failure()?;
            let left = st
                .groups
                .get_mut(group)
                .is_some_and(|members| members.remove(&session));
            if left {
                st.groups.retain(|_, members| !members.is_empty());
                st.broadcast(group);
            }
            Ok(())
        })();
        futures::future::ready(result).boxed()
    }

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
            let now = Instant::now();
            // The holder check comes first: a session that does not own the
            // lease with this token learns nothing about the slots.
            let owns = st
                .leases
                .get(name)
                .is_some_and(|l| l.holder == Some(session) && l.token == token.get());
            #[cfg(feature = "testkit")]
            let (any_holder, rewind) = (
                st.flaw == Some(Flaw::SlotIgnoresHolder),
                st.flaw == Some(Flaw::SlotRewinds),
            );
            #[cfg(not(feature = "testkit"))]
            let (any_holder, rewind) = (false, false);
            if !any_holder && (!owns || st.live(session, now).is_none()) {
                return Ok(SlotClaim::NotHolder);
            }
            match st.slots.get(name) {
                Some(&last) if last >= slot && !rewind => Ok(SlotClaim::AlreadyClaimed { last }),
                _ => {
                    st.slots.insert(name.clone(), slot);
                    Ok(SlotClaim::Claimed)
                }
            }
        })();
        futures::future::ready(result).boxed()
    }

    fn name(&self) -> &'static str {
        "memory"
    }
}
