//! `handover order (S6.1)`: the old leader's tasks stop before the new
//! leader's start. After a voluntary move, a node releases the lease only
//! once its task has exited (or the term's deadline has passed, S6.2), and
//! a new task of the name starts only once every old one of a voluntarily
//! revoked term has exited (or its deadline has passed).
//!
//! The old holder keeps the lease until then; a term whose lease an
//! outside actor removed (a `lease removed` fault, S3.4) no longer can, so
//! the next holder may start at once: such terms are left out (unless the
//! world is told to judge without the `lease-removed` exceptions).

use super::s3_5_revoke_before_release::released_term;
use super::{Checker, Cx, Observed, Out, TaskState};
use simba_core::RevokeReason;

/// The `handover order (S6.1)` checker.
#[derive(Default)]
pub(super) struct HandoverOrder;

impl Checker for HandoverOrder {
    fn observe(&mut self, ev: &Observed<'_>, cx: &Cx<'_>, out: &mut Out<'_>) {
        match *ev {
            Observed::Sent {
                node,
                cmd,
                local: l,
            } => {
                let Some(rec) = released_term(cx, node, cmd) else {
                    return;
                };
                let deadline_open = rec.revoke_deadline.is_some_and(|d| l < d);
                if rec.revoked.is_some_and(RevokeReason::is_voluntary)
                    && matches!(rec.task, TaskState::Running | TaskState::Interrupted)
                    && deadline_open
                {
                    out.violation(
                        "handover order (S6.1)",
                        format!(
                            "node {node} released {} token {} while the task of {} still runs",
                            rec.term.name, rec.term.token, rec.term.id
                        ),
                    );
                }
            }
            Observed::TaskStart { node, term } => {
                if !cx.cluster.nodes[node].terms.contains_key(&term.id) {
                    return;
                }
                let relax = cx.removal_exceptions;
                let mut bad = Vec::new();
                for (i, n) in cx.cluster.nodes.iter().enumerate() {
                    if n.engine.is_none() {
                        continue;
                    }
                    let li = n.clock.local(cx.now);
                    for rec in n.terms.values() {
                        if rec.term.name == term.name
                            && rec.term.id != term.id
                            && !(relax && cx.removed_terms.contains(&(i, rec.term.id)))
                            && rec.revoked.is_some_and(RevokeReason::is_voluntary)
                            && matches!(rec.task, TaskState::Running | TaskState::Interrupted)
                            && rec.revoke_deadline.is_some_and(|d| li < d)
                        {
                            bad.push((i, rec.term.id));
                        }
                    }
                }
                if !bad.is_empty() {
                    out.violation(
                        "handover order (S6.1)",
                        format!(
                            "node {node}'s task for {} started while the tasks of {bad:?} still run",
                            term.name
                        ),
                    );
                }
            }
            _ => {}
        }
    }
}
