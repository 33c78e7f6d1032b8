//! `groups (S10)`: every (re)started process joins every group of the run
//! (S10.1); the engine must accept the join.

use super::{Checker, Cx, Observed, Out};

/// The `groups (S10)` checker.
#[derive(Default)]
pub(super) struct Join;

impl Checker for Join {
    fn observe(&mut self, ev: &Observed<'_>, _cx: &Cx<'_>, out: &mut Out<'_>) {
        if let Observed::JoinRefused { node, error } = ev {
            out.violation(
                "groups (S10)",
                format!("node {node}: join refused: {error}"),
            );
        }
    }
}
