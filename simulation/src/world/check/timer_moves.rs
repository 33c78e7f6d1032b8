//! `timer (STYLE)`: an engine's deadline moves after its timeout fires
//! (`/work/shared/STYLE.md`, "one timer table"): a stuck deadline makes the
//! driver spin. More than 1,000 timeouts at one true instant is a stuck
//! timer; the world then stops that engine ([`TimerMoves::stalled`]).

use super::{Checker, Cx, Observed, Out};
use std::collections::BTreeMap;

/// The `timer (STYLE)` checker.
#[derive(Default)]
pub(in crate::world) struct TimerMoves {
    /// Per node: the true instant of its latest timeouts, and how many
    /// more came at that instant.
    stuck: BTreeMap<usize, (u64, u32)>,
}

impl TimerMoves {
    /// Whether `node`'s timer is stuck (the checker fired on its latest
    /// timeout): the world stops its engine.
    pub(in crate::world) fn stalled(&self, node: usize) -> bool {
        self.stuck.get(&node).is_some_and(|s| s.1 > 1_000)
    }
}

impl Checker for TimerMoves {
    fn observe(&mut self, ev: &Observed<'_>, cx: &Cx<'_>, out: &mut Out<'_>) {
        let Observed::TimerFired { node } = *ev else {
            return;
        };
        let s = self.stuck.entry(node).or_insert((0, 0));
        if s.0 == cx.now {
            s.1 += 1;
        } else {
            *s = (cx.now, 0);
        }
        if s.1 > 1_000 {
            out.violation(
                "timer (STYLE)",
                format!(
                    "node {node}: poll_timeout() did not move after 1000 timeouts at one instant"
                ),
            );
        }
    }
}
