//! Leader-only schedules (S11): a job that runs at fixed times (its slots)
//! only on the current leader of the schedule's election, each slot at most
//! once whichever nodes lead in turn.
//!
//! The election is an ordinary one with a leader task (S4–S6). The task is
//! the run loop of this file: it picks the next slot from the wall clock
//! (S11.2), waits for it, claims it in the backend with the term's token
//! through the engine ([`simba_core::Engine::claim_slot`], S11.1), and runs
//! the job only if the claim succeeded while the term was still valid. On a
//! voluntary hand-over it keeps the term for the minimum hold (S11.5) before
//! returning, so the lease is released only then (S6.1).

use crate::client::{LeaderTask, Simba};
use crate::driver::Msg;
use crate::error::Error;
use crate::listener::ElectionListener;
use crate::mutant::{ClientMutant, Selected};
use crate::runtime::AsyncRuntime;
use crate::term::{TaskOutput, Term};
use chrono::TimeZone as _;
use croner::Cron;
use futures::channel::{mpsc, oneshot};
use futures::future::{BoxFuture, Either, FutureExt};
pub use simba_core::MissedRuns;
use simba_core::{
    ApiError, BackendErrorKind, EntrySnapshot, EveryPeriod, LeaseName, SlotClaim, SlotGrid,
    SlotPlanner, SlotRule,
};
use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::str::FromStr as _;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The longest single sleep while waiting for a slot: a step of the wall
/// clock is noticed within this.
const MAX_SLEEP: Duration = Duration::from_secs(30);
/// The first pause before a failed claim is tried again (doubling).
const CLAIM_RETRY_MIN: Duration = Duration::from_millis(100);
/// The longest pause between two tries of a failed claim.
const CLAIM_RETRY_MAX: Duration = Duration::from_secs(5);

/// When a schedule's slots fall (S11.2). Slot numbers are milliseconds since
/// the Unix epoch of the slot's wall-clock instant, the same on every node.
///
/// ```
/// use simba_client::Schedule;
/// use std::time::Duration;
///
/// let every_5m = Schedule::every(Duration::from_secs(300));
/// assert_eq!(every_5m.next_slot_after(1_000), Some(300_000));
///
/// let nightly = Schedule::cron_in("0 3 * * *", "Europe/Paris")?;
/// // 2026-01-01T00:00:00Z is 01:00 in Paris; the next 03:00 there is 02:00Z.
/// assert_eq!(nightly.next_slot_after(1_767_225_600_000), Some(1_767_232_800_000));
/// # Ok::<(), simba_client::Error>(())
/// ```
#[derive(Clone)]
pub struct Schedule {
    kind: Kind,
}

#[derive(Clone)]
enum Kind {
    /// Multiples of the period (milliseconds) since the Unix epoch.
    Rate(u64),
    /// The delay after the end of the previous run.
    Delay(Duration),
    Cron {
        cron: Arc<Cron>,
        tz: chrono_tz::Tz,
        text: String,
    },
}

impl fmt::Debug for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            Kind::Rate(ms) => write!(f, "every {ms} ms"),
            Kind::Delay(d) => write!(f, "{d:?} after each run"),
            Kind::Cron { text, tz, .. } => write!(f, "cron `{text}` in {tz}"),
        }
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            Kind::Rate(ms) => write!(
                f,
                "every {}",
                humantime::format_duration(Duration::from_millis(*ms))
            ),
            Kind::Delay(d) => write!(f, "{} after each run", humantime::format_duration(*d)),
            Kind::Cron { text, tz, .. } => write!(f, "`{text}` ({tz})"),
        }
    }
}

impl Schedule {
    /// Fixed rate: a slot at every multiple of `period` since the Unix epoch
    /// (S11.2), so every node agrees on the slots. `period` counts in whole
    /// milliseconds; one under a millisecond is refused when the schedule
    /// starts ([`Error::InvalidSchedule`]).
    pub fn every(period: Duration) -> Schedule {
        let ms = u64::try_from(period.as_millis()).unwrap_or(u64::MAX);
        Schedule {
            kind: Kind::Rate(ms),
        }
    }

    /// Fixed delay: a slot `delay` after the end of the previous run of the
    /// term (S11.2); the first slot of a term comes `delay` after the term
    /// began, or at once with [`MissedRuns::RunOnce`].
    pub fn fixed_delay(delay: Duration) -> Schedule {
        Schedule {
            kind: Kind::Delay(delay),
        }
    }

    /// A cron expression in UTC: five fields (minute hour day-of-month month
    /// day-of-week), or six with seconds first.
    ///
    /// # Errors
    /// [`Error::InvalidSchedule`] if it does not parse.
    pub fn cron(expr: &str) -> Result<Schedule, Error> {
        Schedule::cron_in(expr, "UTC")
    }

    /// A cron expression in the IANA time zone `tz` (`"Europe/Paris"`): its
    /// slots follow that zone's daylight-saving changes.
    ///
    /// # Errors
    /// [`Error::InvalidSchedule`] if the expression or the zone does not parse.
    pub fn cron_in(expr: &str, tz: &str) -> Result<Schedule, Error> {
        let cron = Cron::from_str(expr.trim())
            .map_err(|e| Error::InvalidSchedule(format!("cron expression `{expr}`: {e}")))?;
        let tz = chrono_tz::Tz::from_str(tz.trim())
            .map_err(|e| Error::InvalidSchedule(format!("time zone `{tz}`: {e}")))?;
        Ok(Schedule {
            kind: Kind::Cron {
                cron: Arc::new(cron),
                tz,
                text: expr.trim().to_owned(),
            },
        })
    }

    /// Whether slots follow the end of each run (fixed delay) rather than a
    /// grid (fixed rate, cron).
    pub fn is_fixed_delay(&self) -> bool {
        matches!(self.kind, Kind::Delay(_))
    }

    /// How the core's [`SlotPlanner`] sees this schedule.
    fn rule(&self) -> SlotRule<'_, Schedule> {
        match &self.kind {
            Kind::Delay(d) => SlotRule::Delay(u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            _ => SlotRule::Grid(self),
        }
    }

    fn validate(&self) -> Result<(), Error> {
        match &self.kind {
            Kind::Rate(0) => Err(Error::InvalidSchedule(
                "the period must be at least 1 ms".into(),
            )),
            Kind::Delay(d) if d.as_millis() == 0 => Err(Error::InvalidSchedule(
                "the delay must be at least 1 ms".into(),
            )),
            _ => Ok(()),
        }
    }

    /// The first slot strictly after `after` (milliseconds since the Unix
    /// epoch), or `None` for a fixed delay (whose slots follow the runs) and
    /// for a cron expression that never matches again.
    pub fn next_slot_after(&self, after: u64) -> Option<u64> {
        match &self.kind {
            Kind::Delay(_) => None,
            Kind::Rate(p) => EveryPeriod(*p).next_after(after),
            Kind::Cron { cron, tz, .. } => {
                // Cron slots are whole seconds: start from the second holding
                // `after`, which is itself not after `after`.
                let from = tz.timestamp_millis_opt(i64::try_from(after / 1000 * 1000).ok()?);
                let next = cron.find_next_occurrence(&from.single()?, false).ok()?;
                u64::try_from(next.timestamp_millis()).ok()
            }
        }
    }

    /// The latest slot at or before `at`, or `None` (fixed delay, or no
    /// such slot).
    pub fn latest_slot_at_or_before(&self, at: u64) -> Option<u64> {
        match &self.kind {
            Kind::Delay(_) => None,
            Kind::Rate(p) => EveryPeriod(*p).latest_at_or_before(at),
            Kind::Cron { cron, tz, .. } => {
                let from = tz.timestamp_millis_opt(i64::try_from(at / 1000 * 1000).ok()?);
                let prev = cron.find_previous_occurrence(&from.single()?, true).ok()?;
                u64::try_from(prev.timestamp_millis()).ok()
            }
        }
    }
}

impl SlotGrid for Schedule {
    fn next_after(&self, t: u64) -> Option<u64> {
        self.next_slot_after(t)
    }

    fn latest_at_or_before(&self, t: u64) -> Option<u64> {
        self.latest_slot_at_or_before(t)
    }
}

/// One run of a scheduled job: its slot and the term it runs in (S11).
#[derive(Clone, Debug)]
pub struct ScheduledRun {
    term: Term,
    slot: u64,
}

impl ScheduledRun {
    /// The term this run belongs to: stop when [`Term::revoked`] resolves;
    /// send [`Term::token`] with every write to a fenced resource.
    pub fn term(&self) -> &Term {
        &self.term
    }

    /// The term's fencing token (S3.2).
    pub fn token(&self) -> u64 {
        self.term.token()
    }

    /// The slot number: milliseconds since the Unix epoch of the slot's
    /// scheduled instant (S11.2).
    pub fn slot(&self) -> u64 {
        self.slot
    }

    /// The wall-clock instant the slot was scheduled for.
    pub fn scheduled_for(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(self.slot)
    }
}

impl Simba {
    /// A job run on `schedule` only by the leader of the election `name`,
    /// each slot at most once across leaders (S11). Configure it, then
    /// [`run`](ScheduleBuilder::run) it:
    ///
    /// ```no_run
    /// # async fn demo(simba: simba_client::Simba) -> Result<(), simba_client::Error> {
    /// use simba_client::{MissedRuns, Schedule};
    /// use std::time::Duration;
    ///
    /// let job = simba
    ///     .schedule("reports.nightly", Schedule::cron_in("0 3 * * *", "Europe/Paris")?)
    ///     .lock_at_least_for(Duration::from_secs(30))
    ///     .missed(MissedRuns::RunOnce)
    ///     .run(|run| async move {
    ///         println!("slot {} with token {}", run.slot(), run.token());
    ///     })
    ///     .await?;
    /// // …
    /// job.stop().await;
    /// # Ok(()) }
    /// ```
    pub fn schedule(&self, name: impl AsRef<str>, schedule: Schedule) -> ScheduleBuilder {
        ScheduleBuilder::new(self.clone(), name.as_ref().to_owned(), schedule)
    }
}

/// A job run on schedule by the leader ([`Simba::schedule`]).
pub struct ScheduleBuilder {
    client: Simba,
    name: String,
    schedule: Schedule,
    hold: Duration,
    missed: MissedRuns,
    listener: Option<Arc<dyn ElectionListener>>,
}

impl fmt::Debug for ScheduleBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScheduleBuilder")
            .field("name", &self.name)
            .field("schedule", &self.schedule)
            .field("lock_at_least_for", &self.hold)
            .field("missed", &self.missed)
            .finish_non_exhaustive()
    }
}

impl ScheduleBuilder {
    pub(crate) fn new(client: Simba, name: String, schedule: Schedule) -> Self {
        ScheduleBuilder {
            client,
            name,
            schedule,
            hold: Duration::ZERO,
            missed: MissedRuns::Skip,
            listener: None,
        }
    }

    /// The minimum hold (S11.5): on a voluntary hand-over the leader keeps
    /// its term at least `hold` after the start of its latest run (never
    /// past the term's local deadline). Default: zero.
    pub fn lock_at_least_for(mut self, hold: Duration) -> Self {
        self.hold = hold;
        self
    }

    /// What to do with missed slots (S11.4); default [`MissedRuns::Skip`].
    pub fn missed(mut self, missed: MissedRuns) -> Self {
        self.missed = missed;
        self
    }

    /// Also tell `listener` of every term of the schedule's election (S7.1).
    pub fn listener(mut self, listener: impl ElectionListener) -> Self {
        self.listener = Some(Arc::new(listener));
        self
    }

    /// Starts the schedule's election and runs `job` at each slot while
    /// leader (S11). `job` may return `()` or `Result<(), E>`; a failure or
    /// a panic is logged and the schedule goes on (S11.3).
    ///
    /// # Errors
    /// [`Error::InvalidSchedule`] for a period or delay under 1 ms;
    /// [`Error`] as [`crate::ElectionBuilder::start`].
    pub async fn run<F, Fut>(self, job: F) -> Result<ScheduledJob, Error>
    where
        F: FnMut(ScheduledRun) -> Fut + Send + 'static,
        Fut: Future + Send + 'static,
        Fut::Output: TaskOutput,
    {
        self.schedule.validate()?;
        let name = LeaseName::new(&self.name).map_err(Error::from)?;
        let job = crate::driver::shared_factory(job);
        let job: Job = Arc::new(move |run| -> BoxFuture<'static, Result<(), String>> {
            let fut = job(run);
            Box::pin(async move { fut.await.into_task_result() })
        });
        let runtime = self.client.runtime();
        let started = wall_ms(&*runtime);
        let ctx = Arc::new(Ctx {
            name,
            tx: self.client.msg_sender(),
            runtime,
            schedule: self.schedule,
            hold: self.hold,
            missed: self.missed,
            started,
            job,
            mutant: self.client.mutant(),
        });
        let mut election = self.client.election(&self.name);
        if let Some(l) = self.listener {
            election = election.listener_arc(l);
        }
        let task = election
            .run_while_leader(move |term| {
                let ctx = ctx.clone();
                async move { ctx.lead(term).await }
            })
            .await?;
        Ok(ScheduledJob { task })
    }
}

/// A running schedule: stop it, step down, or look at it.
#[derive(Clone, Debug)]
pub struct ScheduledJob {
    task: LeaderTask,
}

impl ScheduledJob {
    /// The schedule's name.
    pub fn name(&self) -> &str {
        self.task.name()
    }

    /// The schedule's election.
    pub fn election(&self) -> &crate::Election {
        self.task.election()
    }

    /// The client's events that concern the schedule's election
    /// ([`crate::Election::events`]).
    pub fn events(&self) -> futures::stream::BoxStream<'static, crate::ClientEvent> {
        self.task.events()
    }

    /// Stops the schedule: revoke, interrupt a run in progress, keep the
    /// term for the minimum hold (S11.5), release (S6.1).
    pub async fn stop(&self) {
        self.task.stop().await;
    }

    /// As [`ScheduledJob::stop`], blocking the thread.
    ///
    /// # Errors
    /// As [`crate::Election::stop_blocking`].
    pub fn stop_blocking(&self) -> Result<(), Error> {
        self.task.stop_blocking()
    }

    /// Hands leadership over (S6.4) after the minimum hold (S11.5).
    ///
    /// # Errors
    /// As [`crate::Election::step_down`].
    pub async fn step_down(&self, cooldown: Duration) -> Result<(), Error> {
        self.task.step_down(cooldown).await
    }

    /// The election's state.
    ///
    /// # Errors
    /// As [`crate::Election::snapshot`].
    pub async fn snapshot(&self) -> Result<Option<EntrySnapshot>, Error> {
        self.task.snapshot().await
    }
}

type Job = Arc<dyn Fn(ScheduledRun) -> BoxFuture<'static, Result<(), String>> + Send + Sync>;

/// What a claim came to, for the run loop.
enum Claim {
    /// Run the slot.
    Run,
    /// Already claimed up to `last`: move past it (S11.2).
    Taken(u64),
    /// The term is over, or the backend says it is: wait for the revoke.
    TermOver,
    /// Given up (failed calls until the next slot, or unsupported).
    GaveUp,
}

/// The shared state of one schedule's leader task.
struct Ctx {
    name: LeaseName,
    /// The driver's inbox (not the client handle: the task must not keep
    /// the client open, S1.4).
    tx: mpsc::UnboundedSender<Msg>,
    runtime: Arc<dyn AsyncRuntime>,
    schedule: Schedule,
    hold: Duration,
    missed: MissedRuns,
    /// When the schedule started on this node: earlier slots are never
    /// missed ones (S11.4).
    started: u64,
    job: Job,
    /// The deliberate bug it runs with, if any (feature `mutants`).
    mutant: Selected,
}

/// Milliseconds since the Unix epoch on `runtime`'s wall clock
/// ([`AsyncRuntime::wall_clock`]).
fn wall_ms(runtime: &dyn AsyncRuntime) -> u64 {
    runtime
        .wall_clock()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl Ctx {
    /// The leader task of one term.
    async fn lead(self: Arc<Self>, term: Term) {
        let mut last_run: Option<Instant> = None;
        self.slots(&term, &mut last_run).await;
        // S11.5: the term is over (revoked). On a voluntary hand-over the
        // driver waits for this task, so holding here keeps the lease; on an
        // involuntary one this future has already been dropped (S6.3).
        if let Some(started) = last_run {
            let until = started + self.hold;
            if until > self.runtime.now() {
                tracing::debug!(name = %self.name, hold = ?self.hold, "minimum hold (S11.5)");
                self.runtime.sleep_until(until).await;
            }
        }
    }

    /// Runs the slots of `term` until it is revoked; which slot comes next
    /// is the core's [`SlotPlanner`] (S11.2, S11.4).
    async fn slots(&self, term: &Term, last_run: &mut Option<Instant>) {
        let mut plan = SlotPlanner::new(self.missed, self.started);
        loop {
            let Some(slot) = plan.next(self.schedule.rule(), wall_ms(&*self.runtime)) else {
                // No slot ever again (a cron date that never comes).
                term.revoked().await;
                return;
            };
            if !self.wait_for(term, slot).await {
                return;
            }
            if self.mutant.is(ClientMutant::SlotClaimedAfterRun) {
                // The mutant: run first, claim afterwards.
                *last_run = Some(self.runtime.now());
                self.run_one(term, slot).await;
                let claimed_up_to = match self.claim(term, slot).await {
                    Claim::Taken(last) => Some(last),
                    Claim::TermOver => {
                        term.revoked().await;
                        return;
                    }
                    Claim::Run | Claim::GaveUp => None,
                };
                plan.handled(slot, claimed_up_to, wall_ms(&*self.runtime));
                if term.revoke_reason().is_some() {
                    return;
                }
                continue;
            }
            let claimed_up_to = match self.claim(term, slot).await {
                Claim::Run => {
                    *last_run = Some(self.runtime.now());
                    self.run_one(term, slot).await;
                    None
                }
                Claim::Taken(last) => Some(last),
                Claim::GaveUp => None,
                Claim::TermOver => {
                    term.revoked().await;
                    return;
                }
            };
            plan.handled(slot, claimed_up_to, wall_ms(&*self.runtime));
            if term.revoke_reason().is_some() {
                return;
            }
        }
    }

    /// Sleeps until the wall clock reaches `slot`; `false` if the term
    /// was revoked first.
    async fn wait_for(&self, term: &Term, slot: u64) -> bool {
        loop {
            if term.revoke_reason().is_some() {
                return false;
            }
            let now = wall_ms(&*self.runtime);
            if now >= slot {
                return true;
            }
            let d = Duration::from_millis(slot - now).min(MAX_SLEEP);
            let sleep = self.runtime.sleep_until(self.runtime.now() + d);
            let revoked = Box::pin(term.revoked());
            if let Either::Right(_) = futures::future::select(sleep, revoked).await {
                return false;
            }
        }
    }

    /// Claims `slot` with the term's token (S11.1); a failed call is tried
    /// again (a retry of a recorded claim is answered `AlreadyClaimed`, so
    /// the slot still runs at most once) until the next slot is due.
    async fn claim(&self, term: &Term, slot: u64) -> Claim {
        let give_up_at = SlotPlanner::give_up_at(self.schedule.rule(), slot);
        let mut pause = CLAIM_RETRY_MIN;
        loop {
            let (reply, rx) = oneshot::channel();
            let sent = self.tx.unbounded_send(Msg::ClaimSlot {
                name: self.name.clone(),
                token: term.core_token(),
                slot,
                reply,
            });
            if sent.is_err() {
                return Claim::TermOver;
            }
            let answer = match rx.await {
                Ok(Ok(answer)) => answer,
                // The engine has no valid term of that token: it is over.
                Ok(Err(ApiError::Closed)) | Err(_) => return Claim::TermOver,
                Ok(Err(e)) => {
                    tracing::debug!(name = %self.name, slot, error = %e, "slot claim refused");
                    return Claim::TermOver;
                }
            };
            match answer.result {
                Ok(SlotClaim::Claimed) if answer.run => return Claim::Run,
                Ok(SlotClaim::Claimed) => {
                    tracing::warn!(name = %self.name, slot, "slot claimed after the term ended: not run (S11.1)");
                    return Claim::TermOver;
                }
                Ok(SlotClaim::AlreadyClaimed { last }) => {
                    tracing::debug!(name = %self.name, slot, last, "slot already claimed");
                    return Claim::Taken(last);
                }
                Ok(SlotClaim::NotHolder) => return Claim::TermOver,
                Err(e) if e.kind == BackendErrorKind::Unsupported => {
                    tracing::error!(name = %self.name, slot, error = %e, "the backend cannot record schedule slots: the slot is skipped");
                    return Claim::GaveUp;
                }
                Err(e) => {
                    tracing::warn!(name = %self.name, slot, error = %e, "slot claim failed; trying again");
                }
            }
            if wall_ms(&*self.runtime).saturating_add(u64::try_from(pause.as_millis()).unwrap_or(0))
                >= give_up_at
            {
                tracing::error!(name = %self.name, slot, "slot claim kept failing until the next slot: slot skipped");
                return Claim::GaveUp;
            }
            let sleep = self.runtime.sleep_until(self.runtime.now() + pause);
            let revoked = Box::pin(term.revoked());
            if let Either::Right(_) = futures::future::select(sleep, revoked).await {
                return Claim::TermOver;
            }
            pause = (pause * 2).min(CLAIM_RETRY_MAX);
        }
    }

    /// Runs the job for `slot`; a failure or panic is logged (S11.3).
    async fn run_one(&self, term: &Term, slot: u64) {
        tracing::info!(name = %self.name, token = term.token(), slot, "scheduled run");
        let run = ScheduledRun {
            term: term.clone(),
            slot,
        };
        match AssertUnwindSafe((self.job)(run)).catch_unwind().await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => {
                tracing::error!(name = %self.name, slot, %error, "scheduled run failed (S11.3)");
            }
            Err(_) => {
                tracing::error!(name = %self.name, slot, "scheduled run panicked (S11.3)");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const MIN: u64 = 60_000;

    #[test]
    fn s11_2_fixed_rate_slots_are_multiples_of_the_period_since_the_epoch() {
        let s = Schedule::every(Duration::from_secs(300));
        assert_eq!(s.next_slot_after(0), Some(5 * MIN));
        assert_eq!(s.next_slot_after(5 * MIN - 1), Some(5 * MIN));
        assert_eq!(s.next_slot_after(5 * MIN), Some(10 * MIN));
        assert_eq!(s.latest_slot_at_or_before(10 * MIN), Some(10 * MIN));
        assert_eq!(s.latest_slot_at_or_before(10 * MIN - 1), Some(5 * MIN));
        assert!(Schedule::every(Duration::from_micros(10))
            .validate()
            .is_err());
        assert!(Schedule::fixed_delay(Duration::ZERO).validate().is_err());
    }

    #[test]
    fn s11_2_cron_slots_follow_the_time_zone() {
        // 2026-03-29 is the spring change in Paris: 02:00 CET becomes 03:00 CEST.
        let s = Schedule::cron_in("30 1 * * *", "Europe/Paris").unwrap();
        // 2026-03-28T12:00:00Z.
        let mar_28_noon_utc = 1_774_699_200_000;
        // 01:30 CET on the 29th is 00:30Z.
        let first = s.next_slot_after(mar_28_noon_utc).unwrap();
        assert_eq!(first, 1_774_744_200_000);
        // 01:30 CEST on the 30th is 23:30Z on the 29th: 23 h later.
        let second = s.next_slot_after(first).unwrap();
        assert_eq!(second - first, 23 * 60 * MIN);
        assert_eq!(s.latest_slot_at_or_before(second), Some(second));
        assert_eq!(s.latest_slot_at_or_before(second - 1), Some(first));
        // Six fields: seconds first.
        let s = Schedule::cron("*/10 * * * * *").unwrap();
        assert_eq!(s.next_slot_after(1_500), Some(10_000));
        assert_eq!(s.next_slot_after(10_000), Some(20_000));
    }

    #[test]
    fn s11_2_bad_cron_and_zones_are_refused() {
        assert!(matches!(
            Schedule::cron("not cron"),
            Err(Error::InvalidSchedule(_))
        ));
        assert!(matches!(
            Schedule::cron_in("* * * * *", "Mars/Olympus"),
            Err(Error::InvalidSchedule(_))
        ));
    }
}
