//! `task-exit policy (S6.5)`: an election task that ends on its own
//! (returns, fails or panics) while its term is held makes the engine give
//! the term up at once (default policy), so no node holds a lease with
//! nothing running.

use super::{Checker, Cx, Observed, Out};

/// The `task-exit policy (S6.5)` checker.
#[derive(Default)]
pub(super) struct TaskExitPolicy;

impl Checker for TaskExitPolicy {
    fn observe(&mut self, ev: &Observed<'_>, cx: &Cx<'_>, out: &mut Out<'_>) {
        let Observed::TaskEndedOnItsOwn {
            node,
            term,
            outcome,
        } = *ev
        else {
            return;
        };
        let held = cx.cluster.nodes[node]
            .terms
            .get(&term)
            .is_some_and(|r| r.revoked.is_none());
        if held {
            out.violation(
                "task-exit policy (S6.5)",
                format!("node {node}: the task of {term} {outcome} but its term is still held"),
            );
        }
    }
}
