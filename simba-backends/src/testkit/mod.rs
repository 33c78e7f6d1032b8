//! The conformance suite (feature `testkit`): one set of cases that every
//! backend must pass, the in-memory one included. It is runtime-agnostic
//! (timers from `futures-timer`), so any crate's tests can run it:
//!
//! ```
//! use simba_backends::testkit::{run_selected, Capability, Factory};
//! use simba_backends::MemoryBackend;
//! use simba_core::BackendError;
//! use futures::future::{BoxFuture, FutureExt};
//! use std::collections::HashMap;
//! use std::sync::Mutex;
//!
//! /// One shared in-memory state per namespace.
//! #[derive(Default)]
//! struct Memory(Mutex<HashMap<String, MemoryBackend>>);
//!
//! impl Factory for Memory {
//!     type Backend = MemoryBackend;
//!     fn connect<'a>(&'a self, ns: &'a str) -> BoxFuture<'a, Result<MemoryBackend, BackendError>> {
//!         let b = self.0.lock().unwrap().entry(ns.to_owned()).or_default().clone();
//!         async move { Ok(b) }.boxed()
//!     }
//!     // This factory cannot kill a connection mid-call, and its calls never
//!     // wait on one another: it says so, and the cases that need these are
//!     // skipped (any undeclared skip fails the suite).
//!     fn lacks(&self) -> Vec<Capability> {
//!         vec![Capability::KillConnectionMidCall, Capability::LockHold]
//!     }
//! }
//!
//! // `run_all` runs every case (about 30 s: several wait out 2-4 s leases);
//! // here, the cases that need no waiting.
//! let quick = |case: &str| {
//!     !case.contains("expir") && !case.contains("remaining") && !case.contains("a_renewal")
//! };
//! let report = futures::executor::block_on(run_selected(&Memory::default(), quick));
//! println!("{report}");
//! report.assert_passed();
//! // the killed-connection case and the five interleaving cases
//! assert_eq!(report.skipped().len(), 6);
//! ```
//!
//! Each case runs in its own namespace (a fresh table prefix on SQL), uses
//! leases of 2 s where it needs expiry, and checks only bounds that a busy
//! machine cannot break (a slow machine only makes sleeps longer).

pub use interleave::{Hold, HoldError, WaitSeen};

use crate::Backend;
use futures::future::{BoxFuture, FutureExt};
use futures::StreamExt;
use simba_core::{
    AcquireOutcome, BackendError, BackendErrorKind, LeaseName, RenewError, SessionId, Token,
};
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How the suite gets clients of the backend under test.
pub trait Factory: Send + Sync {
    /// The backend under test.
    type Backend: Backend;

    /// A new client of namespace `ns`. Clients of one namespace share state
    /// (like processes sharing a database); different namespaces never see
    /// each other (on SQL: different table prefixes). `ns` is short
    /// (`[a-z0-9]`, at most 4 characters); make it unique per run yourself if
    /// the state outlives the run (e.g. prefix it with a random tag).
    ///
    /// # Errors
    /// A [`BackendError`] if connecting failed; the case fails with it.
    fn connect<'a>(&'a self, ns: &'a str) -> BoxFuture<'a, Result<Self::Backend, BackendError>>;

    /// Runs `backend.acquire(session, name)` while killing the connection
    /// that serves it (in the middle of the call), and returns what the
    /// acquire returned. `None` if this backend cannot do that; the case is
    /// then skipped.
    fn acquire_while_killed<'a>(
        &'a self,
        backend: &'a Self::Backend,
        session: SessionId,
        name: &'a LeaseName,
    ) -> Option<BoxFuture<'a, Result<AcquireOutcome, BackendError>>> {
        let _ = (backend, session, name);
        None
    }

    /// The interleaving hook (see [`Hold`]): opens a backend transaction on a
    /// connection of its own that holds locks until it commits. The default
    /// declares the hook missing; a backend whose calls never wait on each
    /// other returns [`HoldError::NotApplicable`] saying why, and the
    /// interleaving cases are reported as skipped with that reason.
    fn hold<'a>(
        &'a self,
        backend: &'a Self::Backend,
    ) -> BoxFuture<'a, Result<Box<dyn Hold>, HoldError>> {
        let _ = backend;
        futures::future::ready(Err(HoldError::NotApplicable(
            "the factory provides no hold hook".into(),
        )))
        .boxed()
    }

    /// What the backend (or this factory) does not support. A case that
    /// needs a [`Capability`] may be skipped only if it is declared here:
    /// [`Report::assert_passed`] fails on any other skip. Default: nothing
    /// lacking.
    fn lacks(&self) -> Vec<Capability> {
        Vec::new()
    }

    /// How much later than the remaining time it reported the backend may
    /// expire a session, where its expiry is lazy (for example a lessor
    /// that looks for expired leases every 500 ms). Late is safe — no holder
    /// loses a lease before its deadline — but slows fail-over, so a factory
    /// states the bound and its reason. Default: none.
    fn expiry_lateness(&self) -> std::time::Duration {
        std::time::Duration::ZERO
    }
}

/// Something a backend may lack. A case that needs it is skipped where it is
/// missing, and the suite accepts the skip only if the factory declared the
/// lack ([`Factory::lacks`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Capability {
    /// Release broadcasts (S4.2): [`Backend::subscribe_releases`] yields freed names.
    ReleaseBroadcast,
    /// Killing the connection that serves a call
    /// ([`Factory::acquire_while_killed`]).
    KillConnectionMidCall,
    /// Holding a backend lock so that another call waits on it
    /// ([`Factory::hold`]), for the interleaving cases. A backend whose calls
    /// never wait on one another (each call atomic on a single-threaded
    /// server, or under one process-wide lock) declares this lack, with the
    /// reason in its `hold` answer.
    LockHold,
    /// One session acted for by two backend instances at once
    /// (`s3_two_concurrent_acquires_by_one_session_win_one_term`). A backend
    /// whose session is bound to the connection that opened it (ZooKeeper)
    /// declares this lack; the engine only ever uses a session through the
    /// instance that opened it.
    SharedSession,
    /// Partitioned groups (S10.1): [`Backend::join_group`] and the members
    /// listed by each renewal.
    Groups,
    /// Schedule slots (S11.1): [`Backend::claim_slot`].
    ScheduleSlots,
}

impl Capability {
    /// The case that needs a capability, if any.
    pub fn needed_by(case: &str) -> Option<Capability> {
        match case {
            "s4_2_release_notifications_arrive" => Some(Capability::ReleaseBroadcast),
            "connection_killed_mid_call_gives_a_typed_error_then_recovers" => {
                Some(Capability::KillConnectionMidCall)
            }
            c if c.starts_with("interleave_") => Some(Capability::LockHold),
            "s3_two_concurrent_acquires_by_one_session_win_one_term" => {
                Some(Capability::SharedSession)
            }
            c if c.starts_with("s10_") => Some(Capability::Groups),
            c if c.starts_with("s11_") => Some(Capability::ScheduleSlots),
            _ => None,
        }
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Capability::ReleaseBroadcast => "release broadcast (S4.2)",
            Capability::KillConnectionMidCall => "killing a connection mid-call",
            Capability::LockHold => "holding a lock another call waits on (interleaving cases)",
            Capability::SharedSession => "one session used through two backend instances",
            Capability::Groups => "partitioned groups (S10)",
            Capability::ScheduleSlots => "schedule slots (S11)",
        })
    }
}

/// How one case ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every check held.
    Passed,
    /// A check failed, with what was seen.
    Failed(String),
    /// The backend cannot run this case (e.g. it has no release broadcast).
    Skipped(String),
}

/// The result of one case.
#[derive(Clone, Debug)]
pub struct CaseResult {
    /// The case's name (it cites the SPEC rule it checks).
    pub case: &'static str,
    /// How it ended.
    pub outcome: Outcome,
    /// How long it took.
    pub elapsed: Duration,
}

/// The results of a suite run.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// The backend's [`Backend::name`], once a client connected.
    pub backend: String,
    /// One entry per case, in order.
    pub results: Vec<CaseResult>,
    /// What the factory declared lacking ([`Factory::lacks`]).
    pub lacks: Vec<Capability>,
}

impl Report {
    /// The failed cases.
    pub fn failures(&self) -> Vec<&CaseResult> {
        self.results
            .iter()
            .filter(|r| matches!(r.outcome, Outcome::Failed(_)))
            .collect()
    }

    /// The skipped cases.
    pub fn skipped(&self) -> Vec<&CaseResult> {
        self.results
            .iter()
            .filter(|r| matches!(r.outcome, Outcome::Skipped(_)))
            .collect()
    }

    /// The skipped cases whose skip no declared lack explains: a case that
    /// needs no capability, or one the factory did not declare lacking.
    pub fn unexplained_skips(&self) -> Vec<&CaseResult> {
        self.skipped()
            .into_iter()
            .filter(|r| Capability::needed_by(r.case).is_none_or(|c| !self.lacks.contains(&c)))
            .collect()
    }

    /// Fails the calling test, listing every failed case and every skip that
    /// no declared lack ([`Factory::lacks`]) explains.
    ///
    /// # Panics
    /// If any case failed or was skipped without a declared reason (this is
    /// a test helper).
    pub fn assert_passed(&self) {
        assert!(self.failures().is_empty(), "conformance failures:\n{self}");
        assert!(
            self.unexplained_skips().is_empty(),
            "conformance cases skipped without a declared lack (Factory::lacks):\n{self}"
        );
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for r in &self.results {
            let (tag, detail) = match &r.outcome {
                Outcome::Passed => ("ok", String::new()),
                Outcome::Failed(m) => ("FAILED", format!(": {m}")),
                Outcome::Skipped(m) => ("skipped", format!(": {m}")),
            };
            writeln!(
                f,
                "[{}] {} ... {tag} ({:.2?}){detail}",
                self.backend, r.case, r.elapsed
            )?;
        }
        let passed = self
            .results
            .iter()
            .filter(|r| r.outcome == Outcome::Passed)
            .count();
        let lacks: Vec<String> = self.lacks.iter().map(ToString::to_string).collect();
        writeln!(
            f,
            "[{}] {passed} of {} cases passed, {} skipped; declared lacking: {}",
            self.backend,
            self.results.len(),
            self.skipped().len(),
            if lacks.is_empty() {
                "nothing".to_owned()
            } else {
                lacks.join(", ")
            }
        )
    }
}

type CaseFn<F> = for<'a> fn(&'a F, &'a str) -> BoxFuture<'a, Result<(), Step>>;

/// Why a case stopped early.
#[derive(Debug)]
pub enum Step {
    /// A check failed.
    Fail(String),
    /// The backend cannot run the case.
    Skip(String),
}

impl From<BackendError> for Step {
    fn from(e: BackendError) -> Self {
        Step::Fail(format!("unexpected backend error: {e}"))
    }
}

impl From<RenewError> for Step {
    fn from(e: RenewError) -> Self {
        Step::Fail(format!("unexpected renew error: {e}"))
    }
}

macro_rules! check {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(Step::Fail(format!($($msg)+)));
        }
    };
}

mod groups;
pub mod history;
mod interleave;
mod timing;

pub use timing::{ATTEMPTS, EARLY, LATE, RATE};

/// The names of all cases, in the order [`run_all`] runs them.
pub fn case_names<F: Factory>() -> Vec<&'static str> {
    cases::<F>().into_iter().map(|(n, _)| n).collect()
}

fn cases<F: Factory>() -> Vec<(&'static str, CaseFn<F>)> {
    vec![
        (
            "s1_open_renew_expire_on_backend_clock_and_no_resurrection",
            |f, ns| open_renew_expire(f, ns).boxed(),
        ),
        ("s3_acquire_contention_and_idempotent_reacquire", |f, ns| {
            contention(f, ns).boxed()
        }),
        ("s1_2_takeover_after_expiry_with_a_higher_token", |f, ns| {
            takeover_after_expiry(f, ns).boxed()
        }),
        (
            "s3_2_tokens_strictly_increase_across_releases_closes_and_terms",
            |f, ns| token_monotonicity(f, ns).boxed(),
        ),
        ("s3_5_stale_release_is_a_no_op", |f, ns| {
            stale_release(f, ns).boxed()
        }),
        ("s4_7_batch_answers_each_call_as_alone", |f, ns| {
            batch_case(f, ns).boxed()
        }),
        (
            "s4_5_a_withdrawn_waiter_never_holds_and_withdraw_never_ends_a_term",
            |f, ns| withdraw_case(f, ns).boxed(),
        ),
        ("s1_4_close_releases_everything", |f, ns| {
            close_releases_all(f, ns).boxed()
        }),
        ("s3_1_names_at_the_limits", |f, ns| {
            names_at_limits(f, ns).boxed()
        }),
        ("s1_1_renew_lists_every_owned_lease", |f, ns| {
            renew_lists_owned(f, ns).boxed()
        }),
        (
            "inspect_lists_leases_by_prefix_and_live_sessions",
            |f, ns| inspect_case(f, ns).boxed(),
        ),
        (
            "session_metadata_round_trips_to_inspect_and_holder",
            |f, ns| metadata_case(f, ns).boxed(),
        ),
        ("bad_lease_durations_are_refused", |f, ns| {
            bad_durations(f, ns).boxed()
        }),
        ("sixteen_clients_never_see_two_winners", |f, ns| {
            sixteen_clients(f, ns).boxed()
        }),
        (
            "s10_1_join_and_leave_list_members_in_the_renewal",
            |f, ns| groups::join_and_leave(f, ns).boxed(),
        ),
        ("s10_1_membership_ends_with_close_and_expiry", |f, ns| {
            groups::membership_ends_with_the_session(f, ns).boxed()
        }),
        ("s10_1_thirty_groups_of_four_in_one_renewal", |f, ns| {
            groups::many_groups_in_one_renewal(f, ns).boxed()
        }),
        ("s11_1_claim_slot_by_the_holder_only_forward", |f, ns| {
            groups::claim_slot_by_the_holder_only_forward(f, ns).boxed()
        }),
        (
            "s11_1_slot_record_outlives_the_holder_and_refuses_stale_tokens",
            |f, ns| groups::slot_record_outlives_the_holder(f, ns).boxed(),
        ),
        ("s11_1_an_expired_holder_claims_nothing", |f, ns| {
            groups::expired_holder_claims_nothing(f, ns).boxed()
        }),
        ("s4_2_release_notifications_arrive", |f, ns| {
            notifications(f, ns).boxed()
        }),
        (
            "connection_killed_mid_call_gives_a_typed_error_then_recovers",
            |f, ns| killed_mid_call(f, ns).boxed(),
        ),
        ("interleave_s3_2_acquire_vs_open_and_acquire", |f, ns| {
            interleave::acquire_vs_open_acquire(f, ns).boxed()
        }),
        ("interleave_s1_2_acquire_vs_renew", |f, ns| {
            interleave::acquire_vs_renew(f, ns).boxed()
        }),
        ("interleave_s3_5_acquire_vs_release", |f, ns| {
            interleave::acquire_vs_release(f, ns).boxed()
        }),
        ("interleave_s1_4_acquire_vs_close", |f, ns| {
            interleave::acquire_vs_close(f, ns).boxed()
        }),
        ("interleave_s1_2_renew_vs_acquire_takeover", |f, ns| {
            interleave::renew_vs_takeover(f, ns).boxed()
        }),
        (
            "s2_1_live_until_the_reported_remaining_time_then_gone",
            |f, ns| timing::live_until_reported_remaining(f, ns).boxed(),
        ),
        (
            "s1_1_a_renewal_extends_a_full_lease_from_the_renewal",
            |f, ns| timing::renewal_extends_from_the_renewal(f, ns).boxed(),
        ),
        (
            "s3_two_concurrent_acquires_by_one_session_win_one_term",
            |f, ns| timing::concurrent_acquires_by_one_session(f, ns).boxed(),
        ),
        (
            "sixteen_clients_with_short_sessions_left_to_expire",
            |f, ns| timing::sixteen_clients_with_expiry(f, ns).boxed(),
        ),
        ("s4_4_held_reports_the_holders_remaining_time", |f, ns| {
            timing::holder_remaining_then_takeover(f, ns).boxed()
        }),
    ]
}

/// Runs every case, one after the other, each in its own namespace, and
/// reports each case's outcome (a case never stops the others).
pub async fn run_all<F: Factory>(factory: &F) -> Report {
    run_selected(factory, |_| true).await
}

/// Runs the cases whose name `select` accepts.
pub async fn run_selected<F: Factory>(factory: &F, select: impl Fn(&str) -> bool) -> Report {
    let mut report = Report {
        lacks: factory.lacks(),
        ..Report::default()
    };
    for (i, (case, run)) in cases::<F>().into_iter().enumerate() {
        if !select(case) {
            continue;
        }
        let ns = format!("k{i:02}");
        let started = std::time::Instant::now();
        if let Some(lack) = Capability::needed_by(case).filter(|c| report.lacks.contains(c)) {
            report.results.push(CaseResult {
                case,
                outcome: Outcome::Skipped(format!("the backend declares it lacks {lack}")),
                elapsed: started.elapsed(),
            });
            continue;
        }
        let timed =
            futures::future::select(run(factory, &ns), sleep(Duration::from_secs(60)).boxed());
        let outcome = match timed.await {
            futures::future::Either::Left((Ok(()), _)) => Outcome::Passed,
            futures::future::Either::Left((Err(Step::Fail(m)), _)) => Outcome::Failed(m),
            futures::future::Either::Left((Err(Step::Skip(m)), _)) => Outcome::Skipped(m),
            futures::future::Either::Right(_) => Outcome::Failed("timed out after 60 s".into()),
        };
        if report.backend.is_empty() {
            if let Ok(b) = factory.connect(&ns).await {
                report.backend = b.name().to_owned();
            }
        }
        report.results.push(CaseResult {
            case,
            outcome,
            elapsed: started.elapsed(),
        });
    }
    report
}

/// A runtime-agnostic sleep.
pub async fn sleep(d: Duration) {
    futures_timer::Delay::new(d).await;
}

const LONG: Duration = Duration::from_secs(30);
/// Short enough to wait out, long enough that a stalled test machine does not
/// expire a session before the checks that need it live.
const SHORT: Duration = Duration::from_secs(2);
/// Longer than [`SHORT`] by a margin no clock-rate difference can eat.
const PAST_SHORT: Duration = Duration::from_millis(2600);

fn name(s: &str) -> Result<LeaseName, Step> {
    LeaseName::new(s).map_err(|e| Step::Fail(format!("test name {s:?}: {e}")))
}

/// Two clients of `f` in namespace `ns`, each with a session of `LONG`
/// leases: `(b, c, a, o)`, session `a` opened on `b` and `o` on `c`.
async fn two_clients<F: Factory>(
    f: &F,
    ns: &str,
) -> Result<(F::Backend, F::Backend, SessionId, SessionId), Step> {
    let b = f.connect(ns).await?;
    let c = f.connect(ns).await?;
    let a = b.open_session(LONG).await?.session;
    let o = c.open_session(LONG).await?.session;
    Ok((b, c, a, o))
}

async fn won<B: Backend>(b: &B, s: SessionId, n: &LeaseName) -> Result<Token, Step> {
    match b.acquire(s, n).await? {
        AcquireOutcome::Won { token, remaining } => {
            check!(
                remaining > Duration::ZERO && remaining <= LONG,
                "acquire of `{n}` won with remaining {remaining:?}"
            );
            Ok(token)
        }
        other => Err(Step::Fail(format!(
            "acquire of `{n}` should win, got {other:?}"
        ))),
    }
}

async fn held<B: Backend>(
    b: &B,
    s: SessionId,
    n: &LeaseName,
    by: SessionId,
    token: Token,
) -> Result<(), Step> {
    match b.acquire(s, n).await? {
        AcquireOutcome::Held {
            holder, token: t, ..
        } => {
            check!(
                holder.is_none_or(|h| h == by),
                "`{n}` held by {holder:?}, expected {by}"
            );
            check!(
                t.is_none_or(|t| t == token),
                "`{n}` held with token {t:?}, expected {token}"
            );
            Ok(())
        }
        other => Err(Step::Fail(format!(
            "acquire of `{n}` should be held, got {other:?}"
        ))),
    }
}

async fn owned<B: Backend>(b: &B, s: SessionId) -> Result<BTreeMap<LeaseName, Token>, Step> {
    Ok(b.renew(s).await?.owned.into_iter().collect())
}

async fn open_renew_expire<F: Factory>(f: &F, ns: &str) -> Result<(), Step> {
    let b = f.connect(ns).await?;
    let g = b.open_session(SHORT).await?;
    check!(
        g.remaining > Duration::from_secs(1) && g.remaining <= SHORT,
        "open granted {:?} of a {SHORT:?} lease",
        g.remaining
    );
    sleep(Duration::from_millis(400)).await;
    let r = b.renew(g.session).await?;
    check!(
        r.remaining > Duration::from_secs(1) && r.remaining <= SHORT,
        "renew after 400 ms granted {:?}: it must restart the full lease on the backend clock",
        r.remaining
    );
    check!(r.owned.is_empty(), "a new session owns {:?}", r.owned);
    let live = b.inspect(None).await?;
    check!(
        live.sessions.iter().any(|s| s.session == g.session),
        "inspect does not list the live session"
    );
    sleep(PAST_SHORT).await;
    check!(
        matches!(b.renew(g.session).await, Err(RenewError::Expired)),
        "renew 2.6 s after the last renewal of a 2 s lease must be Expired (S1.2)"
    );
    // No resurrection: it stays expired, for every call and every client.
    check!(
        matches!(b.renew(g.session).await, Err(RenewError::Expired)),
        "a second late renew revived the session (S1.2)"
    );
    let n = name("resurrect")?;
    let other = f.connect(ns).await?;
    check!(
        matches!(other.acquire(g.session, &n).await?, AcquireOutcome::Expired),
        "acquire by an expired session must answer Expired (S1.2)"
    );
    check!(
        matches!(other.renew(g.session).await, Err(RenewError::Expired)),
        "another client revived the expired session"
    );
    let seen = b.inspect(None).await?;
    check!(
        seen.sessions.iter().all(|s| s.session != g.session),
        "inspect lists an expired session"
    );
    Ok(())
}

async fn contention<F: Factory>(f: &F, ns: &str) -> Result<(), Step> {
    let (b, c, a, o) = two_clients(f, ns).await?;
    check!(a != o, "two sessions got the same id");
    let n = name("contended")?;
    let t = won(&b, a, &n).await?;
    let again = won(&b, a, &n).await?;
    check!(
        again == t,
        "re-acquire by the owner changed the token {t} -> {again}"
    );
    held(&c, o, &n, a, t).await?;
    let mine = owned(&b, a).await?;
    check!(mine.get(&n) == Some(&t), "owner's renewal lists {mine:?}");
    let theirs = owned(&c, o).await?;
    check!(theirs.is_empty(), "loser's renewal lists {theirs:?}");
    Ok(())
}

async fn takeover_after_expiry<F: Factory>(f: &F, ns: &str) -> Result<(), Step> {
    let b = f.connect(ns).await?;
    let a = b.open_session(SHORT).await?.session;
    let o = b.open_session(LONG).await?.session;
    let n = name("takeover")?;
    let t1 = won(&b, a, &n).await?;
    held(&b, o, &n, a, t1).await?;
    sleep(PAST_SHORT).await;
    let t2 = won(&b, o, &n).await?;
    check!(
        t2 > t1,
        "takeover token {t2} is not above the expired holder's {t1}"
    );
    check!(
        matches!(b.renew(a).await, Err(RenewError::Expired)),
        "the expired holder renewed"
    );
    check!(
        matches!(b.acquire(a, &n).await?, AcquireOutcome::Expired),
        "the expired holder acquired"
    );
    b.release(a, &n, t1).await?;
    let still = owned(&b, o).await?;
    check!(
        still.get(&n) == Some(&t2),
        "late release by the expired holder freed the new term: {still:?}"
    );
    Ok(())
}

async fn token_monotonicity<F: Factory>(f: &F, ns: &str) -> Result<(), Step> {
    let b = f.connect(ns).await?;
    let n = name("terms")?;
    let mut last: Option<Token> = None;
    let mut s = b.open_session(LONG).await?.session;
    for i in 0..30 {
        let t = won(&b, s, &n).await?;
        check!(
            last.is_none_or(|l| t > l),
            "term {i}: token {t} is not above the previous {last:?}"
        );
        last = Some(t);
        match i % 3 {
            0 => b.release(s, &n, t).await?,
            1 => {
                b.close_session(s).await?;
                s = b.open_session(LONG).await?.session;
            }
            _ => {
                // Switch session without releasing: the next acquire is held,
                // until the holder releases.
                let next = b.open_session(LONG).await?.session;
                held(&b, next, &n, s, t).await?;
                b.release(s, &n, t).await?;
                s = next;
            }
        }
    }
    Ok(())
}

async fn stale_release<F: Factory>(f: &F, ns: &str) -> Result<(), Step> {
    let b = f.connect(ns).await?;
    let a = b.open_session(LONG).await?.session;
    let o = b.open_session(LONG).await?.session;
    let n = name("stale")?;
    let t1 = won(&b, a, &n).await?;
    b.release(a, &n, t1).await?;
    b.release(a, &n, t1).await?; // twice: still fine
    let t2 = won(&b, o, &n).await?;
    check!(t2 > t1, "token after release {t2} not above {t1}");
    b.release(a, &n, t1).await?; // the old term's late release
    b.release(a, &n, t2).await?; // right token, wrong session
    if let Some(wrong) = Token::new(t2.get() + 1) {
        b.release(o, &n, wrong).await?; // right session, wrong token
    }
    let still = owned(&b, o).await?;
    check!(
        still.get(&n) == Some(&t2),
        "a stale release freed the lease: {still:?}"
    );
    held(&b, a, &n, o, t2).await?;
    Ok(())
}

/// S4.7: a batch of acquires, releases and withdraws answers each call as
/// the call alone would: a free lease won, a held one `Held` by its holder,
/// a release that frees (its lease no longer listed, and won by another
/// with a greater token), a stale release a no-op, a withdraw `Ok`; one
/// reply per call, each echoing its op. An empty batch answers nothing.
async fn batch_case<F: Factory>(f: &F, ns: &str) -> Result<(), Step> {
    use simba_core::{Command, Input, OpId};
    let b = f.connect(ns).await?;
    let a = b.open_session(LONG).await?.session;
    let o = b.open_session(LONG).await?.session;
    let n: Vec<LeaseName> = (0..4)
        .map(|i| name(&format!("batch.{i}")))
        .collect::<Result<_, _>>()?;
    let theirs = won(&b, o, &n[2]).await?;
    let mine = won(&b, a, &n[3]).await?;
    let stale = Token::new(mine.get() + 1000).ok_or_else(|| Step::Fail("token".into()))?;
    let calls = vec![
        Command::Acquire {
            op: OpId(1),
            session: a,
            name: n[0].clone(),
        },
        Command::Acquire {
            op: OpId(2),
            session: a,
            name: n[1].clone(),
        },
        Command::Acquire {
            op: OpId(3),
            session: a,
            name: n[2].clone(),
        },
        Command::Release {
            op: OpId(4),
            session: a,
            name: n[3].clone(),
            token: mine,
        },
        Command::Withdraw {
            op: OpId(5),
            session: a,
            name: n[2].clone(),
        },
        Command::Release {
            op: OpId(6),
            session: a,
            name: n[2].clone(),
            token: stale,
        },
    ];
    let metadata = crate::SessionMetadata::default();
    let Input::Batch { replies } = b.execute(Command::Batch { calls }, &metadata).await else {
        return Err(Step::Fail("a batch was not answered by a batch".into()));
    };
    check!(
        replies.len() == 6,
        "6 calls, {} replies: {replies:?}",
        replies.len()
    );
    let mut tokens = Vec::new();
    for reply in &replies {
        match reply {
            Input::AcquireReplied {
                op: OpId(1 | 2),
                result: Ok(AcquireOutcome::Won { token, .. }),
            } => tokens.push(*token),
            Input::AcquireReplied {
                op: OpId(3),
                result: Ok(AcquireOutcome::Held { holder, token, .. }),
            } => check!(
                holder.is_none_or(|h| h == o) && token.is_none_or(|t| t == theirs),
                "held by {holder:?} with {token:?}, not {o} with {theirs}"
            ),
            Input::ReleaseReplied {
                op: OpId(4 | 6),
                result: Ok(()),
            }
            | Input::WithdrawReplied {
                op: OpId(5),
                result: Ok(()),
            } => {}
            other => return Err(Step::Fail(format!("unexpected reply {other:?}"))),
        }
    }
    check!(tokens.len() == 2, "two acquires won: {replies:?}");
    let listed = owned(&b, a).await?;
    check!(
        listed.contains_key(&n[0]) && listed.contains_key(&n[1]) && !listed.contains_key(&n[3]),
        "after the batch the session owns {listed:?}"
    );
    check!(
        owned(&b, o).await?.get(&n[2]) == Some(&theirs),
        "the stale release in the batch freed another's lease"
    );
    let after = won(&b, o, &n[3]).await?;
    check!(
        after > mine,
        "token after the batch's release {after} not above {mine}"
    );
    let Input::Batch { replies } = b
        .execute(Command::Batch { calls: Vec::new() }, &metadata)
        .await
    else {
        return Err(Step::Fail(
            "an empty batch was not answered by a batch".into(),
        ));
    };
    check!(replies.is_empty(), "an empty batch answered {replies:?}");
    Ok(())
}

/// S4.5: a waiter that withdrew is skipped when the holder releases (on a
/// backend that queues waiters it would otherwise be handed the lease); a
/// withdraw never ends a term; a waiter that did not withdraw wins after the
/// release with a greater token; withdrawing for an unknown session is `Ok`.
async fn withdraw_case<F: Factory>(f: &F, ns: &str) -> Result<(), Step> {
    let b = f.connect(ns).await?;
    let a = b.open_session(LONG).await?.session;
    let w = b.open_session(LONG).await?.session;
    let c = b.open_session(LONG).await?.session;
    let n = name("withdraw")?;
    let t1 = won(&b, a, &n).await?;
    held(&b, w, &n, a, t1).await?;
    b.withdraw(w, &n).await?;
    b.withdraw(w, &n).await?; // twice: still fine
    b.withdraw(a, &n).await?; // the holder's: its term goes on
    check!(
        owned(&b, a).await?.get(&n) == Some(&t1),
        "a withdraw ended the holder's term"
    );
    b.release(a, &n, t1).await?;
    let t2 = won(&b, c, &n).await?;
    check!(t2 > t1, "token after release {t2} not above {t1}");
    check!(
        !owned(&b, w).await?.contains_key(&n),
        "the withdrawn waiter owns the lease"
    );
    // A waiter that stays wins once the holder releases.
    held(&b, w, &n, c, t2).await?;
    b.release(c, &n, t2).await?;
    let t3 = won(&b, w, &n).await?;
    check!(t3 > t2, "the waiter's token {t3} is not above {t2}");
    held(&b, a, &n, w, t3).await?;
    b.withdraw(a, &n).await?;
    b.close_session(a).await?;
    b.withdraw(a, &n).await?; // a closed session: a no-op
    b.withdraw(SessionId::from_u128(0x5eed), &n).await?; // never opened
    check!(
        owned(&b, w).await?.get(&n) == Some(&t3),
        "the waiter lost its term"
    );
    Ok(())
}

async fn close_releases_all<F: Factory>(f: &F, ns: &str) -> Result<(), Step> {
    let b = f.connect(ns).await?;
    let a = b.open_session(LONG).await?.session;
    let o = b.open_session(LONG).await?.session;
    let names = [name("close.x")?, name("close.y")?, name("close.z")?];
    let mut tokens = Vec::new();
    for n in &names {
        tokens.push(won(&b, a, n).await?);
    }
    b.close_session(a).await?;
    b.close_session(a).await?; // closing twice is fine
    check!(
        matches!(b.renew(a).await, Err(RenewError::Expired)),
        "a closed session renewed"
    );
    check!(
        matches!(b.acquire(a, &names[0]).await?, AcquireOutcome::Expired),
        "a closed session acquired"
    );
    for (n, t) in names.iter().zip(&tokens) {
        let t2 = won(&b, o, n).await?;
        check!(t2 > *t, "`{n}` after close: token {t2} not above {t}");
    }
    let seen = b.inspect(None).await?;
    check!(
        seen.sessions.iter().all(|s| s.session != a),
        "inspect lists the closed session"
    );
    Ok(())
}

async fn names_at_limits<F: Factory>(f: &F, ns: &str) -> Result<(), Step> {
    let b = f.connect(ns).await?;
    let s = b.open_session(LONG).await?.session;
    let every: String = ('a'..='z')
        .chain('A'..='Z')
        .chain('0'..='9')
        .chain(['.', '_', ':', '-'])
        .collect();
    let names = [
        name(&every)?,
        name("x")?,
        name(&"y".repeat(128))?,
        name(&"Y".repeat(128))?, // differs only in case: a different lease
        name("...")?,
        name("a_b")?,
        name("axb")?,
    ];
    let mut want = BTreeMap::new();
    for n in &names {
        let t = won(&b, s, n).await?;
        want.insert(n.clone(), t);
    }
    let got = owned(&b, s).await?;
    check!(got == want, "renew lists {got:?}, expected {want:?}");
    // `_` is a SQL LIKE wildcard; a prefix filter must not treat it so.
    let seen = b.inspect(Some("a_")).await?;
    let listed: Vec<&str> = seen.leases.iter().map(|l| l.name.as_str()).collect();
    check!(listed == ["a_b"], "inspect(\"a_\") lists {listed:?}");
    let seen = b.inspect(Some("y")).await?;
    check!(
        seen.leases.len() == 1,
        "inspect(\"y\") lists {:?}",
        seen.leases
    );
    // Invalid names cannot even be built (S3.1), and an invalid inspect
    // prefix is refused before any I/O.
    for bad in ["", ".", "..", "a b", "a/b", "é"] {
        check!(LeaseName::new(bad).is_err(), "{bad:?} accepted as a name");
    }
    check!(
        LeaseName::new("z".repeat(129)).is_err(),
        "129 characters accepted"
    );
    match b.inspect(Some("a b")).await {
        Err(e) if e.kind == BackendErrorKind::Rejected => {}
        other => return Err(Step::Fail(format!("inspect(\"a b\") gave {other:?}"))),
    }
    Ok(())
}

async fn renew_lists_owned<F: Factory>(f: &F, ns: &str) -> Result<(), Step> {
    let b = f.connect(ns).await?;
    let s = b.open_session(LONG).await?.session;
    let o = b.open_session(LONG).await?.session;
    let mut want = BTreeMap::new();
    for i in 0..40 {
        let n = name(&format!("owned.{i}"))?;
        let t = won(&b, s, &n).await?;
        want.insert(n, t);
    }
    let theirs = name("owned.theirs")?;
    won(&b, o, &theirs).await?;
    let r = b.renew(s).await?;
    check!(
        r.owned.len() == want.len(),
        "renew lists {} leases, expected 40",
        r.owned.len()
    );
    let got: BTreeMap<_, _> = r.owned.into_iter().collect();
    check!(got == want, "renew lists the wrong leases");
    Ok(())
}

async fn inspect_case<F: Factory>(f: &F, ns: &str) -> Result<(), Step> {
    let b = f.connect(ns).await?;
    let a = b.open_session(LONG).await?.session;
    let o = b.open_session(Duration::from_secs(20)).await?.session;
    let ga = name("grp.a")?;
    let gb = name("grp.b")?;
    let other = name("other")?;
    let ta = won(&b, a, &ga).await?;
    let tb = won(&b, a, &gb).await?;
    won(&b, o, &other).await?;
    b.release(a, &gb, tb).await?;
    let seen = b.inspect(Some("grp.")).await?;
    let names: Vec<&str> = seen.leases.iter().map(|l| l.name.as_str()).collect();
    check!(
        names == ["grp.a", "grp.b"],
        "inspect(\"grp.\") lists {names:?}"
    );
    let la = &seen.leases[0];
    check!(
        la.holder == Some(a) && la.token == Some(ta),
        "grp.a shows {la:?}"
    );
    check!(
        la.remaining
            .is_some_and(|r| r > Duration::ZERO && r <= LONG),
        "grp.a remaining {:?}",
        la.remaining
    );
    let lb = &seen.leases[1];
    check!(
        lb.holder.is_none() && lb.remaining.is_none() && lb.token == Some(tb),
        "released grp.b shows {lb:?}"
    );
    let sa = seen.sessions.iter().find(|s| s.session == a);
    check!(
        sa.is_some_and(|s| s.lease_duration == LONG && s.remaining <= LONG),
        "session a shows {sa:?}"
    );
    check!(
        seen.sessions
            .iter()
            .any(|s| s.session == o && s.lease_duration == Duration::from_secs(20)),
        "inspect misses session o"
    );
    Ok(())
}

/// Leader observation: the metadata a session is opened with comes back,
/// unchanged, from `inspect` and from `holder` of a lease it holds, to any
/// client; a session opened without any shows none; a free lease has no holder.
async fn metadata_case<F: Factory>(f: &F, ns: &str) -> Result<(), Step> {
    let b = f.connect(ns).await?;
    let watcher = f.connect(ns).await?;
    let mut meta = crate::SessionMetadata::new();
    for (k, v) in [
        ("host", "node-7.example"),
        ("pid", "4242"),
        ("app", "ledger posting"),
        ("addr", "10.0.0.7:8443|x=y"),
    ] {
        meta.insert(k, v)
            .map_err(|e| Step::Fail(format!("metadata {k}: {e}")))?;
    }
    let a = b.open_session_with(LONG, &meta).await?.session;
    let plain = b.open_session(LONG).await?.session;
    let n = name("observed")?;
    let free = name("observed.free")?;
    let token = won(&b, a, &n).await?;
    let seen = watcher.inspect(Some("observed")).await?;
    let sa = seen.sessions.iter().find(|s| s.session == a);
    check!(
        sa.is_some_and(|s| s.metadata == meta),
        "inspect shows session a as {sa:?}, expected metadata {meta}"
    );
    let sp = seen.sessions.iter().find(|s| s.session == plain);
    check!(
        sp.is_some_and(|s| s.metadata.is_empty()),
        "a session opened without metadata shows {sp:?}"
    );
    let h = watcher.holder(&n).await?;
    check!(
        h.as_ref().is_some_and(|h| h.session == a
            && h.token == token
            && h.metadata == meta
            && h.remaining > Duration::ZERO
            && h.remaining <= LONG),
        "holder(`{n}`) is {h:?}, expected session {a} token {token} metadata {meta}"
    );
    let h = watcher.holder(&free).await?;
    check!(h.is_none(), "a never acquired lease has holder {h:?}");
    b.release(a, &n, token).await?;
    let h = watcher.holder(&n).await?;
    check!(h.is_none(), "a released lease has holder {h:?}");
    let t2 = won(&b, plain, &n).await?;
    let h = watcher.holder(&n).await?;
    check!(
        h.as_ref()
            .is_some_and(|h| h.session == plain && h.token == t2 && h.metadata.is_empty()),
        "holder(`{n}`) after a new term is {h:?}"
    );
    Ok(())
}

async fn bad_durations<F: Factory>(f: &F, ns: &str) -> Result<(), Step> {
    let b = f.connect(ns).await?;
    for d in [Duration::ZERO, Duration::from_secs(400 * 24 * 3600)] {
        match b.open_session(d).await {
            Err(e) if e.kind == BackendErrorKind::Rejected => {}
            other => return Err(Step::Fail(format!("open_session({d:?}) gave {other:?}"))),
        }
    }
    Ok(())
}

async fn sixteen_clients<F: Factory>(f: &F, ns: &str) -> Result<(), Step> {
    const CLIENTS: usize = 16;
    const ROUNDS: usize = 10;
    let names = [name("race.0")?, name("race.1")?, name("race.2")?];
    // Four connections (pools), four sessions on each.
    let mut backends = Vec::new();
    for _ in 0..4 {
        backends.push(f.connect(ns).await?);
    }
    let mut sessions = Vec::new();
    for i in 0..CLIENTS {
        sessions.push(backends[i % 4].open_session(LONG).await?.session);
    }
    // Who believes it holds each name right now, and every token won.
    let inside: Arc<Mutex<HashMap<LeaseName, SessionId>>> = Arc::default();
    let wins: Arc<Mutex<Vec<(LeaseName, Token, SessionId)>>> = Arc::default();
    let errors: Arc<Mutex<Vec<String>>> = Arc::default();
    let clients = (0..CLIENTS).map(|i| {
        let b = &backends[i % 4];
        let s = sessions[i];
        let names = &names;
        let inside = inside.clone();
        let wins = wins.clone();
        let errors = errors.clone();
        async move {
            for round in 0..ROUNDS {
                let n = &names[(i + round) % names.len()];
                match b.acquire(s, n).await {
                    Ok(AcquireOutcome::Won { token, .. }) => {
                        {
                            let mut map = inside.lock().unwrap_or_else(|p| p.into_inner());
                            if let Some(other) = map.insert(n.clone(), s) {
                                errors
                                    .lock()
                                    .unwrap_or_else(|p| p.into_inner())
                                    .push(format!(
                                        "`{n}`: {s} won token {token} while {other} held it"
                                    ));
                            }
                        }
                        wins.lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .push((n.clone(), token, s));
                        sleep(Duration::from_millis(2)).await;
                        inside.lock().unwrap_or_else(|p| p.into_inner()).remove(n);
                        if let Err(e) = b.release(s, n, token).await {
                            errors
                                .lock()
                                .unwrap_or_else(|p| p.into_inner())
                                .push(format!("release: {e}"));
                        }
                    }
                    Ok(AcquireOutcome::Held { .. }) => sleep(Duration::from_millis(1)).await,
                    Ok(AcquireOutcome::Expired) => errors
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(format!("session {s} expired")),
                    Err(e) => errors
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(format!("acquire: {e}")),
                }
            }
        }
    });
    futures::future::join_all(clients).await;
    let errors = std::mem::take(&mut *errors.lock().unwrap_or_else(|p| p.into_inner()));
    check!(
        errors.is_empty(),
        "{} problems, first: {:?}",
        errors.len(),
        errors.first()
    );
    let wins = std::mem::take(&mut *wins.lock().unwrap_or_else(|p| p.into_inner()));
    check!(
        wins.len() >= 3,
        "only {} wins in {} attempts",
        wins.len(),
        CLIENTS * ROUNDS
    );
    let mut seen: HashMap<(LeaseName, Token), SessionId> = HashMap::new();
    for (n, t, s) in &wins {
        if let Some(other) = seen.insert((n.clone(), *t), *s) {
            return Err(Step::Fail(format!(
                "`{n}` token {t} won by both {other} and {s}"
            )));
        }
    }
    Ok(())
}

async fn notifications<F: Factory>(f: &F, ns: &str) -> Result<(), Step> {
    let b = f.connect(ns).await?;
    let sub = b.subscribe_releases().await?;
    let Some(mut stream) = sub else {
        check!(
            !b.broadcasts_releases(),
            "broadcasts_releases() is true but subscribe_releases() gave None"
        );
        return Err(Step::Skip(
            "this backend does not broadcast releases".into(),
        ));
    };
    let s = b.open_session(LONG).await?.session;
    let n = name("notified")?;
    let t = won(&b, s, &n).await?;
    b.release(s, &n, t).await?;
    let got = next_release(&mut stream, "a release").await?;
    check!(got == n, "notified `{got}` after releasing `{n}`");
    won(&b, s, &n).await?;
    b.close_session(s).await?;
    let got = next_release(&mut stream, "a close").await?;
    check!(
        got == n,
        "notified `{got}` after closing the holder of `{n}`"
    );
    Ok(())
}

async fn next_release(
    stream: &mut futures::stream::BoxStream<'static, LeaseName>,
    what: &str,
) -> Result<LeaseName, Step> {
    match futures::future::select(stream.next(), sleep(Duration::from_secs(5)).boxed()).await {
        futures::future::Either::Left((Some(got), _)) => Ok(got),
        futures::future::Either::Left((None, _)) => {
            Err(Step::Fail(format!("release stream ended before {what}")))
        }
        futures::future::Either::Right(_) => Err(Step::Fail(format!(
            "no notification within 5 s after {what}"
        ))),
    }
}

async fn killed_mid_call<F: Factory>(f: &F, ns: &str) -> Result<(), Step> {
    let b = f.connect(ns).await?;
    let s = b.open_session(LONG).await?.session;
    let n = name("killed")?;
    let Some(call) = f.acquire_while_killed(&b, s, &n) else {
        return Err(Step::Skip(
            "the factory cannot kill a connection mid-call".into(),
        ));
    };
    match call.await {
        Err(e)
            if matches!(
                e.kind,
                BackendErrorKind::Unavailable | BackendErrorKind::Timeout
            ) => {}
        other => {
            return Err(Step::Fail(format!(
                "acquire on a killed connection gave {other:?}, expected an Unavailable error"
            )))
        }
    }
    // The next call recovers (a fresh connection), and nothing was half-written.
    let t = won(&b, s, &n).await?;
    let again = won(&b, s, &n).await?;
    check!(t == again, "token changed on re-acquire after recovery");
    b.renew(s).await?;
    Ok(())
}
