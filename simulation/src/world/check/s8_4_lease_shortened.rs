//! `lease shortened (S8.4)`: an engine says `SessionLeaseShortened` at most
//! once per session.

use super::{Checker, Cx, Observed, Out};
use simba_core::SessionId;
use std::collections::BTreeSet;

/// The `lease shortened (S8.4)` checker.
#[derive(Default)]
pub(super) struct LeaseShortened {
    /// Every (node, session) it was said for.
    said: BTreeSet<(usize, SessionId)>,
}

impl Checker for LeaseShortened {
    fn observe(&mut self, ev: &Observed<'_>, _cx: &Cx<'_>, out: &mut Out<'_>) {
        let Observed::LeaseShortened { node, session } = *ev else {
            return;
        };
        if !self.said.insert((node, session)) {
            out.violation(
                "lease shortened (S8.4)",
                format!("node {node}: SessionLeaseShortened twice for one session"),
            );
        }
    }
}
