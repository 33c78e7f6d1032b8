//! `taken over (S3.4)`: a term whose lease an outside actor removed ends
//! (`TakenOver`) at the reply to its holder's first renewal sent after the
//! removal. That reply cannot list the lease (the backend dropped it before
//! the renewal arrived, and never grants the same token again), so the
//! engine has no excuse; a term elected after the renewal's send would have
//! one (S3.4), but only elected terms are removed.

use super::{Checker, Cx, Observed, Out, Removal};
use simba_core::{Command, Input, SessionId};
use std::collections::BTreeMap;

/// The `taken over (S3.4)` checker.
#[derive(Default)]
pub(super) struct TakenOver {
    /// Removals not yet judged (mutual exclusion makes an exception for
    /// their terms meanwhile).
    removals: Vec<Removal>,
    /// Per (node, op): a renewal's session and the world's step of its send.
    renews: BTreeMap<(usize, u64), (SessionId, u64)>,
    /// The successful renewal reply being delivered: (op, session, step of
    /// its send).
    delivered: Option<(u64, SessionId, u64)>,
    /// Whether the engine took that reply (not as stale).
    fresh: bool,
}

impl TakenOver {
    /// Takes the removals out (to lend them to the other checkers).
    pub(super) fn take_unjudged(&mut self) -> Vec<Removal> {
        std::mem::take(&mut self.removals)
    }

    /// Puts back what [`TakenOver::take_unjudged`] took.
    pub(super) fn put_unjudged(&mut self, removals: Vec<Removal>) {
        self.removals = removals;
    }

    /// After `node` took a successful reply to renewal `op` of `session`,
    /// sent at world step `sent_step`: for every lease removed from this
    /// session before that send, the term must have ended by now.
    fn judge(
        &mut self,
        node: usize,
        op: u64,
        session: SessionId,
        sent_step: u64,
        cx: &Cx<'_>,
        out: &mut Out<'_>,
    ) {
        // Judged removals are forgotten: mutual exclusion makes no more
        // exception for their terms.
        let (due, rest): (Vec<Removal>, Vec<Removal>) = std::mem::take(&mut self.removals)
            .into_iter()
            .partition(|r| r.node == node && r.session == session && r.step < sent_step);
        self.removals = rest;
        let mut late = Vec::new();
        for r in due {
            out.report.removals_judged += 1;
            if let Some(rec) = cx.cluster.nodes[node].terms.get(&r.term) {
                if rec.revoked.is_none() && rec.elected_step < sent_step {
                    late.push((rec.term.name.clone(), rec.term.token, r.term));
                }
            }
        }
        for (name, token, term) in late {
            out.violation(
                "taken over (S3.4)",
                format!(
                    "node {node} still holds {term} ({name}, token {token}) after the reply to \
                     renewal {op}, sent after the backend dropped the lease: the term must end \
                     (TakenOver) at that reply"
                ),
            );
        }
    }
}

impl Checker for TakenOver {
    fn observe(&mut self, ev: &Observed<'_>, cx: &Cx<'_>, out: &mut Out<'_>) {
        match *ev {
            Observed::Sent {
                node,
                cmd: Command::Renew { op, session },
                ..
            } => {
                if self.renews.len() >= 4096 {
                    self.renews.pop_first();
                }
                self.renews.insert((node, op.0), (*session, cx.steps));
            }
            Observed::Delivered { node, input, .. } => {
                self.delivered = match input {
                    Input::RenewReplied { op, result } => self
                        .renews
                        .remove(&(node, op.0))
                        .filter(|_| result.is_ok())
                        .map(|(session, step)| (op.0, session, step)),
                    _ => None,
                };
                self.fresh = false;
            }
            Observed::Taken { fresh, .. } => self.fresh = fresh,
            Observed::Settled { node } => {
                if let (Some((op, session, sent_step)), true) = (self.delivered.take(), self.fresh)
                {
                    self.judge(node, op, session, sent_step, cx, out);
                }
            }
            Observed::LeaseRemoved(r) => self.removals.push(r.clone()),
            Observed::Crashed { node } => {
                self.renews.retain(|(n, _), _| *n != node);
                // The process and its terms are gone: nothing left to judge.
                self.removals.retain(|r| r.node != node);
            }
            _ => {}
        }
    }
}
