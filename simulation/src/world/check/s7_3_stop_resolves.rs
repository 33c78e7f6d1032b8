//! S7.3: `stop()` and `step_down()` resolve after the last callback. A node
//! is elected only for a name the workload has asked it to compete for
//! (`callbacks (S7.3, S6.4)`: not while stopping or stepping down), and
//! every `stop()` or `step_down()` the engine accepted completes by the end
//! of the run (`completions (S7.3)`).

use super::{Api, Checker, Cx, Observed, Out};
use simba_core::LeaseName;
use std::collections::BTreeMap;
use std::time::Duration;

/// The S7.3 checker.
#[derive(Default)]
pub(super) struct StopResolves {
    /// Per (node, name): the call not yet completed, and its true time.
    pending: BTreeMap<(usize, LeaseName), (&'static str, u64)>,
}

impl Checker for StopResolves {
    fn observe(&mut self, ev: &Observed<'_>, cx: &Cx<'_>, out: &mut Out<'_>) {
        match ev {
            Observed::Elected {
                node, term, api, ..
            } => match api {
                Some(Api::Election { .. } | Api::Lock { .. } | Api::Partition) => {}
                other => out.violation(
                    "callbacks (S7.3, S6.4)",
                    format!(
                        "node {node} elected for {} ({}) while its election is {other:?}",
                        term.name, term.id
                    ),
                ),
            },
            Observed::MustComplete { node, name, what } => {
                self.pending
                    .insert((*node, (*name).clone()), (*what, cx.now));
            }
            Observed::Completed { node, name } => {
                self.pending.remove(&(*node, (*name).clone()));
            }
            Observed::Crashed { node } => self.pending.retain(|(n, _), _| n != node),
            _ => {}
        }
    }

    fn finish(&mut self, _cx: &Cx<'_>, out: &mut Out<'_>) {
        for ((node, name), (what, since)) in &self.pending {
            out.violation(
                "completions (S7.3)",
                format!(
                    "node {node}: {what}({name}) issued at {:?} never completed",
                    Duration::from_nanos(*since)
                ),
            );
        }
    }
}
