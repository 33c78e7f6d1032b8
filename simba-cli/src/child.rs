//! Child processes: spawn the command of `simba run` / `simba lock` with the
//! term's details in its environment, stop it with SIGTERM then SIGKILL, and
//! turn its exit status into simba's.
//!
//! The child runs in its own process group, so that a stop reaches its whole
//! tree (a shell and what it started), and so that a Ctrl-C on the terminal
//! reaches simba alone, which then stops the child in order (S6.1).
//!
//! Neither a crash of simba (SIGKILL, OOM) nor simba being stopped
//! (SIGSTOP) or starved of CPU may leave the child running past its term.
//! Next to each child simba starts a **guard**: a copy of itself
//! (`simba __guard PGID DEADLINE`, hidden), a separate process that holds
//! the term's latest local deadline on `CLOCK_BOOTTIME` (which counts host
//! suspend). A task of simba writes each extended deadline on the guard's
//! pipe; the guard SIGKILLs the child's process group as soon as the
//! deadline passes unextended (S3.3, S6.2), whatever state simba is in. When
//! simba stops the child normally it tells the guard `done`; if the pipe
//! closes without that, simba died, and the guard SIGKILLs the group at once
//! (a lost term does not wait, S6.3).
//!
//! Known gap: the guard starts just after the child (it needs the child's
//! process group); if simba is stopped or killed in between, the child has
//! no guard.

use crate::error::CliError;
use rustix::process::{kill_process_group, Pid, Signal};
use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::Duration;
use tokio::process::{Child, ChildStdin, Command};

/// The variable holding the lease name.
pub const ENV_LEASE_NAME: &str = "SIMBA_LEASE_NAME";
/// The variable holding the term's fencing token.
pub const ENV_FENCING_TOKEN: &str = "SIMBA_FENCING_TOKEN";
/// The variable holding the session id (32 hex digits).
pub const ENV_SESSION_ID: &str = "SIMBA_SESSION_ID";
/// The variable holding the schedule slot a `simba cron` run is for
/// (milliseconds since the Unix epoch, S11.2).
pub const ENV_SCHEDULE_SLOT: &str = "SIMBA_SCHEDULE_SLOT";

/// What to run.
#[derive(Clone, Debug)]
pub struct ChildSpec {
    /// The program and its arguments (at least the program).
    pub command: Vec<OsString>,
    /// The longest time between SIGTERM and SIGKILL.
    pub grace: Duration,
}

/// The term a child runs under, for its environment.
#[derive(Clone, Debug)]
pub struct TermEnv {
    /// The lease name.
    pub name: String,
    /// The fencing token.
    pub token: u64,
    /// The session id, if known.
    pub session: Option<String>,
    /// The schedule slot (`simba cron`), if any.
    pub slot: Option<u64>,
}

/// A running child.
#[derive(Debug)]
pub struct Running {
    child: Child,
    pgid: Option<Pid>,
    guard: Option<Guard>,
    guard_fired: bool,
}

impl ChildSpec {
    /// The program's name, for messages.
    pub fn program(&self) -> String {
        self.command
            .first()
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    /// Starts the command in its own process group with `term` in its
    /// environment, and its guard, which kills the group once `remaining`
    /// (the term's remaining time) runs out without simba stopping it.
    ///
    /// # Errors
    /// [`CliError::CommandNotFound`] or [`CliError::CannotExecute`].
    pub fn spawn(&self, term: &TermEnv, remaining: Remaining) -> Result<Running, CliError> {
        let Some((program, args)) = self.command.split_first() else {
            return Err(CliError::CommandNotFound(String::new()));
        };
        let mut cmd = Command::new(program);
        cmd.args(args)
            .env(ENV_LEASE_NAME, &term.name)
            .env(ENV_FENCING_TOKEN, term.token.to_string())
            .process_group(0)
            .kill_on_drop(true);
        match &term.session {
            Some(s) => cmd.env(ENV_SESSION_ID, s),
            None => cmd.env_remove(ENV_SESSION_ID),
        };
        match term.slot {
            Some(slot) => cmd.env(ENV_SCHEDULE_SLOT, slot.to_string()),
            None => cmd.env_remove(ENV_SCHEDULE_SLOT),
        };
        let child = cmd.spawn().map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => CliError::CommandNotFound(self.program()),
            _ => CliError::CannotExecute {
                program: self.program(),
                message: e.to_string(),
            },
        })?;
        let pgid = child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .and_then(Pid::from_raw);
        let guard = pgid.and_then(|pgid| spawn_guard(pgid, remaining));
        Ok(Running {
            child,
            pgid,
            guard,
            guard_fired: false,
        })
    }
}

/// How often simba re-reads the term's deadline to pass it on to the guard.
const FEED_PERIOD: Duration = Duration::from_millis(20);

/// The longest the guard sleeps between two looks at the clock: a host
/// suspend (which the sleep itself does not count) is noticed within this.
const GUARD_POLL: Duration = Duration::from_millis(50);

/// The guard's exit code when simba dismissed it (the child was stopped normally).
pub const GUARD_DISMISSED: u8 = 0;
/// The guard's exit code when the term's deadline passed unextended and it
/// SIGKILLed the child's process group.
pub const GUARD_FIRED_DEADLINE: u8 = 3;
/// The guard's exit code when simba vanished (its pipe closed without
/// `done`) and it SIGKILLed the child's process group.
pub const GUARD_FIRED_ORPHANED: u8 = 4;

/// The host's monotonic clock **including time spent suspended**
/// (`CLOCK_BOOTTIME`), in nanoseconds: the library's own reading, which its
/// clients' clocks count suspend with too. The guard compares deadlines on
/// it, so a term never outlives a suspend of the host in the guard's eyes.
pub use simba_tokio::boottime_ns;

/// The deadline to give the guard on [`boottime_ns`]: `now` plus the
/// term's remaining time, or 0 (at once) when the term is over. `now` is
/// read *before* `remaining`, so the result is never later than the term's
/// own deadline.
fn guard_deadline(now: u64, remaining: Duration) -> u64 {
    if remaining.is_zero() {
        0
    } else {
        now.saturating_add(u64::try_from(remaining.as_nanos()).unwrap_or(u64::MAX))
    }
}

/// The time the child's term has left, read by simba to feed the guard.
pub type Remaining = Arc<dyn Fn() -> Duration + Send + Sync>;

/// The guard process of one child, and the task that feeds it deadlines.
#[derive(Debug)]
struct Guard {
    process: Child,
    pipe: Arc<tokio::sync::Mutex<Option<ChildStdin>>>,
    feeder: tokio::task::JoinHandle<()>,
}

/// Starts `simba __guard PGID DEADLINE` with a pipe on its stdin, and a task
/// that writes `deadline NS` on it each time the term's deadline moves;
/// `None` (and a warning) if it cannot be started.
fn spawn_guard(pgid: Pid, remaining: Remaining) -> Option<Guard> {
    let exe = std::env::current_exe().ok()?;
    let first = guard_deadline(boottime_ns(), remaining());
    let spawned = Command::new(exe)
        .arg(GUARD_COMMAND)
        .arg(pgid.as_raw_nonzero().get().to_string())
        .arg(first.to_string())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .process_group(0)
        .spawn();
    match spawned {
        Ok(mut process) => {
            let pipe = Arc::new(tokio::sync::Mutex::new(process.stdin.take()));
            let feeder = tokio::spawn(feed_guard(pipe.clone(), remaining, first));
            Some(Guard {
                process,
                pipe,
                feeder,
            })
        }
        Err(e) => {
            let mut err = anstream::stderr();
            let _ = std::io::Write::write_fmt(
                &mut err,
                format_args!(
                    "simba: {} cannot start the guard ({e}): if simba is killed or stopped, the command may outlive its term\n",
                    crate::style::warn("warning:")
                ),
            );
            None
        }
    }
}

/// Passes every move of the term's deadline on to the guard (and 0 once
/// the term is over). Ends when the pipe is gone.
async fn feed_guard(
    pipe: Arc<tokio::sync::Mutex<Option<ChildStdin>>>,
    remaining: Remaining,
    mut last: u64,
) {
    use tokio::io::AsyncWriteExt;
    const JITTER_NS: u64 = 1_000_000;
    let mut tick = tokio::time::interval(FEED_PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let deadline = guard_deadline(boottime_ns(), remaining());
        let moved =
            deadline > last.saturating_add(JITTER_NS) || deadline.saturating_add(JITTER_NS) < last;
        if moved {
            let mut pipe = pipe.lock().await;
            let Some(stdin) = pipe.as_mut() else { return };
            let line = format!("deadline {deadline}\n");
            if stdin.write_all(line.as_bytes()).await.is_err() {
                return;
            }
            last = deadline;
        }
        if last == 0 {
            return; // the term is over: the guard fires now
        }
    }
}

/// The hidden subcommand of the guard process.
pub const GUARD_COMMAND: &str = "__guard";

/// What simba last said on the guard's pipe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Said {
    Nothing,
    Done,
    Closed,
}

/// The guard process's main (`simba __guard PGID DEADLINE`).
///
/// It keeps the latest deadline simba wrote on its stdin (`deadline NS`
/// lines, on [`boottime_ns`]; 0 means at once) and SIGKILLs the process
/// group `pgid`
/// * when that deadline passes unextended, whether simba is running,
///   stopped (SIGSTOP) or starved: a child never outlives its term's local
///   deadline (S3.3, S6.2), which comes before the backend can hand the
///   lease to anyone else;
/// * at once if the pipe closes without `done`: simba died (S6.3).
///
/// `done` dismisses it. Returns the exit code ([`GUARD_DISMISSED`],
/// [`GUARD_FIRED_DEADLINE`], [`GUARD_FIRED_ORPHANED`]).
pub fn guard_main(pgid: &str, deadline: Option<&str>) -> u8 {
    use std::io::BufRead;
    use std::sync::{Condvar, Mutex, PoisonError};
    let Some(pgid) = pgid.parse::<i32>().ok().and_then(Pid::from_raw) else {
        return crate::error::EXIT_USAGE;
    };
    // Without a deadline (an older simba): only the crash guard.
    let first = match deadline {
        Some(d) => match d.parse::<u64>() {
            Ok(d) => d,
            Err(_) => return crate::error::EXIT_USAGE,
        },
        None => u64::MAX,
    };
    let shared = Arc::new((Mutex::new((first, Said::Nothing)), Condvar::new()));
    let reader = shared.clone();
    std::thread::spawn(move || {
        let (state, changed) = &*reader;
        let mut said = Said::Closed;
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            let line = line.trim();
            if line == "done" {
                said = Said::Done;
                break;
            }
            if let Some(d) = line
                .strip_prefix("deadline ")
                .and_then(|d| d.parse::<u64>().ok())
            {
                state.lock().unwrap_or_else(PoisonError::into_inner).0 = d;
                changed.notify_all();
            }
        }
        state.lock().unwrap_or_else(PoisonError::into_inner).1 = said;
        changed.notify_all();
    });
    let (state, changed) = &*shared;
    let mut guard = state.lock().unwrap_or_else(PoisonError::into_inner);
    loop {
        let (deadline, said) = *guard;
        match said {
            Said::Done => return GUARD_DISMISSED,
            Said::Closed => {
                let _ = kill_process_group(pgid, Signal::KILL);
                return GUARD_FIRED_ORPHANED;
            }
            Said::Nothing => {}
        }
        let now = boottime_ns();
        if now >= deadline {
            let _ = kill_process_group(pgid, Signal::KILL);
            return GUARD_FIRED_DEADLINE;
        }
        // Sleep on the condition variable (CLOCK_MONOTONIC) in short
        // slices, re-reading CLOCK_BOOTTIME after each.
        let wait = Duration::from_nanos(deadline - now).min(GUARD_POLL);
        guard = match changed.wait_timeout(guard, wait) {
            Ok((g, _)) => g,
            Err(poisoned) => poisoned.into_inner().0,
        };
    }
}

impl Running {
    /// Waits for the child to exit by itself.
    ///
    /// # Errors
    /// An I/O error from waiting.
    pub async fn wait(&mut self) -> Result<ExitStatus, CliError> {
        let status = self.child.wait().await?;
        // Whatever the command left behind in its group goes with it.
        self.signal(Signal::KILL);
        self.dismiss_guard().await;
        Ok(status)
    }

    /// Stops the child: SIGTERM to its process group, then SIGKILL once
    /// `grace` has passed (the caller caps `grace` by the term's remaining
    /// time, S6.2) or as soon as `abort` resolves (the term ended, S6.3),
    /// and waits for it to exit.
    ///
    /// # Errors
    /// An I/O error from waiting.
    pub async fn stop(
        &mut self,
        grace: Duration,
        abort: impl std::future::Future,
    ) -> Result<ExitStatus, CliError> {
        if let Ok(Some(status)) = self.child.try_wait() {
            self.signal(Signal::KILL); // leftovers of its group, if any
            self.dismiss_guard().await;
            return Ok(status);
        }
        self.signal(Signal::TERM);
        let exited = tokio::select! {
            status = self.child.wait() => Some(status?),
            _ = tokio::time::sleep(grace) => None,
            _ = abort => None,
        };
        let status = match exited {
            Some(status) => status,
            None => {
                self.signal(Signal::KILL);
                self.child.wait().await?
            }
        };
        // The leader process is gone; make sure nothing it started lives on.
        self.signal(Signal::KILL);
        self.dismiss_guard().await;
        Ok(status)
    }

    /// Tells the guard the child was stopped normally, and reaps it,
    /// noting whether it had fired.
    async fn dismiss_guard(&mut self) {
        use tokio::io::AsyncWriteExt;
        if let Some(mut guard) = self.guard.take() {
            guard.feeder.abort();
            if let Some(mut stdin) = guard.pipe.lock().await.take() {
                let _ = stdin.write_all(b"done\n").await;
                let _ = stdin.shutdown().await;
            }
            if let Ok(Ok(status)) =
                tokio::time::timeout(Duration::from_secs(2), guard.process.wait()).await
            {
                self.guard_fired = matches!(
                    status.code().and_then(|c| u8::try_from(c).ok()),
                    Some(GUARD_FIRED_DEADLINE | GUARD_FIRED_ORPHANED)
                );
            }
        }
    }

    /// Whether the guard killed the child because its term's deadline
    /// passed while simba did not stop it (simba stopped or starved).
    /// Known once the child has been waited for.
    pub fn guard_fired(&self) -> bool {
        self.guard_fired
    }

    fn signal(&self, sig: Signal) {
        if let Some(pgid) = self.pgid {
            // ESRCH (the group is gone already) is fine.
            let _ = kill_process_group(pgid, sig);
        }
    }
}

/// simba's exit code for a child's exit status: its code, or 128 + the
/// signal that killed it.
pub fn exit_code(status: ExitStatus) -> u8 {
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code & 0xff).unwrap_or(1),
        (None, Some(sig)) => u8::try_from(128 + (sig & 0x7f)).unwrap_or(255),
        (None, None) => 1,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn spec(cmd: &[&str]) -> ChildSpec {
        ChildSpec {
            command: cmd.iter().map(OsString::from).collect(),
            grace: Duration::from_secs(1),
        }
    }

    fn forever() -> Remaining {
        Arc::new(|| Duration::from_secs(3600))
    }

    fn term() -> TermEnv {
        TermEnv {
            name: "job".into(),
            token: 42,
            session: Some("00ff".into()),
            slot: None,
        }
    }

    #[tokio::test]
    async fn the_child_sees_the_term_and_its_status_is_mirrored() {
        let mut c = spec(&[
            "sh",
            "-c",
            "test \"$SIMBA_LEASE_NAME:$SIMBA_FENCING_TOKEN:$SIMBA_SESSION_ID\" = job:42:00ff && exit 7",
        ])
        .spawn(&term(), forever())
        .unwrap();
        assert_eq!(exit_code(c.wait().await.unwrap()), 7);
    }

    #[tokio::test]
    async fn a_stubborn_child_is_killed_after_the_grace_period() {
        let mut c = spec(&["sh", "-c", "trap '' TERM; sleep 30"])
            .spawn(&term(), forever())
            .unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        let started = std::time::Instant::now();
        let status = c
            .stop(Duration::from_millis(300), std::future::pending::<()>())
            .await
            .unwrap();
        assert_eq!(exit_code(status), 128 + 9);
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[tokio::test]
    async fn sigterm_reaches_the_whole_group() {
        let mut c = spec(&["sh", "-c", "sleep 30; true"])
            .spawn(&term(), forever())
            .unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        let status = c
            .stop(Duration::from_secs(5), std::future::pending::<()>())
            .await
            .unwrap();
        assert_eq!(exit_code(status), 128 + 15);
    }

    #[test]
    fn the_guard_deadline_is_now_plus_remaining_or_at_once() {
        assert_eq!(guard_deadline(10, Duration::from_nanos(5)), 15);
        assert_eq!(guard_deadline(10, Duration::ZERO), 0);
        assert_eq!(
            guard_deadline(u64::MAX - 1, Duration::from_secs(1)),
            u64::MAX
        );
        let a = boottime_ns();
        assert!(boottime_ns() >= a, "CLOCK_BOOTTIME does not go back");
    }

    #[test]
    fn a_missing_command_is_a_distinct_error() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let _guard = rt.enter();
        let e = spec(&["simba-no-such-command-xyz"])
            .spawn(&term(), forever())
            .unwrap_err();
        assert!(matches!(e, CliError::CommandNotFound(_)));
        assert_eq!(e.exit_code(), crate::error::EXIT_NOT_FOUND);
    }
}
