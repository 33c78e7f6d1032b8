//! The client campaign's checkers: one type per rule, each in its own file
//! named by the rule it checks (`docs/RULES.md`), each a [`Checker`].
//!
//! The campaign's tasks tell the checkers what they see ([`Seen`]) as they
//! run. The nodes of one run share one [`Checks`] (found with
//! `Node::shared`), which hands every observation to each checker in a
//! fixed order and reports what they find as violations of the observing
//! node. The checkers never act on the run: a run is the same with or
//! without them.

use simba_client::Term;
use simba_sim::Node;
use std::sync::Mutex;

mod s11_1_slot_at_most_once;
mod s3_3_term_validity;
mod s3_4_revocation_delivered;
mod s6_1_handover_order;

/// What a task of the campaign saw.
#[derive(Clone, Copy, Debug)]
pub(super) enum Seen<'a> {
    /// The task (or lock holder) of the term `name`, `token` started.
    Started { name: &'a str, token: u64 },
    /// The node's client reported the revocation of the term `name`,
    /// `token` (`ClientEvent::Revoked`).
    RevocationReported { name: &'a str, token: u64 },
    /// A step of a task (or lock holder) whose term has not ended for it.
    Step { term: &'a Term },
    /// A step of a task after a voluntary revoke, before it returns.
    FinishingStep { term: &'a Term },
    /// The schedule's run of `slot` started, on the term of `token`.
    SlotRun { slot: u64, token: u64 },
}

/// A checker of one rule.
pub(super) trait Checker {
    /// Looks at what node `node` saw; remembers what it needs, and returns
    /// what breaks its rule, if anything does.
    fn observe(&mut self, node: usize, seen: &Seen<'_>) -> Option<String>;
}

/// One of each checker, shared by the nodes of a run.
#[derive(Default)]
pub(super) struct Checks(Mutex<All>);

#[derive(Default)]
struct All {
    revocation: s3_4_revocation_delivered::RevocationDelivered,
    validity: s3_3_term_validity::TermValidity,
    handover: s6_1_handover_order::HandoverOrder,
    slots: s11_1_slot_at_most_once::SlotAtMostOnce,
}

impl Checks {
    /// Hands what `node` saw to every checker, in a fixed order, and
    /// reports what they find as `node`'s violations (in that order).
    pub(super) fn observe(&self, node: &Node, seen: Seen<'_>) {
        let found: Vec<String> = {
            let mut all = self.0.lock().unwrap_or_else(|p| p.into_inner());
            let All {
                revocation,
                validity,
                handover,
                slots,
            } = &mut *all;
            // Term validity first: when a reused token confuses the
            // revocation checker at the same step, the valid stale term is
            // the fault to report.
            let checkers: [&mut dyn Checker; 4] = [validity, revocation, handover, slots];
            checkers
                .into_iter()
                .filter_map(|c| c.observe(node.id(), &seen))
                .collect()
        };
        for what in found {
            node.violation(what);
        }
    }
}

/// The greatest token of each lease whose task (or lock term) started, as
/// [`Seen::Started`] tells it (kept by the checkers that compare a term
/// with later ones).
#[derive(Default)]
struct Latest(std::collections::BTreeMap<String, u64>);

impl Latest {
    fn started(&mut self, name: &str, token: u64) {
        let latest = self.0.entry(name.to_owned()).or_insert(0);
        *latest = (*latest).max(token);
    }

    /// A token of `name` greater than `token` whose term started, if any.
    fn later_than(&self, name: &str, token: u64) -> Option<u64> {
        self.0.get(name).copied().filter(|t| *t > token)
    }
}
