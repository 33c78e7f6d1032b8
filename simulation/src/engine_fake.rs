//! TEMPORARY stand-in for simba-core's Engine until it lands on main. Deleted after the merge.
#![allow(missing_docs, dead_code, unused_variables)]
use simba_core::{ApiError, Fraction, Input, LeaseName, Output, SimbaConfig, Timestamp};
use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BackendProfile {
    pub renewal_proves: Fraction,
}
impl Default for BackendProfile {
    fn default() -> Self {
        BackendProfile {
            renewal_proves: Fraction::ONE,
        }
    }
}
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockWait {
    Try,
    Until(Timestamp),
    Forever,
}
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Mutant {
    IgnoreDrift,
    IgnoreMargin,
    DeadlineFromArrival,
    LateReplyExtends,
    AcceptLateAcquire,
    SkipReleasedTokenCheck,
    ReleaseBeforeRevoke,
    AcceptAbandonedAttempts,
}
impl Mutant {
    pub const ALL: [Mutant; 8] = [
        Mutant::IgnoreDrift,
        Mutant::IgnoreMargin,
        Mutant::DeadlineFromArrival,
        Mutant::LateReplyExtends,
        Mutant::AcceptLateAcquire,
        Mutant::SkipReleasedTokenCheck,
        Mutant::ReleaseBeforeRevoke,
        Mutant::AcceptAbandonedAttempts,
    ];
    pub fn name(self) -> &'static str {
        match self {
            Mutant::IgnoreDrift => "ignore-drift",
            Mutant::IgnoreMargin => "ignore-margin",
            Mutant::DeadlineFromArrival => "deadline-from-arrival",
            Mutant::LateReplyExtends => "late-reply-extends",
            Mutant::AcceptLateAcquire => "accept-late-acquire",
            Mutant::SkipReleasedTokenCheck => "skip-released-token-check",
            Mutant::ReleaseBeforeRevoke => "release-before-revoke",
            Mutant::AcceptAbandonedAttempts => "accept-abandoned-attempts",
        }
    }
    pub fn from_name(s: &str) -> Option<Mutant> {
        Mutant::ALL.into_iter().find(|m| m.name() == s)
    }
}
pub struct Engine {
    out: std::collections::VecDeque<Output>,
    call_timeout: Duration,
}
impl Engine {
    pub fn new(config: SimbaConfig, profile: BackendProfile, now: Timestamp) -> Engine {
        Engine {
            out: Default::default(),
            call_timeout: config.renew_interval(),
        }
    }
    pub fn start_election(
        &mut self,
        now: Timestamp,
        name: LeaseName,
        runs_task: bool,
    ) -> Result<(), ApiError> {
        Ok(())
    }
    pub fn acquire_lock(
        &mut self,
        now: Timestamp,
        name: LeaseName,
        wait: LockWait,
        runs_task: bool,
    ) -> Result<(), ApiError> {
        Ok(())
    }
    pub fn stop(&mut self, now: Timestamp, name: &LeaseName) -> Result<(), ApiError> {
        Ok(())
    }
    pub fn step_down(
        &mut self,
        now: Timestamp,
        name: &LeaseName,
        cooldown: Duration,
    ) -> Result<(), ApiError> {
        Ok(())
    }
    pub fn close(&mut self, now: Timestamp) {}
    pub fn handle(&mut self, now: Timestamp, input: Input) {}
    pub fn handle_timeout(&mut self, now: Timestamp) {}
    pub fn poll_timeout(&self) -> Option<Timestamp> {
        None
    }
    pub fn poll_output(&mut self) -> Option<Output> {
        self.out.pop_front()
    }
    pub fn call_timeout(&self) -> Duration {
        self.call_timeout
    }
}
