//! The JSON shape of `simba status --json` and `simba watch --json`: plain
//! data, shared by the status commands and the event stream.

use serde::Serialize;
use simba_backends::Inspection;
use std::time::Duration;

/// The JSON shape of `simba status --json` (stable: scripts parse it).
#[derive(Debug, Serialize)]
pub struct StatusJson {
    /// The backend kind (`sqlite`, `postgres`, `mysql`, `memory`).
    pub backend: &'static str,
    /// Leases by name.
    pub leases: Vec<LeaseJson>,
    /// Live sessions by id.
    pub sessions: Vec<SessionJson>,
}

/// One lease in [`StatusJson`].
#[derive(Debug, Serialize)]
pub struct LeaseJson {
    /// The lease name.
    pub name: String,
    /// The holding session id (32 hex digits), or `null` if free.
    pub holder: Option<String>,
    /// The current (or latest) fencing token.
    pub token: Option<u64>,
    /// The holder's remaining time in milliseconds, by the backend's clock.
    pub remaining_ms: Option<u64>,
}

/// One session in [`StatusJson`].
#[derive(Debug, Serialize)]
pub struct SessionJson {
    /// The session id (32 hex digits).
    pub session: String,
    /// Time until the backend expires it, in milliseconds.
    pub remaining_ms: u64,
    /// The lease duration each renewal grants, in milliseconds.
    pub lease_duration_ms: u64,
    /// What the session's client attached to it (host, pid, app, …).
    pub metadata: std::collections::BTreeMap<String, String>,
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Converts an inspection to its JSON shape.
pub fn to_json(backend: &'static str, i: &Inspection) -> StatusJson {
    StatusJson {
        backend,
        leases: i
            .leases
            .iter()
            .map(|l| LeaseJson {
                name: l.name.as_str().to_owned(),
                holder: l.holder.map(|s| s.to_string()),
                token: l.token.map(|t| t.get()),
                remaining_ms: l.remaining.map(ms),
            })
            .collect(),
        sessions: i
            .sessions
            .iter()
            .map(|s| SessionJson {
                session: s.session.to_string(),
                remaining_ms: ms(s.remaining),
                lease_duration_ms: ms(s.lease_duration),
                metadata: s
                    .metadata
                    .iter()
                    .map(|(k, v)| (k.to_owned(), v.to_owned()))
                    .collect(),
            })
            .collect(),
    }
}
