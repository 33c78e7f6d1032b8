//! `handover order (S6.1, S10.3)`: after a voluntary revoke, the old
//! term's task finishes before a later term of its lease starts its task,
//! as long as its hand-over time lasts (past it, the lease may move, S6.2).

use super::{Checker, Latest, Seen};
use std::time::Duration;

/// The `handover order (S6.1, S10.3)` checker.
#[derive(Default)]
pub(super) struct HandoverOrder {
    latest: Latest,
}

impl Checker for HandoverOrder {
    fn observe(&mut self, _node: usize, seen: &Seen<'_>) -> Option<String> {
        match *seen {
            Seen::Started { name, token } => {
                self.latest.started(name, token);
                None
            }
            Seen::FinishingStep { term } if term.handover_remaining() > Duration::ZERO => {
                let (name, token) = (term.name(), term.token());
                let later = self.latest.later_than(name, token)?;
                Some(format!(
                    "handover order (S6.1, S10.3): the task of {name} token {token} still runs \
                     after its voluntary revoke, within its hand-over time, while the task of \
                     token {later} has started"
                ))
            }
            _ => None,
        }
    }
}
