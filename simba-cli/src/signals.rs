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
