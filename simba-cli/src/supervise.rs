//! `simba run` and `simba lock`: a child process that runs only while this
//! process holds the lease.
//!
//! The command drives an election (or a lock) with a listener rather than a
//! leader task, so that it decides the handover order itself (S6.1): on
//! Ctrl-C or SIGTERM the child is stopped **while the term is still held**,
//! and only then is the election stopped, which releases the lease. A term
//! lost any other way (S6.3) stops the child at once: SIGTERM, then SIGKILL
//! as soon as the term is over, which it already is.

use crate::child::{exit_code, ChildSpec, Running, TermEnv};
use crate::error::CliError;
use crate::settings::human;
use crate::signals::StopSignals;
use crate::style;
use simba_core::RevokeReason;
use simba_tokio::{ElectionListener, Simba, Term};
use std::io::Write;
use std::process::ExitStatus;
use std::time::Duration;
use tokio::sync::mpsc;

/// How long closing the client may take before simba gives up on it (the
/// session then expires by itself).
const CLOSE_TIMEOUT: Duration = Duration::from_secs(10);

/// `--restart` starts the command at most this often.
const RESTART_MIN_INTERVAL: Duration = Duration::from_millis(500);

/// Options of `simba run`.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Exit after one term.
    pub once: bool,
    /// Re-run the command if it exits while still leader.
    pub restart: bool,
}

/// Prints one progress line on stderr (the child owns stdout).
fn note(text: &str) {
    let mut err = anstream::stderr();
    let _ = writeln!(err, "{} {text}", style::dim("simba:"));
}

/// Forwards every new term of the election to the command's loop.
struct Forward(mpsc::UnboundedSender<Term>);

impl ElectionListener for Forward {
    fn on_elected(&self, term: &Term) {
        let _ = self.0.send(term.clone());
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

/// The term's remaining time, for the child's guard.
fn remaining(term: &Term) -> crate::child::Remaining {
    let term = term.clone();
    std::sync::Arc::new(move || term.remaining())
}

async fn term_env(simba: &Simba, term: &Term) -> TermEnv {
    TermEnv {
        name: term.name().to_owned(),
        token: term.token(),
        session: session_id(simba).await,
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

/// Stops `child` while `term` may still be held: SIGTERM, then SIGKILL after
/// `grace`, capped by the term's remaining time (S6.2), or at once if the
/// term ends meanwhile (S6.3).
/// A second Ctrl-C or SIGTERM meanwhile sends the SIGKILL at once.
async fn stop_child(
    child: &mut Running,
    grace: Duration,
    term: &Term,
    signals: &mut StopSignals,
) -> Result<ExitStatus, CliError> {
    let cap = grace.min(term.remaining());
    let revoked = term.revoked();
    let abort = async {
        tokio::select! {
            _ = revoked => {}
            _ = signals.recv() => {}
        }
    };
    child.stop(cap, abort).await
}

fn describe(reason: RevokeReason) -> &'static str {
    match reason {
        RevokeReason::Stopped => "stopped",
        RevokeReason::SteppedDown => "stepped down",
        RevokeReason::DeadlinePassed => "the session's local deadline passed",
        RevokeReason::SessionExpired => "the backend expired the session",
        RevokeReason::TakenOver => "another session took the lease over",
    }
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
    let (tx, mut terms) = mpsc::unbounded_channel();
    let election = simba
        .election(name)
        .start(Forward(tx))
        .await
        .map_err(|e| CliError::Internal(e.to_string()))?;
    note(&format!("competing for `{name}`"));
    let mut last: Option<u8> = None;
    loop {
        // Candidate: wait for a term or a stop signal.
        let term = tokio::select! {
            term = terms.recv() => match term {
                Some(term) => term,
                None => {
                    close(simba).await;
                    return Err(CliError::Internal("the client stopped unexpectedly".into()));
                }
            },
            sig = signals.recv() => {
                election.stop().await;
                close(simba).await;
                return Ok(last.unwrap_or(128 + sig as u8));
            }
        };
        if !term.is_valid() {
            continue; // already over: a later term will come
        }
        let env = term_env(simba, &term).await;
        note(&format!(
            "elected: `{name}` token {}, running {}",
            term.token(),
            spec.program()
        ));
        // Leader: run the command (again, with --restart) while the term lasts.
        loop {
            let started = std::time::Instant::now();
            let mut child = match spec.spawn(&env, remaining(&term)) {
                Ok(child) => child,
                Err(e) => {
                    election.stop().await;
                    close(simba).await;
                    return Err(e);
                }
            };
            tokio::select! {
                status = child.wait() => {
                    let code = exit_code(status?);
                    if child.guard_fired() {
                        // simba was stopped or starved past the deadline:
                        // the guard ended the child; the term is over.
                        note(&format!("{}: term {} over while simba was held up; the guard stopped {}",
                            style::bad("lost"), term.token(), spec.program()));
                        last = Some(code);
                        if options.once {
                            election.stop().await;
                            close(simba).await;
                            return Ok(code);
                        }
                        break;
                    }
                    if options.restart && term.is_valid() {
                        note(&format!("{} exited ({code}) while leader: restarting", spec.program()));
                        // A command that fails at once is not restarted in a tight loop.
                        let pause = RESTART_MIN_INTERVAL.saturating_sub(started.elapsed());
                        tokio::select! {
                            _ = tokio::time::sleep(pause) => continue,
                            _ = term.revoked() => {
                                if options.once {
                                    election.stop().await;
                                    close(simba).await;
                                    return Ok(code);
                                }
                                break;
                            }
                            _ = signals.recv() => {
                                election.stop().await;
                                close(simba).await;
                                return Ok(code);
                            }
                        }
                    }
                    // Release only after the child is gone (S6.1).
                    election.stop().await;
                    close(simba).await;
                    return Ok(code);
                }
                reason = term.revoked() => {
                    note(&format!("{}: term {} over ({}), stopping {}",
                        style::bad("lost"), term.token(), describe(reason), spec.program()));
                    let code = exit_code(stop_child(&mut child, spec.grace, &term, signals).await?);
                    last = Some(code);
                    if options.once {
                        election.stop().await;
                        close(simba).await;
                        return Ok(code);
                    }
                    break;
                }
                _ = signals.recv() => {
                    note(&format!("stopping {} (grace {}), then releasing `{name}`",
                        spec.program(), human(spec.grace.min(term.remaining()))));
                    let code = exit_code(stop_child(&mut child, spec.grace, &term, signals).await?);
                    election.stop().await;
                    close(simba).await;
                    return Ok(code);
                }
            }
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
    let lock = simba.lock(name);
    let acquired = tokio::select! {
        r = async {
            match wait {
                Some(d) => lock.acquire_timeout(d).await,
                None => lock.acquire().await,
            }
        } => r,
        sig = signals.recv() => {
            close(simba).await;
            return Ok(128 + sig as u8);
        }
    };
    let held = match acquired {
        Ok(held) => held,
        Err(simba_tokio::LockError::TimedOut { .. }) => {
            close(simba).await;
            return Err(CliError::NotAcquired {
                name: name.to_owned(),
                waited: wait.unwrap_or_default(),
            });
        }
        Err(e) => {
            close(simba).await;
            return Err(CliError::Internal(e.to_string()));
        }
    };
    let term = held.term().clone();
    let env = term_env(simba, &term).await;
    let mut child = match spec.spawn(&env, remaining(&term)) {
        Ok(child) => child,
        Err(e) => {
            held.release().await;
            close(simba).await;
            return Err(e);
        }
    };
    let code = tokio::select! {
        status = child.wait() => exit_code(status?),
        reason = term.revoked() => {
            note(&format!("{}: lock `{name}` token {} over ({}), stopping {}",
                style::bad("lost"), term.token(), describe(reason), spec.program()));
            exit_code(stop_child(&mut child, spec.grace, &term, signals).await?)
        }
        _ = signals.recv() => exit_code(stop_child(&mut child, spec.grace, &term, signals).await?),
    };
    held.release().await;
    close(simba).await;
    Ok(code)
}
