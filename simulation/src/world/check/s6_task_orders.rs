//! `task orders (S6)`: the engine orders a task started only for a term it
//! elected and has not ended.

use super::{Checker, Cx, Observed, Out};

/// The `task orders (S6)` checker.
#[derive(Default)]
pub(super) struct TaskOrders;

impl Checker for TaskOrders {
    fn observe(&mut self, ev: &Observed<'_>, cx: &Cx<'_>, out: &mut Out<'_>) {
        let Observed::TaskStart { node, term } = *ev else {
            return;
        };
        if !cx.cluster.nodes[node].terms.contains_key(&term.id) {
            out.violation(
                "task orders (S6)",
                format!("node {node}: task start for unknown or ended {}", term.id),
            );
        }
    }
}
