//! `late acquire (S4.3)`: a won lease becomes a term only while the
//! session's local deadline has not passed.

use super::{Checker, Cx, Observed, Out};

/// The `late acquire (S4.3)` checker.
#[derive(Default)]
pub(super) struct LateAcquire;

impl Checker for LateAcquire {
    fn observe(&mut self, ev: &Observed<'_>, cx: &Cx<'_>, out: &mut Out<'_>) {
        let Observed::Elected {
            node,
            term,
            local: l,
            ..
        } = *ev
        else {
            return;
        };
        let deadline = cx.cluster.nodes[node].deadlines.get(&term.session).copied();
        if deadline.is_none_or(|d| l >= d) {
            out.violation(
                "late acquire (S4.3)",
                format!(
                    "node {node} elected for {} with token {} at local {l} after its session's deadline {deadline:?}",
                    term.name, term.token
                ),
            );
        }
    }
}
