//! Ctrl-C and SIGTERM: both ask for a clean stop (child terminated, then the
//! lease released: a graceful handover).

use tokio::signal::unix::{signal, Signal, SignalKind};

/// SIGINT's number.
pub const SIGINT: i32 = 2;
/// SIGTERM's number.
pub const SIGTERM: i32 = 15;

/// The stop signals simba listens to. Create it before spawning anything:
/// from then on SIGINT and SIGTERM no longer kill simba outright.
pub struct StopSignals {
    int: Option<Signal>,
    term: Option<Signal>,
}

impl StopSignals {
    /// Installs the handlers. If one cannot be installed, that signal keeps
    /// its default action (it then kills simba, and the lease expires).
    pub fn install() -> StopSignals {
        StopSignals {
            int: signal(SignalKind::interrupt()).ok(),
            term: signal(SignalKind::terminate()).ok(),
        }
    }

    /// Resolves with the number of the next stop signal received.
    pub async fn recv(&mut self) -> i32 {
        async fn next(s: &mut Option<Signal>) {
            match s {
                Some(s) => {
                    if s.recv().await.is_none() {
                        std::future::pending::<()>().await;
                    }
                }
                None => std::future::pending::<()>().await,
            }
        }
        tokio::select! {
            _ = next(&mut self.int) => SIGINT,
            _ = next(&mut self.term) => SIGTERM,
        }
    }
}

/// Resolves at the first SIGINT or SIGTERM (for commands with no child).
pub async fn shutdown() -> i32 {
    StopSignals::install().recv().await
}

/// simba's exit code once it was asked to stop by `sig` and has stopped:
/// its child (if one ran) terminated and the lease released.
///
/// A SIGTERM is how service managers (systemd, Kubernetes, supervisord)
/// stop a service, and they count only exit 0 as a clean stop: so after a
/// SIGTERM simba exits **0** when its child ended by the stop itself (it
/// exited 0, or died of the SIGTERM simba passed on, or of the SIGKILL after
/// `--grace`) or when no child was running. A child that exited with a code
/// of its own (say 1, a failed shutdown) is still mirrored. A SIGINT (Ctrl-C
/// in a terminal) keeps the shell's convention: the child's status, or 130.
///
/// ```text
/// stopped_code(SIGTERM, Some(143)) == 0
/// stopped_code(SIGTERM, Some(1))   == 1
/// stopped_code(SIGINT, None)       == 130
/// ```
pub fn stopped_code(sig: i32, child: Option<u8>) -> u8 {
    let by_signal = |n: i32| u8::try_from(128 + n).unwrap_or(u8::MAX);
    match (sig, child) {
        (SIGTERM, None) => 0,
        (SIGTERM, Some(code)) if code == by_signal(SIGTERM) || code == by_signal(9) => 0,
        (_, Some(code)) => code,
        (_, None) => by_signal(sig),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sigterm_stop_is_clean_unless_the_child_failed_on_its_own() {
        assert_eq!(stopped_code(SIGTERM, None), 0);
        assert_eq!(stopped_code(SIGTERM, Some(0)), 0);
        assert_eq!(stopped_code(SIGTERM, Some(143)), 0);
        assert_eq!(stopped_code(SIGTERM, Some(137)), 0);
        assert_eq!(stopped_code(SIGTERM, Some(1)), 1);
        assert_eq!(stopped_code(SIGINT, None), 130);
        assert_eq!(stopped_code(SIGINT, Some(130)), 130);
        assert_eq!(stopped_code(SIGINT, Some(0)), 0);
    }
}
