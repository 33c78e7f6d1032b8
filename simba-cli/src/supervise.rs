//! `simba run` and `simba lock`: a child process that runs only while this
//! process holds the lease.
//!
//! Both run the child as the library's **leader task**
//! (`run_while_leader`), so the hand-over order of S6.1 has one
//! implementation, the library's: on Ctrl-C or SIGTERM simba stops the
//! election; the library revokes the term (`term.revoked()` resolves) and
//! keeps the lease while the task stops the child — SIGTERM to its process
//! group, SIGKILL after `--grace` capped by the time left until the term's
//! deadline as of the revoke (`Term::handover_remaining`, S6.2), or at once
//! on a second signal — and releases the lease only once the task has
//! returned (or, if it has not, when that deadline passes and the library
//! drops it, which kills the child). A term lost any other way (S6.3) drops
//! the task at once, which kills the child (SIGTERM then SIGKILL without
//! grace); the child's guard (see `child.rs`) covers a simba that is
//! stopped or dead. A child that exits on its own while leader ends the
//! election (`TaskExitPolicy::StopElection`: the lease is released) and
//! simba exits with its status, unless `--restart` runs it again.
//!
//! `simba lock` is the same with one term: an election that is stopped
//! after its first term, and given up after `--wait`.

use crate::child::{exit_code, ChildSpec, Running, TermEnv};
use crate::error::CliError;
use crate::events::{self, Event, To};
use crate::signals::StopSignals;
use crate::style;
use crate::style::human;
use simba_core::RevokeReason;
use simba_tokio::{ElectionListener, LeaderTask, Simba, TaskExitPolicy, Term};
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, Notify};

/// How long closing the client may take before simba gives up on it (the
/// session then expires by itself).
const CLOSE_TIMEOUT: Duration = Duration::from_secs(10);

/// `--restart` starts the command at most this often.
const RESTART_MIN_INTERVAL: Duration = Duration::from_millis(500);

/// How long simba waits for the status of a child killed with a lost term.
const KILLED_STATUS_WAIT: Duration = Duration::from_secs(5);

/// Options of `simba run`.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Exit after one term.
    pub once: bool,
    /// Re-run the command if it exits while still leader.
    pub restart: bool,
}

/// Prints one progress line on stderr (the child owns stdout); with
/// `--json`, a `note` event.
fn note(text: &str) {
    if events::json() {
        emit(&Event::Note {
            message: text.to_owned(),
        });
        return;
    }
    let mut err = anstream::stderr();
    let _ = writeln!(err, "{} {text}", style::dim("simba:"));
}

/// Prints one NDJSON event on stderr (`--json` only).
fn emit(event: &Event<'_>) {
    if events::json() {
        let _ = events::emit(To::Stderr, event);
    }
}

/// Prints a progress line, unless `--json` is on: the caller emits the
/// line's event instead.
fn note_text(text: &str) {
    if !events::json() {
        note(text);
    }
}

/// What the election and its leader task tell the command's loop (and,
/// its first two kinds only, `simba elect`'s).
pub(crate) enum Ev {
    /// A term began.
    Elected(Term),
    /// A term ended.
    Revoked(Term, RevokeReason),
    /// A child ended: simba's exit code for it; `own` if it exited on its
    /// own (not stopped by simba); `guard_fired` if its guard killed it.
    Exited {
        code: u8,
        own: bool,
        guard_fired: bool,
    },
    /// The command could not be started or waited for.
    Failed(CliError),
}

/// Forwards every term's start and end to the command's loop.
pub(crate) struct Forward(pub(crate) mpsc::UnboundedSender<Ev>);

impl ElectionListener for Forward {
    fn on_elected(&self, term: &Term) {
        let _ = self.0.send(Ev::Elected(term.clone()));
    }
    fn on_revoked(&self, term: &Term, reason: RevokeReason) {
        let _ = self.0.send(Ev::Revoked(term.clone(), reason));
    }
}

/// What every term's leader task needs.
struct Job {
    simba: Simba,
    spec: ChildSpec,
    restart: bool,
    events: mpsc::UnboundedSender<Ev>,
    /// A second Ctrl-C or SIGTERM while the child is being stopped.
    kill_now: Arc<Notify>,
}

/// A running child owned by the leader task. If the task is dropped (a lost
/// term, S6.3, or a hand-over whose deadline passed, S6.2) the child is
/// killed at once and its status reported.
struct Owned {
    running: Option<Running>,
    events: mpsc::UnboundedSender<Ev>,
}

impl Owned {
    fn get(&mut self) -> Result<&mut Running, CliError> {
        self.running
            .as_mut()
            .ok_or_else(|| CliError::Internal("the child is gone".into()))
    }
}

impl Drop for Owned {
    fn drop(&mut self) {
        if let Some(mut running) = self.running.take() {
            let events = self.events.clone();
            tokio::spawn(async move {
                let status = running.stop(Duration::ZERO, std::future::ready(())).await;
                if let Ok(status) = status {
                    let _ = events.send(Ev::Exited {
                        code: exit_code(status),
                        own: false,
                        guard_fired: false,
                    });
                }
            });
        }
    }
}

/// The session id the client holds now, for `SIMBA_SESSION_ID`.
async fn session_id(simba: &Simba) -> Option<String> {
    simba
        .snapshot()
        .await
        .ok()
        .and_then(|s| s.session.id)
        .map(|id| id.to_string())
}

/// The time the child may still run, for its guard: the term's remaining
/// time, and after a voluntary revoke the time left to hand over (S6.1).
fn remaining(term: &Term) -> crate::child::Remaining {
    let term = term.clone();
    Arc::new(move || term.handover_remaining())
}

async fn term_env(simba: &Simba, term: &Term) -> TermEnv {
    TermEnv {
        name: term.name().to_owned(),
        token: term.token(),
        session: session_id(simba).await,
        slot: None,
    }
}

/// The leader task of one term: runs the command (again, with `--restart`)
/// while the term lasts, and on a voluntary revoke stops it (S6.1 steps
/// 2–3) before returning, which lets the library release the lease.
async fn leader_task(job: Arc<Job>, term: Term) {
    let env = term_env(&job.simba, &term).await;
    loop {
        let started = std::time::Instant::now();
        let mut child = match job.spec.spawn(&env, remaining(&term)) {
            Ok(running) => Owned {
                running: Some(running),
                events: job.events.clone(),
            },
            Err(e) => {
                let _ = job.events.send(Ev::Failed(e));
                return;
            }
        };
        let exited = {
            let Ok(running) = child.get() else { return };
            tokio::select! {
                status = running.wait() => Some(status),
                _ = term.revoked() => None,
            }
        };
        let Some(status) = exited else {
            // A voluntary revoke (a lost term drops this future instead):
            // the lease is held until the child is gone.
            let grace = job.spec.grace.min(term.handover_remaining());
            let kill_now = job.kill_now.notified();
            let stopped = match child.get() {
                Ok(running) => running.stop(grace, kill_now).await,
                Err(e) => Err(e),
            };
            child.running = None;
            let _ = job.events.send(match stopped {
                Ok(status) => Ev::Exited {
                    code: exit_code(status),
                    own: false,
                    guard_fired: false,
                },
                Err(e) => Ev::Failed(e),
            });
            return;
        };
        let guard_fired = child.running.as_ref().is_some_and(Running::guard_fired);
        child.running = None;
        let code = match status {
            Ok(status) => exit_code(status),
            Err(e) => {
                let _ = job.events.send(Ev::Failed(e));
                return;
            }
        };
        if guard_fired {
            // simba was stopped or starved past the deadline: the guard
            // ended the child and the term is over; wait to be dropped.
            let _ = job.events.send(Ev::Exited {
                code,
                own: false,
                guard_fired: true,
            });
            term.revoked().await;
            return;
        }
        if job.restart && term.is_valid() {
            note(&format!(
                "{} exited ({code}) while leader: restarting",
                job.spec.program()
            ));
            // A command that fails at once is not restarted in a tight loop.
            let pause = RESTART_MIN_INTERVAL.saturating_sub(started.elapsed());
            tokio::select! {
                _ = tokio::time::sleep(pause) => continue,
                _ = term.revoked() => {
                    let _ = job.events.send(Ev::Exited { code, own: false, guard_fired: false });
                    return;
                }
            }
        }
        // Returning ends the election (StopElection): the lease is released
        // now that the child is gone (S6.1).
        let _ = job.events.send(Ev::Exited {
            code,
            own: true,
            guard_fired: false,
        });
        return;
    }
}

/// Closes the client (releasing every lease at once, S1.4), bounded in time.
pub(crate) async fn close(simba: &Simba) {
    if tokio::time::timeout(CLOSE_TIMEOUT, simba.close())
        .await
        .is_err()
    {
        note("closing the session timed out; it will expire by itself");
    }
}

fn describe(reason: RevokeReason) -> &'static str {
    match reason {
        RevokeReason::Stopped => "stopped",
        RevokeReason::SteppedDown => "stepped down",
        RevokeReason::DeadlinePassed => "the session's local deadline passed",
        RevokeReason::SessionExpired => "the backend expired the session",
        RevokeReason::TakenOver => "another session took the lease over",
        RevokeReason::Rebalanced => "the partition moved to another group member",
    }
}

/// A started election whose leader task runs the command.
struct Supervisor<'a> {
    simba: &'a Simba,
    name: &'a str,
    spec: &'a ChildSpec,
    task: LeaderTask,
    events: mpsc::UnboundedReceiver<Ev>,
    kill_now: Arc<Notify>,
    /// simba's exit code for the last child that ended.
    last: Option<u8>,
    /// Whether the current term's child has ended (its status is known).
    child_done: bool,
}

impl<'a> Supervisor<'a> {
    async fn start(
        simba: &'a Simba,
        name: &'a str,
        spec: &'a ChildSpec,
        restart: bool,
    ) -> Result<Supervisor<'a>, CliError> {
        let (tx, events) = mpsc::unbounded_channel();
        let kill_now = Arc::new(Notify::new());
        let job = Arc::new(Job {
            simba: simba.clone(),
            spec: spec.clone(),
            restart,
            events: tx.clone(),
            kill_now: kill_now.clone(),
        });
        let task = simba
            .election(name)
            .listener(Forward(tx))
            .on_task_exit(TaskExitPolicy::StopElection)
            .run_while_leader(move |term| leader_task(job.clone(), term))
            .await
            .map_err(|e| CliError::Internal(e.to_string()))?;
        Ok(Supervisor {
            simba,
            name,
            spec,
            task,
            events,
            kill_now,
            last: None,
            child_done: false,
        })
    }

    /// Stops the election through the library's hand-over (S6.1; a second
    /// signal meanwhile kills the child at once), closes the client, and
    /// returns the stopped child's exit code, if a child ran.
    async fn stop(mut self, signals: &mut StopSignals) -> Option<u8> {
        {
            let stop = self.task.stop();
            tokio::pin!(stop);
            loop {
                tokio::select! {
                    () = &mut stop => break,
                    _ = signals.recv() => self.kill_now.notify_one(),
                }
            }
        }
        while let Ok(ev) = self.events.try_recv() {
            self.report(&ev).await;
            if let Ev::Exited { code, .. } = ev {
                self.last = Some(code);
            }
        }
        close(self.simba).await;
        self.last
    }

    /// With `--json`, prints what an event says as an NDJSON event.
    async fn report(&self, ev: &Ev) {
        if !events::json() {
            return;
        }
        match ev {
            Ev::Elected(term) => emit(&Event::Elected {
                name: self.name,
                token: term.token(),
                session: session_id(self.simba).await,
                proposal: None,
            }),
            Ev::Revoked(term, reason) => emit(&Event::Revoked {
                name: self.name,
                token: term.token(),
                reason: reason.as_str(),
                voluntary: reason.is_voluntary(),
            }),
            Ev::Exited { code, .. } => emit(&Event::Exited {
                name: self.name,
                code: *code,
            }),
            Ev::Failed(_) => {}
        }
    }

    /// Notes what an event says about the current term's child.
    fn track(&mut self, ev: &Ev) {
        match ev {
            Ev::Elected(_) => self.child_done = false,
            Ev::Exited { code, .. } => {
                self.last = Some(*code);
                self.child_done = true;
            }
            _ => {}
        }
    }

    /// After a lost term: the status of the child killed with it.
    async fn killed_status(&mut self) -> Option<u8> {
        if self.child_done {
            return self.last;
        }
        let wait = tokio::time::sleep(KILLED_STATUS_WAIT);
        tokio::pin!(wait);
        loop {
            tokio::select! {
                ev = self.events.recv() => match ev {
                    Some(ev @ Ev::Exited { .. }) => {
                        self.track(&ev);
                        return self.last;
                    }
                    Some(_) => {}
                    None => return self.last,
                },
                () = &mut wait => return self.last,
            }
        }
    }

    /// Tracks an event received (`None`: the channel closed) and, with
    /// `--json`, reports it.
    async fn take_note(&mut self, ev: Option<&Ev>) {
        if let Some(ev) = ev {
            self.track(ev);
            self.report(ev).await;
        }
    }

    /// After a lost term: stops, and returns the status of the child
    /// killed with the term (1 if none is known).
    async fn stop_after_loss(mut self, signals: &mut StopSignals) -> u8 {
        let code = self.killed_status().await;
        let last = self.stop(signals).await;
        code.or(last).unwrap_or(1)
    }

    /// Stops (see [`Supervisor::stop`]) and returns `result`.
    async fn stop_with<T>(
        self,
        signals: &mut StopSignals,
        result: Result<T, CliError>,
    ) -> Result<T, CliError> {
        let _ = self.stop(signals).await;
        result
    }

    /// On the stop signal `sig`: says so, stops, and returns simba's exit
    /// code for it.
    async fn stop_on_signal(self, sig: i32, signals: &mut StopSignals) -> u8 {
        self.note_stopping(sig);
        let code = self.stop(signals).await;
        crate::signals::stopped_code(sig, code)
    }

    /// Note for a signal: what happens now.
    fn note_stopping(&self, signal: i32) {
        emit(&Event::Stopping {
            name: self.name,
            signal,
        });
        note_text(&format!(
            "stopping {} (grace {}) if it runs, then releasing `{}`",
            self.spec.program(),
            human(self.spec.grace),
            self.name
        ));
    }
}

/// The client's event channel closed under a running command: closes the
/// client and returns the error.
async fn client_stopped(simba: &Simba) -> CliError {
    close(simba).await;
    CliError::Internal("the client stopped unexpectedly".into())
}

/// Runs `simba run`; returns simba's exit code.
///
/// # Errors
/// [`CliError`] if the election cannot start or the command cannot be
/// spawned (the lease is released first).
pub async fn run(
    simba: &Simba,
    name: &str,
    spec: &ChildSpec,
    options: &RunOptions,
    signals: &mut StopSignals,
) -> Result<u8, CliError> {
    let mut sup = Supervisor::start(simba, name, spec, options.restart).await?;
    emit(&Event::Competing { name });
    note_text(&format!("competing for `{name}`"));
    say_who_holds(simba, name).await;
    loop {
        tokio::select! {
            ev = sup.events.recv() => {
                sup.take_note(ev.as_ref()).await;
                match ev {
                None => return Err(client_stopped(simba).await),
                Some(Ev::Elected(term)) => note_text(&format!(
                    "elected: `{name}` token {}, running {}",
                    term.token(),
                    spec.program()
                )),
                Some(Ev::Revoked(term, reason)) => {
                    if reason.is_voluntary() {
                        continue;
                    }
                    note_text(&format!("{}: term {} over ({}), stopping {}",
                        style::bad("lost"), term.token(), describe(reason), spec.program()));
                    if options.once {
                        return Ok(sup.stop_after_loss(signals).await);
                    }
                }
                Some(Ev::Exited { code, own, guard_fired }) => {
                    if guard_fired {
                        note(&format!("{}: term over while simba was held up; the guard stopped {}",
                            style::bad("lost"), spec.program()));
                    } else if own {
                        // The election ended with the task (StopElection).
                        return sup.stop_with(signals, Ok(code)).await;
                    }
                }
                Some(Ev::Failed(e)) => return sup.stop_with(signals, Err(e)).await,
                }
            },
            sig = signals.recv() => return Ok(sup.stop_on_signal(sig, signals).await),
        }
    }
}

/// Runs `simba lock`; returns simba's exit code.
///
/// # Errors
/// [`CliError::NotAcquired`] if `wait` passed first; [`CliError`] if the
/// command cannot be spawned (the lock is released first).
pub async fn lock(
    simba: &Simba,
    name: &str,
    wait: Option<Duration>,
    spec: &ChildSpec,
    signals: &mut StopSignals,
) -> Result<u8, CliError> {
    let mut sup = Supervisor::start(simba, name, spec, false).await?;
    emit(&Event::Competing { name });
    say_who_holds(simba, name).await;
    let give_up = wait.map(|d| tokio::time::Instant::now() + d);
    let mut acquired = false;
    loop {
        let timeout = async {
            match give_up {
                Some(at) if !acquired => tokio::time::sleep_until(at).await,
                _ => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            () = timeout => {
                return sup.stop_with(signals, Err(CliError::NotAcquired {
                    name: name.to_owned(),
                    waited: wait.unwrap_or_default(),
                })).await;
            }
            ev = sup.events.recv() => {
                sup.take_note(ev.as_ref()).await;
                match ev {
                None => return Err(client_stopped(simba).await),
                Some(Ev::Elected(_)) => acquired = true,
                Some(Ev::Revoked(term, reason)) => {
                    if reason.is_voluntary() {
                        continue;
                    }
                    // S5.3: a lock lost is gone for good.
                    note_text(&format!("{}: lock `{name}` token {} over ({}), stopping {}",
                        style::bad("lost"), term.token(), describe(reason), spec.program()));
                    return Ok(sup.stop_after_loss(signals).await);
                }
                Some(Ev::Exited { code, guard_fired, .. }) => {
                    if guard_fired {
                        note(&format!("{}: lock `{name}` over while simba was held up; the guard stopped {}",
                            style::bad("lost"), spec.program()));
                    }
                    return sup.stop_with(signals, Ok(code)).await;
                }
                Some(Ev::Failed(e)) => return sup.stop_with(signals, Err(e)).await,
                }
            },
            sig = signals.recv() => return Ok(sup.stop_on_signal(sig, signals).await),
        }
    }
}

/// Says who holds `name` when another process does (its session's metadata:
/// host, pid, …; the term's token; its time left on the backend's clock), so
/// a waiting `simba run`, `simba lock` or `simba cron` is not silent about what it waits for.
/// Best effort: a failed or slow look (over 1 s) says nothing.
pub(crate) async fn say_who_holds(simba: &Simba, name: &str) {
    let look = tokio::time::timeout(Duration::from_secs(1), simba.leader(name)).await;
    let Ok(Ok(Some(holder))) = look else {
        return;
    };
    let ours = std::process::id().to_string();
    if holder.metadata.get("pid") == Some(ours.as_str()) {
        return;
    }
    emit(&Event::Waiting {
        name,
        holder: holder.session.to_string(),
        token: holder.token.get(),
        remaining_ms: events::ms(holder.remaining),
        metadata: events::metadata_map(&holder.metadata),
    });
    note_text(&format!(
        "waiting: `{name}` is held by {} (token {}, {} left unless renewed)",
        holder.metadata,
        holder.token,
        human(holder.remaining)
    ));
}
