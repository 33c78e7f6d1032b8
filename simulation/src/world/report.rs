//! What a run reports: its violations and its figures.

use simba_core::LeaseName;
use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

/// A broken rule, found by a checker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// True time of the step that broke it.
    pub at: Duration,
    /// Which checker fired (cites the SPEC rule).
    pub checker: &'static str,
    /// What happened.
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{:?}] {}: {}", self.at, self.checker, self.message)
    }
}

/// The outcome of one run.
#[derive(Clone, Debug, Default)]
pub struct RunReport {
    /// The run's seed.
    pub seed: u64,
    /// Hash of the trace (every processed event and engine output).
    pub trace_hash: u64,
    /// True time simulated.
    pub simulated: Duration,
    /// Steps processed.
    pub steps: u64,
    /// Checker violations (the run stops at the first one, unless
    /// [`World::keep_going`]).
    pub violations: Vec<Violation>,
    /// Faults injected, by kind.
    pub faults: BTreeMap<&'static str, u64>,
    /// Terms started (Elected events).
    pub terms: u64,
    /// Writes that reached the registers.
    pub writes: u64,
    /// Writes the unfenced register accepted from an older term after a newer one.
    pub unfenced_anomalies: u64,
    /// Writes the fenced register refused (stale tokens).
    pub fenced_rejections: u64,
    /// `SessionLeaseShortened` events (S8.4).
    pub leases_shortened: u64,
    /// `on_elected` calls the callback executor refused (S7.7).
    pub rejected: u64,
    /// Warnings the engines logged.
    pub warnings: u64,
    /// Messages lost to loss or partitions.
    pub messages_lost: u64,
    /// Every election: (true time, node, name, token), in order.
    pub elections: Vec<(Duration, usize, LeaseName, u64)>,
    /// Every revocation: (true time, node, name, reason), in order.
    pub revocations: Vec<(Duration, usize, LeaseName, String)>,
    /// Stale writes the fenced register accepted (each also a violation).
    pub fenced_stale_accepted: u64,
    /// The liveness bound of the run ([`RunParams::liveness_bound`](crate::RunParams::liveness_bound),
    /// plus what is left past `max_cooldown` of an S6.5 back-off at healing).
    pub liveness_bound: Duration,
    /// The longest time from healing to a leader, over the contended names.
    pub max_time_to_leader: Option<Duration>,
    /// Leases an outside actor removed from a live, elected holder
    /// (`lease removed` faults that found one, S3.4).
    pub leases_removed: u64,
    /// Of those, the terms whose holder reached a renewal that had to tell
    /// it (its first renewal sent after the removal, answered and taken),
    /// judged by the `taken over (S3.4)` checker. The others ended first.
    pub removals_judged: u64,
    /// The run's swarm, one line ([`RunParams::swarm`]).
    pub swarm: String,
    /// The optional workloads and faults it had on ([`RunParams::swarm_on`]).
    pub swarm_on: Vec<&'static str>,
}
