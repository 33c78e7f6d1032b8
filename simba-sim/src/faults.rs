//! Which faults a run may draw ([`Faults`]) and the plan one seed draws
//! ([`Fault`]): continuous per-node conditions from time zero, and discrete
//! events at drawn times.

use crate::rng::Rng;
use std::fmt;
use std::time::Duration;

/// The faults a simulation may draw. Each seed draws, swarm-style, which of
/// the enabled kinds are on and with which parameters (see the fault table
/// in `docs/SIMULATION.md`).
///
/// ```
/// use simba_sim::Faults;
/// let all = Faults::default(); // all but state loss and lease removal
/// let calm = Faults::none().latency(true);
/// # let _ = (all, calm);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Faults {
    pub(crate) latency: bool,
    pub(crate) loss: bool,
    pub(crate) timeouts: bool,
    pub(crate) partitions: bool,
    pub(crate) pauses: bool,
    pub(crate) crashes: bool,
    pub(crate) drift: bool,
    pub(crate) backend_restarts: bool,
    pub(crate) lease_removal: bool,
    pub(crate) state_loss: bool,
    pub(crate) swarm: bool,
}

impl Default for Faults {
    /// Every fault a correct application must survive: all kinds except
    /// backend state loss (which no client can survive; the harness must
    /// report it) and a lease removed from outside (until its holder's
    /// next renewal two nodes hold valid terms: only fenced, conditional
    /// writes survive it). Swarm drawing on.
    fn default() -> Self {
        Faults {
            state_loss: false,
            lease_removal: false,
            ..Faults::all()
        }
    }
}

macro_rules! setter {
    ($($(#[$doc:meta])* $name:ident),* $(,)?) => {
        $(
            $(#[$doc])*
            #[must_use]
            pub fn $name(mut self, on: bool) -> Self {
                self.$name = on;
                self
            }
        )*
    };
}

impl Faults {
    /// Every kind, including backend state loss.
    pub fn all() -> Faults {
        Faults {
            latency: true,
            loss: true,
            timeouts: true,
            partitions: true,
            pauses: true,
            crashes: true,
            drift: true,
            backend_restarts: true,
            lease_removal: true,
            state_loss: true,
            swarm: true,
        }
    }

    /// No faults (a calm run), swarm drawing on.
    pub fn none() -> Faults {
        Faults {
            latency: false,
            loss: false,
            timeouts: false,
            partitions: false,
            pauses: false,
            crashes: false,
            drift: false,
            backend_restarts: false,
            lease_removal: false,
            state_loss: false,
            swarm: true,
        }
    }

    setter! {
        /// Per-node call latency (each way), with jitter.
        latency,
        /// Per-node loss: a request lost before the backend, or a reply
        /// lost after it (the call then times out).
        loss,
        /// Per-node calls that hang until the client's call timeout.
        timeouts,
        /// A node cut off from the backend for a while (calls hang,
        /// release broadcasts are not delivered).
        partitions,
        /// A node paused (a GC or VM pause): its client and its tasks are
        /// not polled while simulated time moves on.
        pauses,
        /// A node crashed (its client and tasks dropped, no goodbye to the
        /// backend) and restarted later with a new client and session.
        crashes,
        /// Per-node clock drift within the configuration's bound
        /// (`SimbaConfig::drift`), and a per-node wall-clock offset.
        drift,
        /// The backend restarts: calls fail for a while, release
        /// subscriptions drop; its state is kept.
        backend_restarts,
        /// A lease removed from outside the clients (an operator deleting
        /// the row or key).
        lease_removal,
        /// The backend loses all its state (tokens restart): a fault the
        /// harness must report, never one an application can survive.
        state_loss,
        /// Swarm testing: each seed turns each enabled kind on with
        /// probability 0.7 (off: every enabled kind in every seed).
        swarm,
    }
}

/// One fault of a seed's plan.
#[derive(Clone, Debug, PartialEq)]
pub struct Fault {
    /// When it starts, in simulated time since the start of the run.
    pub at: Duration,
    /// What it is.
    pub kind: FaultKind,
}

/// The kinds of [`Fault`].
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum FaultKind {
    /// Calls from `node` take `base` plus up to `base` of jitter each way.
    Latency {
        /// The node.
        node: usize,
        /// The base latency one way.
        base: Duration,
    },
    /// Each call from `node` loses its request or its reply with `rate`.
    Loss {
        /// The node.
        node: usize,
        /// The probability per call.
        rate: f64,
    },
    /// Each call from `node` hangs until the call timeout with `rate`.
    Timeouts {
        /// The node.
        node: usize,
        /// The probability per call.
        rate: f64,
    },
    /// `node`'s clock runs at `1 + rate` of real time; its wall clock is
    /// off by `wall_offset_ms`.
    Drift {
        /// The node.
        node: usize,
        /// Within `±SimbaConfig::drift`.
        rate: f64,
        /// The wall clock's offset, in milliseconds.
        wall_offset_ms: i64,
    },
    /// `node` is paused for `span`.
    Pause {
        /// The node.
        node: usize,
        /// How long.
        span: Duration,
    },
    /// `node` crashes and restarts `down` later.
    Crash {
        /// The node.
        node: usize,
        /// How long it stays down.
        down: Duration,
    },
    /// `node` is cut off from the backend for `span`.
    Partition {
        /// The node.
        node: usize,
        /// How long.
        span: Duration,
    },
    /// The backend restarts and is unreachable for `down`.
    BackendRestart {
        /// How long.
        down: Duration,
    },
    /// The backend loses all its state.
    StateLoss,
    /// A held lease (drawn among those held then) is removed from outside.
    RemoveLease,
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at {:.3}s: ", self.at.as_secs_f64())?;
        match &self.kind {
            FaultKind::Latency { node, base } => write!(f, "node {node} latency {base:?}"),
            FaultKind::Loss { node, rate } => write!(f, "node {node} loss {:.1}%", rate * 100.0),
            FaultKind::Timeouts { node, rate } => {
                write!(f, "node {node} hung calls {:.1}%", rate * 100.0)
            }
            FaultKind::Drift {
                node,
                rate,
                wall_offset_ms,
            } => write!(
                f,
                "node {node} clock rate {:+.3}%, wall clock {wall_offset_ms:+} ms",
                rate * 100.0
            ),
            FaultKind::Pause { node, span } => write!(f, "node {node} paused for {span:?}"),
            FaultKind::Crash { node, down } => write!(f, "node {node} crashes, down {down:?}"),
            FaultKind::Partition { node, span } => {
                write!(f, "node {node} partitioned for {span:?}")
            }
            FaultKind::BackendRestart { down } => write!(f, "backend restarts, down {down:?}"),
            FaultKind::StateLoss => write!(f, "backend loses its state"),
            FaultKind::RemoveLease => write!(f, "a held lease is removed from outside"),
        }
    }
}

/// Draws one seed's plan: the swarm's choice of kinds, then their
/// parameters and times, all from `rng`.
pub(crate) fn draw(
    faults: &Faults,
    rng: &mut Rng,
    nodes: usize,
    duration: Duration,
    lease: Duration,
    drift_bound: f64,
) -> Vec<Fault> {
    let mut on = |enabled: bool| enabled && (!faults.swarm || rng.chance(0.7));
    let latency = on(faults.latency);
    let loss = on(faults.loss);
    let timeouts = on(faults.timeouts);
    let drift = on(faults.drift);
    let partitions = on(faults.partitions);
    let pauses = on(faults.pauses);
    let crashes = on(faults.crashes);
    let restarts = on(faults.backend_restarts);
    let removal = on(faults.lease_removal);
    let state_loss = on(faults.state_loss);

    let mut plan = Vec::new();
    let zero = Duration::ZERO;
    for node in 0..nodes {
        if latency {
            let base = rng.between(Duration::from_millis(1), Duration::from_millis(30));
            plan.push(Fault {
                at: zero,
                kind: FaultKind::Latency { node, base },
            });
        }
        if loss {
            let rate = rng.unit() * 0.05;
            plan.push(Fault {
                at: zero,
                kind: FaultKind::Loss { node, rate },
            });
        }
        if timeouts {
            let rate = rng.unit() * 0.03;
            plan.push(Fault {
                at: zero,
                kind: FaultKind::Timeouts { node, rate },
            });
        }
        if drift {
            let rate = (rng.unit() * 2.0 - 1.0) * drift_bound * 0.9;
            let wall_offset_ms = i64::try_from(rng.below(401)).unwrap_or(0) - 200;
            plan.push(Fault {
                at: zero,
                kind: FaultKind::Drift {
                    node,
                    rate,
                    wall_offset_ms,
                },
            });
        }
    }
    // Discrete events: about one of each enabled kind per 15 simulated
    // seconds (at least one), at uniform times.
    let count = |rng: &mut Rng| 1 + rng.below(duration.as_secs() / 15 + 1);
    let at = |rng: &mut Rng| rng.between(Duration::from_millis(500), duration);
    let node = |rng: &mut Rng| usize::try_from(rng.below(nodes as u64)).unwrap_or(0);
    let span = |rng: &mut Rng, lo: f64, hi: f64| rng.between(lease.mul_f64(lo), lease.mul_f64(hi));
    let mut events = Vec::new();
    if pauses {
        for _ in 0..count(rng) {
            let kind = FaultKind::Pause {
                node: node(rng),
                span: span(rng, 0.3, 3.0),
            };
            events.push(Fault { at: at(rng), kind });
        }
    }
    if crashes {
        for _ in 0..count(rng) {
            let kind = FaultKind::Crash {
                node: node(rng),
                down: span(rng, 0.1, 2.0),
            };
            events.push(Fault { at: at(rng), kind });
        }
    }
    if partitions {
        for _ in 0..count(rng) {
            let kind = FaultKind::Partition {
                node: node(rng),
                span: span(rng, 0.3, 3.0),
            };
            events.push(Fault { at: at(rng), kind });
        }
    }
    if restarts {
        let kind = FaultKind::BackendRestart {
            down: span(rng, 0.05, 1.0),
        };
        events.push(Fault { at: at(rng), kind });
    }
    if removal {
        for _ in 0..count(rng) {
            events.push(Fault {
                at: at(rng),
                kind: FaultKind::RemoveLease,
            });
        }
    }
    if state_loss {
        events.push(Fault {
            at: at(rng),
            kind: FaultKind::StateLoss,
        });
    }
    events.sort_by_key(|f| f.at);
    plan.extend(events);
    plan
}
