//! # simba-core: Simba's sans-IO engine
//!
//! A deterministic state machine for one Simba client: one session on the
//! backend (S1), local deadlines computed from durations (S2), leases, terms
//! and fencing tokens (S3), elections and locks (S4, S5), the handover order
//! (S6) and the timing rules (S8). It never reads a clock, sleeps, spawns,
//! does I/O or draws randomness except from the seed in its [`SimbaConfig`].
//! Runtime adapters (`simba-tokio`, `simba-async-std`) and the `simulation`
//! crate drive it unchanged.
//!
//! Rule ids such as `S3.2` in these docs refer to Simba's rulebook,
//! `docs/RULES.md` in Simba's repository: each rule's statement, its
//! reason, and the code and tests behind it.
//!
//! ## The drive loop
//!
//! ```
//! use simba_core::*;
//! # fn backend_call(c: &Command) -> Option<Input> { None }
//! # fn deliver(e: Event) {}
//! # fn run_task(t: TaskOrder) {}
//! let mut now = Timestamp::ZERO; // from the driver's monotonic clock
//! let mut engine = Engine::new(SimbaConfig::default(), BackendProfile::default(), now);
//! engine.start_election(now, LeaseName::new("ledger")?, true)?;
//! for _round in 0..3 {
//!     // 1. Drain every output, in order, after every call into the engine.
//!     while let Some(output) = engine.poll_output() {
//!         match output {
//!             // 2. Commands: run them (concurrently, each cancelled after
//!             //    `engine.call_timeout()`); feed each reply back with its op id
//!             //    (`Command::call` or `simba-backends`' `Backend::execute` map a
//!             //    command to its call and back). A cancelled call gets no reply:
//!             //    the engine times it out on its own clock (S2.4).
//!             Output::Command(cmd) => {
//!                 if let Some(reply) = backend_call(&cmd) {
//!                     engine.handle(now, reply);
//!                 }
//!             }
//!             // 3. Events go to the application (on_elected, on_revoked, …),
//!             //    serially per election; a refused `Elected` is reported with
//!             //    `Input::ElectedRejected` before the next output is handled.
//!             Output::Event(event) => deliver(event),
//!             // 4. Task orders start or cancel the leader task; its exit is
//!             //    reported with `Input::TaskExited`.
//!             Output::Task(order) => run_task(order),
//!         }
//!     }
//!     // 5. Sleep until the one next deadline (or until a reply arrives),
//!     //    then tell the engine what time it is.
//!     match engine.poll_timeout() {
//!         Some(at) => now = at,
//!         None => break,
//!     }
//!     engine.handle_timeout(now);
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! A complete loop on one plain thread against a real backend (no async
//! runtime of the application's; one blocking call per command, each
//! cancelled after `call_timeout`), with when to choose it over an adapter:
//! `simba-backends/examples/thread_loop.rs`
//! (`cargo run -p simba-backends --example thread_loop`).
//!
//! **Poll order.** After each call (`handle`, `handle_all`,
//! `handle_timeout` or an API call), drain [`Engine::poll_output`] until
//! `None`, then arm one timer at [`Engine::poll_timeout`]. Replies and
//! broadcasts that are ready together may go in one
//! [`Engine::handle_all`]: a member of a large group then computes its
//! target once for all of them (S10.2). Outputs are in the order they must be acted
//! on: a `Revoked` always precedes the `Release` of its lease (S3.5), and an
//! `Interrupt` precedes it too (S6.1).
//!
//! ## The time contract
//!
//! Every mutating call takes `now`, an opaque monotonic [`Timestamp`]
//! (nanoseconds from an origin the driver picks). A `now` earlier than one
//! already seen is treated as the latest seen. Deadlines are computed from
//! durations the backend measured (S2.1), never by comparing clocks.
//! [`poll_timeout`](Engine::poll_timeout) is always later than the last
//! `now`. Term validity is a pure function of the session deadline and the
//! caller's clock ([`term_is_valid`]), so an adapter answers `is_valid()`
//! without a background task (S3.3).
//!
//! ## The error policy
//!
//! - Bad input from the application is a typed error before anything
//!   changes: [`NameError`] (S3.1), [`ConfigError`] (S8.1), [`ApiError`].
//! - Backend failures are *data*: a reply carrying a [`BackendError`] or
//!   `Expired` is an [`Input`] like any other, and the engine reacts
//!   (back-off, suspension, a new session). Stale, duplicated, reordered or
//!   malformed replies are counted ([`Stats::stale_replies`]) and dropped.
//! - No input sequence makes the engine panic. A broken backend contract is
//!   reported as an [`Event::Diagnostic`] and worked around.
//!
//! ## Inputs and outputs
//!
//! | inputs (facts) | outputs (orders and news) |
//! |---|---|
//! | API calls: [`start_election`](Engine::start_election), [`acquire_lock`](Engine::acquire_lock), [`stop`](Engine::stop), [`step_down`](Engine::step_down), [`close`](Engine::close) | [`Command`]: `OpenSession`, `Renew`, `Acquire`, `Release`, `Withdraw`, `CloseSession`, … |
//! | replies echoing their [`OpId`]: `SessionOpened`, `RenewReplied`, `AcquireReplied`, `ReleaseReplied`, `WithdrawReplied`, `SessionClosed`, … | [`Event`]: `Elected`, `Revoked`, `SessionStateChanged`, `DeadlineChanged`, `SessionLeaseShortened`, `Completed`, … |
//! | `ReleaseBroadcast`, `TaskExited`, `ElectedRejected` | [`TaskOrder`]: `Start`, `Interrupt` |
//! | time passing: [`handle_timeout`](Engine::handle_timeout) | [`Engine::poll_timeout`] |
//!
//! Partitioned groups ([`join_group`](Engine::join_group), S10) are another
//! kind of entry next to elections and locks: each partition is a lease with
//! its own terms, and the assignment rule ([`assign_partitions`], S10.2)
//! lives in this crate.
//!
//! ## The backend model
//!
//! [`model::LeaseModel`] is the one sequential model of a backend
//! (sessions, leases, tokens, expiry by durations, groups, slots), pure and
//! clock-free like the engine: the in-memory backend, the simulation's
//! backend and the history checker of the backend test kit all run it.
#![forbid(unsafe_code)]

mod call;
mod config;
mod election;
mod engine;
mod error;
mod group;
mod ids;
mod lease;
pub mod model;
#[cfg(feature = "mutants")]
mod mutant;
mod name;
mod protocol;
mod schedule;
mod time;
mod timers;

pub use call::Calls;
pub use config::{ConfigError, Fraction, SimbaConfig, SimbaConfigBuilder};
pub use election::{EntrySnapshot, Kind, LockWait, SessionSnapshot, Snapshot, Status};
pub use engine::{BackendProfile, Engine, Stats};
pub use error::{ApiError, BackendError, BackendErrorKind};
pub use group::{
    assign_partitions, fair_share, freed_by_change, parse_partition_name, partition_name,
    planned_by_change, sticky_target, sticky_target_from_base, target_partitions, GroupSnapshot,
    StickyInput, PARTITION_SEPARATOR,
};
pub use ids::{EntryId, OpId, ParseSessionIdError, SessionId, TermId, Token};
pub use lease::{
    local_deadline, local_validity, renew_period, renewal_backoff, retry_after_holder_expiry,
    task_failure_backoff, term_is_valid, term_remaining, TASK_BACKOFF_MAX_INTERVALS,
};
#[cfg(feature = "mutants")]
pub use mutant::Mutant;
pub use name::{is_name_char, LeaseName, NameError, MAX_NAME_LEN};
pub use protocol::{
    AcquireOutcome, Command, Event, GroupView, Input, Level, Output, RenewError, Renewal,
    RevokeReason, SessionGrant, SessionState, SlotClaim, TaskExitAction, TaskExitPolicy, TaskOrder,
    TaskOutcome, Term,
};
pub use schedule::{EveryPeriod, MissedRuns, SlotGrid, SlotPlanner, SlotRule};
pub use time::Timestamp;
