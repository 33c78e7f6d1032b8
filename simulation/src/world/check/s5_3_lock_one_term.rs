//! `lock takes one term (S5.3)`: a lock call is elected at most once.

use super::{Api, Checker, Cx, Observed, Out};

/// The `lock takes one term (S5.3)` checker.
#[derive(Default)]
pub(super) struct LockOneTerm;

impl Checker for LockOneTerm {
    fn observe(&mut self, ev: &Observed<'_>, _cx: &Cx<'_>, out: &mut Out<'_>) {
        if let Observed::Elected {
            node,
            term,
            api: Some(Api::Lock { had_term: true }),
            ..
        } = ev
        {
            out.violation(
                "lock takes one term (S5.3)",
                format!("node {node}: second term for lock {}", term.name),
            );
        }
    }
}
