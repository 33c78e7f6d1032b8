//! `slot at most once (S11.1)`: a schedule slot runs once, on one node and
//! one term.

use super::{Checker, Seen};
use std::collections::BTreeMap;

/// The `slot at most once (S11.1)` checker.
#[derive(Default)]
pub(super) struct SlotAtMostOnce {
    /// The first run of each slot: (node, token).
    first: BTreeMap<u64, (usize, u64)>,
}

impl Checker for SlotAtMostOnce {
    fn observe(&mut self, node: usize, seen: &Seen<'_>) -> Option<String> {
        let Seen::SlotRun { slot, token } = *seen else {
            return None;
        };
        let first = *self.first.entry(slot).or_insert((node, token));
        (first != (node, token)).then(|| {
            format!(
                "slot at most once (S11.1): slot {slot} runs on node {node} (token {token}) after \
                 it ran on node {} (token {})",
                first.0, first.1
            )
        })
    }
}
