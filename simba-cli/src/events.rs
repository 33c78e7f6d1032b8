//! Machine-readable output (`--json`): one JSON object per line (NDJSON).
//!
//! `simba run --json` and `simba lock --json` write their events on stderr
//! (stdout belongs to the command); `simba elect --json` and
//! `simba watch --json` write them on stdout. Every object has an `event`
//! field naming its kind and an `at` field (the wall-clock time it was
//! written, RFC 3339 in UTC with milliseconds); the other fields depend on
//! the kind and are stable (scripts parse them). While `--json` is on,
//! every line simba itself writes, its progress notes and its final error
//! included, is such an object.

use serde::Serialize;
use std::collections::BTreeMap;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether `--json` was given.
static JSON: AtomicBool = AtomicBool::new(false);

/// Turns NDJSON output on (for the whole process).
pub fn set_json(on: bool) {
    JSON.store(on, Ordering::Relaxed);
}

/// Whether simba writes NDJSON instead of text.
pub fn json() -> bool {
    JSON.load(Ordering::Relaxed)
}

/// The current wall-clock time, RFC 3339 in UTC with milliseconds.
fn now() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}

/// One event. The variant is the `event` field, in snake case.
#[derive(Debug, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event<'a> {
    /// `run`/`lock`/`elect`: started competing for `name`.
    Competing {
        /// The lease name.
        name: &'a str,
    },
    /// `run`/`lock`: `name` is held by another session, which this one waits for.
    Waiting {
        /// The lease name.
        name: &'a str,
        /// The holder's session id.
        holder: String,
        /// The holder's fencing token.
        token: u64,
        /// The holder's remaining time on the backend's clock, in milliseconds.
        remaining_ms: u64,
        /// The holder's session metadata (host, pid, app, proposal, …).
        metadata: BTreeMap<String, String>,
    },
    /// `run`/`lock`/`elect`: a term began: this process leads `name`.
    Elected {
        /// The lease name.
        name: &'a str,
        /// The term's fencing token.
        token: u64,
        /// This process's session id, if known.
        session: Option<String>,
        /// `elect`: the proposal published with the session.
        #[serde(skip_serializing_if = "Option::is_none")]
        proposal: Option<&'a str>,
    },
    /// `run`/`lock`/`elect`: a term ended.
    Revoked {
        /// The lease name.
        name: &'a str,
        /// The term's fencing token.
        token: u64,
        /// Why: `stopped`, `stepped_down`, `deadline_passed`,
        /// `session_expired`, `taken_over` or `rebalanced`.
        reason: &'static str,
        /// Whether the term was given up on purpose (S6.1) rather than lost (S6.3).
        voluntary: bool,
    },
    /// `run`/`lock`: the command ended.
    Exited {
        /// The lease name.
        name: &'a str,
        /// simba's code for it: its exit status, or 128+n for signal n.
        code: u8,
    },
    /// `run`/`lock`/`elect`: a stop signal arrived; simba hands over and exits.
    Stopping {
        /// The lease name.
        name: &'a str,
        /// The signal's number (2: SIGINT, 15: SIGTERM).
        signal: i32,
    },
    /// `elect --listen`: `name` has a (new) leader.
    Leader {
        /// The lease name.
        name: &'a str,
        /// The leader's session id.
        holder: String,
        /// The leader's fencing token.
        token: u64,
        /// The leader's remaining time on the backend's clock, in milliseconds.
        remaining_ms: u64,
        /// The leader's session metadata (host, pid, app, proposal, …).
        metadata: BTreeMap<String, String>,
    },
    /// `elect --listen`: `name` has no leader.
    Vacant {
        /// The lease name.
        name: &'a str,
    },
    /// `watch`: one refresh of the status.
    Status(crate::status_json::StatusJson),
    /// `watch`: one refresh failed.
    InspectFailed {
        /// What went wrong (credentials redacted).
        message: String,
    },
    /// Anything else simba says on its way (a retry, a restart).
    Note {
        /// The text simba would have written without `--json`.
        message: String,
    },
    /// simba fails: the last line before it exits.
    Error {
        /// The error (credentials redacted).
        message: String,
        /// The exit status that follows.
        exit_code: u8,
    },
}

/// An event and its time, as written.
#[derive(Serialize)]
struct Line<'e, 'a> {
    #[serde(flatten)]
    event: &'e Event<'a>,
    at: String,
}

/// The NDJSON line of `event` (without the line break).
///
/// # Errors
/// A serialization error (none for these types in practice).
pub fn line(event: &Event<'_>) -> Result<String, serde_json::Error> {
    serde_json::to_string(&Line { event, at: now() })
}

/// Where an event goes.
#[derive(Clone, Copy, Debug)]
pub enum To {
    /// Standard output (`elect`, `watch`).
    Stdout,
    /// Standard error (`run`, `lock`: the command owns stdout).
    Stderr,
}

/// Writes `event` as one line. A failed write (a closed pipe) is ignored
/// on stderr and reported on stdout.
///
/// # Errors
/// The I/O error of a write to stdout.
pub fn emit(to: To, event: &Event<'_>) -> std::io::Result<()> {
    let text = line(event).map_err(std::io::Error::other)?;
    match to {
        To::Stdout => {
            let mut out = std::io::stdout().lock();
            writeln!(out, "{text}")?;
            out.flush()
        }
        To::Stderr => {
            let mut err = std::io::stderr().lock();
            let _ = writeln!(err, "{text}");
            Ok(())
        }
    }
}

/// A metadata as a sorted map, for JSON.
pub fn metadata_map(m: &simba_backends::SessionMetadata) -> BTreeMap<String, String> {
    m.iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// Milliseconds of `d`, saturating.
pub fn ms(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
