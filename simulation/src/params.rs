//! Everything a run draws from its seed (swarm testing, as TigerBeetle's VOPR):
//! cluster size, names, timing, clocks, backend behaviour, network, workload
//! and the fault schedule. `--seed S` prints all of it.

use crate::backend::BackendOptions;
use crate::clock::PPB;
use crate::core_api::Mutant;
use simba_core::{LeaseName, SimbaConfig, TaskOutcome};
use std::fmt;
use std::time::Duration;

/// Which kind of run: the default must pass every checker; the others are
/// documented failure modes (S2.5, drift beyond the bound, state loss) that
/// must be *caught*, or demonstrations that must pass: pauses, while the
/// unfenced register shows anomalies; leases removed from live holders
/// from outside Simba (S3.4), while the holder must end its term at its
/// next renewal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Mode {
    /// Faults within Simba's assumptions: every checker must pass. Each
    /// seed draws its swarm: which workloads (elections, locks, leader
    /// tasks that return, fail or panic, schedules, a group) and which
    /// faults (leases removed from outside among them) are on.
    Default,
    /// Node clocks slower than the backend's by 2–4 × `drift`: must break mutual exclusion.
    DriftBeyondBound,
    /// The backend clock steps forward (S2.5): must break mutual exclusion.
    BackendClockStep,
    /// The backend restarts and loses its state (Redis without persistence).
    BackendStateLoss,
    /// Process pauses (GC, SIGSTOP) and slow writes: every checker must pass,
    /// while the unfenced register shows stale writes the fenced one refuses.
    Pauses,
    /// The default mode's faults without its swarm of workloads, plus, in
    /// every run (the default mode draws them in about 30% of its runs),
    /// an outside actor that removes leases from live holders in the backend ([`FaultKind::LeaseRemoved`]: an operator
    /// deleting the row, key or znode, a Redis eviction). Every checker must
    /// pass, including `taken over (S3.4)`; mutual exclusion allows the
    /// stolen-from holder to stay valid only until its first renewal sent
    /// after the removal is answered (S3.4: Simba cannot know sooner).
    LeaseRemoved,
}

impl Mode {
    /// Every mode, in CLI order.
    pub const ALL: [Mode; 6] = [
        Mode::Default,
        Mode::DriftBeyondBound,
        Mode::BackendClockStep,
        Mode::BackendStateLoss,
        Mode::Pauses,
        Mode::LeaseRemoved,
    ];

    /// The CLI name.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Default => "default",
            Mode::DriftBeyondBound => "drift-beyond-bound",
            Mode::BackendClockStep => "backend-clock-step",
            Mode::BackendStateLoss => "backend-state-loss",
            Mode::Pauses => "pauses",
            Mode::LeaseRemoved => "lease-removed",
        }
    }

    /// The mode named `name`.
    pub fn from_name(name: &str) -> Option<Mode> {
        Mode::ALL.into_iter().find(|m| m.name() == name)
    }

    /// Whether runs of this mode are expected to break safety.
    pub fn must_fail(self) -> bool {
        matches!(
            self,
            Mode::DriftBeyondBound | Mode::BackendClockStep | Mode::BackendStateLoss
        )
    }
}

/// A direction of the link between a node and the backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Direction {
    /// Requests from the node are lost.
    ToBackend,
    /// Replies and broadcasts to the node are lost.
    FromBackend,
    /// Both.
    Both,
}

/// One fault of the schedule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// The link between `node` and the backend drops messages.
    Partition {
        /// The node.
        node: usize,
        /// Which way.
        direction: Direction,
    },
    /// `node` is not stepped while time moves on (GC pause, SIGSTOP).
    Pause {
        /// The node.
        node: usize,
        /// Start at the node's next backend call or register write after
        /// `at`, rather than at `at`: the worst moment for a pause.
        after_send: bool,
    },
    /// `node` crashes; it restarts (a new process, a new session) when the fault ends.
    Crash {
        /// The node.
        node: usize,
    },
    /// `node`'s monotonic clock jumps forward (a VM resumed).
    NodeClockStep {
        /// The node.
        node: usize,
        /// By how much.
        forward: Duration,
    },
    /// The backend is down for the fault's duration, then restarts.
    BackendRestart {
        /// Whether it keeps its state (persistent store) or loses it all.
        keep_state: bool,
    },
    /// The backend's clock steps by `delta_ms` (S2.5).
    BackendClockStep {
        /// Signed step in milliseconds.
        delta_ms: i64,
    },
    /// The next won acquire reply to `node` is stuck for the fault's
    /// duration plus a renewal interval, while `node` pauses for the
    /// duration: it arrives after the node's session has ended and a new
    /// one opened (an abandoned attempt's late grant, S4.3).
    DelayedGrant {
        /// The node.
        node: usize,
    },
    /// The next successful renewal of `node` (armed for the fault's
    /// duration) gets a reply `delay` late, and the node is cut off from the
    /// backend both ways for two leases from the moment the backend renewed:
    /// a deadline counted from the reply's arrival outlives the session (S2.1).
    SlowRenewalThenPartition {
        /// The node.
        node: usize,
        /// How late the reply arrives.
        delay: Duration,
    },
    /// The backend answers slowly: up to `extra` more per reply.
    SlowBackend {
        /// The extra reply delay's upper bound.
        extra: Duration,
    },
    /// An outside actor removes the lease of `name` from its live holder in
    /// the backend (an operator's delete, a Redis eviction; the token
    /// counter is kept): another node may acquire it at once, and the
    /// holder learns it from its next renewal reply (S3.4 `TakenOver`).
    /// Only a lease whose holder's engine has been elected for it and not
    /// revoked the term is removed; otherwise the fault does nothing.
    LeaseRemoved {
        /// The name.
        name: LeaseName,
    },
}

impl FaultKind {
    /// A stable label, for the summary.
    pub fn label(&self) -> &'static str {
        match self {
            FaultKind::Partition {
                direction: Direction::Both,
                ..
            } => "partition (two-way)",
            FaultKind::Partition { .. } => "partition (one-way)",
            FaultKind::Pause { .. } => "pause",
            FaultKind::Crash { .. } => "crash+restart",
            FaultKind::NodeClockStep { .. } => "node clock step",
            FaultKind::BackendRestart { keep_state: true } => "backend restart (state kept)",
            FaultKind::BackendRestart { keep_state: false } => "backend restart (state lost)",
            FaultKind::BackendClockStep { .. } => "backend clock step",
            FaultKind::SlowBackend { .. } => "slow backend",
            FaultKind::DelayedGrant { .. } => "delayed grant",
            FaultKind::SlowRenewalThenPartition { .. } => "slow renewal then partition",
            FaultKind::LeaseRemoved { .. } => "lease removed",
        }
    }
}

/// A fault at a true instant, lasting `duration`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    /// When it starts, from the start of the run.
    pub at: Duration,
    /// How long it lasts (at least the kind's minimum duration).
    pub duration: Duration,
    /// What it is.
    pub kind: FaultKind,
}

/// The network between each node and the backend.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NetParams {
    /// Every message takes at least this long.
    pub min_delay: Duration,
    /// Plus a uniform delay in `[0, jitter)`.
    pub jitter: Duration,
    /// Per mille of messages that take a long-tail delay instead.
    pub tail_permille: u32,
    /// The long-tail delay is uniform in `[0, tail_max)`.
    pub tail_max: Duration,
    /// Per mille of messages lost.
    pub loss_permille: u32,
    /// Per mille of messages delivered twice (each copy with its own delay).
    pub dup_permille: u32,
}

impl NetParams {
    /// The largest delay of the healed network (no tail), used by the liveness bound.
    pub fn healed_max_delay(&self) -> Duration {
        self.min_delay + self.jitter
    }
}

/// The workload: API calls and the tasks elected nodes run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkloadParams {
    /// Mean gap between two random API calls of one node.
    pub api_gap: Duration,
    /// Per mille of `stop`/`step_down` calls armed to fire right after the
    /// node's next acquire for that name (the worst moment).
    pub armed_permille: u32,
    /// Per mille of API calls that are `close()`.
    pub close_permille: u32,
    /// Longest `step_down` cooldown.
    pub max_cooldown: Duration,
    /// Per mille of `on_elected` callbacks the executor refuses (S7.7).
    pub reject_permille: u32,
    /// A task writes to both registers this often (local time).
    pub write_period: Duration,
    /// A task exits within this after its interrupt…
    pub exit_delay: Duration,
    /// …except this per mille of tasks that ignore the interrupt for a while (S6.2)…
    pub slow_exit_permille: u32,
    /// …for up to this long.
    pub slow_exit_max: Duration,
    /// Per mille of election tasks that end on their own within one lease
    /// duration of their start, during the safety phase (S6.5).
    pub task_crash_permille: u32,
    /// How such a task ends, drawn uniformly from this list (returns, fails
    /// or panics); empty means it panics.
    pub task_end_outcomes: Vec<TaskOutcome>,
}

/// An API call of a hand-written scenario.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScriptCall {
    /// `start_election(name)` (with a task).
    Start(LeaseName),
    /// `stop(name)`.
    Stop(LeaseName),
    /// `step_down(name, cooldown)`.
    StepDown(LeaseName, Duration),
    /// `close()`.
    Close,
}

/// A scripted API call: `call` on `node` at true time `at`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scripted {
    /// When.
    pub at: Duration,
    /// Which node.
    pub node: usize,
    /// What.
    pub call: ScriptCall,
}

/// Every parameter of one run.
#[derive(Clone, Debug)]
pub struct RunParams {
    /// The seed everything was drawn from.
    pub seed: u64,
    /// The kind of run.
    pub mode: Mode,
    /// Tight timing: node clocks at the slow edge of the bound, near-zero delays.
    pub tight: bool,
    /// The deliberately broken core, if any.
    pub mutant: Option<Mutant>,
    /// Cluster size (1–16).
    pub nodes: usize,
    /// Election names.
    pub elections: Vec<LeaseName>,
    /// Lock names.
    pub locks: Vec<LeaseName>,
    /// `SimbaConfig::lease_duration`.
    pub lease_duration: Duration,
    /// `SimbaConfig::renew_interval`.
    pub renew_interval: Duration,
    /// `SimbaConfig::drift`.
    pub drift: f64,
    /// `SimbaConfig::margin`.
    pub margin: Duration,
    /// ZooKeeper-like: the backend caps the grant and one renewal proves 5/12 (S8.4, S8.5).
    pub zk_like: bool,
    /// The simulated backend's behaviour.
    pub backend: BackendOptions,
    /// Backend clock rate, parts per billion of true time.
    pub backend_rate_ppb: u64,
    /// Node clock rates, parts per billion of true time.
    pub node_rates_ppb: Vec<u64>,
    /// Node clock offsets (nanoseconds read at true time zero).
    pub node_offsets: Vec<u64>,
    /// The network.
    pub net: NetParams,
    /// The workload.
    pub workload: WorkloadParams,
    /// The fault schedule of the safety phase.
    pub faults: Vec<Fault>,
    /// Length of the safety phase (faults on).
    pub safety_phase: Duration,
    /// Scripted API calls (hand-written scenarios), on top of the random ones.
    pub script: Vec<Scripted>,
    /// Replaces the derived liveness bound (to prove the liveness checker fires).
    pub liveness_override: Option<Duration>,
    /// Partitioned groups every node joins at boot, with their partition
    /// counts (S10) ([`group_workload`] sets one of 12 partitions).
    pub groups: Vec<(LeaseName, u32)>,
    /// How many acquires, releases and withdraws one call may carry
    /// (`BackendProfile::batch`, S4.7); 1: each is its own call.
    pub batch: usize,
}

impl RunParams {
    /// The optional workloads and fault kinds this run has on, as the
    /// summary counts them.
    pub fn swarm_on(&self) -> Vec<&'static str> {
        let mut on = Vec::new();
        if !self.locks.is_empty() {
            on.push("locks");
        }
        if self.workload.task_crash_permille > 0 {
            on.push("tasks ending on their own (S6.5)");
        }
        if !self.groups.is_empty() {
            on.push("groups (S10)");
        }
        if self.batch > 1 {
            on.push("batched calls (S4.7)");
        }
        if self
            .faults
            .iter()
            .any(|f| matches!(f.kind, FaultKind::LeaseRemoved { .. }))
        {
            on.push("leases removed from outside (S3.4)");
        }
        on
    }

    /// One line naming the workloads and faults this run has on (the swarm
    /// drawn from its seed), e.g. `nodes 3, elections 2, locks 1, tasks end
    /// on their own 150‰ (panicked), group grp/8;
    /// faults: lease removed ×4, pause ×2`.
    pub fn swarm(&self) -> String {
        let mut on = vec![
            format!("nodes {}", self.nodes),
            format!("elections {}", self.elections.len()),
        ];
        if !self.locks.is_empty() {
            on.push(format!("locks {}", self.locks.len()));
        }
        let w = &self.workload;
        if w.task_crash_permille > 0 {
            let how: Vec<&str> = if w.task_end_outcomes.is_empty() {
                vec![TaskOutcome::Panicked.as_str()]
            } else {
                w.task_end_outcomes.iter().map(|o| o.as_str()).collect()
            };
            on.push(format!(
                "tasks end on their own {}‰ ({})",
                w.task_crash_permille,
                how.join("/")
            ));
        }
        for (g, n) in &self.groups {
            on.push(format!("group {g}/{n}"));
        }
        if self.batch > 1 {
            on.push(format!("batches of up to {}", self.batch));
        }
        let mut kinds: std::collections::BTreeMap<&str, usize> = Default::default();
        for f in &self.faults {
            *kinds.entry(f.kind.label()).or_default() += 1;
        }
        let faults: Vec<String> = kinds.iter().map(|(k, n)| format!("{k} ×{n}")).collect();
        let faults = if faults.is_empty() {
            "none".to_owned()
        } else {
            faults.join(", ")
        };
        format!("{}; faults: {faults}", on.join(", "))
    }

    /// The engine configuration of node `node`, incarnation `inc`.
    ///
    /// # Errors
    /// The config's validation error, if the drawn timing breaks S8.1.
    pub fn config(&self, node: usize, inc: u64) -> Result<SimbaConfig, simba_core::ConfigError> {
        let b = SimbaConfig::builder()
            .lease_duration(self.lease_duration)
            .renew_interval(self.renew_interval)
            .drift(self.drift)
            .margin(self.margin)
            .seed(self.seed ^ (node as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ inc << 40);
        crate::core_api::with_mutant(b, self.mutant).build()
    }

    /// The retry jitter in force (`renew_interval / 2`, the default).
    pub fn retry_jitter(&self) -> Duration {
        self.renew_interval / 2
    }

    /// The liveness bound after healing (stated in docs/FAULTS.md):
    /// `max_cooldown + 2·L·(1 + 2·d') + 2·I + J + T + 4·D`, with `L` the lease
    /// duration, `d'` the larger of `drift` and the backend's rate error, `I`
    /// the renewal interval, `J` the retry jitter, `T` the call timeout (one
    /// renewal interval, S2.4) and `D` the healed network's largest one-way delay.
    /// A run whose tasks failed or panicked just before healing adds what is
    /// left of their S6.5 back-off past `max_cooldown` (`RunReport::liveness_bound`).
    pub fn liveness_bound(&self) -> Duration {
        if let Some(b) = self.liveness_override {
            return b;
        }
        let backend_err = self.backend_rate_ppb.abs_diff(PPB) as f64 / PPB as f64;
        let d = self.drift.max(backend_err);
        let l = self.lease_duration.mul_f64(2.0 * (1.0 + 2.0 * d));
        self.workload.max_cooldown
            + l
            + self.renew_interval * 2
            + self.retry_jitter()
            + self.renew_interval
            + self.net.healed_max_delay() * 4
    }
}

impl fmt::Display for RunParams {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self:#?}")
    }
}

struct Draw {
    rng: fastrand::Rng,
}

impl Draw {
    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.rng.usize(..items.len())]
    }
    fn chance(&mut self, permille: u32) -> bool {
        self.rng.u32(..1000) < permille
    }
    fn dur(&mut self, lo: Duration, hi: Duration) -> Duration {
        if hi <= lo {
            return lo;
        }
        let lo_n = lo.as_nanos() as u64;
        let hi_n = hi.as_nanos() as u64;
        Duration::from_nanos(self.rng.u64(lo_n..hi_n))
    }
}

fn name(s: &str) -> LeaseName {
    // The names below are valid (S3.1); fall back to a fixed valid one.
    LeaseName::new(s).unwrap_or_else(|_| LeaseName::new("n").unwrap_or_else(|_| unreachable_name()))
}

#[allow(clippy::panic)]
fn unreachable_name() -> LeaseName {
    panic!("`n` is a valid lease name (S3.1)")
}

const MS: Duration = Duration::from_millis(1);
const US: Duration = Duration::from_micros(1);

/// Draws every parameter of the run `seed` of `mode`, with `mutant`.
pub fn draw(seed: u64, mode: Mode, mutant: Option<Mutant>) -> RunParams {
    let mut d = Draw {
        rng: fastrand::Rng::with_seed(seed ^ 0x05EE_D0F5_14BA),
    };
    // A quarter of the default runs (and every must-fail run) use tight
    // timing: node clocks exactly at the slow edge of the bound and near-zero
    // delays, where a lost margin or drift factor shows.
    let tight = match mode {
        Mode::Default | Mode::LeaseRemoved => d.chance(300),
        Mode::DriftBeyondBound | Mode::BackendClockStep | Mode::BackendStateLoss => true,
        Mode::Pauses => false,
    };
    let nodes = if tight {
        d.pick(&[2, 3, 3, 4, 5])
    } else {
        d.pick(&[1, 2, 3, 3, 3, 4, 5, 5, 5, 6, 7, 8, 10, 12, 16])
    };
    let n_elections = d.pick(&[1, 1, 2, 3]);
    let n_locks = if tight { 0 } else { d.pick(&[0, 0, 1]) };
    let elections: Vec<LeaseName> = (0..n_elections).map(|i| name(&format!("e{i}"))).collect();
    let locks: Vec<LeaseName> = (0..n_locks).map(|i| name(&format!("lock{i}"))).collect();

    let lease_duration = if tight {
        d.pick(&[1, 2, 3, 5, 15]) * Duration::from_secs(1)
    } else {
        d.pick(&[1, 2, 3, 5, 10, 15]) * Duration::from_secs(1)
    };
    let renew_interval = lease_duration / d.pick(&[3, 3, 4]);
    let mut drift = if tight {
        d.pick(&[0.02, 0.05, 0.1])
    } else {
        d.pick(&[0.0, 0.001, 0.01, 0.01, 0.05, 0.1, 0.2])
    };
    let mut margin = if tight {
        d.pick(&[2 * MS, 5 * MS, 20 * MS])
    } else {
        d.pick(&[2 * MS, 10 * MS, 50 * MS])
    };
    // S8.1: lease_duration × (1 − drift) − margin > renew_interval.
    while lease_duration.mul_f64(1.0 - drift).saturating_sub(margin) <= renew_interval {
        drift /= 2.0;
        margin /= 2;
    }
    let zk_like = !tight && lease_duration >= Duration::from_secs(3) && d.chance(150);

    let backend = if tight {
        BackendOptions {
            broadcast_release: true,
            broadcast_expiry: true,
            millisecond_clock: true,
            round_remaining_up: true,
            max_grant: None,
        }
    } else {
        let broadcast_release = d.chance(700);
        BackendOptions {
            broadcast_release,
            broadcast_expiry: broadcast_release && d.chance(500),
            millisecond_clock: d.chance(500),
            round_remaining_up: d.chance(500),
            max_grant: zk_like.then(|| lease_duration.mul_f64(d.pick(&[0.5, 0.75, 1.0]))),
        }
    };

    // Clocks. The backend's rate is off by up to 500 ppm; each node's rate,
    // relative to the backend's, is within 1 ± drift (at the slow edge in
    // tight runs), or 2–4 × drift slow when the run must break the bound.
    let backend_rate_ppb = if tight {
        PPB
    } else {
        PPB - 500_000 + d.rng.u64(..1_000_000)
    };
    let mut node_rates_ppb = Vec::with_capacity(nodes);
    let mut node_offsets = Vec::with_capacity(nodes);
    for _ in 0..nodes {
        let rel = match mode {
            Mode::DriftBeyondBound => 1.0 - drift * d.pick(&[2.0, 3.0, 4.0]),
            _ if tight => 1.0 - drift,
            _ => {
                if d.chance(250) {
                    1.0 - drift
                } else if d.chance(150) {
                    1.0 + drift
                } else {
                    1.0 - drift + 2.0 * drift * d.rng.f64()
                }
            }
        };
        // Round up, so a node never runs slower than the bound allows.
        node_rates_ppb.push((backend_rate_ppb as f64 * rel).ceil() as u64);
        node_offsets.push(d.rng.u64(1..3_600) * 1_000_000_000 + d.rng.u64(..1_000_000_000));
    }

    let call_timeout = renew_interval;
    let net = if tight {
        NetParams {
            min_delay: 5 * US,
            jitter: d.pick(&[10 * US, 60 * US, 200 * US]),
            tail_permille: d.pick(&[0, 10, 30]),
            tail_max: call_timeout * 2,
            loss_permille: d.pick(&[0, 5]),
            dup_permille: d.pick(&[0, 20]),
        }
    } else {
        NetParams {
            min_delay: d.pick(&[Duration::ZERO, 100 * US, MS, 2 * MS]),
            jitter: d
                .pick(&[MS, 5 * MS, 20 * MS, 50 * MS])
                .min(renew_interval / 10),
            tail_permille: d.pick(&[0, 10, 30, 80]),
            tail_max: call_timeout * d.pick(&[1, 2, 3]),
            loss_permille: d.pick(&[0, 0, 10, 50]),
            dup_permille: d.pick(&[0, 0, 20, 50]),
        }
    };

    let workload = WorkloadParams {
        api_gap: lease_duration * d.pick(&[1, 2, 4]),
        armed_permille: d.pick(&[0, 300, 600]),
        close_permille: d.pick(&[0, 20, 50]),
        reject_permille: d.pick(&[0, 0, 20]),
        max_cooldown: lease_duration.min(renew_interval * 2),
        write_period: renew_interval / d.pick(&[2, 4, 8]),
        exit_delay: d.pick(&[US, MS, 10 * MS]),
        slow_exit_permille: d.pick(&[0, 100, 300]),
        slow_exit_max: lease_duration * 2,
        task_crash_permille: 0,
        task_end_outcomes: Vec::new(),
    };

    let leases = match mode {
        Mode::Default | Mode::Pauses | Mode::LeaseRemoved => d.rng.u64(10..30),
        _ => d.rng.u64(8..16),
    };
    let safety_phase = lease_duration * leases as u32;

    let mut faults = draw_faults(
        &mut d,
        mode,
        tight,
        nodes,
        lease_duration,
        renew_interval,
        safety_phase,
    );
    if mode == Mode::LeaseRemoved {
        // Drawn after every other parameter, so the other faults of seed S
        // are those of the default mode's seed S.
        let names: Vec<LeaseName> = elections.iter().chain(&locks).cloned().collect();
        faults.extend(draw_removals(&mut d, &names, lease_duration, safety_phase));
        faults.sort_by_key(|f| f.at);
    }

    let mut p = RunParams {
        seed,
        mode,
        tight,
        mutant,
        nodes,
        elections,
        locks,
        lease_duration,
        renew_interval,
        drift,
        margin,
        zk_like,
        backend,
        backend_rate_ppb,
        node_rates_ppb,
        node_offsets,
        net,
        workload,
        faults,
        safety_phase,
        script: Vec::new(),
        liveness_override: None,
        groups: Vec::new(),
        batch: 1,
    };
    if mode == Mode::Default {
        // Drawn after every other parameter, so the rest of seed S is what
        // it was before these workloads and faults joined the swarm.
        draw_swarm(&mut d, &mut p);
    }
    p
}

/// The default mode's swarm (TigerBeetle's VOPR): each of these workloads
/// and faults is on in a fraction of the runs, in any combination, and
/// every checker must pass under all of them. Each is what some mutant
/// needs to be caught: tasks ending on their own (S6.5), a partitioned
/// group (S10), leases removed from live
/// holders from outside (S3.4). Elections, locks and the other faults are
/// drawn in every mode by [`draw`].
fn draw_swarm(d: &mut Draw, p: &mut RunParams) {
    use TaskOutcome::{Failed, Panicked, Returned};
    if d.chance(350) {
        p.workload.task_crash_permille = d.pick(&[50, 150, 400]);
        let outcomes: &[&[TaskOutcome]] = &[
            &[Panicked],
            &[Returned, Failed, Panicked],
            &[Failed, Panicked],
            &[Returned],
            &[Failed],
        ];
        p.workload.task_end_outcomes = d.pick(outcomes).to_vec();
    }
    // Schedules (S11) are not drawn here: they run through the real
    // client's schedule loop in the client campaign (`client.rs`). Their
    // draws are kept, unused, so the rest of seed S stays as it was.
    if d.chance(250) {
        let _ = d.pick(&[0.5, 1.0, 2.0]);
        let _ = d.chance(500);
    }
    if d.chance(300) {
        p.groups = vec![(name("grp"), d.pick(&[1, 2, 3, 5, 8, 12]))];
    }
    if d.chance(300) {
        let names: Vec<LeaseName> = p.elections.iter().chain(&p.locks).cloned().collect();
        p.faults
            .extend(draw_removals(d, &names, p.lease_duration, p.safety_phase));
        p.faults.sort_by_key(|f| f.at);
    }
    // Drawn last, so the rest of seed S is what it was before batches.
    if d.chance(400) {
        p.batch = d.pick(&[2, 4, 16]);
    }
}

#[allow(clippy::too_many_arguments)]
fn draw_faults(
    d: &mut Draw,
    mode: Mode,
    tight: bool,
    nodes: usize,
    lease: Duration,
    renew: Duration,
    phase: Duration,
) -> Vec<Fault> {
    let mut faults = Vec::new();
    let leases = (phase.as_nanos() / lease.as_nanos().max(1)) as u32;
    // Each kind is on in about half of the runs (swarm testing); when on, it
    // occurs at a rate of `per` faults per ten lease durations.
    let kind = |d: &mut Draw, on: u32, per: u32| -> u32 {
        if d.chance(on) {
            let mean = per * leases / 10;
            d.rng.u32(0..=mean.max(1) * 2)
        } else {
            0
        }
    };
    let at = |d: &mut Draw| d.dur(Duration::ZERO, phase);
    let (p_part, p_pause, p_crash, p_step, p_brestart, p_slow) = match mode {
        Mode::Default | Mode::LeaseRemoved if tight => (900, 500, 300, 0, 0, 0),
        Mode::Default | Mode::LeaseRemoved => (500, 500, 500, 300, 300, 300),
        Mode::Pauses => (0, 1000, 0, 0, 0, 0),
        _ => (700, 300, 300, 0, 0, 0),
    };
    for _ in 0..kind(d, p_part, 3) {
        let node = d.rng.usize(..nodes);
        let direction = d.pick(&[
            Direction::ToBackend,
            Direction::FromBackend,
            Direction::Both,
        ]);
        // Minimum duration: half a renewal interval; tight runs partition
        // for longer than a lease so the backend expires the holder.
        let (lo, hi) = if tight {
            (lease, lease * 3)
        } else {
            (renew / 2, lease * 3)
        };
        faults.push(Fault {
            at: at(d),
            duration: d.dur(lo, hi),
            kind: FaultKind::Partition { node, direction },
        });
    }
    let pause_rate = if mode == Mode::Pauses { 6 } else { 3 };
    for _ in 0..kind(d, p_pause, pause_rate) {
        let node = d.rng.usize(..nodes);
        let after_send = d.chance(700);
        // Up to several lease durations (GC pause, SIGSTOP).
        faults.push(Fault {
            at: at(d),
            duration: {
                let k = d.pick(&[1, 2, 3]);
                d.dur(10 * MS, lease * k)
            },
            kind: FaultKind::Pause { node, after_send },
        });
    }
    for _ in 0..kind(d, p_crash, 1) {
        let node = d.rng.usize(..nodes);
        faults.push(Fault {
            at: at(d),
            duration: d.dur(10 * MS, lease * 2),
            kind: FaultKind::Crash { node },
        });
    }
    for _ in 0..kind(d, p_step, 1) {
        let node = d.rng.usize(..nodes);
        let forward = d.dur(MS, lease);
        faults.push(Fault {
            at: at(d),
            duration: Duration::ZERO,
            kind: FaultKind::NodeClockStep { node, forward },
        });
    }
    for _ in 0..kind(d, p_brestart, 1) {
        faults.push(Fault {
            at: at(d),
            duration: d.dur(10 * MS, lease),
            kind: FaultKind::BackendRestart { keep_state: true },
        });
    }
    for _ in 0..kind(d, p_slow, 1) {
        let extra = d.dur(MS, renew);
        faults.push(Fault {
            at: at(d),
            duration: d.dur(renew, lease * 2),
            kind: FaultKind::SlowBackend { extra },
        });
    }
    let default_like = matches!(mode, Mode::Default | Mode::LeaseRemoved);
    let p_grant = if default_like { 300 } else { 0 };
    for _ in 0..kind(d, p_grant, 1) {
        let node = d.rng.usize(..nodes);
        faults.push(Fault {
            at: at(d),
            duration: d.dur(lease + renew, lease * 2),
            kind: FaultKind::DelayedGrant { node },
        });
    }
    let p_slow_renewal = if default_like { 300 } else { 0 };
    for _ in 0..kind(d, p_slow_renewal, 1) {
        let node = d.rng.usize(..nodes);
        // Longer than `lease × drift + margin` (at most 0.2 × lease + 50 ms),
        // shorter than a renewal interval.
        let lo = (lease / 5 + 50 * MS).min(renew / 2);
        let delay = d.dur(lo, renew);
        faults.push(Fault {
            at: at(d),
            duration: lease,
            kind: FaultKind::SlowRenewalThenPartition { node, delay },
        });
    }
    // The documented failure modes.
    let hazards = d.rng.u32(1..4);
    for _ in 0..hazards {
        match mode {
            Mode::BackendClockStep => {
                let delta_ms = (lease.as_millis() as i64) * i64::from(d.rng.u32(30..100)) / 100;
                faults.push(Fault {
                    at: d.dur(lease * 2, phase),
                    duration: Duration::ZERO,
                    kind: FaultKind::BackendClockStep { delta_ms },
                });
            }
            Mode::BackendStateLoss => {
                faults.push(Fault {
                    at: d.dur(lease * 2, phase),
                    duration: d.dur(MS, 50 * MS),
                    kind: FaultKind::BackendRestart { keep_state: false },
                });
            }
            _ => {}
        }
    }
    faults.sort_by_key(|f| f.at);
    faults
}

/// The removals of [`Mode::LeaseRemoved`]: 2–6 per ten lease durations of
/// the safety phase (uniform around a mean of 4), each at a uniform instant
/// and of a name drawn from the run's elections and locks.
fn draw_removals(
    d: &mut Draw,
    names: &[LeaseName],
    lease: Duration,
    phase: Duration,
) -> Vec<Fault> {
    if names.is_empty() {
        return Vec::new();
    }
    let leases = (phase.as_nanos() / lease.as_nanos().max(1)) as u32;
    let count = d.rng.u32(2..=6) * leases / 10;
    (0..count.max(1))
        .map(|_| Fault {
            at: d.dur(Duration::ZERO, phase),
            duration: Duration::ZERO,
            kind: FaultKind::LeaseRemoved {
                name: names[d.rng.usize(..names.len())].clone(),
            },
        })
        .collect()
}

/// A fixed, fault-free base for hand-written scenarios: `nodes` nodes
/// competing for one election `e0`, 3 s leases, drift 0.05 with node clocks at
/// the slow edge, fast network, backend broadcasting releases and expiries.
/// Set `faults` (and anything else) on the result.
pub fn scenario(seed: u64, nodes: usize) -> RunParams {
    let mut p = draw(seed, Mode::Default, None);
    let nodes = nodes.clamp(1, 16);
    p.tight = true;
    p.nodes = nodes;
    p.elections = vec![name("e0")];
    p.locks = Vec::new();
    p.lease_duration = Duration::from_secs(3);
    p.renew_interval = Duration::from_secs(1);
    p.drift = 0.05;
    p.margin = 2 * MS;
    p.zk_like = false;
    p.backend = BackendOptions {
        broadcast_release: true,
        broadcast_expiry: true,
        millisecond_clock: true,
        round_remaining_up: true,
        max_grant: None,
    };
    p.backend_rate_ppb = PPB;
    p.node_rates_ppb = vec![(PPB as f64 * 0.95).ceil() as u64; nodes];
    p.node_offsets = (0..nodes as u64)
        .map(|i| (i + 1) * 1_000_000_000_000)
        .collect();
    p.net = NetParams {
        min_delay: 5 * US,
        jitter: 50 * US,
        tail_permille: 0,
        tail_max: Duration::ZERO,
        loss_permille: 0,
        dup_permille: 0,
    };
    p.workload = WorkloadParams {
        api_gap: Duration::from_secs(3600 * 24),
        armed_permille: 0,
        close_permille: 0,
        reject_permille: 0,
        max_cooldown: Duration::from_secs(1),
        write_period: Duration::from_millis(100),
        exit_delay: MS,
        slow_exit_permille: 0,
        slow_exit_max: Duration::ZERO,
        task_crash_permille: 0,
        task_end_outcomes: Vec::new(),
    };
    p.faults = Vec::new();
    p.groups = Vec::new();
    p.safety_phase = Duration::from_secs(60);
    p
}

/// The group workload (S10): the run `seed` of the default mode, with every
/// node also a member of one group of `partitions` partitions, each owned
/// partition running a task. Its checkers: mutual exclusion and the
/// hand-over order per partition (as for elections), and after the faults
/// heal, within the liveness bound, every partition owned by one live member
/// and max − min partitions per member ≤ 1 (`group balance (S10.4)`).
pub fn group_workload(seed: u64, partitions: u32, mutant: Option<Mutant>) -> RunParams {
    let mut p = draw(seed, Mode::Default, mutant);
    p.groups = vec![(name("grp"), partitions)];
    p
}
