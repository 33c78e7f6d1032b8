//! `liveness`: after the faults heal, every contended election name gets a
//! leader within the run's liveness bound
//! ([`RunParams::liveness_bound`](crate::RunParams::liveness_bound), plus
//! what is left of an S6.5 back-off at healing). A leader counts once it
//! has stayed valid for one renewal period (not any holder at one
//! instant); its time to leader is when it was first seen.

use super::mutual_exclusion::holders;
use super::{nanos, Checker, Cx, Observed, Out};
use simba_core::{LeaseName, TermId};
use std::collections::BTreeMap;
use std::time::Duration;

/// The `liveness` checker.
#[derive(Default)]
pub(super) struct Liveness {
    /// Per contended name: when its leader was first seen, once confirmed.
    liveness: BTreeMap<LeaseName, Option<u64>>,
    /// A holder seen after healing, not yet valid for a renewal period:
    /// (first seen, last seen valid, node, term).
    candidates: BTreeMap<LeaseName, (u64, u64, usize, TermId)>,
}

impl Liveness {
    /// `holder` is the valid holder of `name` now, if any.
    fn observe_leader(&mut self, name: &LeaseName, holder: Option<(usize, TermId)>, cx: &Cx<'_>) {
        if !matches!(self.liveness.get(name), Some(None)) {
            return; // not contended, or already confirmed
        }
        let period = nanos(cx.p.renew_interval);
        match (self.candidates.get(name).copied(), holder) {
            (Some((since, _, n, t)), Some(h)) if (n, t) == h => {
                if cx.now.saturating_sub(since) >= period {
                    self.liveness.insert(name.clone(), Some(since));
                    self.candidates.remove(name);
                } else {
                    self.candidates.insert(name.clone(), (since, cx.now, n, t));
                }
            }
            (_, Some((n, t))) => {
                self.candidates.insert(name.clone(), (cx.now, cx.now, n, t));
            }
            (_, None) => {
                self.candidates.remove(name);
            }
        }
    }
}

impl Checker for Liveness {
    fn observe(&mut self, ev: &Observed<'_>, cx: &Cx<'_>, _out: &mut Out<'_>) {
        match *ev {
            Observed::Healed => {
                for name in &cx.p.elections {
                    self.liveness.insert(name.clone(), None);
                }
            }
            Observed::HoldersMayChange { name } if cx.healed => {
                let h = holders(name, cx).first().map(|h| (h.0, h.2));
                self.observe_leader(name, h, cx);
            }
            _ => {}
        }
    }

    fn finish(&mut self, cx: &Cx<'_>, out: &mut Out<'_>) {
        // A candidate still valid at the end counts if it has been valid for
        // a renewal period by now (the run ends one period after the bound).
        for name in &cx.p.elections {
            let Some((_, _, node, term)) = self.candidates.get(name).copied() else {
                continue;
            };
            let valid = cx.cluster.nodes[node]
                .terms
                .get(&term)
                .is_some_and(|rec| cx.is_valid(node, rec));
            self.observe_leader(name, valid.then_some((node, term)), cx);
        }
        let bound = out.report.liveness_bound;
        let mut worst = None;
        for (name, got) in &self.liveness {
            match *got {
                Some(t) if t <= cx.heal_at + nanos(bound) => {
                    let d = Duration::from_nanos(t - cx.heal_at);
                    worst = worst.max(Some(d));
                }
                _ => out.violation(
                    "liveness",
                    format!(
                        "no leader for {name} within {:?} after the faults healed \
                         (one that then stays valid for a renewal period, {:?})",
                        bound, cx.p.renew_interval
                    ),
                ),
            }
        }
        out.report.max_time_to_leader = worst;
    }
}
