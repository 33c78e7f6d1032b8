//! Cases that catch a backend lying about time: the remaining time it
//! reports is what the engine's deadline rests on (S2.1), so a session and
//! its leases must stay live for all of it, a renewal must restart a whole
//! lease from the renewal (S1.1), and a short session left to expire must
//! not be taken over before its holder's deadline, even in a crowd.
//!
//! Tolerances, stated once: the backend's clock and the test machine's may
//! run at different rates ([`RATE`], 1 %), and a check's call reaches the
//! backend at an unknown instant between its send and its reply. A check is
//! only *conclusive* when that whole window lies on the right side of the
//! bound; a stalled machine makes a check inconclusive (the case retries, up
//! to [`ATTEMPTS`] times), never a false failure.

use super::{name, sleep, two_clients, won, Factory, Step, LONG};
use crate::Backend;
use simba_core::{AcquireOutcome, LeaseName, RenewError, SessionId, Token};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Rate difference allowed between the backend's clock and the test's.
pub const RATE: f64 = 0.01;
/// How long before the reported expiry the "still live" probe is sent.
pub const EARLY: Duration = Duration::from_millis(150);
/// How long after the reported expiry (plus [`RATE`]) the "gone" probe is sent.
pub const LATE: Duration = Duration::from_millis(300);
/// How many times a case retries when a stalled machine made a probe
/// inconclusive.
pub const ATTEMPTS: usize = 6;

fn sleep_until(t: Instant) -> impl std::future::Future<Output = ()> {
    sleep(t.saturating_duration_since(Instant::now()))
}

/// The instant before which the backend must still hold a session whose
/// `remaining` it reported in a call sent at `sent`: its clock may run
/// [`RATE`] fast.
fn live_until(sent: Instant, remaining: Duration) -> Instant {
    sent + remaining.mul_f64(1.0 - RATE)
}

/// Whether `b` still holds `n` for `holder`: `o` (another live session)
/// tries to acquire it. `Ok(None)` if the reply came too late to tell
/// (after `deadline`).
async fn still_held<B: Backend>(
    b: &B,
    o: SessionId,
    n: &LeaseName,
    holder: SessionId,
    deadline: Instant,
) -> Result<Option<bool>, Step> {
    let out = b.acquire(o, n).await?;
    if Instant::now() >= deadline {
        return Ok(None);
    }
    match out {
        AcquireOutcome::Held { holder: h, .. } => {
            check!(
                h.is_none_or(|h| h == holder),
                "`{n}` held by {h:?}, expected {holder}"
            );
            Ok(Some(true))
        }
        AcquireOutcome::Won { .. } => Ok(Some(false)),
        AcquireOutcome::Expired => Err(Step::Fail(format!(
            "the probing session {o} expired (lease {LONG:?})"
        ))),
    }
}

/// One session of `lease` holds a lease; after `renew_after` it renews and
/// the reported remaining time `R` is taken at its word: a probe sent at
/// `renewal sent + R·(1 − RATE) − EARLY` must find the lease still held, a
/// probe sent at `renewal reply + R·(1 + RATE) + LATE` must find the session
/// expired and the lease free (with a higher token).
async fn live_for_reported_remaining<F: Factory>(
    f: &F,
    ns: &str,
    lease: Duration,
    renew_after: Duration,
) -> Result<(), Step> {
    let b = f.connect(ns).await?;
    let c = f.connect(ns).await?;
    let mut inconclusive = Vec::new();
    for attempt in 0..ATTEMPTS {
        let opened = Instant::now();
        let a = b.open_session(lease).await?.session;
        let o = c.open_session(LONG).await?.session;
        let n = name(&format!("edge.{attempt}"))?;
        let t = won(&b, a, &n).await?;
        sleep_until(opened + renew_after).await;
        let sent = Instant::now();
        let r = b.renew(a).await?;
        let got = Instant::now();
        check!(
            r.remaining <= lease,
            "renew granted {:?} of a {lease:?} lease",
            r.remaining
        );
        // S1.1: the renewal restarts a whole lease on the backend clock,
        // measured from the renewal (not from the session's opening).
        check!(
            r.remaining + (got - sent) >= lease.mul_f64(1.0 - RATE),
            "a renewal {renew_after:?} after opening a {lease:?} session granted {:?}: \
             it must grant a full lease from the renewal (S1.1)",
            r.remaining
        );
        check!(
            r.owned.iter().any(|(m, tt)| *m == n && *tt == t),
            "renew does not list `{n}` with token {t}: {:?}",
            r.owned
        );
        let bound = live_until(sent, r.remaining);
        let Some(probe_at) = bound.checked_sub(EARLY) else {
            return Err(Step::Fail("remaining time too short to probe".into()));
        };
        sleep_until(probe_at).await;
        match still_held(&c, o, &n, a, bound).await? {
            None => {
                inconclusive.push(format!("probe reply after the bound (attempt {attempt})"));
                let _ = b.close_session(a).await;
                let _ = c.close_session(o).await;
                continue;
            }
            Some(false) => {
                return Err(Step::Fail(format!(
                    "`{n}` was taken over {:?} before the holder's reported remaining time \
                     ({:?}, renewed {renew_after:?} after opening) ran out (S2.1 rests on it)",
                    bound.saturating_duration_since(Instant::now()) + lease.mul_f64(RATE),
                    r.remaining
                )))
            }
            Some(true) => {}
        }
        // Gone after it: the session is expired for good and the lease free.
        let late = LATE + f.expiry_lateness();
        sleep_until(got + r.remaining.mul_f64(1.0 + RATE) + late).await;
        match c.acquire(o, &n).await? {
            AcquireOutcome::Won { token, .. } => check!(
                token > t,
                "takeover of `{n}` got token {token}, not above {t}"
            ),
            other => {
                return Err(Step::Fail(format!(
                    "`{n}` still {other:?} {late:?} after its holder's reported remaining time \
                     ran out (the factory declares {:?} of lazy expiry)",
                    f.expiry_lateness()
                )))
            }
        }
        check!(
            matches!(b.renew(a).await, Err(RenewError::Expired)),
            "the session renewed after its reported remaining time ran out (S1.2)"
        );
        let _ = c.close_session(o).await;
        return Ok(());
    }
    Err(Step::Fail(format!(
        "every probe was inconclusive (machine too slow): {inconclusive:?}"
    )))
}

/// S2.1: a session and its leases stay live for the whole remaining time the
/// backend reported (4 s lease, renewed at once), and are gone just after it.
pub(super) async fn live_until_reported_remaining<F: Factory>(f: &F, ns: &str) -> Result<(), Step> {
    live_for_reported_remaining(f, ns, Duration::from_secs(4), Duration::ZERO).await
}

/// S1.1: a renewal 1.5 s into a 3 s session extends it to a full 3 s from
/// the renewal (probed 1.3 s past the original expiry), not from the opening.
pub(super) async fn renewal_extends_from_the_renewal<F: Factory>(
    f: &F,
    ns: &str,
) -> Result<(), Step> {
    live_for_reported_remaining(f, ns, Duration::from_secs(3), Duration::from_millis(1500)).await
}

/// S3: one session acquiring one name on two clients at once gets the same
/// term twice (one token), and the name is held once.
pub(super) async fn concurrent_acquires_by_one_session<F: Factory>(
    f: &F,
    ns: &str,
) -> Result<(), Step> {
    let (b, c, a, o) = two_clients(f, ns).await?;
    let mut last: HashMap<LeaseName, Token> = HashMap::new();
    for i in 0..20 {
        let n = name(&format!("twice.{}", i % 4))?;
        let (x, y) = futures::future::join(b.acquire(a, &n), c.acquire(a, &n)).await;
        let (tx, ty) = match (x?, y?) {
            (AcquireOutcome::Won { token: tx, .. }, AcquireOutcome::Won { token: ty, .. }) => {
                (tx, ty)
            }
            other => {
                return Err(Step::Fail(format!(
                    "two concurrent acquires of a free `{n}` by one session gave {other:?}; \
                     both must win"
                )))
            }
        };
        check!(
            tx == ty,
            "two concurrent acquires of `{n}` by one session won two terms: tokens {tx} and {ty}"
        );
        check!(
            last.get(&n).is_none_or(|l| tx > *l),
            "`{n}` token {tx} not above the previous term's {:?}",
            last.get(&n)
        );
        last.insert(n.clone(), tx);
        let owned: Vec<_> = b.renew(a).await?.owned;
        let mine: Vec<_> = owned.iter().filter(|(m, _)| *m == n).collect();
        check!(
            mine.len() == 1 && mine[0].1 == tx,
            "renew lists `{n}` as {mine:?}, expected once with token {tx}"
        );
        match c.acquire(o, &n).await? {
            AcquireOutcome::Held { .. } => {}
            other => {
                return Err(Step::Fail(format!(
                    "another session's acquire of `{n}` gave {other:?} while it is held"
                )))
            }
        }
        // It stops competing (S4.5): on a backend that queues waiters, the
        // release would otherwise hand it the name.
        c.withdraw(o, &n).await?;
        b.release(a, &n, tx).await?;
    }
    Ok(())
}

/// What a client believes it holds: until when, with which token.
#[derive(Clone, Copy)]
struct Belief {
    session: SessionId,
    token: Token,
    valid_until: Instant,
    abandoned: bool,
}

/// The sixteen-client race with expiry in it: four clients on short (2 s)
/// sessions (opened 300 ms apart) each try until they win once and then
/// vanish without releasing or renewing; twelve on long sessions keep
/// acquiring and releasing for 4 s. A client believes it
/// holds a lease until `send + proven·(1 − RATE)` of its winning call, where
/// `proven` is the part of the reported remaining time that one call proves
/// ([`Backend::renewal_proves`], S8.5; all of it except on ZooKeeper): the
/// engine's deadline, without margin; a win whose reply arrives before
/// another session's belief ends is two holders at once. At least one
/// abandoned lease must be taken over (expiry did enter the race).
pub(super) async fn sixteen_clients_with_expiry<F: Factory>(f: &F, ns: &str) -> Result<(), Step> {
    const STEADY: usize = 12;
    const ABANDON: usize = 4;
    const SHORT: Duration = Duration::from_secs(2);
    const RUN: Duration = Duration::from_millis(4000);
    let names = [name("racex.0")?, name("racex.1")?, name("racex.2")?];
    let mut backends = Vec::new();
    for _ in 0..4 {
        backends.push(f.connect(ns).await?);
    }
    let beliefs: Arc<Mutex<HashMap<LeaseName, Belief>>> = Arc::default();
    let problems: Arc<Mutex<Vec<String>>> = Arc::default();
    let takeovers: Arc<Mutex<u32>> = Arc::default();
    let wins: Arc<Mutex<u32>> = Arc::default();
    let lock = |m: &Arc<Mutex<Vec<String>>>, s: String| {
        m.lock().unwrap_or_else(|p| p.into_inner()).push(s);
    };
    let mut steady = Vec::new();
    for i in 0..STEADY {
        steady.push(backends[i % 4].open_session(LONG).await?.session);
    }
    let start = Instant::now();
    let clients = (0..STEADY + ABANDON).map(|i| {
        let b = &backends[i % 4];
        let steady = &steady;
        let names = &names;
        let beliefs = beliefs.clone();
        let problems = problems.clone();
        let takeovers = takeovers.clone();
        let wins = wins.clone();
        async move {
            let abandons = i >= STEADY;
            // The short sessions open one after the other, 300 ms apart,
            // each just before it starts competing.
            // Until when the session is proven alive (its opening's reply);
            // the steady ones, with LONG sessions, for the whole run.
            let (s, proven) = if abandons {
                sleep(Duration::from_millis(300 * (i - STEADY) as u64)).await;
                let sent = Instant::now();
                match b.open_session(SHORT).await {
                    Ok(g) => (
                        g.session,
                        live_until(sent, b.renewal_proves().of(g.remaining)),
                    ),
                    Err(e) => return lock(&problems, format!("open: {e}")),
                }
            } else {
                (steady[i], start + LONG)
            };
            let mut round = 0usize;
            while start.elapsed() < RUN {
                let n = &names[(i + round) % names.len()];
                round += 1;
                let sent = Instant::now();
                let out = b.acquire(s, n).await;
                let got = Instant::now();
                match out {
                    Ok(AcquireOutcome::Won { token, remaining }) => {
                        *wins.lock().unwrap_or_else(|p| p.into_inner()) += 1;
                        {
                            let mut map = beliefs.lock().unwrap_or_else(|p| p.into_inner());
                            if let Some(old) = map.get(n).copied() {
                                if old.session != s && old.valid_until > got {
                                    lock(
                                        &problems,
                                        format!(
                                            "`{n}`: {s} won token {token} while {} still held it \
                                             (token {}) for {:?} by the remaining time the \
                                             backend reported",
                                            old.session,
                                            old.token,
                                            old.valid_until - got
                                        ),
                                    );
                                }
                                if old.session != s && token <= old.token {
                                    lock(
                                        &problems,
                                        format!("`{n}`: token {token} after {} (S3.2)", old.token),
                                    );
                                }
                                if old.abandoned && old.session != s {
                                    *takeovers.lock().unwrap_or_else(|p| p.into_inner()) += 1;
                                }
                            }
                            map.insert(
                                n.clone(),
                                Belief {
                                    session: s,
                                    token,
                                    valid_until: live_until(sent, b.renewal_proves().of(remaining)),
                                    abandoned: abandons,
                                },
                            );
                        }
                        if abandons {
                            // Vanish: no release, no renewal; the lease must
                            // expire with the session.
                            return;
                        }
                        sleep(Duration::from_millis(2)).await;
                        beliefs.lock().unwrap_or_else(|p| p.into_inner()).remove(n);
                        if let Err(e) = b.release(s, n, token).await {
                            lock(&problems, format!("release: {e}"));
                        }
                    }
                    Ok(AcquireOutcome::Held { .. }) => sleep(Duration::from_millis(3)).await,
                    Ok(AcquireOutcome::Expired) => {
                        // A short session that never won in time expires
                        // unrenewed, as it should; only an expiry within
                        // the time its opening proved is wrong.
                        if got < proven {
                            lock(
                                &problems,
                                format!(
                                    "session {s} expired {:?} before the time its opening \
                                     proved",
                                    proven - got
                                ),
                            );
                        }
                        return;
                    }
                    Err(e) => lock(&problems, format!("acquire: {e}")),
                }
            }
        }
    });
    futures::future::join_all(clients).await;
    let problems = std::mem::take(&mut *problems.lock().unwrap_or_else(|p| p.into_inner()));
    check!(
        problems.is_empty(),
        "{} problems, first: {:?}",
        problems.len(),
        problems.first()
    );
    let takeovers = *takeovers.lock().unwrap_or_else(|p| p.into_inner());
    let wins = *wins.lock().unwrap_or_else(|p| p.into_inner());
    check!(
        takeovers >= 1,
        "no abandoned lease was taken over within {RUN:?} ({wins} wins): expiry never \
         entered the race"
    );
    Ok(())
}

/// S4.4: a `Held` reply's `holder_remaining` is the holder's time by the
/// backend's clock. A 3 s holder left to expire (not renewed after 0.5 s); a
/// candidate's acquire answered `Held` with `holder_remaining` `R` means a
/// probe sent at `sent + R·(1 − RATE) − EARLY` still finds it held, and one
/// sent at `reply + R·(1 + RATE) + LATE` wins it with a higher token. A
/// backend that answers `None` (it cannot tell cheaply, and broadcasts the
/// expiry instead) passes.
pub(super) async fn holder_remaining_then_takeover<F: Factory>(
    f: &F,
    ns: &str,
) -> Result<(), Step> {
    let lease = Duration::from_secs(3);
    let b = f.connect(ns).await?;
    let c = f.connect(ns).await?;
    let mut inconclusive = Vec::new();
    for attempt in 0..ATTEMPTS {
        let a = b.open_session(lease).await?.session;
        let o = c.open_session(LONG).await?.session;
        let n = name(&format!("heldfor.{attempt}"))?;
        let t = won(&b, a, &n).await?;
        sleep(Duration::from_millis(500)).await;
        let sent = Instant::now();
        let out = c.acquire(o, &n).await?;
        let got = Instant::now();
        let r = match out {
            AcquireOutcome::Held {
                holder,
                holder_remaining,
                ..
            } => {
                check!(
                    holder.is_none_or(|h| h == a),
                    "`{n}` held by {holder:?}, expected {a}"
                );
                match holder_remaining {
                    None => {
                        let _ = b.close_session(a).await;
                        let _ = c.close_session(o).await;
                        return Ok(());
                    }
                    Some(r) => r,
                }
            }
            other => {
                return Err(Step::Fail(format!(
                    "acquire of `{n}` held by a live session gave {other:?}"
                )))
            }
        };
        // Opened before `sent` and never renewed: at most a whole lease left,
        // and no more than the lease minus what passed since it won.
        check!(
            r <= lease && r > Duration::ZERO,
            "holder_remaining {r:?} for a {lease:?} session"
        );
        let bound = live_until(sent, r);
        let Some(probe_at) = bound.checked_sub(EARLY) else {
            return Err(Step::Fail("holder_remaining too short to probe".into()));
        };
        sleep_until(probe_at).await;
        match still_held(&c, o, &n, a, bound).await? {
            None => {
                inconclusive.push(format!("probe reply after the bound (attempt {attempt})"));
                let _ = b.close_session(a).await;
                let _ = c.close_session(o).await;
                continue;
            }
            Some(false) => {
                return Err(Step::Fail(format!(
                    "`{n}` was won before the holder_remaining time {r:?} ran out: \
                     it must be the holder's remaining time (S4.4)"
                )))
            }
            Some(true) => {}
        }
        sleep_until(got + r.mul_f64(1.0 + RATE) + LATE).await;
        match c.acquire(o, &n).await? {
            AcquireOutcome::Won { token, .. } => check!(
                token > t,
                "takeover of `{n}` got token {token}, not above {t}"
            ),
            other => {
                return Err(Step::Fail(format!(
                    "`{n}` still {other:?} {LATE:?} after the holder_remaining time {r:?} \
                     ran out: a candidate timed by it would miss the expiry (S4.4)"
                )))
            }
        }
        let _ = c.close_session(o).await;
        return Ok(());
    }
    Err(Step::Fail(format!(
        "every probe was inconclusive (machine too slow): {inconclusive:?}"
    )))
}
