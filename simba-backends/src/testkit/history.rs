//! History check: several clients issue random operations on one lease name
//! against a backend, each call's invocation and completion recorded on one
//! monotonic clock ([`record`]); [`check`] then verifies the history
//!
//! * against Simba's one **sequential lease model**
//!   ([`simba_core::model`], the model `MemoryBackend` and the simulation's
//!   backend run), by a Wing–Gong style search for a linearization
//!   (Knossos / porcupine family): an order of the calls that respects real
//!   time (a call that completed before another was invoked comes first) in
//!   which the model, run call by call, gives every observed answer; and
//! * against two **direct invariants**: tokens strictly increase per name
//!   (a term that began after another term's win has a greater token, and
//!   no token is won by two sessions), and no two sessions are both told they
//!   own the name while both believe themselves live (S3.2, S1.2).
//!
//! # Expiry windows
//!
//! What a call does to the name (who holds it, which token a new term gets,
//! what a release or a close frees, which token a renewal lists) is decided
//! by the shared model's per-name transitions, [`LeaseState`]. What the
//! checker adds is the judgement those transitions take as an input: is the
//! caller, or the holder, still live? The model proper judges by one exact
//! expiry instant; here an expiry is only known as a window, so the checker
//! judges as follows and passes its judgement in.
//!
//! Expiry makes the answers depend on time, and the backend's clock is not
//! the client's. The checker gives each call a *linearization time* inside
//! its own interval `[invocation, completion]` widened by a tolerance
//! ([`Check::tolerance`]), never earlier than the previous call's in the
//! order. A session opened or renewed at linearization time `t` expires at
//! `t + lease`, so its expiry is known only as a window `[lo, hi]`. A call
//! whose answer says "live" (a renewal that succeeded, an acquire held by
//! that holder) needs `hi + tolerance > start of the call's window`; an
//! answer saying "expired" (`Expired`, a takeover with a greater token) needs
//! `lo - tolerance <= end of the call's window`, and moves the earliest
//! linearization time of later calls past `lo - tolerance`; an expired
//! session never comes back (S1.2). Release and close need no liveness.
//! The model is thus generous at the edges of an expiry (by the tolerance),
//! and exact everywhere else: a takeover of a holder whose renewal completed
//! less than `lease - tolerance` before is always a violation.
//!
//! A call that failed has an unknown outcome: the search may place it
//! anywhere after its invocation with any outcome the model allows, or
//! nowhere.

use crate::Backend;
use futures::future::join_all;
use simba_core::model::{Acquired, LeaseState};
use simba_core::{AcquireOutcome, LeaseName, RenewError, SessionId, Token};
use std::collections::BTreeMap;
use std::fmt;
use std::time::{Duration, Instant};

/// One call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// `open_session(lease)`.
    Open,
    /// `renew(session)`.
    Renew(SessionId),
    /// `acquire(session, name)`.
    Acquire(SessionId),
    /// `release(session, name, token)`.
    Release(SessionId, Token),
    /// `close_session(session)`.
    Close(SessionId),
    /// `withdraw(session, name)` (S4.5; only in a queueing history).
    Withdraw(SessionId),
}

/// What a call answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ret {
    /// A session was opened.
    Opened(SessionId),
    /// A renewal succeeded; the token if the name is listed as owned.
    Renewed(Option<Token>),
    /// `Expired` (renew or acquire).
    Expired,
    /// Acquire won.
    Won(Token),
    /// Acquire found the lease held (holder and token where reported).
    Held(Option<SessionId>, Option<Token>),
    /// Release or close returned `Ok`.
    Done,
    /// The call failed: its outcome is unknown.
    Failed,
}

/// One recorded call: times are microseconds since the history began.
#[derive(Clone, Debug)]
pub struct Event {
    /// The client that made it.
    pub client: usize,
    /// The call.
    pub op: Op,
    /// Its answer.
    pub ret: Ret,
    /// When it was invoked.
    pub inv: i64,
    /// When it completed.
    pub cmp: i64,
}

/// A recorded history on one lease name.
#[derive(Clone, Debug)]
pub struct History {
    /// The lease duration of every session.
    pub lease: Duration,
    /// The calls, in order of invocation.
    pub events: Vec<Event>,
    /// The backend queues `Held` acquires ([`Load::queueing`]).
    pub queueing: bool,
}

/// How [`record`] drives the clients.
#[derive(Clone, Debug)]
pub struct Load {
    /// Calls per client.
    pub calls: usize,
    /// Lease duration of every session (short, so that expiry happens).
    pub lease: Duration,
    /// Seed of the clients' choices.
    pub seed: u64,
    /// The backend keeps a `Held` acquire's place in a queue on the server
    /// (ZooKeeper; S4.2, S4.5): the lease passes to the first live waiter
    /// the moment its holder is gone, and the load also withdraws. The model
    /// then queues a caller answered `Held` until it wins, withdraws, closes
    /// or expires.
    pub queueing: bool,
}

/// A small deterministic generator (xorshift*), seeded per client.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

fn micros_since(start: Instant) -> i64 {
    i64::try_from(start.elapsed().as_micros()).unwrap_or(i64::MAX)
}

/// Runs one client per backend handle (clients of one namespace), each
/// issuing `load.calls` random calls on `name`, and returns the history.
/// Clients sometimes pause longer than the lease, so that sessions expire
/// and others take over.
pub async fn record<B: Backend>(clients: &[B], name: &LeaseName, load: &Load) -> History {
    let start = Instant::now();
    let runs = clients.iter().enumerate().map(|(i, b)| {
        let mut rng = Rng(load
            .seed
            .wrapping_add(0x9E37_79B9_7F4A_7C15u64.wrapping_mul(i as u64 + 1))
            | 1);
        async move {
            let mut out = Vec::with_capacity(load.calls);
            let mut session: Option<SessionId> = None;
            let mut token: Option<Token> = None;
            let lease_ms = u64::try_from(load.lease.as_millis()).unwrap_or(1000).max(4);
            for _ in 0..load.calls {
                // Think time: mostly short, sometimes past the lease.
                let pause = match rng.below(20) {
                    0 => lease_ms + lease_ms / 4,
                    1..=3 => lease_ms / 2,
                    _ => rng.below(lease_ms / 8 + 1),
                };
                super::sleep(Duration::from_millis(pause)).await;
                let op = match (session, rng.below(10)) {
                    (None, _) => Op::Open,
                    (Some(s), 0..=3) => Op::Renew(s),
                    (Some(s), 4..=6) => Op::Acquire(s),
                    (Some(s), 7 | 8) => match token {
                        Some(t) => Op::Release(s, t),
                        None => Op::Acquire(s),
                    },
                    (Some(s), _) if load.queueing && rng.below(2) == 0 => Op::Withdraw(s),
                    (Some(s), _) => Op::Close(s),
                };
                let inv = micros_since(start);
                let ret = match &op {
                    Op::Open => match b.open_session(load.lease).await {
                        Ok(g) => {
                            session = Some(g.session);
                            token = None;
                            Ret::Opened(g.session)
                        }
                        Err(_) => Ret::Failed,
                    },
                    Op::Renew(s) => match b.renew(*s).await {
                        Ok(r) => {
                            let t = r.owned.iter().find(|(n, _)| n == name).map(|(_, t)| *t);
                            token = t;
                            Ret::Renewed(t)
                        }
                        Err(RenewError::Expired) => {
                            session = None;
                            Ret::Expired
                        }
                        Err(_) => Ret::Failed,
                    },
                    Op::Acquire(s) => match b.acquire(*s, name).await {
                        Ok(AcquireOutcome::Won { token: t, .. }) => {
                            token = Some(t);
                            Ret::Won(t)
                        }
                        Ok(AcquireOutcome::Held {
                            holder, token: t, ..
                        }) => Ret::Held(holder, t),
                        Ok(AcquireOutcome::Expired) => {
                            session = None;
                            Ret::Expired
                        }
                        Err(_) => Ret::Failed,
                    },
                    Op::Release(s, t) => match b.release(*s, name, *t).await {
                        Ok(()) => {
                            token = None;
                            Ret::Done
                        }
                        Err(_) => Ret::Failed,
                    },
                    Op::Withdraw(s) => match b.withdraw(*s, name).await {
                        Ok(()) => Ret::Done,
                        Err(_) => Ret::Failed,
                    },
                    Op::Close(s) => match b.close_session(*s).await {
                        Ok(()) => {
                            session = None;
                            token = None;
                            Ret::Done
                        }
                        Err(_) => Ret::Failed,
                    },
                };
                let cmp = micros_since(start);
                out.push(Event {
                    client: i,
                    op,
                    ret,
                    inv,
                    cmp,
                });
            }
            out
        }
    });
    let mut events: Vec<Event> = join_all(runs).await.into_iter().flatten().collect();
    events.sort_by_key(|e| (e.inv, e.cmp));
    History {
        lease: load.lease,
        events,
        queueing: load.queueing,
    }
}

/// The checker's settings.
#[derive(Clone, Debug)]
pub struct Check {
    /// How far a call's linearization time may lie outside its interval, and
    /// the slack at the edges of an expiry (clock-rate differences, the
    /// backend clock's resolution).
    pub tolerance: Duration,
    /// How long after its expiry a backend whose expiry is lazy may still
    /// hold a session (late is safe: no holder is cut short, only fail-over
    /// waits). Widens only the "may still be alive" side of the model; the
    /// "must still be alive" side keeps [`Check::tolerance`].
    pub late: Duration,
    /// The search gives up (inconclusive) after this many model steps.
    pub budget: u64,
}

impl Default for Check {
    fn default() -> Self {
        Check {
            tolerance: Duration::from_millis(5),
            late: Duration::ZERO,
            budget: 5_000_000,
        }
    }
}

/// What [`check`] found.
#[derive(Clone, Debug, Default)]
pub struct Verdict {
    /// Calls in the history.
    pub calls: usize,
    /// Wins that started a new term (takeovers and free wins).
    pub terms: usize,
    /// Calls that failed (unknown outcome).
    pub failed: usize,
    /// Model steps the search took.
    pub steps: u64,
    /// Violations of the direct invariants.
    pub invariant_violations: Vec<String>,
    /// `Some(why)` if no linearization exists (or the search gave up).
    pub not_linearizable: Option<String>,
}

impl Verdict {
    /// Whether every check held.
    pub fn ok(&self) -> bool {
        self.invariant_violations.is_empty() && self.not_linearizable.is_none()
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} calls, {} terms, {} failed calls, {} search steps: ",
            self.calls, self.terms, self.failed, self.steps
        )?;
        if self.ok() {
            return write!(f, "linearizable, invariants hold");
        }
        if let Some(why) = &self.not_linearizable {
            write!(f, "NOT LINEARIZABLE ({why}); ")?;
        }
        for v in &self.invariant_violations {
            write!(f, "INVARIANT: {v}; ")?;
        }
        Ok(())
    }
}

/// Checks `h` (see the module docs).
pub fn check(h: &History, c: &Check) -> Verdict {
    let mut v = Verdict {
        calls: h.events.len(),
        failed: h.events.iter().filter(|e| e.ret == Ret::Failed).count(),
        ..Verdict::default()
    };
    invariants(h, c, &mut v);
    let tol = i64::try_from(c.tolerance.as_micros()).unwrap_or(0);
    let lease = i64::try_from(h.lease.as_micros()).unwrap_or(i64::MAX / 4);
    let mut search = Search {
        h,
        tol,
        late: i64::try_from(c.late.as_micros()).unwrap_or(0),
        lease,
        steps: 0,
        budget: c.budget,
        done: vec![false; h.events.len()],
        best: 0,
        best_why: String::new(),
    };
    let start = Model {
        queueing: h.queueing,
        ..Model::default()
    };
    let found = search.dfs(&start, 0, 0);
    v.steps = search.steps;
    if !found {
        v.not_linearizable = Some(if search.steps >= c.budget {
            format!("search budget of {} steps exhausted", c.budget)
        } else {
            format!(
                "at most {} of {} calls linearize; first blocked: {}",
                search.best,
                h.events.len(),
                search.best_why
            )
        });
    }
    v
}

/// Direct invariants: token order and no overlapping terms.
fn invariants(h: &History, c: &Check, v: &mut Verdict) {
    let tol = i64::try_from(c.tolerance.as_micros()).unwrap_or(0);
    let lease = i64::try_from(h.lease.as_micros()).unwrap_or(i64::MAX / 4);
    // Terms: (session, token) -> first win completion.
    let mut terms: BTreeMap<(SessionId, u64), i64> = BTreeMap::new();
    let mut by_token: BTreeMap<u64, SessionId> = BTreeMap::new();
    for e in &h.events {
        if let (Op::Acquire(s), Ret::Won(t)) = (&e.op, &e.ret) {
            let t = t.get();
            if let Some(other) = by_token.insert(t, *s) {
                if other != *s {
                    v.invariant_violations
                        .push(format!("token {t} was won by two sessions {other} and {s}"));
                }
            }
            terms.entry((*s, t)).or_insert(e.cmp);
        }
    }
    v.terms = terms.len();
    let wins: Vec<(SessionId, u64, i64)> = terms.iter().map(|(&(s, t), &at)| (s, t, at)).collect();
    for &(s1, t1, at1) in &wins {
        for e in &h.events {
            if let (Op::Acquire(s2), Ret::Won(t2)) = (&e.op, &e.ret) {
                if *s2 != s1 && at1 < e.inv && t2.get() <= t1 {
                    v.invariant_violations.push(format!(
                        "session {s2} won token {t2} at {} µs after session {s1} had won the higher or equal token {t1} at {at1} µs",
                        e.inv
                    ));
                }
            }
        }
    }
    // When does each client believe its term valid? From the win's
    // completion until the earliest of: its release or close being
    // invoked, an `Expired` answer, or `lease - tolerance` after the
    // invocation of its latest successful open or renewal.
    let valid = |s: SessionId, t: u64, at: i64, x: i64| -> bool {
        if x < at {
            return false;
        }
        let mut until = i64::MIN;
        for e in &h.events {
            if e.inv > x {
                break;
            }
            let mine = match &e.op {
                Op::Open => matches!(e.ret, Ret::Opened(o) if o == s),
                Op::Renew(o)
                | Op::Acquire(o)
                | Op::Close(o)
                | Op::Release(o, _)
                | Op::Withdraw(o) => *o == s,
            };
            if !mine {
                continue;
            }
            match (&e.op, &e.ret) {
                (Op::Open, Ret::Opened(_)) | (Op::Renew(_), Ret::Renewed(_)) if e.cmp <= x => {
                    until = until.max(e.inv + lease - tol);
                }
                (Op::Release(_, rt), _) if rt.get() == t => return false,
                (Op::Close(_), _) | (_, Ret::Expired) => return false,
                _ => {}
            }
        }
        x < until
    };
    let mut probes: Vec<i64> = h.events.iter().map(|e| e.cmp).collect();
    probes.sort_unstable();
    probes.dedup();
    'outer: for (i, &(s1, t1, at1)) in wins.iter().enumerate() {
        for &(s2, t2, at2) in &wins[i + 1..] {
            if s1 == s2 {
                continue;
            }
            if let Some(x) = probes
                .iter()
                .find(|&&x| valid(s1, t1, at1, x) && valid(s2, t2, at2, x))
            {
                v.invariant_violations.push(format!(
                    "two valid terms at {x} µs: session {s1} with token {t1} and session {s2} with token {t2}"
                ));
                break 'outer;
            }
        }
    }
}

/// The search's state for one lease name: the shared model's record of the
/// name, and the expiry windows of the sessions (see the module docs).
#[derive(Clone, Debug, Default)]
struct Model {
    /// Live or possibly-live sessions: expiry window `[lo, hi]` (µs).
    sessions: BTreeMap<SessionId, (i64, i64)>,
    /// Sessions known expired or closed (never come back, S1.2).
    dead: Vec<SessionId>,
    /// The name, run by the shared model's transitions.
    lease: LeaseState,
    /// Queueing histories: the sessions answered `Held` that still wait,
    /// in order.
    queue: Vec<SessionId>,
    /// Queueing histories: the first waiter, which holds the name since its
    /// holder went but has not yet been told (its token is learned from its
    /// `Won` answer).
    next: Option<SessionId>,
    queueing: bool,
}

impl Model {
    fn may_live(&self, s: SessionId, a: i64, tol: i64) -> bool {
        self.sessions.get(&s).is_some_and(|&(_, hi)| hi + tol > a)
    }
    fn may_die(&self, s: SessionId, b: i64, tol: i64) -> bool {
        match self.sessions.get(&s) {
            Some(&(lo, _)) => lo - tol <= b,
            None => true,
        }
    }
    fn kill(&mut self, s: SessionId) {
        self.sessions.remove(&s);
        if !self.dead.contains(&s) {
            self.dead.push(s);
        }
        self.lease.drop_holder(s);
        self.leave_queue(s);
    }
    /// Who holds the name: the holder of record or the untold first waiter.
    fn holder(&self) -> Option<SessionId> {
        self.lease.holder().or(self.next)
    }
    /// `s` no longer waits (or holds untold); the name passes on if free.
    fn leave_queue(&mut self, s: SessionId) {
        self.queue.retain(|q| *q != s);
        if self.next == Some(s) {
            self.next = None;
        }
        self.pass_on();
    }
    /// A queueing backend hands a free name to its first waiter at once.
    fn pass_on(&mut self) {
        if self.queueing && self.holder().is_none() && !self.queue.is_empty() {
            self.next = Some(self.queue.remove(0));
        }
    }
}

struct Search<'h> {
    h: &'h History,
    tol: i64,
    late: i64,
    lease: i64,
    steps: u64,
    budget: u64,
    done: Vec<bool>,
    best: usize,
    best_why: String,
}

impl Search<'_> {
    /// Applies event `e` at the earliest time `>= t`: the new model and the
    /// new earliest time, or why the answer is impossible.
    fn apply(&self, m: &Model, e: &Event, t: i64) -> Result<(Model, i64), String> {
        let tol = self.tol;
        let late = self.late;
        let a = t.max(e.inv - tol);
        let b = e.cmp + tol;
        if a > b {
            return Err(format!("{:?} cannot fit after time {t}", e.op));
        }
        let mut m = m.clone();
        let mut next = a;
        let bad = |why: &str| {
            Err(format!(
                "{:?} -> {:?} at [{}, {}]: {why}",
                e.op, e.ret, e.inv, e.cmp
            ))
        };
        match (&e.op, &e.ret) {
            (Op::Open, Ret::Opened(s)) => {
                m.sessions.insert(*s, (a + self.lease, b + self.lease));
            }
            (Op::Renew(s), Ret::Renewed(owned)) => {
                if !m.may_live(*s, a, tol + late) {
                    return bad("the session had expired");
                }
                let expect = m.lease.owned_by(*s);
                if *owned != expect {
                    let expect = expect.map(Token::get);
                    return bad(&format!("the model's owned token is {expect:?}"));
                }
                m.sessions.insert(*s, (a + self.lease, b + self.lease));
            }
            (Op::Renew(s) | Op::Acquire(s) | Op::Withdraw(s), Ret::Expired) => {
                if !m.may_die(*s, b, tol) {
                    return bad("the session was surely live");
                }
                if let Some(&(lo, _)) = m.sessions.get(s) {
                    next = next.max(lo - tol);
                }
                m.kill(*s);
            }
            (Op::Acquire(s), Ret::Won(tok)) => {
                if !m.may_live(*s, a, tol + late) {
                    return bad("the caller's session had expired");
                }
                // A win over another holder judges that holder expired (in a
                // queueing history, also every waiter the name passed to
                // before the caller).
                while let Some(h) = m.holder().filter(|h| h != s) {
                    if !m.may_die(h, b, tol) {
                        return bad(&format!("holder {h} was surely live"));
                    }
                    if let Some(&(lo, _)) = m.sessions.get(&h) {
                        next = next.max(lo - tol);
                    }
                    m.kill(h);
                }
                if m.next == Some(*s) {
                    m.next = None;
                }
                m.queue.retain(|q| q != s);
                // The model proposes the observed token: S3.2 asks for a
                // greater token, not the next integer (revision-based tokens,
                // etcd and ZooKeeper, skip values).
                let last = m.lease.last_token().map_or(0, Token::get);
                match m.lease.acquire(*s, false, tok.get()) {
                    Ok(Acquired::Kept(kept)) if kept != *tok => {
                        return bad(&format!("re-acquire must keep token {kept}"));
                    }
                    Ok(Acquired::NewTerm { token, .. }) if token != *tok => {
                        return bad(&format!("a new term's token must exceed {last}"));
                    }
                    Ok(Acquired::Kept(_) | Acquired::NewTerm { .. }) => {}
                    Ok(Acquired::Held { .. }) | Err(_) => {
                        return bad("the model cannot grant this token");
                    }
                }
            }
            (Op::Acquire(s), Ret::Held(holder, tok)) => {
                if !m.may_live(*s, a, tol + late) {
                    return bad("the caller's session had expired");
                }
                // Queueing: a holder reported as someone else, or surely
                // expired, is gone, and the name passed to its next waiter.
                while m.queueing {
                    let Some(h) = m.holder().filter(|h| h != s) else {
                        break;
                    };
                    let other = holder.is_some_and(|x| x != h);
                    if !other && m.may_live(h, a, tol + late) {
                        break;
                    }
                    if !m.may_die(h, b, tol) {
                        return bad(&format!("holder {h} was surely live"));
                    }
                    if let Some(&(lo, _)) = m.sessions.get(&h) {
                        next = next.max(lo - tol);
                    }
                    m.kill(h);
                }
                let Some(h) = m.holder().filter(|h| h != s) else {
                    return bad("the lease was free or the caller's");
                };
                if !m.may_live(h, a, tol + late) {
                    return bad(&format!("holder {h} had surely expired"));
                }
                if m.next == Some(h) {
                    // The untold first waiter holds it: no token yet.
                    if holder.is_some_and(|x| x != h) {
                        return bad(&format!("the model's holder is {h}, not yet told"));
                    }
                    if !m.queue.contains(s) {
                        m.queue.push(*s);
                    }
                    if next > b {
                        return bad("its expiry judgement lies after its completion");
                    }
                    return Ok((m, next));
                }
                // The holder is judged live: the model must answer `Held`.
                let Ok(Acquired::Held {
                    holder: mh,
                    token: mt,
                }) = m.lease.acquire(*s, true, 0)
                else {
                    return bad("the lease was free or the caller's");
                };
                if holder.is_some_and(|x| x != mh) || tok.is_some_and(|x| x != mt) {
                    return bad(&format!("the model's holder is {mh} with token {mt}"));
                }
                if m.queueing && !m.queue.contains(s) {
                    m.queue.push(*s);
                }
            }
            (Op::Release(s, tok), Ret::Done) => {
                if m.lease.release(*s, *tok) {
                    m.pass_on();
                }
            }
            (Op::Close(s), Ret::Done) => {
                m.kill(*s);
            }
            (Op::Withdraw(s), Ret::Done) => {
                // Never ends a term; a waiter (told or not) leaves.
                m.leave_queue(*s);
            }
            _ => return bad("an answer this call cannot give"),
        }
        if next > b {
            return bad("its expiry judgement lies after its completion");
        }
        Ok((m, next))
    }

    /// Outcomes a failed call may have had (besides none at all).
    fn failed_variants(m: &Model, e: &Event) -> Vec<Ret> {
        match &e.op {
            Op::Acquire(_) => {
                let last = m.lease.last_token().map_or(0, Token::get);
                let mut v: Vec<Ret> = [last.saturating_add(1), last.max(1)]
                    .into_iter()
                    .filter_map(Token::new)
                    .map(Ret::Won)
                    .collect();
                if m.queueing {
                    // It may have left a place in the queue.
                    v.push(Ret::Held(None, None));
                }
                v
            }
            Op::Renew(_) => vec![Ret::Expired],
            Op::Release(..) | Op::Close(_) | Op::Withdraw(_) => vec![Ret::Done],
            // A failed open leaves at most a session nobody uses.
            Op::Open => vec![],
        }
    }

    fn dfs(&mut self, m: &Model, t: i64, placed: usize) -> bool {
        if placed == self.h.events.len() {
            return true;
        }
        if self.steps >= self.budget {
            return false;
        }
        let h = self.h;
        // Calls that may come next: not placed, and invoked before every
        // unplaced call completed.
        let horizon = h
            .events
            .iter()
            .zip(&self.done)
            .filter(|(_, d)| !**d)
            .map(|(e, _)| e.cmp)
            .min()
            .unwrap_or(i64::MAX);
        for (i, e) in h.events.iter().enumerate() {
            if self.done[i] {
                continue;
            }
            if e.inv > horizon {
                break; // events are sorted by invocation
            }
            self.steps += 1;
            let tries: Vec<Result<(Model, i64), String>> = if e.ret == Ret::Failed {
                let mut v = vec![Ok((m.clone(), t))]; // no effect
                for r in Self::failed_variants(m, e) {
                    // It may have taken effect long after it returned.
                    let mut alt = e.clone();
                    alt.ret = r;
                    alt.cmp = i64::MAX / 4;
                    v.push(self.apply(m, &alt, t));
                }
                v
            } else {
                vec![self.apply(m, e, t)]
            };
            for attempt in tries {
                match attempt {
                    Ok((m2, t2)) => {
                        self.done[i] = true;
                        if placed + 1 > self.best {
                            self.best = placed + 1;
                        }
                        let ok = self.dfs(&m2, t2, placed + 1);
                        self.done[i] = false;
                        if ok {
                            return true;
                        }
                    }
                    Err(why) => {
                        if placed >= self.best {
                            self.best = placed;
                            self.best_why = why;
                        }
                    }
                }
            }
            if self.steps >= self.budget {
                return false;
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used)]
    use super::*;

    fn sid(n: u128) -> SessionId {
        SessionId::from_u128(n)
    }

    fn tok(n: u64) -> Token {
        Token::new(n).expect("test tokens are > 0")
    }

    /// A history of sequential calls, 100 µs apart, with 10 s sessions.
    fn history(queueing: bool, calls: &[(Op, Ret)]) -> History {
        let events = calls
            .iter()
            .enumerate()
            .map(|(i, (op, ret))| Event {
                client: 0,
                op: op.clone(),
                ret: ret.clone(),
                inv: i as i64 * 100,
                cmp: i as i64 * 100 + 50,
            })
            .collect();
        History {
            lease: Duration::from_secs(10),
            events,
            queueing,
        }
    }

    fn opened(n: u128) -> (Op, Ret) {
        (Op::Open, Ret::Opened(sid(n)))
    }

    fn linearizes(h: &History) -> bool {
        check(h, &Check::default()).ok()
    }

    /// A held, B waits, A releases: B's next acquire wins.
    fn base() -> Vec<(Op, Ret)> {
        vec![
            opened(1),
            opened(2),
            opened(3),
            (Op::Acquire(sid(1)), Ret::Won(tok(10))),
            (Op::Acquire(sid(2)), Ret::Held(Some(sid(1)), None)),
            (Op::Release(sid(1), tok(10)), Ret::Done),
        ]
    }

    #[test]
    fn a_queueing_history_passes_the_name_to_the_first_waiter() {
        let mut calls = base();
        calls.push((Op::Acquire(sid(3)), Ret::Held(Some(sid(2)), None)));
        calls.push((Op::Acquire(sid(2)), Ret::Won(tok(11))));
        calls.push((Op::Renew(sid(2)), Ret::Renewed(Some(tok(11)))));
        assert!(linearizes(&history(true, &calls)));
        // Without a queue the name was free after the release.
        assert!(!linearizes(&history(false, &calls)));
    }

    #[test]
    fn a_queueing_backend_that_forgets_its_waiter_is_caught() {
        let mut calls = base();
        // The name belongs to B (live): C must not win it.
        calls.push((Op::Acquire(sid(3)), Ret::Won(tok(12))));
        assert!(!linearizes(&history(true, &calls)));
        assert!(linearizes(&history(false, &calls)));
    }

    #[test]
    fn a_withdrawn_waiter_is_skipped_and_never_ends_a_term() {
        let mut calls = vec![
            opened(1),
            opened(2),
            opened(3),
            (Op::Acquire(sid(1)), Ret::Won(tok(10))),
            (Op::Acquire(sid(2)), Ret::Held(Some(sid(1)), None)),
            (Op::Withdraw(sid(2)), Ret::Done),
            (Op::Withdraw(sid(1)), Ret::Done),
            (Op::Renew(sid(1)), Ret::Renewed(Some(tok(10)))),
            (Op::Release(sid(1), tok(10)), Ret::Done),
        ];
        calls.push((Op::Acquire(sid(3)), Ret::Won(tok(12))));
        assert!(linearizes(&history(true, &calls)));
        // A waiter told nothing yet but holding (A released) that withdraws
        // passes the name on.
        let mut calls = base();
        calls.push((Op::Withdraw(sid(2)), Ret::Done));
        calls.push((Op::Acquire(sid(3)), Ret::Won(tok(12))));
        assert!(linearizes(&history(true, &calls)));
    }

    #[test]
    fn a_waiter_winning_while_its_holder_is_surely_live_is_caught() {
        let calls = vec![
            opened(1),
            opened(2),
            (Op::Acquire(sid(1)), Ret::Won(tok(10))),
            (Op::Acquire(sid(2)), Ret::Held(Some(sid(1)), None)),
            (Op::Acquire(sid(2)), Ret::Won(tok(11))),
        ];
        assert!(!linearizes(&history(true, &calls)));
    }
}
