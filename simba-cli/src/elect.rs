//! `simba elect`: campaign for an election and hold it until stopped, or
//! (`--listen`) only watch who leads, like `etcdctl elect [-l]`.
//!
//! A campaign publishes its proposal as the session's `proposal` metadata
//! (S1: the metadata lives with the session), so observers (`elect
//! --listen`, `status`, a waiting `run`) see it next to the holder's host
//! and pid. It prints each term when it begins and when it ends; a lost term
//! (S6.3) is printed and the campaign goes on. On Ctrl-C or SIGTERM the
//! election is stopped (the lease released at once, S6.1: there is no task
//! to wait for) and simba exits as `run` does: 0 on SIGTERM, 130 on SIGINT.
//!
//! Listening uses the library's leader observation (`Simba::observe`): the
//! current leader first, then each change, polled once per renewal interval.

use crate::error::CliError;
use crate::events::{self, Event, To};
use crate::signals::StopSignals;
use crate::supervise::{close, Ev, Forward};
use futures::StreamExt;
use simba_core::RevokeReason;
use simba_tokio::{Simba, Term};
use std::io::Write;
use tokio::sync::mpsc;

/// The session metadata key under which a campaign publishes its proposal.
pub const PROPOSAL_KEY: &str = "proposal";

/// Writes one event on stdout: NDJSON with `--json`, else one line of text.
fn say(event: &Event<'_>) -> Result<(), CliError> {
    if events::json() {
        return Ok(events::emit(To::Stdout, event)?);
    }
    let text = match event {
        Event::Competing { name } => format!("campaigning name={name}"),
        Event::Elected {
            name,
            token,
            session,
            proposal,
        } => format!(
            "elected name={name} token={token} session={} proposal={}",
            session.as_deref().unwrap_or("-"),
            proposal.unwrap_or("")
        ),
        Event::Revoked {
            name,
            token,
            reason,
            ..
        } => format!("revoked name={name} token={token} reason={reason}"),
        Event::Stopping { name, signal } => format!("stopping name={name} signal={signal}"),
        Event::Leader {
            name,
            holder,
            token,
            remaining_ms,
            metadata,
        } => {
            let meta: Vec<String> = metadata.iter().map(|(k, v)| format!("{k}={v}")).collect();
            format!(
                "leader name={name} token={token} session={holder} remaining_ms={remaining_ms} {}",
                meta.join(" ")
            )
        }
        Event::Vacant { name } => format!("vacant name={name}"),
        other => events::line(other).map_err(|e| CliError::Internal(e.to_string()))?,
    };
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", text.trim_end())?;
    out.flush()?;
    Ok(())
}

/// The session id the client holds now.
async fn session_id(simba: &Simba) -> Option<String> {
    simba
        .snapshot()
        .await
        .ok()
        .and_then(|s| s.session.id)
        .map(|id| id.to_string())
}

fn revoked<'a>(name: &'a str, term: &Term, reason: RevokeReason) -> Event<'a> {
    Event::Revoked {
        name,
        token: term.token(),
        reason: reason.as_str(),
        voluntary: reason.is_voluntary(),
    }
}

/// Runs `simba elect NAME [PROPOSAL]`: campaigns until stopped; returns
/// simba's exit code.
///
/// # Errors
/// [`CliError`] if the election cannot start, or writing stdout fails.
pub async fn campaign(
    simba: &Simba,
    name: &str,
    proposal: Option<&str>,
    signals: &mut StopSignals,
) -> Result<u8, CliError> {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let election = simba
        .election(name)
        .start(Forward(tx))
        .await
        .map_err(|e| CliError::Internal(e.to_string()))?;
    say(&Event::Competing { name })?;
    loop {
        tokio::select! {
            ev = rx.recv() => match ev {
                Some(Ev::Elected(term)) => say(&Event::Elected {
                    name,
                    token: term.token(),
                    session: session_id(simba).await,
                    proposal,
                })?,
                Some(Ev::Revoked(term, reason)) => say(&revoked(name, &term, reason))?,
                // No leader task: nothing exits or fails.
                Some(Ev::Exited { .. } | Ev::Failed(_)) => {}
                None => {
                    close(simba).await;
                    return Err(CliError::Internal("the client stopped unexpectedly".into()));
                }
            },
            sig = signals.recv() => {
                say(&Event::Stopping { name, signal: sig })?;
                election.stop().await;
                close(simba).await;
                while let Ok(ev) = rx.try_recv() {
                    if let Ev::Revoked(term, reason) = ev {
                        say(&revoked(name, &term, reason))?;
                    }
                }
                return Ok(crate::signals::stopped_code(sig, None));
            }
        }
    }
}

/// Runs `simba elect --listen NAME`: prints the leader of NAME and each
/// change until Ctrl-C or SIGTERM (then exits 0), without campaigning.
///
/// # Errors
/// [`CliError`] if observation cannot start, or writing stdout fails.
pub async fn listen(simba: &Simba, name: &str) -> Result<u8, CliError> {
    let mut leaders = simba
        .observe(name)
        .map_err(|e| CliError::Internal(e.to_string()))?;
    let mut stop = std::pin::pin!(crate::signals::shutdown());
    loop {
        tokio::select! {
            item = leaders.next() => match item {
                Some(Some(holder)) => say(&Event::Leader {
                    name,
                    holder: holder.session.to_string(),
                    token: holder.token.get(),
                    remaining_ms: events::ms(holder.remaining),
                    metadata: events::metadata_map(&holder.metadata),
                })?,
                Some(None) => say(&Event::Vacant { name })?,
                None => {
                    close(simba).await;
                    return Err(CliError::Internal("the client stopped unexpectedly".into()));
                }
            },
            _ = &mut stop => {
                close(simba).await;
                return Ok(crate::error::EXIT_OK);
            }
        }
    }
}
