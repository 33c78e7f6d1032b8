//! What one run records, on its simulated clock: the trace, the violations
//! found, and the backend's grants for the token check (S3.2). The nodes'
//! tasks, their view of the backend and the world all write here; it knows
//! nothing of them.

use crate::trace::Trace;
use simba_core::{LeaseName, SessionId, Token};
use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

/// Locks `m`, taking the data of a poisoned lock (a panicking task is a
/// violation of its own; the run goes on to report it).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A broken invariant or checker finding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// Simulated time it was found at.
    pub at: Duration,
    /// The node whose action broke it, if one.
    pub node: Option<usize>,
    /// Which check, and what it saw.
    pub what: String,
}

/// The run's trace and findings.
pub(crate) struct Journal {
    /// The run's start on tokio's paused clock.
    pub(crate) start: tokio::time::Instant,
    pub(crate) trace: Mutex<Trace>,
    pub(crate) violations: Mutex<Vec<Violation>>,
    /// The last won term per lease: (token, session), for the token check.
    won: Mutex<BTreeMap<LeaseName, (Token, SessionId)>>,
}

impl Journal {
    pub(crate) fn new(start: tokio::time::Instant) -> Journal {
        Journal {
            start,
            trace: Mutex::default(),
            violations: Mutex::default(),
            won: Mutex::default(),
        }
    }

    /// The simulated time since the start of the run.
    pub(crate) fn now(&self) -> Duration {
        tokio::time::Instant::now() - self.start
    }

    pub(crate) fn record(&self, node: Option<usize>, text: String) {
        let at = self.now();
        lock(&self.trace).record(at, node, text);
    }

    pub(crate) fn violate(&self, node: Option<usize>, what: String) {
        let at = self.now();
        self.record(node, format!("VIOLATION: {what}"));
        lock(&self.violations).push(Violation { at, node, what });
    }

    /// S3.2 at the backend: every new term of a lease has a greater token
    /// than every earlier one. A smaller (or reused) token means the
    /// backend lost its state.
    pub(crate) fn token_won(&self, name: &LeaseName, session: SessionId, token: Token) {
        let mut won = lock(&self.won);
        let seen = won.get(name).copied();
        let _ = won.insert(name.clone(), (token, session));
        drop(won);
        if let Some((last, by)) = seen {
            if token < last || (token == last && by != session) {
                self.violate(
                    None,
                    format!(
                        "fencing tokens went backwards (S3.2): lease {name} granted token {token} \
                         after token {last} (did the backend lose its state?)"
                    ),
                );
            }
        }
    }
}
