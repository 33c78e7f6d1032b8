//! `fencing tokens (S3.2)`: each term of a name has a greater token than
//! every earlier term of that name, on any node.

use super::{Checker, Cx, Observed, Out};
use simba_core::{LeaseName, Token};
use std::collections::BTreeMap;

/// The `fencing tokens (S3.2)` checker.
#[derive(Default)]
pub(super) struct FencingTokens {
    /// Per name: the greatest token elected so far.
    last: BTreeMap<LeaseName, Token>,
}

impl Checker for FencingTokens {
    fn observe(&mut self, ev: &Observed<'_>, _cx: &Cx<'_>, out: &mut Out<'_>) {
        let Observed::Elected { node, term, .. } = *ev else {
            return;
        };
        if let Some(last) = self.last.get(&term.name) {
            if term.token <= *last {
                out.violation(
                    "fencing tokens (S3.2)",
                    format!(
                        "node {node} elected for {} with token {} after a term with token {last}",
                        term.name, term.token
                    ),
                );
            }
        }
        let last = self.last.entry(term.name.clone()).or_insert(term.token);
        *last = (*last).max(term.token);
    }
}
