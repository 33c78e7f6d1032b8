//! # `simba`: Simba from the shell
//!
//! Like `flock`, `consul lock` or `etcdctl lock`/`elect`, with sessions and
//! fencing tokens:
//!
//! | command | what it does |
//! |---|---|
//! | `simba demo` | 3 nodes on a temporary SQLite file: who leads, a crash, fail-over, a graceful handover, with tokens and timings |
//! | `simba run NAME -- CMD …` | competes for NAME and runs CMD only while leader; `--once`, `--restart` |
//! | `simba cron NAME 'SCHEDULE' -- CMD …` | runs CMD at each slot of a cron, fixed-rate or fixed-delay schedule, only on the leader, each slot at most once (S11) |
//! | `simba lock NAME [--wait D] -- CMD …` | a one-shot lock; exit 75 if not acquired in time |
//! | `simba elect NAME [PROPOSAL]` | campaigns and leads until stopped, publishing PROPOSAL as session metadata; `--listen` prints each new leader |
//! | `simba status [--json]` | leases (name, holder, token, remaining) and sessions |
//! | `simba watch` | the same, refreshed in place |
//! | `simba migrate` | creates the SQL schema (a no-op on Redis) |
//! | `simba completions SHELL`, `simba man` | a completion script, the manual page (roff), generated from the clap definition |
//!
//! The child of `run`/`lock` gets `SIMBA_LEASE_NAME`, `SIMBA_FENCING_TOKEN`
//! and `SIMBA_SESSION_ID`. When its term ends it gets SIGTERM, then SIGKILL
//! after `--grace`, never later than the term's remaining time (S6.2), even
//! if simba itself is stopped, starved or killed meanwhile (a separate guard
//! process holds the deadline, see [`child`]). On
//! Ctrl-C or SIGTERM simba stops the child first, then releases the lease
//! (a graceful handover, S6.1). simba's exit status mirrors the child's.
//!
//! Configuration: `--backend URL` or `SIMBA_BACKEND` (default: one SQLite
//! file per user, `~/.local/state/simba/simba.db`), timing flags or `SIMBA_SESSION_*` variables, or a
//! TOML file (`--config`, see [`settings`]). URLs are redacted in every
//! message.
//!
//! ## Exit codes
//!
//! | code | meaning |
//! |---|---|
//! | 0 | success (run/lock: the command exited 0) |
//! | 1–125 | run/lock: the command's own exit status |
//! | 2 | usage error (bad flags or arguments) |
//! | 65 | invalid lease name (or `--prefix`), timing settings or `cron` schedule |
//! | 69 | backend unreachable or failing |
//! | 70 | internal error |
//! | 74 | I/O error of simba itself |
//! | 75 | `lock`: not acquired within `--wait` (`EX_TEMPFAIL`) |
//! | N | `run`/`lock --conflict-exit-code N`: the lease could not be obtained (instead of 75 and 69) |
//! | 78 | bad backend URL or configuration file |
//! | 126 | the command cannot be executed |
//! | 127 | the command does not exist |
//! | 128+n | run/lock: the command was killed by signal n; or simba was stopped by signal n before any command ran |

#[cfg(not(unix))]
compile_error!("simba-cli (the `simba` and `simba-chaos` commands) is Unix-only: it runs each command in a process group, stops it with SIGTERM/SIGKILL, handles SIGINT/SIGTERM and guards the child on CLOCK_BOOTTIME (tokio::signal::unix, rustix). On this platform build the library crates alone, e.g. `cargo build --workspace --exclude simba-cli`.");

#[cfg(unix)]
mod app;
#[cfg(unix)]
mod child;
#[cfg(unix)]
mod cli;
#[cfg(unix)]
mod cron;
#[cfg(unix)]
mod demo;
#[cfg(unix)]
mod elect;
#[cfg(unix)]
mod error;
#[cfg(unix)]
mod events;
#[cfg(unix)]
mod settings;
#[cfg(unix)]
mod signals;
#[cfg(unix)]
mod status;
#[cfg(unix)]
mod status_json;
#[cfg(unix)]
mod style;
#[cfg(unix)]
mod supervise;

/// The `simba` command (Unix only).
#[cfg(unix)]
fn main() -> std::process::ExitCode {
    app::main()
}

/// Never built: the `compile_error!` above stops a non-Unix build first.
#[cfg(not(unix))]
fn main() {}
