//! S1.4: closing releases everything at once. `Closed` comes only after
//! `close()`, with every term revoked (`close (S1.4)`); nothing is elected
//! after it (`close (S1.4, S7.3)`); every `close()` completes by the end of
//! the run (`completions (S1.4)`).

use super::{Checker, Cx, Observed, Out};
use std::time::Duration;

/// The S1.4 checker.
#[derive(Default)]
pub(super) struct Close;

impl Checker for Close {
    fn observe(&mut self, ev: &Observed<'_>, cx: &Cx<'_>, out: &mut Out<'_>) {
        match *ev {
            Observed::Elected { node, term, .. } if cx.cluster.nodes[node].closed => {
                out.violation(
                    "close (S1.4, S7.3)",
                    format!("node {node} elected for {} after Closed", term.name),
                );
            }
            Observed::Closed { node } => {
                let n = &cx.cluster.nodes[node];
                let unrevoked = n.terms.values().filter(|r| r.revoked.is_none()).count();
                if unrevoked > 0 {
                    out.violation(
                        "close (S1.4)",
                        format!("node {node} closed with {unrevoked} terms not revoked"),
                    );
                }
                if n.closing.is_none() {
                    out.violation(
                        "close (S1.4)",
                        format!("node {node}: Closed without close()"),
                    );
                }
            }
            _ => {}
        }
    }

    fn finish(&mut self, cx: &Cx<'_>, out: &mut Out<'_>) {
        for (node, n) in cx.cluster.nodes.iter().enumerate() {
            if let Some(since) = n.closing {
                out.violation(
                    "completions (S1.4)",
                    format!(
                        "node {node}: close() at {:?} never completed",
                        Duration::from_nanos(since)
                    ),
                );
            }
        }
    }
}
