//! `group stickiness (S10.2)`, judged on each target a member computes,
//! from the membership it was told of (sound whatever views the other
//! members have): the member gives up a partition it holds only when it
//! holds more than its share, and then keeps exactly its share. A leave or
//! a crash shrinks no share, so only the partitions of the member who went
//! move; a join shrinks shares, so only the surplus moves, to the joiner.
//! (Asking for more than the share is `group balance (S10.4)`'s to catch.)
//! What the node holds is what the events so far tell (a term neither
//! revoked nor ended), on the session that computed the target.

use super::{Checker, Cx, Observed, Out};
use simba_core::Engine;
use std::collections::BTreeSet;

/// The `group stickiness (S10.2)` checker.
#[derive(Default)]
pub(super) struct GroupStickiness;

impl Checker for GroupStickiness {
    fn observe(&mut self, ev: &Observed<'_>, cx: &Cx<'_>, out: &mut Out<'_>) {
        let Observed::GroupChanged {
            node,
            group,
            members,
            target,
        } = *ev
        else {
            return;
        };
        let Some(partitions) =
            cx.p.groups
                .iter()
                .find(|(g, _)| g == group)
                .map(|(_, n)| *n)
        else {
            return;
        };
        let n = &cx.cluster.nodes[node];
        let Some((me, _)) = n.engine.as_ref().and_then(Engine::session_deadline) else {
            return;
        };
        let mut sorted = members.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        // A session that changed since the target was computed: not judged.
        let Ok(rank) = sorted.binary_search(&me) else {
            return;
        };
        let share = simba_core::fair_share(partitions, sorted.len(), rank) as usize;
        let held: BTreeSet<u32> = n
            .terms
            .values()
            .filter(|rec| rec.term.session == me && rec.revoked.is_none())
            .filter_map(|rec| {
                let (g, p) = simba_core::parse_partition_name(rec.term.name.as_str())?;
                (g == group.as_str() && p < partitions).then_some(p)
            })
            .collect();
        let kept = target.iter().filter(|p| held.contains(p)).count();
        if kept < held.len().min(share) {
            out.violation(
                "group stickiness (S10.2)",
                format!(
                    "node {node}, {group}: among {} members (share {share}) it holds {held:?} \
                     and targets {target:?}: it gives up partitions it holds without holding \
                     more than its share",
                    sorted.len(),
                ),
            );
        }
    }
}
