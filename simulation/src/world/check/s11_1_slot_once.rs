//! `schedule slots (S11.1)`: a slot runs at most once. The slots of a name
//! run in strictly increasing order over the whole run, on every node and
//! every term (the backend records only a slot later than the last one),
//! so a slot never runs twice; a node runs a slot only when its claim was
//! answered `Claimed`, and only on a term valid at that true instant. A
//! backend that loses its state loses its slot records too (the documented
//! failure mode of S9): the record restarts then.
//!
//! The workload that runs the slots is `world/schedule.rs`; the mutant
//! `skip_claim` runs each slot without claiming it, and this checker must
//! catch it (`simulation/tests/schedule_slots.rs`).

use super::{Checker, Cx, Observed, Out};
use simba_core::{LeaseName, SlotClaim};
use std::collections::BTreeMap;
use std::time::Duration;

/// The `schedule slots (S11.1)` checker.
#[derive(Default)]
pub(super) struct SlotOnce {
    /// The latest slot run so far, by name: (slot, node, token, true start).
    runs: BTreeMap<LeaseName, (u64, usize, u64, u64)>,
}

impl Checker for SlotOnce {
    fn observe(&mut self, ev: &Observed<'_>, cx: &Cx<'_>, out: &mut Out<'_>) {
        match *ev {
            Observed::SlotToldRun {
                node,
                name,
                slot,
                result,
            } if !matches!(result, Ok(SlotClaim::Claimed)) => {
                out.violation(
                    "schedule slots (S11.1)",
                    format!("node {node}: told to run slot {slot} of {name} on {result:?}"),
                );
            }
            Observed::SlotRun {
                node,
                rec,
                slot,
                valid: false,
            } => {
                let skip_claim =
                    cx.p.workload
                        .schedule
                        .as_ref()
                        .is_some_and(|w| w.skip_claim);
                if !skip_claim {
                    // The engine said run; the term must still be valid (S11.1).
                    out.violation(
                        "schedule slots (S11.1)",
                        format!(
                            "node {node}: slot {slot} of {} would run on ended term {}",
                            rec.term.name, rec.term.id
                        ),
                    );
                }
            }
            Observed::SlotRun {
                node,
                rec,
                slot,
                valid: true,
            } => {
                let name = &rec.term.name;
                if let Some((s0, n0, t0, at0)) = self.runs.get(name).copied() {
                    // S3.4: a holder whose lease was removed from outside may
                    // still run a slot the backend let it claim before a later
                    // term claimed a later slot, the claim's reply arriving after
                    // that term's run began: the backend's record kept the slots
                    // in order (a claim is told `run` only on `Claimed`, checked
                    // above), and the fencing token protects the resource. Only a
                    // removed term, behind a greater token, is excused so.
                    let excused = slot < s0
                        && rec.term.token.get() < t0
                        && cx.removed_terms.contains(&(node, rec.term.id));
                    if slot <= s0 && !excused {
                        let what = if slot == s0 {
                            "ran twice".to_owned()
                        } else {
                            format!("ran after the later slot {s0}")
                        };
                        out.violation(
                            "schedule slots (S11.1)",
                            format!(
                                "slot {slot} of {name} {what}: slot {s0} on node {n0} (token {t0}) at {:?}, now on node {node} (token {})",
                                Duration::from_nanos(at0),
                                rec.term.token
                            ),
                        );
                    }
                }
                self.runs
                    .insert(name.clone(), (slot, node, rec.term.token.get(), cx.now));
            }
            Observed::BackendStateLost => self.runs.clear(),
            _ => {}
        }
    }
}
