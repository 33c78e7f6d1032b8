//! Interleaving cases: one call is paused behind a lock that another backend
//! transaction holds, other calls run to completion inside that transaction,
//! the lock is released, and the outcome must be one that *some sequential
//! order* of the calls could give (linearizability of a single backend call,
//! SPEC S1.2, S3.2, S3.5, S1.4).
//!
//! # The hook a backend provides: [`Hold`]
//!
//! [`Factory::hold`] opens a **hold**: an open backend transaction on a
//! connection of its own. Calls made *through* the hold
//! ([`Hold::open_session`], [`Hold::acquire`], …) run the backend's own code
//! for that operation inside the hold's transaction: they take the same locks
//! the real operation takes, return what it returns, and become visible to
//! other clients only on [`Hold::commit`]. Meanwhile an ordinary call from
//! another client that needs one of those locks waits; [`Hold::waiters`]
//! returns once the backend's own lock-wait view (PostgreSQL
//! `pg_blocking_pids`, InnoDB `INNODB_LOCK_WAITS`) shows that many calls
//! waiting behind the hold — the suite never relies on a sleep to know that a
//! call is waiting, except where the backend has no such view (it answers
//! [`WaitSeen::Unobservable`] and the case goes on after a grace period: the
//! outcome is checked all the same, only the proof that the call waited is
//! missing).
//!
//! A backend whose operations never wait on one another (each call is one
//! atomic step on the server: the memory backend's mutex, a Redis script, an
//! etcd transaction) answers [`HoldError::NotApplicable`] with the reason;
//! the cases are then reported as skipped with that reason. The class of bug
//! these cases catch — a call that reads one row, waits for a lock on another,
//! and decides on the stale read — cannot arise in such a backend, and the
//! reason should say why.
//!
//! The SQL backends implement it with a blocker transaction
//! (`PgBackend::hold`, `MysqlBackend::hold`, `SqliteBackend::hold`, feature
//! `testkit`).

use super::{name, sleep, Factory, Step, LONG};
use crate::Backend;
use futures::future::{BoxFuture, FutureExt};
use simba_core::{
    AcquireOutcome, BackendError, LeaseName, RenewError, Renewal, SessionGrant, SessionId, Token,
};
use std::time::Duration;

/// Whether [`Hold::waiters`] could see the waiting calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitSeen {
    /// The backend's lock-wait view showed them.
    Seen,
    /// The backend has no lock-wait view; the suite waits a grace period.
    Unobservable,
}

/// Why [`Factory::hold`] gave no hold.
#[derive(Debug)]
pub enum HoldError {
    /// The backend has no locks that one call can wait on inside another
    /// (the string says why the interleaving class cannot arise).
    NotApplicable(String),
    /// Opening the hold failed.
    Backend(BackendError),
}

impl From<BackendError> for HoldError {
    fn from(e: BackendError) -> Self {
        HoldError::Backend(e)
    }
}

/// An open backend transaction that holds locks until [`Hold::commit`]; see
/// the [module docs](self). Every call runs the backend's own code for that
/// operation inside the transaction.
pub trait Hold: Send {
    /// Locks lease `name` (creating its row, free, if missing) without
    /// changing it.
    fn lock_lease<'a>(&'a mut self, name: &'a LeaseName)
        -> BoxFuture<'a, Result<(), BackendError>>;
    /// [`Backend::open_session`] inside the hold.
    fn open_session(
        &mut self,
        lease_duration: Duration,
    ) -> BoxFuture<'_, Result<SessionGrant, BackendError>>;
    /// [`Backend::renew`] inside the hold.
    fn renew(&mut self, session: SessionId) -> BoxFuture<'_, Result<Renewal, RenewError>>;
    /// [`Backend::acquire`] inside the hold.
    fn acquire<'a>(
        &'a mut self,
        session: SessionId,
        name: &'a LeaseName,
    ) -> BoxFuture<'a, Result<AcquireOutcome, BackendError>>;
    /// [`Backend::release`] inside the hold.
    fn release<'a>(
        &'a mut self,
        session: SessionId,
        name: &'a LeaseName,
        token: Token,
    ) -> BoxFuture<'a, Result<(), BackendError>>;
    /// [`Backend::close_session`] inside the hold.
    fn close_session(&mut self, session: SessionId) -> BoxFuture<'_, Result<(), BackendError>>;
    /// Returns once at least `n` calls of other clients wait on a lock this
    /// hold owns, as the backend's lock-wait view shows; gives up with an
    /// error after about 10 s.
    fn waiters(&mut self, n: usize) -> BoxFuture<'_, Result<WaitSeen, BackendError>>;
    /// Commits the transaction: everything done through the hold becomes
    /// visible at once, and its locks are released.
    fn commit(self: Box<Self>) -> BoxFuture<'static, Result<(), BackendError>>;
}

/// Opens a hold, or skips the case with the backend's reason.
async fn hold<F: Factory>(f: &F, b: &F::Backend) -> Result<Box<dyn Hold>, Step> {
    match f.hold(b).await {
        Ok(h) => Ok(h),
        Err(HoldError::NotApplicable(why)) => Err(Step::Skip(format!("not applicable: {why}"))),
        Err(HoldError::Backend(e)) => Err(Step::Fail(format!("opening the hold failed: {e}"))),
    }
}

/// Waits until `n` calls wait behind the hold (or a grace period where the
/// backend cannot show it).
async fn paused(h: &mut Box<dyn Hold>, n: usize) -> Result<(), Step> {
    match h.waiters(n).await {
        Ok(WaitSeen::Seen) => Ok(()),
        Ok(WaitSeen::Unobservable) => {
            sleep(Duration::from_millis(300)).await;
            Ok(())
        }
        Err(e) => Err(Step::Fail(format!(
            "the paused call never waited behind the hold: {e}"
        ))),
    }
}

/// Runs `paused_call` until it waits behind the hold, then `inside` (calls
/// made through the hold), commits, and returns both results.
async fn interleave<'h, T: std::fmt::Debug, U>(
    h: Box<dyn Hold>,
    paused_call: BoxFuture<'h, T>,
    inside: impl for<'x> FnOnce(&'x mut Box<dyn Hold>) -> BoxFuture<'x, Result<U, Step>>,
) -> Result<(T, U), Step> {
    let mut call = paused_call.fuse();
    let committing = std::sync::atomic::AtomicBool::new(false);
    let committing = &committing;
    // Poll the paused call concurrently with the driver; it must not finish
    // while the hold is open (it waits on the hold's lock).
    let driver = async move {
        let mut h = h;
        paused(&mut h, 1).await?;
        let u = inside(&mut h).await?;
        committing.store(true, std::sync::atomic::Ordering::SeqCst);
        h.commit().await?;
        Ok::<U, Step>(u)
    }
    .fuse();
    futures::pin_mut!(driver);
    let mut early: Option<T> = None;
    let mut late: Option<T> = None;
    let u = loop {
        futures::select! {
            t = call => {
                if committing.load(std::sync::atomic::Ordering::SeqCst) {
                    late = Some(t);
                } else {
                    early = Some(t);
                }
            }
            u = driver => match (u, early.take()) {
                (Err(Step::Fail(m)), Some(t)) => return Err(Step::Fail(format!(
                    "{m}; the paused call had finished while the hold was open: {t:?}"
                ))),
                (u, e) => { early = e; break u? }
            },
        }
    };
    if let Some(t) = early {
        return Err(Step::Fail(format!(
            "the paused call finished while the hold was still open: {t:?}"
        )));
    }
    let t = match late {
        Some(t) => t,
        None => call.await,
    };
    Ok((t, u))
}

fn tok(t: Option<Token>) -> u64 {
    t.map_or(0, Token::get)
}

/// The lease's holder and token as [`Backend::inspect`] sees them.
async fn state<B: Backend>(b: &B, n: &LeaseName) -> Result<(Option<SessionId>, u64), Step> {
    let i = b.inspect(Some(n.as_str())).await?;
    let l = i.leases.iter().find(|l| &l.name == n);
    Ok((l.and_then(|l| l.holder), tok(l.and_then(|l| l.token))))
}

/// Checks one acquire's outcome against the two orders "it ran before the
/// other calls" (`before`: the outcome then) and "after them" (`after`).
fn one_of(what: &str, got: &AcquireOutcome, allowed: &[Allowed]) -> Result<(), Step> {
    if allowed.iter().any(|a| a.matches(got)) {
        return Ok(());
    }
    Err(Step::Fail(format!(
        "{what}: {got:?} is no outcome of any sequential order (allowed: {allowed:?})"
    )))
}

/// An acquire outcome a sequential order allows.
#[derive(Debug)]
enum Allowed {
    Won(u64),
    HeldBy(SessionId, u64),
}

impl Allowed {
    fn matches(&self, got: &AcquireOutcome) -> bool {
        match (self, got) {
            (Allowed::Won(t), AcquireOutcome::Won { token, .. }) => token.get() == *t,
            (Allowed::HeldBy(s, t), AcquireOutcome::Held { holder, token, .. }) => {
                holder.is_none_or(|h| h == *s) && token.is_none_or(|x| x.get() == *t)
            }
            _ => false,
        }
    }
}

async fn owns<B: Backend>(b: &B, s: SessionId, n: &LeaseName) -> Result<Option<Token>, Step> {
    match b.renew(s).await {
        Ok(r) => Ok(r.owned.into_iter().find(|(x, _)| x == n).map(|(_, t)| t)),
        Err(RenewError::Expired) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// A lease that was won and released once (its row exists with token 1).
async fn used_lease<B: Backend>(b: &B, n: &LeaseName) -> Result<(), Step> {
    let c = b.open_session(LONG).await?.session;
    let token = setup_won(b, c, n).await?;
    b.release(c, n, token).await?;
    b.close_session(c).await?;
    Ok(())
}

/// A: acquire of a free lease, paused on the lease's lock; B: a *new* session
/// opens and acquires the lease inside the hold. The issue-9 PostgreSQL
/// takeover: A must not also win (its snapshot predates B's session).
pub(super) async fn acquire_vs_open_acquire<F: Factory>(f: &F, ns: &str) -> Result<(), Step> {
    let b = f.connect(ns).await?;
    let n = name("interleave.open")?;
    used_lease(&b, &n).await?;
    let a = b.open_session(LONG).await?.session;
    let mut h = hold(f, &b).await?;
    h.lock_lease(&n).await?;
    let n2 = n.clone();
    let (ra, (sb, rb)) = interleave(h, b.acquire(a, &n), move |h| {
        async move {
            let sb = h.open_session(LONG).await?.session;
            let rb = h.acquire(sb, &n2).await?;
            Ok((sb, rb))
        }
        .boxed()
    })
    .await?;
    let ra = ra?;
    // Orders: A first (A wins token 2, B is held by A) or B first (B wins
    // token 2, A is held by B).
    if let (AcquireOutcome::Won { .. }, AcquireOutcome::Won { .. }) = (&ra, &rb) {
        return Err(Step::Fail(format!(
            "two winners of one lease: A (waiting behind the hold) {ra:?} and B (new session, \
             inside the hold) {rb:?}; no sequential order gives both"
        )));
    }
    let (winner, token) = match (&ra, &rb) {
        (AcquireOutcome::Won { token, .. }, r) => {
            one_of("B's acquire after A's", r, &[Allowed::HeldBy(a, 2)])?;
            (a, token.get())
        }
        (r, AcquireOutcome::Won { token, .. }) => {
            one_of("A's acquire after B's", r, &[Allowed::HeldBy(sb, 2)])?;
            (sb, token.get())
        }
        _ => {
            return Err(Step::Fail(format!(
                "nobody won a free lease: A {ra:?}, B {rb:?}"
            )))
        }
    };
    check!(token == 2, "the winner got token {token}, expected 2");
    let (holder, t) = state(&b, &n).await?;
    check!(
        holder == Some(winner) && t == token,
        "after A {ra:?} and B {rb:?} the lease is held by {holder:?} with token {t}"
    );
    let loser = if winner == a { sb } else { a };
    check!(
        owns(&b, loser, &n).await?.is_none(),
        "the losing session's renewal lists the lease"
    );
    Ok(())
}

/// A: acquire of a lease whose holder H is renewing inside the hold while its
/// old expiry passes; A must be held (the renewal that returned Ok came first).
pub(super) async fn acquire_vs_renew<F: Factory>(f: &F, ns: &str) -> Result<(), Step> {
    const LEASE: Duration = Duration::from_secs(3);
    let b = f.connect(ns).await?;
    let n = name("interleave.renew")?;
    let opened = std::time::Instant::now();
    let hs = b.open_session(LEASE).await?.session;
    let a = b.open_session(LONG).await?.session;
    let t1 = setup_won(&b, hs, &n).await?.get();
    // The renewal runs (uncommitted) 2 s into the 3 s lease: it extends the
    // session to 5 s. The acquire starts once the old expiry (3 s) passed.
    sleep(Duration::from_secs(2).saturating_sub(opened.elapsed())).await;
    let renewed_at = std::time::Instant::now();
    let mut h = hold(f, &b).await?;
    let renewed = h.renew(hs).await?;
    check!(
        renewed.owned.iter().any(|(x, _)| x == &n),
        "the renewal inside the hold does not list the lease"
    );
    sleep((LEASE + Duration::from_millis(300)).saturating_sub(opened.elapsed())).await;
    let (ra, ()) = interleave(h, b.acquire(a, &n), |_| async { Ok(()) }.boxed()).await?;
    let ra = ra?;
    if renewed_at.elapsed() > LEASE - Duration::from_millis(200) {
        return Err(Step::Skip(
            "the machine was too slow: the renewed lease may have run out before the check".into(),
        ));
    }
    one_of(
        "acquire while the holder's renewal commits",
        &ra,
        &[Allowed::HeldBy(hs, t1)],
    )?;
    check!(
        owns(&b, hs, &n).await?.map(Token::get) == Some(t1),
        "the renewed holder lost the lease"
    );
    Ok(())
}

/// A: acquire paused while the holder releases inside the hold: A wins with
/// the next token (release first) or is held (A first).
pub(super) async fn acquire_vs_release<F: Factory>(f: &F, ns: &str) -> Result<(), Step> {
    acquire_vs_leaving(f, ns, "interleave.release", Leaving::Release).await
}

/// A: acquire paused while the holder closes its session inside the hold.
pub(super) async fn acquire_vs_close<F: Factory>(f: &F, ns: &str) -> Result<(), Step> {
    acquire_vs_leaving(f, ns, "interleave.close", Leaving::Close).await
}

/// How the holder leaves in [`acquire_vs_leaving`].
#[derive(Clone, Copy)]
enum Leaving {
    /// It releases the lease.
    Release,
    /// It closes its session.
    Close,
}

/// A: acquire on `lease` paused while the holder leaves inside the hold: A
/// wins with the next token (the holder left first) or is held (A first),
/// and the lease's state says the same.
async fn acquire_vs_leaving<F: Factory>(
    f: &F,
    ns: &str,
    lease: &str,
    leaving: Leaving,
) -> Result<(), Step> {
    let b = f.connect(ns).await?;
    let n = name(lease)?;
    let hs = b.open_session(LONG).await?.session;
    let a = b.open_session(LONG).await?.session;
    let token = setup_won(&b, hs, &n).await?;
    let mut h = hold(f, &b).await?;
    h.lock_lease(&n).await?;
    let n2 = n.clone();
    let (ra, ()) = interleave(h, b.acquire(a, &n), move |h| {
        async move {
            match leaving {
                Leaving::Release => h.release(hs, &n2, token).await?,
                Leaving::Close => h.close_session(hs).await?,
            }
            Ok(())
        }
        .boxed()
    })
    .await?;
    let ra = ra?;
    let t1 = token.get();
    let what = match leaving {
        Leaving::Release => "acquire while the holder releases",
        Leaving::Close => "acquire while the holder closes",
    };
    one_of(what, &ra, &[Allowed::Won(t1 + 1), Allowed::HeldBy(hs, t1)])?;
    let (holder, t) = state(&b, &n).await?;
    let expected = if matches!(ra, AcquireOutcome::Won { .. }) {
        (Some(a), t1 + 1)
    } else {
        (None, t1)
    };
    check!(
        (holder, t) == expected,
        "after {ra:?} the lease is held by {holder:?} with token {t}, expected {expected:?}"
    );
    Ok(())
}

/// The setup's acquire of `n` by `s`, which must win: its token.
async fn setup_won<B: Backend>(b: &B, s: SessionId, n: &LeaseName) -> Result<Token, Step> {
    match b.acquire(s, n).await? {
        AcquireOutcome::Won { token, .. } => Ok(token),
        other => Err(Step::Fail(format!("setup acquire gave {other:?}"))),
    }
}

/// H's session has expired; A takes the lease over inside the hold while H's
/// renewal is paused: the renewal must answer `Expired` (S1.2), never list
/// the lease that A now owns.
pub(super) async fn renew_vs_takeover<F: Factory>(f: &F, ns: &str) -> Result<(), Step> {
    let b = f.connect(ns).await?;
    let n = name("interleave.takeover")?;
    let hs = b.open_session(Duration::from_secs(1)).await?.session;
    let a = b.open_session(LONG).await?.session;
    let t1 = setup_won(&b, hs, &n).await?.get();
    sleep(Duration::from_millis(1300)).await; // H expires
    let mut h = hold(f, &b).await?;
    h.lock_lease(&n).await?;
    let ra = h.acquire(a, &n).await?;
    check!(
        Allowed::Won(t1 + 1).matches(&ra),
        "the takeover inside the hold gave {ra:?}, expected a win with token {}",
        t1 + 1
    );
    let renew = b.renew(hs).boxed();
    // The renewal may finish at once (it needs no lock the takeover holds on
    // some backends): race it against the hold's wait view.
    let mut renew = renew.fuse();
    let mut h = h;
    let seen = {
        let wait = h.waiters(1).fuse();
        futures::pin_mut!(wait);
        futures::select! {
            r = renew => Err(r),
            w = wait => Ok(w),
        }
    };
    let r = match seen {
        Err(r) => {
            h.commit().await?;
            r
        }
        Ok(w) => {
            if let Ok(WaitSeen::Unobservable) = w {
                sleep(Duration::from_millis(300)).await;
            }
            h.commit().await?;
            renew.await
        }
    };
    match r {
        Err(RenewError::Expired) => {}
        Ok(r) => {
            return Err(Step::Fail(format!(
                "the expired holder's renewal succeeded after a takeover: {r:?}"
            )))
        }
        Err(e) => return Err(e.into()),
    }
    let (holder, t) = state(&b, &n).await?;
    check!(
        holder == Some(a) && t == t1 + 1,
        "after the takeover the lease is held by {holder:?} with token {t}"
    );
    Ok(())
}
