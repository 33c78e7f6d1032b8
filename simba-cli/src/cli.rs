//! The command line, as clap definitions.

use crate::error::EXIT_CODES_HELP;
use clap::{Args, Parser, Subcommand};
use std::ffi::OsString;
use std::path::PathBuf;

/// Safe mutual exclusion from the shell: run a command only while leader,
/// take a one-shot lock, inspect leases, with sessions and fencing tokens.
#[derive(Debug, Parser)]
#[command(name = "simba", version, after_long_help = EXIT_CODES_HELP, after_help = EXIT_CODES_HELP)]
pub struct Cli {
    /// Backend URL: sqlite://PATH, postgres://…, mysql://…, redis://…,
    /// zk://HOST:PORT/ROOT, etcd://… (etcd and the TLS schemes rediss:// and
    /// zks:// with their opt-in features; credentials are never printed).
    /// [default: sqlite://$XDG_STATE_HOME/simba/simba.db, else
    /// ~/.local/state/simba/simba.db: one file per user, wherever simba runs]
    #[arg(
        long,
        global = true,
        env = "SIMBA_BACKEND",
        value_name = "URL",
        hide_env_values = true,
        help_heading = "Backend"
    )]
    pub backend: Option<String>,

    /// A TOML file with `[simba] backend` and `[simba.session]` timing settings.
    #[arg(
        long,
        global = true,
        env = "SIMBA_CONFIG",
        hide_env_values = true,
        value_name = "FILE",
        help_heading = "Backend"
    )]
    pub config: Option<PathBuf>,

    /// Timing settings (SPEC S8).
    #[command(flatten, next_help_heading = "Timing (rules S8, docs/RULES.md)")]
    pub timing: TimingArgs,

    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Declares [`TimingArgs`]: each field is a global `--flag` named after
/// it that also reads the variable `$env`, whose value the help hides.
macro_rules! timing_args {
    ($($(#[doc = $doc:literal])+ $field:ident, $env:literal, $value_name:literal;)+) => {
        /// The timing flags (S8); each also reads a `SIMBA_SESSION_*` variable.
        #[derive(Debug, Default, Clone, Args)]
        pub struct TimingArgs {
            $(
                $(#[doc = $doc])+
                #[arg(
                    long,
                    global = true,
                    env = $env,
                    hide_env_values = true,
                    value_name = $value_name
                )]
                pub $field: Option<String>,
            )+
        }
    };
}

timing_args! {
    /// How long the backend keeps a session after its last renewal [default: 15s].
    lease_duration, "SIMBA_SESSION_LEASE_DURATION", "DURATION";
    /// Renewal period [default: lease_duration / 3].
    renew_interval, "SIMBA_SESSION_RENEW_INTERVAL", "DURATION";
    /// Bound on the clock rate difference, in [0, 0.5) [default: 0.01].
    drift, "SIMBA_SESSION_DRIFT", "RATE";
    /// Extra safety subtracted from every local deadline [default: 50ms].
    margin, "SIMBA_SESSION_MARGIN", "DURATION";
    /// Random extra delay of candidate retries [default: renew_interval / 2].
    retry_jitter, "SIMBA_SESSION_RETRY_JITTER", "DURATION";
    /// Floor of the back-off after a failed renewal [default: 100ms].
    min_backoff, "SIMBA_SESSION_MIN_BACKOFF", "DURATION";
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Show an election on a temporary SQLite file: 3 nodes, a crash, a fail-over, a handover.
    Demo(DemoArgs),
    /// Compete for NAME and run CMD only while leader (SIGTERM, then SIGKILL, when leadership ends).
    Run(RunArgs),
    /// Run CMD at each slot of SCHEDULE, only on the leader of NAME, each slot at most once.
    Cron(CronArgs),
    /// Take the one-shot lock NAME, run CMD, release (like flock); exit 75 if not acquired in time.
    Lock(LockArgs),
    /// Campaign for NAME and lead until stopped, publishing PROPOSAL; or (--listen) print each new leader.
    Elect(ElectArgs),
    /// Print the leases (name, holder, token, remaining) and the live sessions.
    Status(StatusArgs),
    /// Like status, refreshed in place until interrupted.
    Watch(WatchArgs),
    /// Create the SQL schema (tables) of the backend.
    Migrate,
    /// Print a completion script for SHELL on stdout
    /// (e.g. `simba completions bash > ~/.local/share/bash-completion/completions/simba`).
    Completions(CompletionsArgs),
    /// Print the manual page (roff) on stdout (e.g. `simba man | man -l -`).
    Man,
}

/// `simba completions`.
#[derive(Debug, Clone, Args)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// `simba demo`.
#[derive(Debug, Clone, Args)]
pub struct DemoArgs {
    /// The lease duration of the demo's nodes.
    #[arg(long = "lease", default_value = "2s", value_name = "DURATION", value_parser = duration_text)]
    pub lease: String,
}

/// How a child is stopped when leadership ends.
#[derive(Debug, Clone, Args)]
pub struct ChildArgs {
    /// Time between SIGTERM and SIGKILL; never more than the term's remaining time (S6).
    #[arg(long, default_value = "10s", value_name = "DURATION", value_parser = duration_text)]
    pub grace: String,
    /// The command and its arguments.
    #[arg(required = true, last = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

/// What `simba run` and `simba lock` share: how they report and how the
/// child is run and stopped.
#[derive(Debug, Clone, Args)]
pub struct SuperviseArgs {
    /// Exit with N (1-255) instead of 75 or 69 when the lease could not be
    /// obtained (not acquired within --wait; backend unreachable or failing
    /// before the command started), so that it cannot be mistaken for the
    /// command's own status (like flock -E).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u8).range(1..=255))]
    pub conflict_exit_code: Option<u8>,
    /// Exit at once (69) if the backend cannot be reached or is full,
    /// instead of waiting and retrying with back-off.
    #[arg(long)]
    pub fail_fast: bool,
    /// Print simba's own output as NDJSON events on stderr (one object per
    /// line: competing, waiting, elected, revoked, exited, stopping, note,
    /// error); the command keeps stdout.
    #[arg(long)]
    pub json: bool,
    /// The child and how to stop it.
    #[command(flatten)]
    pub child: ChildArgs,
}

/// `simba run`.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// The lease name: 1-128 of [A-Za-z0-9._:-].
    pub name: String,
    /// Exit after one term (lock semantics) instead of competing again.
    #[arg(long)]
    pub once: bool,
    /// Run CMD again if it exits while still leader.
    #[arg(long)]
    pub restart: bool,
    /// What is reported, and how the child is run and stopped.
    #[command(flatten)]
    pub supervise: SuperviseArgs,
}

/// `simba cron`.
#[derive(Debug, Clone, Args)]
pub struct CronArgs {
    /// The lease name of the schedule's election: 1-128 of [A-Za-z0-9._:-].
    pub name: String,
    /// A cron expression ('0 3 * * *', or 6 fields with seconds first),
    /// 'every DURATION' (fixed rate, aligned to the Unix epoch) or
    /// 'delay DURATION' (fixed delay after each run).
    pub schedule: String,
    /// The IANA time zone of a cron expression [default: UTC].
    #[arg(long, value_name = "ZONE")]
    pub tz: Option<String>,
    /// Missed slots (fail-over, slow runs): skip them, or run the latest once.
    #[arg(long, default_value = "skip", value_name = "skip|run-once")]
    pub missed: String,
    /// Keep leadership at least this long after a run starts, when handing over.
    #[arg(long, default_value = "0s", value_name = "DURATION", value_parser = duration_text)]
    pub lock_at_least_for: String,
    /// Exit at once (69) if the backend cannot be reached or is full,
    /// instead of waiting and retrying with back-off.
    #[arg(long)]
    pub fail_fast: bool,
    /// The child and how to stop it.
    #[command(flatten)]
    pub child: ChildArgs,
}

/// `simba lock`.
#[derive(Debug, Clone, Args)]
pub struct LockArgs {
    /// The lease name: 1-128 of [A-Za-z0-9._:-].
    pub name: String,
    /// Give up (exit 75) if not acquired within this long [default: wait
    /// forever]; a backend that cannot be reached is retried that long too
    /// (then exit 69).
    #[arg(long, value_name = "DURATION", value_parser = duration_text)]
    pub wait: Option<String>,
    /// What is reported, and how the child is run and stopped.
    #[command(flatten)]
    pub supervise: SuperviseArgs,
}

/// `simba elect`.
#[derive(Debug, Clone, Args)]
pub struct ElectArgs {
    /// The election's lease name: 1-128 of [A-Za-z0-9._:-].
    pub name: String,
    /// What this candidate proposes (an address, say), published as its
    /// session's `proposal` metadata so that observers see it.
    #[arg(conflicts_with = "listen")]
    pub proposal: Option<String>,
    /// Only observe: print the leader and each new one (holder, token,
    /// metadata with the proposal), without campaigning.
    #[arg(short = 'l', long)]
    pub listen: bool,
    /// Exit at once (69) if the backend cannot be reached or is full,
    /// instead of waiting and retrying with back-off.
    #[arg(long)]
    pub fail_fast: bool,
    /// Print NDJSON events on stdout (one object per line) instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `simba status`.
#[derive(Debug, Clone, Args)]
pub struct StatusArgs {
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Only leases whose name starts with this.
    #[arg(long, value_name = "PREFIX")]
    pub prefix: Option<String>,
}

/// `simba watch`.
#[derive(Debug, Clone, Args)]
pub struct WatchArgs {
    /// Refresh period.
    #[arg(long, default_value = "1s", value_name = "DURATION", value_parser = duration_text)]
    pub interval: String,
    /// Print one NDJSON line per refresh (`{"event":"status",…}`) instead
    /// of redrawing a table.
    #[arg(long)]
    pub json: bool,
    /// Only leases whose name starts with this.
    #[arg(long, value_name = "PREFIX")]
    pub prefix: Option<String>,
}

/// Checks a duration argument (`10s`, `1m 30s`, `250ms`) when the command
/// line is parsed, so a malformed one is a usage error (exit 2) like any
/// other bad argument; the text itself is kept for the message of a later
/// range check.
fn duration_text(text: &str) -> Result<String, String> {
    humantime::parse_duration(text.trim())
        .map(|_| text.to_owned())
        .map_err(|e| format!("{e} (a duration such as 10s, 1m 30s or 250ms)"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }
}
