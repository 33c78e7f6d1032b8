//! `revoke before release (S3.5)`: a node releases a lease only after it
//! revoked the term that held it.

use super::{Checker, Cx, Observed, Out, TermRec};
use simba_core::Command;

/// The `revoke before release (S3.5)` checker.
#[derive(Default)]
pub(super) struct RevokeBeforeRelease;

/// The term a release of `node` is for, if the node knows it.
pub(super) fn released_term<'a>(cx: &Cx<'a>, node: usize, cmd: &Command) -> Option<&'a TermRec> {
    let Command::Release {
        session,
        name,
        token,
        ..
    } = cmd
    else {
        return None;
    };
    cx.cluster.nodes[node].terms.values().rfind(|rec| {
        rec.term.session == *session && &rec.term.name == name && rec.term.token == *token
    })
}

impl Checker for RevokeBeforeRelease {
    fn observe(&mut self, ev: &Observed<'_>, cx: &Cx<'_>, out: &mut Out<'_>) {
        let Observed::Sent { node, cmd, .. } = *ev else {
            return;
        };
        let Some(rec) = released_term(cx, node, cmd) else {
            return;
        };
        if rec.revoked.is_none() {
            out.violation(
                "revoke before release (S3.5)",
                format!(
                    "node {node} released {} token {} before revoking {}",
                    rec.term.name, rec.term.token, rec.term.id
                ),
            );
        }
    }
}
