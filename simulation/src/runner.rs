//! Running seeds and summarising them.

use crate::core_api::Mutant;
use crate::params::{draw, Mode, RunParams};
use crate::world::{RunReport, World};
use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

/// Runs the seed `seed` of `mode` with `mutant`.
pub fn run_seed(seed: u64, mode: Mode, mutant: Option<Mutant>) -> RunReport {
    run_params(draw(seed, mode, mutant))
}

/// Runs a run with explicit parameters (e.g. a hand-written fault schedule).
pub fn run_params(params: RunParams) -> RunReport {
    World::new(params).run()
}

/// Runs the seed `seed` of `mode` with `mutant` to its end, past every
/// violation ([`World::keep_going`]): the report lists every checker that
/// fired, not only the first.
pub fn run_seed_keep_going(seed: u64, mode: Mode, mutant: Option<Mutant>) -> RunReport {
    World::new(draw(seed, mode, mutant)).keep_going().run()
}

/// Totals over many runs.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    /// Runs.
    pub seeds: u64,
    /// True time simulated, in total.
    pub simulated: Duration,
    /// Steps processed, in total.
    pub steps: u64,
    /// Faults injected, by kind.
    pub faults: BTreeMap<&'static str, u64>,
    /// Runs with at least one violation, with their first violation.
    pub failed: Vec<(u64, String)>,
    /// Terms started.
    pub terms: u64,
    /// `on_elected` calls refused by the callback executor (S7.7).
    pub rejected: u64,
    /// Register writes.
    pub writes: u64,
    /// Stale writes the unfenced register accepted.
    pub unfenced_anomalies: u64,
    /// Stale writes the fenced register refused.
    pub fenced_rejections: u64,
    /// Stale writes the fenced register accepted (each a violation).
    pub fenced_stale_accepted: u64,
    /// Longest time from healing to a leader, over all runs.
    pub max_time_to_leader: Duration,
    /// The largest ratio of that time to the run's bound.
    pub max_bound_use: f64,
    /// Leases removed from live holders from outside (`lease-removed`, S3.4).
    pub leases_removed: u64,
    /// Of those, the ones judged at the holder's first renewal sent after
    /// the removal (the others' terms ended first).
    pub removals_judged: u64,
    /// Terms revoked `TakenOver` (S3.4).
    pub taken_over: u64,
    /// Runs with each optional workload or fault on (the swarm).
    pub swarm: BTreeMap<&'static str, u64>,
}

impl Summary {
    /// Adds one run.
    pub fn add(&mut self, r: &RunReport) {
        self.seeds += 1;
        self.simulated += r.simulated;
        self.steps += r.steps;
        for (k, v) in &r.faults {
            *self.faults.entry(k).or_insert(0) += v;
        }
        for k in &r.swarm_on {
            *self.swarm.entry(k).or_insert(0) += 1;
        }
        if let Some(v) = r.violations.first() {
            self.failed
                .push((r.seed, format!("{v}\n  swarm: {}", r.swarm)));
        }
        self.terms += r.terms;
        self.rejected += r.rejected;
        self.writes += r.writes;
        self.unfenced_anomalies += r.unfenced_anomalies;
        self.fenced_rejections += r.fenced_rejections;
        self.fenced_stale_accepted += r.fenced_stale_accepted;
        self.leases_removed += r.leases_removed;
        self.removals_judged += r.removals_judged;
        self.taken_over += r
            .revocations
            .iter()
            .filter(|(_, _, _, reason)| reason == "TakenOver")
            .count() as u64;
        if let Some(t) = r.max_time_to_leader {
            self.max_time_to_leader = self.max_time_to_leader.max(t);
            let use_ = t.as_secs_f64() / r.liveness_bound.as_secs_f64().max(1e-9);
            self.max_bound_use = self.max_bound_use.max(use_);
        }
    }

    /// Counts a run that panicked as a failed seed (it must not vanish).
    pub fn add_panic(&mut self, seed: u64, message: String) {
        self.seeds += 1;
        self.failed
            .push((seed, format!("the run panicked: {message}")));
    }

    /// Runs with a violation.
    pub fn violations(&self) -> usize {
        self.failed.len()
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "seeds: {}", self.seeds)?;
        writeln!(
            f,
            "simulated hours: {:.2}",
            self.simulated.as_secs_f64() / 3600.0
        )?;
        writeln!(f, "steps: {}", self.steps)?;
        writeln!(
            f,
            "terms: {} ({} on_elected refused, S7.7)",
            self.terms, self.rejected
        )?;
        writeln!(
            f,
            "register writes: {} (unfenced register: {} stale writes accepted; fenced register: {} refused, {} accepted)",
            self.writes, self.unfenced_anomalies, self.fenced_rejections, self.fenced_stale_accepted
        )?;
        writeln!(
            f,
            "liveness: worst time to a leader after healing {:?} ({:.0}% of its bound)",
            self.max_time_to_leader,
            self.max_bound_use * 100.0
        )?;
        if self.leases_removed > 0 {
            writeln!(
                f,
                "leases removed from live holders: {} ({} judged at the holder's next renewal; {} terms revoked TakenOver)",
                self.leases_removed, self.removals_judged, self.taken_over
            )?;
        }
        if !self.swarm.is_empty() {
            writeln!(f, "runs with each optional workload or fault (the swarm):")?;
            for (k, v) in &self.swarm {
                writeln!(f, "  {k}: {v}")?;
            }
        }
        writeln!(f, "faults by kind:")?;
        for (k, v) in &self.faults {
            writeln!(f, "  {k}: {v}")?;
        }
        for (seed, v) in self.failed.iter().take(20) {
            writeln!(f, "seed {seed}: {v}")?;
        }
        write!(f, "violations: {}", self.violations())
    }
}

/// Prints the speed of the simulator for 5 nodes and 3 election names at
/// default timing (15 s leases), without faults and with a partition, pause
/// or crash every two minutes: simulated time
/// per wall-clock second, single-threaded.
#[allow(clippy::disallowed_methods)] // measuring wall-clock speed is the point
pub fn speed_report() {
    use crate::params::scenario;
    for (label, faults) in [("fault-free", false), ("faulty", true)] {
        let mut p = scenario(1, 5);
        p.elections = (0..3)
            .map(|i| {
                simba_core::LeaseName::new(format!("e{i}"))
                    .unwrap_or_else(|_| p.elections[0].clone())
            })
            .collect();
        p.lease_duration = Duration::from_secs(15);
        p.renew_interval = Duration::from_secs(5);
        p.drift = 0.01;
        p.margin = Duration::from_millis(50);
        p.node_rates_ppb = vec![crate::clock::PPB; 5];
        p.net.min_delay = Duration::from_millis(1);
        p.net.jitter = Duration::from_millis(5);
        p.workload.api_gap = Duration::from_secs(120);
        p.workload.write_period = Duration::from_secs(1);
        p.safety_phase = Duration::from_secs(3600);
        if faults {
            // Every 2 minutes a partition, pause or crash of one node.
            use crate::params::{Direction, Fault, FaultKind};
            p.faults = (0..30u64)
                .map(|i| Fault {
                    at: Duration::from_secs(60 + 120 * i),
                    duration: Duration::from_secs(5 + 7 * (i % 5)),
                    kind: match i % 3 {
                        0 => FaultKind::Partition {
                            node: (i % 5) as usize,
                            direction: Direction::Both,
                        },
                        1 => FaultKind::Pause {
                            node: (i % 5) as usize,
                            after_send: true,
                        },
                        _ => FaultKind::Crash {
                            node: (i % 5) as usize,
                        },
                    },
                })
                .collect();
        }
        let start = std::time::Instant::now();
        let r = World::new(p).run();
        let wall = start.elapsed();
        println!(
            "{label}: simulated {:.2} h in {:.3} s wall ({} steps): {:.0}× real time; violations: {}",
            r.simulated.as_secs_f64() / 3600.0,
            wall.as_secs_f64(),
            r.steps,
            r.simulated.as_secs_f64() / wall.as_secs_f64().max(1e-9),
            r.violations.len()
        );
    }
}

/// Runs seeds `first..first + max` of `mode` with `mutant` until one breaks
/// a checker; returns that seed and its first violation.
pub fn hunt(
    mode: Mode,
    mutant: Option<Mutant>,
    first: u64,
    max: u64,
) -> Option<(u64, crate::world::Violation)> {
    (first..first.saturating_add(max)).find_map(|seed| {
        let r = run_seed(seed, mode, mutant);
        r.violations.into_iter().next().map(|v| (seed, v))
    })
}

/// Runs seeds `first..first + count` of `mode` on `threads` threads and
/// sums them up (the summary is the same for any thread count). A seed whose
/// run panicked counts as a failed seed, so `seeds` is always `count`.
pub fn run_many(mode: Mode, first: u64, count: u64, threads: usize) -> Summary {
    let threads = threads.max(1) as u64;
    let mut parts: Vec<Vec<Result<RunReport, (u64, String)>>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || {
                    (first..first + count)
                        .filter(|seed| (seed - first) % threads == t)
                        .map(|seed| {
                            std::panic::catch_unwind(|| run_seed(seed, mode, None))
                                .map_err(|e| (seed, panic_message(e.as_ref())))
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect()
    });
    let mut all: Vec<Result<RunReport, (u64, String)>> = parts.drain(..).flatten().collect();
    all.sort_by_key(|r| match r {
        Ok(r) => r.seed,
        Err((seed, _)) => *seed,
    });
    let mut summary = Summary::default();
    for r in &all {
        match r {
            Ok(r) => summary.add(r),
            Err((seed, m)) => summary.add_panic(*seed, m.clone()),
        }
    }
    summary
}

fn panic_message(e: &(dyn std::any::Any + Send)) -> String {
    e.downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| e.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a non-string panic".to_owned())
}
