//! Child processes: spawn the command of `simba run` / `simba lock` with the
//! term's details in its environment, stop it with SIGTERM then SIGKILL, and
//! turn its exit status into simba's.
//!
//! The child runs in its own process group, so that a stop reaches its whole
//! tree (a shell and what it started), and so that a Ctrl-C on the terminal
//! reaches simba alone, which then stops the child in order (S6.1).
//!
//! A crash of simba itself (SIGKILL, OOM) must not leave the child running
//! without a lease. Next to each child simba starts a **guard**: a copy of
//! itself (`simba __guard PGID`, hidden) reading a pipe from simba. When
//! simba stops the child normally it tells the guard `done`; if the pipe
//! closes without that, simba died, and the guard SIGKILLs the child's
//! process group at once (a lost term does not wait, S6.3).

use crate::error::CliError;
use rustix::process::{kill_process_group, Pid, Signal};
use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::Duration;
use tokio::process::{Child, Command};

/// The variable holding the lease name.
pub const ENV_LEASE_NAME: &str = "SIMBA_LEASE_NAME";
/// The variable holding the term's fencing token.
pub const ENV_FENCING_TOKEN: &str = "SIMBA_FENCING_TOKEN";
/// The variable holding the session id (32 hex digits).
pub const ENV_SESSION_ID: &str = "SIMBA_SESSION_ID";

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
}

/// A running child.
#[derive(Debug)]
pub struct Running {
    child: Child,
    pgid: Option<Pid>,
    guard: Option<Child>,
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
    /// environment.
    ///
    /// # Errors
    /// [`CliError::CommandNotFound`] or [`CliError::CannotExecute`].
    pub fn spawn(&self, term: &TermEnv) -> Result<Running, CliError> {
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
        let guard = pgid.and_then(spawn_guard);
        Ok(Running { child, pgid, guard })
    }
}

/// Starts `simba __guard PGID` with a pipe on its stdin; `None` (and a
/// warning) if it cannot be started.
fn spawn_guard(pgid: Pid) -> Option<Child> {
    let exe = std::env::current_exe().ok()?;
    let spawned = Command::new(exe)
        .arg(GUARD_COMMAND)
        .arg(pgid.as_raw_nonzero().get().to_string())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .process_group(0)
        .spawn();
    match spawned {
        Ok(guard) => Some(guard),
        Err(e) => {
            let mut err = anstream::stderr();
            let _ = std::io::Write::write_fmt(
                &mut err,
                format_args!(
                    "simba: {} cannot start the crash guard ({e}): if simba is killed, the command may outlive it\n",
                    crate::style::warn("warning:")
                ),
            );
            None
        }
    }
}

/// The hidden subcommand of the guard process.
pub const GUARD_COMMAND: &str = "__guard";

/// The guard process's main: waits for its stdin to close; unless simba
/// wrote `done` first, SIGKILLs the process group `pgid`. Returns the exit code.
pub fn guard_main(pgid: &str) -> u8 {
    use std::io::Read;
    let Some(pgid) = pgid.parse::<i32>().ok().and_then(Pid::from_raw) else {
        return crate::error::EXIT_USAGE;
    };
    let mut said = Vec::new();
    let _ = std::io::stdin().take(64).read_to_end(&mut said);
    if !said.starts_with(b"done") {
        let _ = kill_process_group(pgid, Signal::KILL);
    }
    crate::error::EXIT_OK
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

    /// Tells the guard the child was stopped normally, and reaps it.
    async fn dismiss_guard(&mut self) {
        use tokio::io::AsyncWriteExt;
        if let Some(mut guard) = self.guard.take() {
            if let Some(mut stdin) = guard.stdin.take() {
                let _ = stdin.write_all(b"done\n").await;
                let _ = stdin.shutdown().await;
            }
            let _ = tokio::time::timeout(Duration::from_secs(2), guard.wait()).await;
        }
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

    fn term() -> TermEnv {
        TermEnv {
            name: "job".into(),
            token: 42,
            session: Some("00ff".into()),
        }
    }

    #[tokio::test]
    async fn the_child_sees_the_term_and_its_status_is_mirrored() {
        let mut c = spec(&[
            "sh",
            "-c",
            "test \"$SIMBA_LEASE_NAME:$SIMBA_FENCING_TOKEN:$SIMBA_SESSION_ID\" = job:42:00ff && exit 7",
        ])
        .spawn(&term())
        .unwrap();
        assert_eq!(exit_code(c.wait().await.unwrap()), 7);
    }

    #[tokio::test]
    async fn a_stubborn_child_is_killed_after_the_grace_period() {
        let mut c = spec(&["sh", "-c", "trap '' TERM; sleep 30"])
            .spawn(&term())
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
            .spawn(&term())
            .unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        let status = c
            .stop(Duration::from_secs(5), std::future::pending::<()>())
            .await
            .unwrap();
        assert_eq!(exit_code(status), 128 + 15);
    }

    #[test]
    fn a_missing_command_is_a_distinct_error() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let _guard = rt.enter();
        let e = spec(&["simba-no-such-command-xyz"])
            .spawn(&term())
            .unwrap_err();
        assert!(matches!(e, CliError::CommandNotFound(_)));
        assert_eq!(e.exit_code(), crate::error::EXIT_NOT_FOUND);
    }
}
