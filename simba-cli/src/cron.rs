//! `simba cron NAME 'SCHEDULE' -- CMD`: runs CMD at each slot of SCHEDULE,
//! only on the leader of NAME, each slot at most once across leaders (S11).
//!
//! The schedule is the client's ([`simba_tokio::Simba::schedule`]): a slot is
//! claimed in the backend with the term's token before its run (S11.1). Each
//! run is a child handled as in `simba run`: its own process group, a guard
//! process holding the term's deadline, SIGTERM then SIGKILL when the term
//! ends (S6.2, S6.3). On Ctrl-C or SIGTERM a running child is stopped
//! **while the term is still held**, then the election is stopped (after the
//! minimum hold, S11.5), which releases the lease (S6.1).

use crate::child::{exit_code, ChildSpec, TermEnv};
use crate::error::CliError;
use crate::signals::StopSignals;
use crate::style;
use crate::style::human;
use simba_tokio::{MissedRuns, Schedule, ScheduledRun, Simba};
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch, Notify};

/// How long closing the client may take before simba gives up on it.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(10);

/// Options of `simba cron`.
#[derive(Clone, Debug)]
pub struct CronOptions {
    /// What to do with missed slots (S11.4).
    pub missed: MissedRuns,
    /// The minimum hold after a run starts (S11.5).
    pub hold: Duration,
}

fn note(text: &str) {
    let mut err = anstream::stderr();
    let _ = writeln!(err, "{} {text}", style::dim("simba:"));
}

/// Parses SCHEDULE: `every DURATION` (fixed rate), `delay DURATION` (fixed
/// delay), or a cron expression (5 fields, or 6 with seconds) in `tz`.
///
/// # Errors
/// [`CliError::InvalidSchedule`] if it does not parse.
pub fn parse_schedule(text: &str, tz: Option<&str>) -> Result<Schedule, CliError> {
    let t = text.trim();
    let word = |w: &str| {
        t.strip_prefix(&format!("@{w} "))
            .or_else(|| t.strip_prefix(&format!("{w} ")))
    };
    let invalid = |e: simba_tokio::Error| CliError::InvalidSchedule(e.to_string());
    let duration = |d: &str| {
        humantime::parse_duration(d.trim())
            .map_err(|e| CliError::InvalidSchedule(format!("{t:?}: {e}")))
    };
    if let Some(d) = word("every") {
        if tz.is_some() {
            return Err(CliError::InvalidSchedule(
                "--tz applies to cron expressions only".into(),
            ));
        }
        let period = duration(d)?;
        if period < Duration::from_millis(1) {
            return Err(CliError::InvalidSchedule(
                "the period must be at least 1ms".into(),
            ));
        }
        return Ok(Schedule::every(period));
    }
    if let Some(d) = word("delay") {
        let delay = duration(d)?;
        if delay < Duration::from_millis(1) {
            return Err(CliError::InvalidSchedule(
                "the delay must be at least 1ms".into(),
            ));
        }
        return Ok(Schedule::fixed_delay(delay));
    }
    Schedule::cron_in(t, tz.unwrap_or("UTC")).map_err(invalid)
}

/// Parses `--missed`.
///
/// # Errors
/// [`CliError::InvalidSchedule`] for anything but `skip` or `run-once`.
pub fn parse_missed(text: &str) -> Result<MissedRuns, CliError> {
    match text.trim() {
        "skip" => Ok(MissedRuns::Skip),
        "run-once" | "run_once" | "once" => Ok(MissedRuns::RunOnce),
        other => Err(CliError::InvalidSchedule(format!(
            "--missed {other:?}: expected skip or run-once"
        ))),
    }
}

/// What the runs share with the command's loop.
struct Shared {
    simba: Simba,
    name: String,
    spec: ChildSpec,
    /// A run that cannot start its command reports it here (simba exits).
    errors: mpsc::UnboundedSender<CliError>,
    /// Set on Ctrl-C or SIGTERM: stop the running child while the term is
    /// still held, and start no new one.
    stopping: AtomicBool,
    stop_child: Notify,
    /// A second Ctrl-C or SIGTERM: SIGKILL at once.
    kill_now: Notify,
    /// Whether a child runs now.
    running: watch::Sender<bool>,
}

/// Marks a child as running until dropped (also when the run is dropped:
/// a term lost involuntarily, S6.3).
struct RunningMark<'a>(&'a watch::Sender<bool>);

impl Drop for RunningMark<'_> {
    fn drop(&mut self) {
        self.0.send_replace(false);
    }
}

impl Shared {
    async fn run(self: Arc<Self>, run: ScheduledRun) -> Result<(), String> {
        let term = run.term().clone();
        if self.stopping.load(Ordering::Acquire) || !term.is_valid() {
            return Ok(());
        }
        let session = self
            .simba
            .snapshot()
            .await
            .ok()
            .and_then(|s| s.session.id)
            .map(|id| id.to_string());
        let env = TermEnv {
            name: self.name.clone(),
            token: term.token(),
            session,
            slot: Some(run.slot()),
        };
        note(&format!(
            "slot {} ({}), token {}: running {}",
            run.slot(),
            humantime::format_rfc3339_millis(run.scheduled_for()),
            term.token(),
            self.spec.program()
        ));
        let remaining = {
            let term = term.clone();
            Arc::new(move || term.remaining())
        };
        let mut child = match self.spec.spawn(&env, remaining) {
            Ok(child) => child,
            Err(e) => {
                let message = e.to_string();
                let _ = self.errors.send(e);
                return Err(message);
            }
        };
        self.running.send_replace(true);
        let _mark = RunningMark(&self.running);
        let status = tokio::select! {
            biased;
            () = self.stop_child.notified() => {
                let grace = self.spec.grace.min(term.remaining());
                note(&format!("stopping {} (grace {}) before releasing `{}`",
                    self.spec.program(), human(grace), self.name));
                child.stop(grace, self.kill_now.notified()).await
            }
            status = child.wait() => status,
            reason = term.revoked() => {
                note(&format!("{}: term {} over ({reason}), stopping {}",
                    style::bad("lost"), term.token(), self.spec.program()));
                child.stop(Duration::ZERO, std::future::ready(())).await
            }
        };
        let code = exit_code(status.map_err(|e| e.to_string())?);
        if code == 0 {
            note(&format!(
                "slot {}: {} exited 0",
                run.slot(),
                self.spec.program()
            ));
            Ok(())
        } else {
            Err(format!("{} exited {code}", self.spec.program()))
        }
    }
}

/// Closes the client (releasing every lease at once, S1.4), bounded in time.
async fn close(simba: &Simba) {
    if tokio::time::timeout(CLOSE_TIMEOUT, simba.close())
        .await
        .is_err()
    {
        note("closing the session timed out; it will expire by itself");
    }
}

/// Runs `simba cron`; returns simba's exit code once a signal stopped it
/// (see `signals::stopped_code`: 0 after SIGTERM, 130 after SIGINT).
///
/// # Errors
/// [`CliError`] if the schedule cannot start or a command cannot be spawned
/// (the lease is released first).
pub async fn cron(
    simba: &Simba,
    name: &str,
    schedule: Schedule,
    spec: &ChildSpec,
    options: &CronOptions,
    signals: &mut StopSignals,
) -> Result<u8, CliError> {
    let (errors, mut failed) = mpsc::unbounded_channel();
    let shared = Arc::new(Shared {
        simba: simba.clone(),
        name: name.to_owned(),
        spec: spec.clone(),
        errors,
        stopping: AtomicBool::new(false),
        stop_child: Notify::new(),
        kill_now: Notify::new(),
        running: watch::channel(false).0,
    });
    let described = schedule.to_string();
    let runs = shared.clone();
    let job = simba
        .schedule(name, schedule)
        .lock_at_least_for(options.hold)
        .missed(options.missed)
        .run(move |run| runs.clone().run(run))
        .await
        .map_err(|e| CliError::Internal(e.to_string()))?;
    note(&format!(
        "competing for `{name}`; runs {} on {described}",
        spec.program()
    ));
    crate::supervise::say_who_holds(simba, name).await;
    tokio::select! {
        e = failed.recv() => {
            job.stop().await;
            close(simba).await;
            Err(e.unwrap_or_else(|| CliError::Internal("the schedule stopped unexpectedly".into())))
        }
        sig = signals.recv() => {
            // S6.1: the child stops while the term is held, then the release.
            shared.stopping.store(true, Ordering::Release);
            shared.stop_child.notify_one();
            let mut running = shared.running.subscribe();
            tokio::select! {
                _ = running.wait_for(|r| !*r) => {}
                _ = signals.recv() => shared.kill_now.notify_one(),
            }
            // The child is gone (or being killed): revoke and release.
            job.stop().await;
            close(simba).await;
            Ok(crate::signals::stopped_code(sig, None))
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn schedules_parse_as_rate_delay_or_cron() {
        let s = parse_schedule("every 5m", None).unwrap();
        assert_eq!(s.next_slot_after(0), Some(300_000));
        let s = parse_schedule("@every 1s", None).unwrap();
        assert_eq!(s.next_slot_after(1_500), Some(2_000));
        assert!(parse_schedule("delay 30s", None).unwrap().is_fixed_delay());
        let s = parse_schedule("*/10 * * * * *", None).unwrap();
        assert_eq!(s.next_slot_after(0), Some(10_000));
        assert!(parse_schedule("0 3 * * *", Some("Europe/Paris")).is_ok());
        for bad in ["every soon", "every 0s", "61 * * * *", "delay"] {
            assert!(
                matches!(parse_schedule(bad, None), Err(CliError::InvalidSchedule(_))),
                "{bad}"
            );
        }
        assert!(parse_schedule("0 3 * * *", Some("Nowhere/Else")).is_err());
        assert!(parse_schedule("every 5m", Some("UTC")).is_err());
        assert_eq!(parse_missed("run-once").unwrap(), MissedRuns::RunOnce);
        assert!(parse_missed("twice").is_err());
    }
}
