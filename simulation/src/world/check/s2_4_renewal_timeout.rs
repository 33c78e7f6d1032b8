//! `renewal timeout (S2.4)`: every backend call has a timeout. A reply to a
//! renewal that arrives after its call timed out, once the engine has been
//! woken after that instant (it then had to fail the call), must be taken
//! as stale. A reply that comes before that wake (e.g. a paused node
//! resumes and reads its socket first) may still be taken: the deadline
//! counts from the send.

use super::{Checker, Cx, Observed, Out};
use simba_core::{Command, Input, Timestamp};
use std::collections::BTreeMap;
use std::time::Duration;

/// The `renewal timeout (S2.4)` checker.
#[derive(Default)]
pub(super) struct RenewalTimeout {
    /// Per (node, op): a renewal's local send time and the call timeout in
    /// force then.
    renews: BTreeMap<(usize, u64), (Timestamp, Duration)>,
    /// Per node: the local time of its engine's latest `handle_timeout`.
    woken_at: BTreeMap<usize, Timestamp>,
    /// The reply being delivered, if late: (op, its age, the timeout).
    late: Option<(u64, Duration, Duration)>,
}

impl Checker for RenewalTimeout {
    fn observe(&mut self, ev: &Observed<'_>, cx: &Cx<'_>, out: &mut Out<'_>) {
        match *ev {
            Observed::Woken { node, local } => {
                self.woken_at.insert(node, local);
            }
            Observed::Sent {
                node,
                cmd: Command::Renew { op, .. },
                local,
            } => {
                if self.renews.len() >= 4096 {
                    self.renews.pop_first();
                }
                self.renews
                    .insert((node, op.0), (local, cx.cluster.call_timeout(node)));
            }
            Observed::Delivered { node, input, local } => {
                let woken = self.woken_at.get(&node).copied();
                self.late = match input {
                    Input::RenewReplied { op, .. } => self
                        .renews
                        .remove(&(node, op.0))
                        .filter(|(sent, timeout)| woken.is_some_and(|w| w >= *sent + *timeout))
                        .map(|(sent, timeout)| (op.0, local - sent, timeout)),
                    _ => None,
                };
            }
            Observed::Taken { node, fresh } => {
                if let (Some((op, age, timeout)), true) = (self.late.take(), fresh) {
                    out.violation(
                        "renewal timeout (S2.4)",
                        format!(
                            "node {node} acted on the reply to renewal {op}, {age:?} after \
                             its send, though woken after its call timeout ({timeout:?})"
                        ),
                    );
                }
            }
            Observed::Crashed { node } => {
                self.renews.retain(|(n, _), _| *n != node);
                self.woken_at.remove(&node);
            }
            _ => {}
        }
    }
}
