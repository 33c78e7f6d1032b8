//! Which slot a leader-only schedule waits for next (S11.2, S11.4): plain
//! data in, a slot number out. The client's schedule task and the
//! simulator's schedule workload both run it; neither reads a clock here,
//! they pass their wall clock's reading in.
//!
//! Slots and readings are numbers in one unit chosen by the caller (the
//! client counts milliseconds since the Unix epoch; the simulator counts
//! periods). Where slots fall is a [`SlotGrid`] (fixed rate, cron) or a
//! fixed delay after each run.

/// Where a grid schedule's slots fall (S11.2): fixed rate or cron.
pub trait SlotGrid {
    /// The first slot strictly after `t`, or `None` if there is none.
    fn next_after(&self, t: u64) -> Option<u64>;
    /// The latest slot at or before `t`, or `None` if there is none.
    fn latest_at_or_before(&self, t: u64) -> Option<u64>;
}

/// Fixed rate: every multiple of the period (a period of 0 has no slots).
///
/// ```
/// use simba_core::{EveryPeriod, SlotGrid};
/// assert_eq!(EveryPeriod(300).next_after(300), Some(600));
/// assert_eq!(EveryPeriod(300).latest_at_or_before(599), Some(300));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EveryPeriod(pub u64);

impl SlotGrid for EveryPeriod {
    fn next_after(&self, t: u64) -> Option<u64> {
        let p = self.0;
        if p == 0 {
            return None;
        }
        (t / p).checked_add(1)?.checked_mul(p)
    }

    fn latest_at_or_before(&self, t: u64) -> Option<u64> {
        let p = self.0;
        (p > 0).then(|| t / p * p)
    }
}

/// What to do with slots that passed while no run could start (S11.4).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum MissedRuns {
    /// Never run a missed slot; wait for the next one (the default).
    #[default]
    Skip,
    /// Run the latest missed slot once, at once, if nobody claimed it;
    /// skip the others.
    RunOnce,
}

/// How the slots of a schedule fall.
#[derive(Clone, Copy, Debug)]
pub enum SlotRule<'a, G: ?Sized> {
    /// On a grid.
    Grid(&'a G),
    /// This long after the end of the previous run of the term (the first
    /// slot of a term this long after it began, or at once with
    /// [`MissedRuns::RunOnce`]).
    Delay(u64),
}

/// The slot bookkeeping of one term of a schedule (S11.2, S11.4).
///
/// ```
/// use simba_core::{EveryPeriod, MissedRuns, SlotPlanner, SlotRule};
/// let grid = EveryPeriod(10);
/// let mut plan = SlotPlanner::new(MissedRuns::RunOnce, 0);
/// // Slot 20 is already due when the term begins at 25: it runs once, at once.
/// assert_eq!(plan.next(SlotRule::Grid(&grid), 25), Some(20));
/// // Someone claimed up to 30 already: the next is after it.
/// plan.handled(20, Some(30), 26);
/// assert_eq!(plan.next(SlotRule::Grid(&grid), 26), Some(40));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotPlanner {
    missed: MissedRuns,
    /// When the schedule started on this node: earlier slots are never
    /// missed ones (S11.4).
    started: u64,
    /// The latest slot this term claimed, gave up or saw claimed.
    prev: Option<u64>,
    /// When the previous run ended (fixed delay), `None` before the first.
    ended: Option<u64>,
}

impl SlotPlanner {
    /// A new term's bookkeeping, for a schedule started at `started`.
    pub fn new(missed: MissedRuns, started: u64) -> SlotPlanner {
        SlotPlanner {
            missed,
            started,
            prev: None,
            ended: None,
        }
    }

    /// The latest slot this term handled.
    pub fn prev(&self) -> Option<u64> {
        self.prev
    }

    /// The next slot to wait for at wall-clock reading `now`: never one
    /// already handled, never one before the schedule started. `None`: no
    /// slot ever again (a cron date that never comes).
    pub fn next<G: SlotGrid + ?Sized>(&self, rule: SlotRule<'_, G>, now: u64) -> Option<u64> {
        let floor = self
            .prev
            .map_or(self.started, |p| p.saturating_add(1).max(self.started));
        match rule {
            SlotRule::Delay(delay) => {
                let at = match (self.ended, self.missed) {
                    (Some(end), _) => end.saturating_add(delay),
                    (None, MissedRuns::RunOnce) => now,
                    (None, MissedRuns::Skip) => now.saturating_add(delay),
                };
                Some(at.max(floor))
            }
            SlotRule::Grid(grid) => {
                let missed = grid.latest_at_or_before(now).filter(|s| *s >= floor);
                match (missed, self.missed) {
                    (Some(s), MissedRuns::RunOnce) => Some(s),
                    _ => grid.next_after(now.max(floor.saturating_sub(1))),
                }
            }
        }
    }

    /// `slot` was handled at wall-clock reading `now`: run, given up, or
    /// answered `AlreadyClaimed { last }` (S11.1), which moves past `last`.
    pub fn handled(&mut self, slot: u64, claimed_up_to: Option<u64>, now: u64) {
        let upto = claimed_up_to.map_or(slot, |last| last.max(slot));
        self.prev = Some(self.prev.map_or(upto, |p| p.max(upto)));
        self.ended = Some(now);
    }

    /// When to stop retrying a failed claim of `slot`: when the next slot
    /// is due.
    pub fn give_up_at<G: SlotGrid + ?Sized>(rule: SlotRule<'_, G>, slot: u64) -> u64 {
        match rule {
            SlotRule::Delay(delay) => slot.saturating_add(delay),
            SlotRule::Grid(grid) => grid.next_after(slot).unwrap_or(u64::MAX),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s11_4_skip_waits_for_the_next_slot_and_run_once_takes_the_latest_due() {
        let g = EveryPeriod(10);
        let skip = SlotPlanner::new(MissedRuns::Skip, 0);
        assert_eq!(skip.next(SlotRule::Grid(&g), 25), Some(30));
        let once = SlotPlanner::new(MissedRuns::RunOnce, 0);
        assert_eq!(once.next(SlotRule::Grid(&g), 25), Some(20));
        // A slot before the schedule started is never a missed one.
        let late = SlotPlanner::new(MissedRuns::RunOnce, 21);
        assert_eq!(late.next(SlotRule::Grid(&g), 25), Some(30));
    }

    #[test]
    fn s11_2_a_handled_slot_is_never_planned_again() {
        let g = EveryPeriod(10);
        let mut p = SlotPlanner::new(MissedRuns::RunOnce, 0);
        p.handled(20, None, 25);
        assert_eq!(p.next(SlotRule::Grid(&g), 25), Some(30));
        p.handled(30, Some(70), 31);
        assert_eq!(p.next(SlotRule::Grid(&g), 75), Some(80));
        assert_eq!(p.prev(), Some(70));
    }

    #[test]
    fn s11_2_fixed_delay_follows_the_end_of_the_previous_run() {
        let rule: SlotRule<'_, EveryPeriod> = SlotRule::Delay(100);
        let mut p = SlotPlanner::new(MissedRuns::Skip, 0);
        assert_eq!(p.next(rule, 1_000), Some(1_100));
        p.handled(1_100, None, 1_150);
        assert_eq!(p.next(rule, 1_150), Some(1_250));
        assert_eq!(SlotPlanner::give_up_at(rule, 1_250), 1_350);
        let once = SlotPlanner::new(MissedRuns::RunOnce, 0);
        assert_eq!(once.next(rule, 1_000), Some(1_000));
    }
}
