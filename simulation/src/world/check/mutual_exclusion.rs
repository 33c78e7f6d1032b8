//! `mutual exclusion`: at any true instant, at most one node holds a valid
//! term of a name, each node judged on its own clock (S2, S3.3).
//!
//! Runs with `lease removed` faults (S3.4): a holder whose lease an outside
//! actor removed stays valid until its first renewal sent after the removal
//! is answered (Simba cannot learn it sooner; the fencing token protects
//! the resource meanwhile). Such a term is left out while `taken over
//! (S3.4)` has not judged its removal, and only beside a holder with a
//! greater token; everything else counts.

use super::{Checker, Cx, Observed, Out};
use simba_core::{LeaseName, TermId, Token};

/// The `mutual exclusion` checker.
#[derive(Default)]
pub(super) struct MutualExclusion;

/// The valid holders of `name` now, as (node, token, term), the
/// `lease-removed` exception applied.
pub(super) fn holders(name: &LeaseName, cx: &Cx<'_>) -> Vec<(usize, Token, TermId)> {
    let mut holders: Vec<(usize, Token, TermId)> = Vec::new();
    for (i, n) in cx.cluster.nodes.iter().enumerate() {
        if n.engine.is_none() {
            continue;
        }
        for rec in n.terms.values() {
            if &rec.term.name == name && cx.is_valid(i, rec) {
                holders.push((i, rec.term.token, rec.term.id));
            }
        }
    }
    if holders.len() >= 2 && cx.removal_exceptions {
        let newest = holders.iter().map(|h| h.1).max();
        holders.retain(|(i, token, term)| {
            let stolen = cx.unjudged.iter().any(|r| r.node == *i && r.term == *term);
            !(stolen && Some(*token) < newest)
        });
    }
    holders
}

impl Checker for MutualExclusion {
    fn observe(&mut self, ev: &Observed<'_>, cx: &Cx<'_>, out: &mut Out<'_>) {
        let Observed::HoldersMayChange { name } = *ev else {
            return;
        };
        let holders = holders(name, cx);
        if holders.len() >= 2 {
            out.violation(
                "mutual exclusion",
                format!("two valid holders of {name}: (node, token, term) {holders:?}"),
            );
        }
    }
}
