//! `group balance (S10.4)`, after the faults healed and the liveness bound
//! passed: every partition of every group has exactly one valid owner
//! among the live members, and max − min partitions per member ≤ 1.

use super::{Checker, Cx, Observed, Out};
use std::collections::BTreeMap;

/// The `group balance (S10.4)` checker.
#[derive(Default)]
pub(super) struct GroupBalance;

impl Checker for GroupBalance {
    fn observe(&mut self, _ev: &Observed<'_>, _cx: &Cx<'_>, _out: &mut Out<'_>) {}

    fn finish(&mut self, cx: &Cx<'_>, out: &mut Out<'_>) {
        let nodes = &cx.cluster.nodes;
        for (group, partitions) in &cx.p.groups {
            let members: Vec<usize> = (0..nodes.len())
                .filter(|&i| {
                    let n = &nodes[i];
                    n.engine.is_some() && n.closing.is_none() && !n.closed
                })
                .collect();
            if members.is_empty() {
                continue;
            }
            let mut counts: BTreeMap<usize, u32> = members.iter().map(|&i| (i, 0)).collect();
            let mut unowned = Vec::new();
            for p in 0..*partitions {
                let Ok(name) = simba_core::partition_name(group, p) else {
                    continue;
                };
                let owners: Vec<usize> = members
                    .iter()
                    .copied()
                    .filter(|&i| {
                        nodes[i]
                            .terms
                            .values()
                            .any(|rec| rec.term.name == name && cx.is_valid(i, rec))
                    })
                    .collect();
                match owners.as_slice() {
                    [one] => *counts.entry(*one).or_default() += 1,
                    _ => unowned.push((p, owners)),
                }
            }
            let max = counts.values().max().copied().unwrap_or(0);
            let min = counts.values().min().copied().unwrap_or(0);
            if !unowned.is_empty() || max - min > 1 {
                let bound = out.report.liveness_bound;
                out.violation(
                    "group balance (S10.4)",
                    format!(
                        "{group}: {bound:?} after healing and the liveness bound: partitions per member {counts:?}; \
                         partitions without exactly one owner (partition, owners) {unowned:?}"
                    ),
                );
            }
        }
    }
}
