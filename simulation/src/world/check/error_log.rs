//! `error log`: no engine logs at ERROR level (an error log is a bug, as in
//! firezone's tests).

use super::{Checker, Cx, Observed, Out};
use simba_core::Level;

/// The `error log` checker.
#[derive(Default)]
pub(super) struct ErrorLog;

impl Checker for ErrorLog {
    fn observe(&mut self, ev: &Observed<'_>, _cx: &Cx<'_>, out: &mut Out<'_>) {
        if let Observed::Diagnostic {
            node,
            level: Level::Error,
            message,
        } = *ev
        {
            out.violation("error log", format!("node {node}: {message}"));
        }
    }
}
