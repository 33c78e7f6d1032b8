//! Simba's deterministic cluster simulator.
//!
//! Many unchanged [`simba_core`] engines run against a simulated backend
//! ([`backend::SimBackend`], a shell over the one sequential lease model
//! [`simba_core::model::LeaseModel`] that `MemoryBackend` also runs), in
//! virtual time, under faults, and checkers run
//! after every step. Everything a run does is drawn from its seed
//! ([`params::draw`]), so a seed replays exactly; the trace hash proves it.
//!
//! The loop of one run ([`world::World::run`]):
//! 1. pop the earliest event (a message arrival, a node timer, an API call, a
//!    task step, a fault starting or ending); a paused node's events wait;
//! 2. hand it to the engine or backend it concerns, with that party's clock
//!    reading (every node and the backend have their own clock);
//! 3. act on every engine output: send commands through the network, record
//!    events, start and interrupt tasks; re-arm the node's single timer;
//! 4. tell the checkers what happened (`Observed` facts, at fixed points of
//!    the step): mutual exclusion, fencing tokens, deadlines never extended
//!    once passed, callbacks paired and ordered, handover order, ERROR logs;
//!    and at the end, liveness and completions. Each checker is its own
//!    type, in its own file named by its rule (`world/check/`); checkers
//!    read the cluster but never change it, so they do not change the run.
//!
//! The world is parts: event scheduling (`world/queue.rs`), the cluster of
//! nodes and backend (`world/cluster.rs`), the network
//! (`world/network.rs`), the faults (`world/faults.rs`), the workload
//! (`world/workload.rs`; schedules run through the real client in the
//! client campaign, `client.rs`) and the checkers;
//! `docs/SIMULATION.md` describes them.
//!
//! The safety phase has faults on; then everything heals, and every
//! contended name must get a leader within [`params::RunParams::liveness_bound`]
//! (plus what is left, past the cooldown it allows for, of an S6.5 back-off
//! a failed task started before healing).
//!
//! Runs come in [`Mode`]s: the default must pass every checker, and draws
//! per seed which workloads and faults are on (swarm testing, as
//! TigerBeetle's VOPR: [`params::RunParams::swarm`]); every
//! `simba_core::Mutant` is caught by it. The
//! documented failure modes (drift beyond the bound, a backend clock step,
//! a backend losing its state) must be caught; `pauses` must pass while the
//! unfenced register shows stale writes; `lease-removed` (leases taken from
//! live holders from outside, S3.4) must pass the `taken over (S3.4)`
//! checker, with mutual exclusion allowing the stolen-from holder only until
//! its next renewal's reply. With a `simba_core::Mutant`
//! selected, a run must be caught. `docs/FAULTS.md` has the table of
//! failure modes and the measured figures.
//!
//! ```
//! use simulation::{run_seed, Mode};
//! let report = run_seed(3, Mode::Default, None);
//! assert!(report.violations.is_empty());
//! assert_eq!(report.trace_hash, run_seed(3, Mode::Default, None).trace_hash);
//! ```
#![forbid(unsafe_code)]

pub mod backend;
pub mod client;
pub mod clock;
pub mod params;
pub mod runner;
pub mod world;

/// The parts of `simba-core` the simulator drives.
pub mod core_api {
    pub use simba_core::{BackendProfile, Engine, LockWait, Mutant};

    /// Selects `mutant` on a config builder.
    pub fn with_mutant(
        b: simba_core::SimbaConfigBuilder,
        mutant: Option<Mutant>,
    ) -> simba_core::SimbaConfigBuilder {
        b.mutant(mutant)
    }
}

pub use params::{draw, group_workload, Mode, RunParams};
pub use runner::{run_params, run_seed, run_seed_keep_going, Summary};
pub use world::{RunReport, Violation, World};
