//! `callbacks (S7.1)`: callbacks come in pairs. A term is elected once,
//! only after the node's previous term of the name was revoked, and revoked
//! once, only after it was elected.

use super::{Checker, Cx, Observed, Out};

/// The `callbacks (S7.1)` checker.
#[derive(Default)]
pub(super) struct CallbacksPaired;

impl Checker for CallbacksPaired {
    fn observe(&mut self, ev: &Observed<'_>, cx: &Cx<'_>, out: &mut Out<'_>) {
        match *ev {
            Observed::Elected { node, term, .. } => {
                let terms = &cx.cluster.nodes[node].terms;
                if terms
                    .values()
                    .any(|r| r.term.name == term.name && r.revoked.is_none())
                {
                    out.violation(
                        "callbacks (S7.1)",
                        format!(
                            "node {node}: {} elected for {} before the previous term was revoked",
                            term.id, term.name
                        ),
                    );
                }
                if terms.contains_key(&term.id) {
                    out.violation(
                        "callbacks (S7.1)",
                        format!("node {node}: {} elected twice", term.id),
                    );
                }
            }
            Observed::Revoked { node, term } => match cx.cluster.nodes[node].terms.get(&term.id) {
                None => out.violation(
                    "callbacks (S7.1)",
                    format!(
                        "node {node}: {} revoked but never elected (or after exit)",
                        term.id
                    ),
                ),
                Some(rec) if rec.revoked.is_some() => out.violation(
                    "callbacks (S7.1)",
                    format!("node {node}: {} revoked twice", term.id),
                ),
                Some(_) => {}
            },
            _ => {}
        }
    }
}
