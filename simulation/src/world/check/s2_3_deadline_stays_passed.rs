//! `deadline (S2.3, S3.3)`: a session's local deadline, once passed, never
//! moves on.

use super::{Checker, Cx, Observed, Out};

/// The `deadline (S2.3, S3.3)` checker.
#[derive(Default)]
pub(super) struct DeadlineStaysPassed;

impl Checker for DeadlineStaysPassed {
    fn observe(&mut self, ev: &Observed<'_>, _cx: &Cx<'_>, out: &mut Out<'_>) {
        let Observed::DeadlineChanged {
            node,
            old: Some(old),
            new: deadline,
            local: l,
        } = *ev
        else {
            return;
        };
        if old <= l && deadline > old {
            out.violation(
                "deadline (S2.3, S3.3)",
                format!(
                    "node {node}: session deadline {old} had passed at {l} but moved to {deadline}"
                ),
            );
        }
    }
}
