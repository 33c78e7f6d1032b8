//! The schedule workload and its checker (S11).
//!
//! With [`ScheduleWorkload`](crate::params::ScheduleWorkload) set, every
//! election task is also a leader-only schedule, as `Simba::schedule` runs
//! it (which slot comes next is the core's `SlotPlanner`, the client's
//! own): slot `k` of a node falls when the node's wall clock reads
//! `k × period`. A node's wall clock is its own clock (with its drift and
//! its steps) less its offset, plus a fixed skew drawn from the seed within
//! `max_skew` (NTP-synchronised machines disagree a little). The
//! leader waits for its next slot, claims it through the engine
//! (`Engine::claim_slot`, S11.1) and runs a job of `run` (true time) only
//! when the engine answers `run`; `AlreadyClaimed { last }` moves it past
//! `last` (S11.2). With `run_once` a new term first claims the latest slot
//! already due (S11.4). Runs of one term never overlap, and a run ends with
//! its term (S11.3).
//!
//! The world tells the checkers when the engine says run and when a slot
//! is about to run; `schedule slots (S11.1)` (`check/s11_1_slot_once.rs`)
//! judges them. The mutant `skip_claim` runs each slot without claiming
//! it; that checker must catch it (`simulation/tests/schedule_slots.rs`).

use super::check::Observed;
use super::cluster::TaskState;
use super::queue::Ev;
use super::World;
use simba_core::{
    BackendError, EveryPeriod, LeaseName, MissedRuns, SlotClaim, SlotPlanner, SlotRule, Term,
    TermId, Timestamp, Token,
};
use std::collections::BTreeMap;
use std::time::Duration;

/// The schedule state of the world.
#[derive(Clone, Debug, Default)]
pub(super) struct Schedules {
    /// Per node and term: the latest slot handled, and whether a run or a
    /// claim is in progress.
    terms: BTreeMap<(usize, TermId), TermSched>,
}

#[derive(Clone, Copy, Debug)]
struct TermSched {
    /// Which slot comes next: the core's planner, as the client runs it,
    /// on slot indices (a node's wall clock divided by the period).
    plan: SlotPlanner,
    busy: bool,
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl World {
    /// `node`'s wall clock now, in nanoseconds since the epoch of the run.
    fn wall(&self, node: usize) -> u64 {
        let local = i128::from(self.local(node).as_nanos());
        let offset = i128::from(self.p.node_offsets.get(node).copied().unwrap_or(0));
        u64::try_from((local - offset + self.skew(node)).max(0)).unwrap_or(0)
    }

    /// `node`'s wall-clock skew (nanoseconds, within ± `max_skew`).
    fn skew(&self, node: usize) -> i128 {
        let max = self
            .p
            .workload
            .schedule
            .as_ref()
            .map_or(0, |w| i128::from(nanos(w.max_skew)));
        if max == 0 {
            return 0;
        }
        let mut rng = fastrand::Rng::with_seed(self.p.seed ^ (node as u64 + 1) << 32);
        let r = i128::from(rng.u64(..u64::MAX / 2));
        r % (2 * max + 1) - max
    }

    /// The true time at which `node`'s wall clock reads `wall`.
    fn true_at_wall(&self, node: usize, wall: u64) -> Option<u64> {
        let offset = i128::from(self.p.node_offsets.get(node).copied().unwrap_or(0));
        let local = u64::try_from((i128::from(wall) + offset - self.skew(node)).max(0)).ok()?;
        self.cluster.nodes[node]
            .clock
            .true_at(Timestamp::from_nanos(local), self.queue.now)
    }

    /// A task started for `term`: its schedule begins (S11.4 for the first slot).
    pub(super) fn sched_term_started(&mut self, node: usize, term: &Term) {
        let Some(w) = self.p.workload.schedule.clone() else {
            return;
        };
        let missed = if w.run_once {
            MissedRuns::RunOnce
        } else {
            MissedRuns::Skip
        };
        // Slot 0 (the run's first instant) is never a missed one.
        let plan = SlotPlanner::new(missed, 1);
        self.sched
            .terms
            .insert((node, term.id), TermSched { plan, busy: false });
        self.sched_next(node, term.id);
    }

    /// Waits for the slot the planner picks: at once for a missed slot
    /// (S11.4), else when the node's wall clock reaches it.
    fn sched_next(&mut self, node: usize, term: TermId) {
        let Some(w) = self.p.workload.schedule.clone() else {
            return;
        };
        let Some(ts) = self.sched.terms.get(&(node, term)) else {
            return;
        };
        let p = nanos(w.period).max(1);
        let now = self.wall(node) / p;
        let Some(slot) = ts.plan.next(SlotRule::Grid(&EveryPeriod(1)), now) else {
            return;
        };
        if slot <= now {
            self.sched_tick_at(node, term, slot, self.queue.now);
        } else if let Some(at) = self.true_at_wall(node, slot.saturating_mul(p)) {
            self.sched_tick_at(node, term, slot, at);
        }
    }

    fn sched_tick_at(&mut self, node: usize, term: TermId, slot: u64, at: u64) {
        let inc = self.cluster.nodes[node].inc;
        self.push(
            at.max(self.queue.now),
            Ev::SlotTick {
                node,
                inc,
                term,
                slot,
            },
        );
    }

    /// The term's rec if its task still runs and it is not revoked.
    fn sched_live(&self, node: usize, term: TermId) -> Option<(LeaseName, Token)> {
        let rec = self.cluster.nodes[node].terms.get(&term)?;
        (rec.revoked.is_none() && rec.task == TaskState::Running)
            .then(|| (rec.term.name.clone(), rec.term.token))
    }

    /// Slot `slot` is due on `node` for `term`: claim it (or, the mutant,
    /// just run it).
    pub(super) fn sched_tick(&mut self, node: usize, inc: u64, term: TermId, slot: u64) {
        if self.cluster.nodes[node].inc != inc || self.cluster.nodes[node].engine.is_none() {
            return;
        }
        let Some(w) = self.p.workload.schedule.clone() else {
            return;
        };
        let Some((name, token)) = self.sched_live(node, term) else {
            self.sched.terms.remove(&(node, term));
            return;
        };
        let Some(ts) = self.sched.terms.get_mut(&(node, term)) else {
            return;
        };
        if ts.busy {
            return;
        }
        ts.busy = true;
        self.mix(500);
        self.mix(slot);
        if w.skip_claim {
            self.sched_run(node, term, slot);
            return;
        }
        let l = self.local(node);
        let claimed = match self.cluster.nodes[node].engine.as_mut() {
            Some(e) => e.claim_slot(l, &name, token, slot).is_ok(),
            None => false,
        };
        if claimed {
            self.drain(node);
        } else {
            self.sched_done(node, term, slot);
        }
    }

    /// The engine's answer to a claim (S11.1).
    pub(super) fn sched_claimed(
        &mut self,
        node: usize,
        name: &LeaseName,
        token: Token,
        slot: u64,
        result: &Result<SlotClaim, BackendError>,
        run: bool,
    ) {
        self.mix(501);
        self.mix(slot);
        let term = self.cluster.nodes[node]
            .terms
            .values()
            .find(|r| &r.term.name == name && r.term.token == token)
            .map(|r| r.term.id);
        let Some(term) = term else { return };
        if !self.sched.terms.contains_key(&(node, term)) {
            return;
        }
        if run {
            self.observe(&Observed::SlotToldRun {
                node,
                name,
                slot,
                result,
            });
            self.report.slots_claimed += 1;
            self.sched_run(node, term, slot);
            return;
        }
        let last = match result {
            Ok(SlotClaim::AlreadyClaimed { last }) => {
                self.report.slots_already_claimed += 1;
                *last
            }
            _ => slot,
        };
        self.sched_done(node, term, slot.max(last));
    }

    /// Starts the run of `slot`: the checker looks at it here (S11.1).
    fn sched_run(&mut self, node: usize, term: TermId, slot: u64) {
        let Some(w) = self.p.workload.schedule.clone() else {
            return;
        };
        let Some(rec) = self.cluster.nodes[node].terms.get(&term).cloned() else {
            return;
        };
        if !self.is_valid(node, &rec) {
            self.observe(&Observed::SlotRun {
                node,
                rec: &rec,
                slot,
                valid: false,
            });
            self.sched_done(node, term, slot);
            return;
        }
        self.report.scheduled_runs += 1;
        self.observe(&Observed::SlotRun {
            node,
            rec: &rec,
            slot,
            valid: true,
        });
        let inc = self.cluster.nodes[node].inc;
        self.push(
            self.queue.now + nanos(w.run),
            Ev::RunEnd {
                node,
                inc,
                term,
                slot,
            },
        );
    }

    /// A run ended (or was refused): wait for the next slot.
    pub(super) fn sched_run_end(&mut self, node: usize, inc: u64, term: TermId, slot: u64) {
        if self.cluster.nodes[node].inc != inc {
            return;
        }
        self.sched_done(node, term, slot);
    }

    fn sched_done(&mut self, node: usize, term: TermId, slot: u64) {
        if self.sched_live(node, term).is_none() {
            self.sched.terms.remove(&(node, term));
            return;
        }
        let Some(ts) = self.sched.terms.get_mut(&(node, term)) else {
            return;
        };
        ts.busy = false;
        ts.plan.handled(slot, None, 0);
        self.sched_next(node, term);
    }

    /// The backend lost its state, slot records included (S9's documented
    /// failure mode): at-most-once starts over.
    pub(super) fn sched_state_lost(&mut self) {
        self.observe(&Observed::BackendStateLost);
    }
}
