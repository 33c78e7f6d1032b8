//! The checkers: one type per rule, each in its own file named by the rule
//! it checks (`docs/RULES.md`), each a [`Checker`].
//!
//! The world tells the checkers what happened ([`Observed`], at fixed
//! points of each step) and lets them read the cluster ([`Cx`]); a checker
//! keeps what it needs to remember and reports what breaks its rule
//! ([`Out`]). Checkers never change the cluster, the network, the queue or
//! the random stream: a run is the same with or without them, and its
//! trace hash does not depend on them. [`Checks`] holds one of each and
//! hands every observation to all of them in a fixed order (the order the
//! report lists violations of one step in).

use super::cluster::Cluster;
use super::observed::Observed;
use super::report::{RunReport, Violation};
use super::types::{nanos, Api, Removal, TaskState, TermRec};
use crate::params::RunParams;
use simba_core::TermId;
use std::collections::BTreeSet;
use std::time::Duration;

mod error_log;
mod fenced_register;
mod liveness;
mod mutual_exclusion;
mod s10_1_join;
mod s10_2_group_stickiness;
mod s10_4_group_balance;
mod s1_4_close;
mod s2_3_deadline_stays_passed;
mod s2_4_renewal_timeout;
mod s3_2_fencing_tokens;
mod s3_4_taken_over;
mod s3_5_revoke_before_release;
mod s4_1_one_attempt;
mod s4_3_late_acquire;
mod s4_4_expiry_timing;
mod s5_3_lock_one_term;
mod s6_1_handover_order;
mod s6_4_step_down_cooldown;
mod s6_5_task_exit_policy;
mod s6_task_orders;
mod s7_1_callbacks_paired;
mod s7_3_stop_resolves;
mod s8_1_config;
mod s8_4_lease_shortened;
mod timer_moves;

/// What a checker may read: the cluster and the run's facts, at the
/// current true instant.
#[derive(Clone, Copy)]
pub(super) struct Cx<'a> {
    /// True time, ns.
    pub now: u64,
    pub p: &'a RunParams,
    pub cluster: &'a Cluster,
    /// Whether the faults have healed.
    pub healed: bool,
    /// True time of healing, ns.
    pub heal_at: u64,
    /// Steps processed so far (the current one included).
    pub steps: u64,
    /// Every (node, term) whose lease an outside actor removed, while the
    /// node's process lives.
    pub removed_terms: &'a BTreeSet<(usize, TermId)>,
    /// Whether mutual exclusion and the S6.1 handover order make their
    /// `lease-removed` exceptions.
    pub removal_exceptions: bool,
    /// Removals the `taken over (S3.4)` checker has not judged yet.
    pub unjudged: &'a [Removal],
}

impl Cx<'_> {
    /// Whether `rec` of `node` is valid now, on the node's clock.
    pub fn is_valid(&self, node: usize, rec: &TermRec) -> bool {
        self.cluster.is_valid(node, rec, self.now)
    }
}

/// Where checkers report: the run's report (violations, and figures some
/// checkers keep).
pub(super) struct Out<'a> {
    pub report: &'a mut RunReport,
    pub now: u64,
}

impl Out<'_> {
    /// `checker` (citing its rule) found `message`.
    pub fn violation(&mut self, checker: &'static str, message: String) {
        self.report.violations.push(Violation {
            at: Duration::from_nanos(self.now),
            checker,
            message,
        });
    }
}

/// A checker of one rule.
pub(super) trait Checker {
    /// Looks at what happened; remembers what it needs, reports what
    /// breaks its rule.
    fn observe(&mut self, ev: &Observed<'_>, cx: &Cx<'_>, out: &mut Out<'_>);

    /// At the end of the run (past the liveness bound): judges what must
    /// have happened by then.
    fn finish(&mut self, _cx: &Cx<'_>, _out: &mut Out<'_>) {}
}

/// One of each checker.
pub(super) struct Checks {
    pub timer: timer_moves::TimerMoves,
    config: s8_1_config::Config,
    join: s10_1_join::Join,
    cooldown: s6_4_step_down_cooldown::StepDownCooldown,
    lock: s5_3_lock_one_term::LockOneTerm,
    stop: s7_3_stop_resolves::StopResolves,
    close: s1_4_close::Close,
    callbacks: s7_1_callbacks_paired::CallbacksPaired,
    late_acquire: s4_3_late_acquire::LateAcquire,
    tokens: s3_2_fencing_tokens::FencingTokens,
    mutex: mutual_exclusion::MutualExclusion,
    liveness: liveness::Liveness,
    deadline: s2_3_deadline_stays_passed::DeadlineStaysPassed,
    renewal_timeout: s2_4_renewal_timeout::RenewalTimeout,
    one_attempt: s4_1_one_attempt::OneAttempt,
    expiry_timing: s4_4_expiry_timing::ExpiryTiming,
    release: s3_5_revoke_before_release::RevokeBeforeRelease,
    task_orders: s6_task_orders::TaskOrders,
    handover: s6_1_handover_order::HandoverOrder,
    task_exit: s6_5_task_exit_policy::TaskExitPolicy,
    stickiness: s10_2_group_stickiness::GroupStickiness,
    balance: s10_4_group_balance::GroupBalance,
    shortened: s8_4_lease_shortened::LeaseShortened,
    error_log: error_log::ErrorLog,
    register: fenced_register::FencedRegister,
    taken_over: s3_4_taken_over::TakenOver,
}

impl Checks {
    /// The checkers of a run of `p`.
    pub fn new(p: &RunParams) -> Checks {
        Checks {
            timer: Default::default(),
            config: Default::default(),
            join: Default::default(),
            cooldown: Default::default(),
            lock: Default::default(),
            stop: Default::default(),
            close: Default::default(),
            callbacks: Default::default(),
            late_acquire: Default::default(),
            tokens: Default::default(),
            mutex: Default::default(),
            liveness: Default::default(),
            deadline: Default::default(),
            renewal_timeout: Default::default(),
            one_attempt: Default::default(),
            expiry_timing: s4_4_expiry_timing::ExpiryTiming::new(p),
            release: Default::default(),
            task_orders: Default::default(),
            handover: Default::default(),
            task_exit: Default::default(),
            stickiness: Default::default(),
            balance: Default::default(),
            shortened: Default::default(),
            error_log: Default::default(),
            register: Default::default(),
            taken_over: Default::default(),
        }
    }

    /// Hands `ev` to every checker, in a fixed order. The removals `taken
    /// over (S3.4)` has not judged yet are lent to the others in `cx`.
    pub fn observe(&mut self, ev: &Observed<'_>, cx: &Cx<'_>, out: &mut Out<'_>) {
        let unjudged = self.taken_over.take_unjudged();
        let lent = Cx {
            unjudged: &unjudged,
            ..*cx
        };
        let all: [&mut dyn Checker; 25] = [
            &mut self.timer,
            &mut self.config,
            &mut self.join,
            &mut self.cooldown,
            &mut self.lock,
            &mut self.stop,
            &mut self.close,
            &mut self.callbacks,
            &mut self.late_acquire,
            &mut self.tokens,
            &mut self.mutex,
            &mut self.liveness,
            &mut self.deadline,
            &mut self.renewal_timeout,
            &mut self.one_attempt,
            &mut self.expiry_timing,
            &mut self.release,
            &mut self.task_orders,
            &mut self.handover,
            &mut self.task_exit,
            &mut self.stickiness,
            &mut self.balance,
            &mut self.shortened,
            &mut self.error_log,
            &mut self.register,
        ];
        for c in all {
            c.observe(ev, &lent, out);
        }
        self.taken_over.put_unjudged(unjudged);
        self.taken_over.observe(ev, cx, out);
    }

    /// Ends the run: liveness, then group balance, then completions.
    pub fn finish(&mut self, cx: &Cx<'_>, out: &mut Out<'_>) {
        let all: [&mut dyn Checker; 4] = [
            &mut self.liveness,
            &mut self.balance,
            &mut self.stop,
            &mut self.close,
        ];
        for c in all {
            c.finish(cx, out);
        }
    }
}
