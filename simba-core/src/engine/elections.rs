//! Elections and locks (S4, S5, S6, S7.7): the API that starts and stops
//! them, acquire attempts, terms, the hand-over order and task exits.

use super::{Engine, MutantKind, TimerKey, Waiting};
use crate::election::{Attempt, Entry, Handover, Held, Kind, LockWait, Status};
use crate::error::ApiError;
use crate::error::{BackendError, BackendErrorKind};
use crate::ids::{EntryId, OpId, SessionId, TermId, Token};
use crate::lease::{local_deadline, retry_after_holder_expiry, task_failure_backoff};
use crate::name::LeaseName;
use crate::protocol::{
    AcquireOutcome, Command, Event, Output, RevokeReason, TaskExitAction, TaskExitPolicy,
    TaskOrder, TaskOutcome, Term,
};
use crate::time::Timestamp;
use std::collections::BTreeSet;
use std::time::Duration;

/// An acquire command whose reply has not arrived (current or abandoned).
#[derive(Clone, Debug)]
pub(super) struct AcquireOp {
    pub(super) name: LeaseName,
    pub(super) session: SessionId,
    pub(super) sent_at: Timestamp,
    /// The number of the call that carried it (S4.6, S4.7).
    pub(super) call: u64,
}

impl Engine {
    // ----- API calls -----------------------------------------------------

    /// Starts competing for `name` as an election (S4.1). With `runs_task`,
    /// every term starts a task and voluntary handovers wait for it (S6.1).
    ///
    /// # Errors
    /// [`ApiError::AlreadyStarted`] if the name is in use on this engine
    /// (S7.4); [`ApiError::Closed`] once `close` was called.
    pub fn start_election(
        &mut self,
        now: Timestamp,
        name: LeaseName,
        runs_task: bool,
    ) -> Result<EntryId, ApiError> {
        self.insert(
            now,
            name,
            Kind::Election,
            runs_task,
            LockWait::Forever,
            TaskExitPolicy::default(),
        )
    }

    /// As [`Engine::start_election`] with a task, and `policy` deciding what
    /// a task that ends on its own does to its term (S6.5).
    ///
    /// # Errors
    /// As [`Engine::start_election`].
    pub fn start_task_election(
        &mut self,
        now: Timestamp,
        name: LeaseName,
        policy: TaskExitPolicy,
    ) -> Result<EntryId, ApiError> {
        self.insert(now, name, Kind::Election, true, LockWait::Forever, policy)
    }

    /// Starts acquiring `name` as a lock: one term only (S5.3).
    ///
    /// # Errors
    /// As [`Engine::start_election`].
    pub fn acquire_lock(
        &mut self,
        now: Timestamp,
        name: LeaseName,
        wait: LockWait,
        runs_task: bool,
    ) -> Result<EntryId, ApiError> {
        let wait = match wait {
            LockWait::For(d) => LockWait::Until(now + d),
            wait => wait,
        };
        self.insert(
            now,
            name,
            Kind::Lock,
            runs_task,
            wait,
            TaskExitPolicy::StopElection,
        )
    }

    pub(super) fn insert(
        &mut self,
        now: Timestamp,
        name: LeaseName,
        kind: Kind,
        runs_task: bool,
        wait: LockWait,
        policy: TaskExitPolicy,
    ) -> Result<EntryId, ApiError> {
        self.advance(now);
        // Every path runs `finish`, errors too: the deadlines due at `now`
        // fire, so `poll_timeout` stays later than `now`.
        if self.closing {
            self.finish();
            return Err(ApiError::Closed);
        }
        if self.entries.contains_key(&name) || self.reserved_by_group(&name) {
            self.finish();
            return Err(ApiError::AlreadyStarted(name));
        }
        let id = self.next_entry_id();
        let mut entry = Entry::new(id, kind, runs_task, wait, self.now);
        entry.exit_policy = policy;
        self.entries.insert(name.clone(), entry);
        self.dirty.push(name);
        self.finish();
        Ok(id)
    }

    /// Stops an election or releases a lock (S6.1): revokes the term,
    /// interrupts its task, releases the lease once the task has exited or
    /// the deadline has passed, then emits [`Event::Completed`].
    ///
    /// # Errors
    /// [`ApiError::NotStarted`] if no election or lock has that name.
    pub fn stop(&mut self, now: Timestamp, name: &LeaseName) -> Result<(), ApiError> {
        self.advance(now);
        let Some(entry) = self.entries.get_mut(name) else {
            self.finish();
            return Err(ApiError::NotStarted(name.clone()));
        };
        if entry.kind == Kind::Partition {
            // A partition moves only by the group's rule (S10.3).
            let error = ApiError::WrongKind {
                name: name.clone(),
                expected: "election or lock",
                actual: entry.kind.as_str(),
            };
            self.finish();
            return Err(error);
        }
        if entry.stopping {
            self.finish();
            return Ok(());
        }
        entry.stopping = true;
        entry.status = Status::Stopped;
        entry.attempt = None;
        entry.cooldown_until = None;
        self.give_up(name);
        let _ = self.revoke(name, RevokeReason::Stopped);
        self.after_handover_step(name);
        self.finish();
        Ok(())
    }

    /// Steps an election down (S6.4): hands the lease over as `stop` does,
    /// then stays out of the competition for `cooldown`, counted from now.
    ///
    /// # Errors
    /// [`ApiError::NotStarted`], or [`ApiError::WrongKind`] for a lock.
    pub fn step_down(
        &mut self,
        now: Timestamp,
        name: &LeaseName,
        cooldown: Duration,
    ) -> Result<(), ApiError> {
        self.advance(now);
        let until = self.now + cooldown;
        let Some(entry) = self.entries.get_mut(name) else {
            self.finish();
            return Err(ApiError::NotStarted(name.clone()));
        };
        if entry.kind != Kind::Election {
            let error = ApiError::WrongKind {
                name: name.clone(),
                expected: Kind::Election.as_str(),
                actual: entry.kind.as_str(),
            };
            self.finish();
            return Err(error);
        }
        if entry.stopping {
            self.finish();
            return Ok(());
        }
        entry.status = Status::CoolingDown;
        entry.cooldown_until = Some(until);
        entry.attempt = None;
        entry.pending_completion = true;
        self.give_up(name);
        let _ = self.revoke(name, RevokeReason::SteppedDown);
        self.after_handover_step(name);
        self.finish();
        Ok(())
    }

    // ----- elections and locks (S4, S5, S6, S7.7) ------------------------

    pub(super) fn on_entry_wake(&mut self, name: &LeaseName) {
        let now = self.now;
        let can_acquire = self.can_acquire();
        let slot_free = self.acquire_slot_free(false);
        let first_slot_free = self.acquire_slot_free(true);
        let timeout = self.call_timeout();
        let resend_early = self.mutant_is(MutantKind::AcquireWhileInFlight);
        if self
            .entries
            .get(name)
            .and_then(|e| e.handover.as_ref())
            .is_some_and(|h| h.until <= now)
        {
            // S6.2: the task ignored its interruption for the term's whole
            // remaining time; release without it.
            self.complete_handover(name);
        }
        // S4.1 for a partition given up and asked for again: an acquire of
        // its earlier entry, or a release of this member's, may still be in
        // flight until its call timeout.
        let busy_until = self.partition_busy_until(name);
        let Some(entry) = self.entries.get_mut(name) else {
            // A removed entry's timer: disarm it.
            self.timers.set(&TimerKey::Entry(name.clone()), None);
            return;
        };
        self.dirty.push(name.clone());
        match entry.status {
            Status::CoolingDown => {
                if entry.cooldown_until.is_some_and(|t| t <= now) && entry.handover.is_none() {
                    entry.cooldown_until = None;
                    entry.status = Status::Candidate;
                    entry.next_attempt = Some(now);
                }
            }
            Status::Candidate => {
                let lock_expired = entry.kind == Kind::Lock
                    && matches!(entry.wait, LockWait::Until(t) if now >= t);
                if lock_expired {
                    self.lock_failed(name);
                } else if let Some(a) = &entry.attempt {
                    if now >= a.sent_at + timeout {
                        // S2.4: abandoned; a late reply releases what it won.
                        entry.attempt = None;
                        self.attempt_lost(name);
                    } else if resend_early && can_acquire && now >= a.sent_at + timeout / 2 {
                        // The mutant: a second acquire while this one is in flight.
                        self.send_acquire(name);
                    }
                } else if can_acquire && entry.next_attempt.is_some_and(|t| t <= now) {
                    if let Some(t) = busy_until.filter(|_| entry.kind == Kind::Partition) {
                        entry.next_attempt = Some(t);
                        entry.waits_for = Some(t);
                    } else if slot_free || (entry.hinted && first_slot_free) {
                        self.send_acquire(name);
                    } else if !entry.parked {
                        // S4.6: wait for a slot, behind those already waiting
                        // (a name a broadcast freed, only behind others so
                        // freed).
                        entry.parked = true;
                        if entry.hinted {
                            self.waiting_first.push_back(name.clone());
                        } else {
                            self.waiting.push_back(Waiting::Candidate(name.clone()));
                        }
                    }
                }
            }
            Status::Leader | Status::Stopped => {}
        }
    }

    /// S4.1: `renew_interval / 2` plus a seeded jitter in `[0, retry_jitter)`.
    pub(super) fn retry_delay(&mut self) -> Duration {
        let jitter = u64::try_from(self.config.retry_jitter().as_nanos()).unwrap_or(u64::MAX);
        let extra = if jitter == 0 {
            0
        } else {
            self.rng.u64(0..jitter)
        };
        self.config.renew_interval() / 2 + Duration::from_nanos(extra)
    }

    pub(super) fn send_acquire(&mut self, name: &LeaseName) {
        let Some(session) = self.session.id else {
            return;
        };
        let op = self.op();
        let now = self.now;
        let Some(entry) = self.entries.get_mut(name) else {
            return;
        };
        entry.attempt = Some(Attempt {
            op,
            sent_at: now,
            freed: false,
        });
        entry.next_attempt = None;
        entry.asked = true;
        entry.hinted = false;
        self.acquires.insert(
            op,
            AcquireOp {
                name: name.clone(),
                session,
                sent_at: now,
                call: 0,
            },
        );
        self.prune_acquires();
        self.stats.acquires += 1;
        self.dirty.push(name.clone());
        let call = self.send(Command::Acquire {
            op,
            session,
            name: name.clone(),
        });
        if let Some(a) = self.acquires.get_mut(&op) {
            a.call = call;
        }
    }

    /// Acquires sent and neither answered nor past their call timeout
    /// (S2.4): the calls the backend may still be serving. Acquires are
    /// sent in `op` order at non-decreasing times, so the live ones are the
    /// newest; with a slot limit (S4.6) there are at most that many.
    fn live_acquires(&self) -> impl Iterator<Item = &AcquireOp> {
        let (now, timeout) = (self.now, self.call_timeout());
        self.acquires
            .values()
            .rev()
            .take_while(move |a| a.sent_at + timeout > now)
    }

    /// Calls other than acquires that hold a slot (S4.6): sent, unanswered
    /// and not yet past their call timeout; when each times out, and the
    /// number of the call that carried it.
    fn live_calls(&self) -> impl Iterator<Item = (Timestamp, u64)> + '_ {
        let (now, timeout) = (self.now, self.call_timeout());
        self.calls_out
            .values()
            .map(move |(sent_at, call)| (*sent_at + timeout, *call))
            .filter(move |(t, _)| *t > now)
    }

    /// S4.6: how many more acquires, releases or withdraws the backend may
    /// be sent now (`usize::MAX` without a limit): a slot for each call not
    /// in flight, each call carrying up to `BackendProfile::batch` of them
    /// (S4.7), and the room left in the batch being formed.
    pub(super) fn free_slots(&self) -> usize {
        match self.profile.call_slots {
            None => usize::MAX,
            Some(_) => self
                .free_calls()
                .saturating_mul(self.profile.batch.max(1))
                .saturating_add(self.batch_room()),
        }
    }

    /// S4.6: how many more calls (a batch counting as one, S4.7) the
    /// backend may be sent now: what a call that travels in no batch needs.
    pub(super) fn free_calls(&self) -> usize {
        match self.profile.call_slots {
            None => usize::MAX,
            Some(max) => {
                let live: BTreeSet<u64> = self
                    .live_acquires()
                    .map(|a| a.call)
                    .chain(self.live_calls().map(|(_, call)| call))
                    .collect();
                max.max(1).saturating_sub(live.len())
            }
        }
    }

    /// S4.6, S4.7: whether `command` may be sent now: into the batch being
    /// formed or a free slot if it batches, a free slot if not.
    pub(super) fn slot_for(&self, command: &Command) -> bool {
        if command.batches() {
            self.free_slots() > 0
        } else {
            self.free_calls() > 0
        }
    }

    /// S4.6: an acquire may be sent now without passing a waiting call or
    /// candidate; with `hinted` (a release broadcast named it, S4.2), it
    /// passes those that were not.
    fn acquire_slot_free(&self, hinted: bool) -> bool {
        self.profile.call_slots.is_none()
            || (self.waiting_first.is_empty()
                && (hinted || self.waiting.is_empty())
                && self.free_slots() > 0)
    }

    /// S4.2, S4.6: a release broadcast named a due candidate waiting for a
    /// slot: it moves to the queue served first.
    fn park_first(&mut self, name: &LeaseName) {
        let at = self
            .waiting
            .iter()
            .position(|w| matches!(w, Waiting::Candidate(n) if n == name));
        if let Some(at) = at {
            self.waiting.remove(at);
            self.waiting_first.push_back(name.clone());
        }
    }

    /// S4.6: while slots are free, sends what waits for one, oldest first
    /// (the candidates a release broadcast named before everything else,
    /// S4.2): a command as it is, a candidate's acquire if it is still due.
    /// A name that no longer waits (stopped, elected by a late reply,
    /// cooling down, or a new entry of the same name) is dropped from the
    /// queue. While no acquire may be sent (no live session), commands pass
    /// the candidates.
    pub(super) fn fill_call_slots(&mut self) {
        if self.profile.call_slots.is_none()
            || (self.waiting.is_empty() && self.waiting_first.is_empty())
        {
            return;
        }
        let (now, timeout) = (self.now, self.call_timeout());
        self.calls_out
            .retain(|_, (sent_at, _)| *sent_at + timeout > now);
        let can_acquire = self.can_acquire();
        // A call that travels in no batch needs a slot of its own (S4.7):
        // at the head of the queue it takes the first one that frees, or
        // the candidates a broadcast named, served first, could take every
        // freed slot before it for ever.
        while matches!(self.waiting.front(), Some(Waiting::Command(c)) if !c.batches())
            && self.free_calls() > 0
        {
            if let Some(Waiting::Command(command)) = self.waiting.pop_front() {
                let op = command.op();
                let call = self.send(command);
                self.calls_out.insert(op, (now, call));
            }
        }
        while can_acquire && self.free_slots() > 0 {
            let Some(name) = self.waiting_first.pop_front() else {
                break;
            };
            self.send_parked(&name);
        }
        let mut i = 0;
        while i < self.waiting.len() && self.free_slots() > 0 {
            if !can_acquire && matches!(self.waiting[i], Waiting::Candidate(_)) {
                i += 1;
                continue;
            }
            // A call that travels in no batch needs a slot of its own
            // (S4.7); it keeps its turn (first come, first served).
            if let Waiting::Command(c) = &self.waiting[i] {
                if !self.slot_for(c) {
                    break;
                }
            }
            match self.waiting.remove(i) {
                Some(Waiting::Command(command)) => {
                    if let Command::Withdraw { op, session, name } = &command {
                        if self.competes(name) {
                            // It competes again since: the place is the new
                            // entry's to withdraw (S4.5).
                            self.withdraws.remove(op);
                            self.inherit_place(*session, name);
                            continue;
                        }
                    }
                    // S2.4, S4.6: a call's timeout counts from now, when it
                    // is sent, not from when it was decided.
                    if let Command::Withdraw { op, .. } = &command {
                        if let Some(w) = self.withdraws.get_mut(op) {
                            w.0 = now;
                        }
                    }
                    if let Command::Release { op, .. } = &command {
                        let key = self.release_ops.get(op);
                        if let Some(r) = key.and_then(|k| self.releasing.get_mut(k)) {
                            r.sent_at = Some(now);
                        }
                    }
                    let op = command.op();
                    let call = self.send(command);
                    self.calls_out.insert(op, (now, call));
                }
                Some(Waiting::Candidate(name)) => {
                    self.send_parked(&name);
                }
                None => break,
            }
        }
    }

    /// S4.6: a candidate that waited for a slot leaves the queue; its
    /// acquire is sent if it is still due. Whether an acquire went out.
    fn send_parked(&mut self, name: &LeaseName) -> bool {
        let now = self.now;
        let Some(entry) = self.entries.get_mut(name) else {
            return false;
        };
        if !entry.parked {
            return false;
        }
        entry.parked = false;
        self.dirty.push(name.clone());
        let due = entry.status == Status::Candidate
            && entry.attempt.is_none()
            && entry.next_attempt.is_some_and(|t| t <= now);
        if due {
            self.send_acquire(name);
        }
        due
    }

    /// When the oldest call in flight reaches its call timeout, while
    /// commands or candidates wait for a slot (S4.6).
    pub(super) fn slots_wake(&self) -> Option<Timestamp> {
        if self.profile.call_slots.is_none()
            || (self.waiting.is_empty() && self.waiting_first.is_empty())
        {
            return None;
        }
        let timeout = self.call_timeout();
        let acquire = self.live_acquires().last().map(|a| a.sent_at + timeout);
        let call = self.live_calls().map(|(t, _)| t).min();
        match (acquire, call) {
            (Some(a), Some(c)) => Some(a.min(c)),
            (a, c) => a.or(c),
        }
    }

    /// Sends every command still waiting for a slot, slot or not: the
    /// client is closed and waits for no reply, and the calls still run
    /// (S1.4).
    pub(super) fn send_held(&mut self) {
        for waiting in std::mem::take(&mut self.waiting) {
            if let Waiting::Command(command) = waiting {
                self.send(command);
            }
        }
    }

    /// Forgets abandoned acquires whose replies can no longer matter.
    pub(super) fn prune_acquires(&mut self) {
        let horizon = self.config.lease_duration().saturating_mul(4);
        while let Some(entry) = self.acquires.first_entry() {
            if entry.get().sent_at + horizon < self.now {
                entry.remove();
            } else {
                break;
            }
        }
    }

    pub(super) fn on_acquire_replied(
        &mut self,
        op: OpId,
        result: Result<AcquireOutcome, BackendError>,
    ) {
        let Some(sent) = self.acquires.remove(&op) else {
            self.stats.stale_replies += 1;
            return;
        };
        let name = sent.name;
        let mut current = self
            .entries
            .get(&name)
            .and_then(|e| e.attempt.as_ref())
            .is_some_and(|a| a.op == op);
        if !current
            && self.mutant_is(MutantKind::AcceptAbandonedAttempts)
            && self
                .entries
                .get(&name)
                .is_some_and(|e| e.status == Status::Candidate)
        {
            current = true;
        }
        if !current {
            self.stats.stale_replies += 1;
            if let Ok(AcquireOutcome::Held {
                holder,
                token,
                holder_remaining,
            }) = &result
            {
                // S4.4 for a partition given up and asked for again: the late
                // answer still times its holder's expiry. S10.2: it still
                // says who holds the partition (a backend whose acquires all
                // answer after their call timeout would otherwise leave the
                // member asking for a partition another member holds, for
                // good).
                let until = holder_remaining
                    .map(|r| retry_after_holder_expiry(self.now, r, self.config.drift()));
                self.partition_held_late(op, &name, *holder, *token, until);
            }
            match result {
                // S4.3: a late reply to an abandoned attempt releases what it
                // won. Not on a session that has ended (S6.1): its leases
                // ended with it (the backend said it expired, S1.2, or the
                // engine closed it once its deadline passed, S1.4), and the
                // win may be the lease of a term whose task still runs after
                // its session's end: a release of it was a release before
                // the task exited.
                Ok(AcquireOutcome::Won { token, .. }) => {
                    let ours = self.entries.get(&name).is_some_and(|e| {
                        e.held.as_ref().is_some_and(|h| h.term.token == token)
                            || e.handover.as_ref().is_some_and(|h| h.term.token == token)
                    });
                    if !ours && self.session.id == Some(sent.session) {
                        self.release(sent.session, name.clone(), token);
                    }
                }
                // S4.5: the late attempt (a failed one too: its outcome is
                // unknown) may have left a place in the backend's queue after
                // the name gave up and withdrew. A candidate still wants its
                // place; a leader's is the holder, which only a release ends.
                // A new entry of the name that competes stands in that
                // place: if it stops before it has asked, it withdraws it.
                // Before, it stopped without a withdraw when it was still
                // waiting (for this reply, a holder's expiry or a call
                // slot), and on ZooKeeper the place became the holder once
                // the partition was released: held by no term for 50 s.
                Ok(AcquireOutcome::Held { .. }) | Err(_) => {
                    let competing = self
                        .entries
                        .get(&name)
                        .is_some_and(|e| matches!(e.status, Status::Candidate | Status::Leader));
                    if competing {
                        self.inherit_place(sent.session, &name);
                    } else if self.session.id == Some(sent.session) && self.can_acquire() {
                        self.withdraw(sent.session, name.clone());
                    }
                }
                Ok(AcquireOutcome::Expired) => {}
            }
            // S4.1: the reply ends a new entry's wait for this acquire (after
            // a win, the wait goes on for the release just sent).
            self.partition_wait_over(&name);
            return;
        }
        let freed = self
            .entries
            .get_mut(&name)
            .and_then(|e| e.attempt.take())
            .is_some_and(|a| a.freed);
        self.dirty.push(name.clone());
        match result {
            Ok(AcquireOutcome::Won {
                token,
                remaining: _,
            }) => self.on_won(&name, token, sent.session),
            Ok(AcquireOutcome::Held { .. }) if freed => {
                // S4.2: the lease was freed while the attempt was in flight.
                let now = self.now;
                if let Some(entry) = self.entries.get_mut(&name) {
                    if entry.status == Status::Candidate {
                        entry.next_attempt = Some(now);
                        entry.hinted = true;
                    }
                }
            }
            Ok(AcquireOutcome::Held {
                holder,
                token,
                holder_remaining,
            }) => {
                self.attempt_lost(&name);
                if let Some(r) = holder_remaining {
                    self.retry_at_holder_expiry(&name, sent.sent_at, r);
                }
                if self
                    .entries
                    .get(&name)
                    .is_some_and(|e| e.kind == Kind::Partition)
                {
                    let until = holder_remaining
                        .map(|r| retry_after_holder_expiry(self.now, r, self.config.drift()));
                    self.partition_held(&name, holder, token, until);
                }
            }
            Ok(AcquireOutcome::Expired) => {
                if Some(sent.session) == self.session.id {
                    self.end_session(RevokeReason::SessionExpired);
                } else {
                    self.attempt_lost(&name);
                }
            }
            Err(error) => {
                self.emit(Event::BackendFailed {
                    command: "acquire",
                    error,
                });
                self.attempt_lost(&name);
            }
        }
    }

    /// S4.3: a won lease becomes a term only from the current attempt,
    /// before the deadline, with a token above every one this session released.
    pub(super) fn on_won(&mut self, name: &LeaseName, token: Token, session: SessionId) {
        let Some(current_session) = self.session.id else {
            return;
        };
        let session = if self.mutant_is(MutantKind::AcceptAbandonedAttempts) {
            current_session
        } else {
            session
        };
        if session != current_session {
            self.release(session, name.clone(), token);
            self.attempt_lost(name);
            return;
        }
        if self.deadline_passed() && !self.mutant_is(MutantKind::AcceptLateAcquire) {
            // The session is over; `finish` ends it right after this input.
            return;
        }
        if !self.mutant_is(MutantKind::SkipReleasedTokenCheck)
            && self.released.get(name).is_some_and(|r| token <= *r)
        {
            // A stale grant (its release may still be on the way): not a term.
            self.attempt_lost(name);
            return;
        }
        let Some(entry) = self.entries.get_mut(name) else {
            return;
        };
        if entry.held.is_some() || entry.status != Status::Candidate {
            return;
        }
        self.next_term += 1;
        let term = Term {
            id: TermId(self.next_term),
            entry: entry.id,
            name: name.clone(),
            token,
            session,
            kind: entry.kind,
            elected_at: self.now,
        };
        let partition = entry.kind == Kind::Partition;
        entry.status = Status::Leader;
        entry.next_attempt = None;
        // The won place is the holder now; only a release ends it (S4.5).
        entry.asked = false;
        entry.held = Some(Held {
            term: term.clone(),
            created_seq: self.seq,
            task_running: entry.runs_task,
        });
        let runs_task = entry.runs_task;
        self.stats.terms += 1;
        self.term_names.insert(term.id, name.clone());
        self.emit(Event::Elected { term: term.clone() });
        if runs_task {
            self.out.push_back(Output::Task(TaskOrder::Start { term }));
        }
        if partition {
            self.partition_won(name);
        }
    }

    /// The attempt did not win: retry later, or give up a `Try` lock.
    pub(super) fn attempt_lost(&mut self, name: &LeaseName) {
        let delay = self.retry_delay();
        let now = self.now;
        let Some(entry) = self.entries.get_mut(name) else {
            return;
        };
        if entry.status != Status::Candidate {
            return;
        }
        if entry.kind == Kind::Lock && entry.wait == LockWait::Try {
            self.lock_failed(name);
            return;
        }
        entry.next_attempt = Some(now + delay);
        self.dirty.push(name.clone());
    }

    /// S4.4: after a `Held` reply that said the holder has `remaining` left
    /// on the backend's clock, try again just after the *latest* instant the
    /// backend can still count it live, unless the normal retry (S4.1, just
    /// scheduled by `attempt_lost`) comes first. An early attempt would only
    /// be refused (the backend decides expiry on its own clock), so this
    /// timing is about not wasting calls, never about safety.
    fn retry_at_holder_expiry(
        &mut self,
        name: &LeaseName,
        sent_at: Timestamp,
        remaining: Duration,
    ) {
        let at = if self.mutant_is(MutantKind::RetryBeforeExpiry) {
            // The mutant: the S2.1 (safety-side, earliest) formula.
            local_deadline(
                sent_at,
                remaining,
                crate::config::Fraction::ONE,
                self.config.drift(),
                self.config.margin(),
            )
        } else {
            retry_after_holder_expiry(self.now, remaining, self.config.drift())
        };
        let Some(entry) = self.entries.get_mut(name) else {
            return;
        };
        if entry.status != Status::Candidate || entry.attempt.is_some() {
            return;
        }
        if let Some(next) = entry.next_attempt {
            if at < next {
                entry.next_attempt = Some(at);
                self.dirty.push(name.clone());
            }
        }
    }

    pub(super) fn lock_failed(&mut self, name: &LeaseName) {
        self.give_up(name);
        if let Some(entry) = self.entries.remove(name) {
            self.dirty.push(name.clone());
            self.emit(Event::LockFailed {
                name: name.clone(),
                entry: entry.id,
                tried: entry.wait == LockWait::Try,
            });
            self.emit(Event::Ended {
                name: name.clone(),
                entry: entry.id,
            });
            self.maybe_finish_close();
        }
    }

    pub(super) fn on_release_broadcast(&mut self, name: &LeaseName) {
        let now = self.now;
        if let Some(entry) = self.entries.get_mut(name) {
            if entry.status == Status::Candidate {
                match entry.attempt.as_mut() {
                    None => {
                        entry.next_attempt = Some(now);
                        // S4.6: its attempt goes ahead of those not freed.
                        let parked = entry.parked && !entry.hinted;
                        entry.hinted = true;
                        self.dirty.push(name.clone());
                        if parked {
                            self.park_first(name);
                        }
                    }
                    Some(attempt) => attempt.freed = true,
                }
            }
        }
        self.on_group_broadcast(name);
    }

    /// Ends the held term of `name`, if any, for `reason` (S3.4), in the
    /// order of S6: revoke, interrupt, then release now or after the task.
    pub(super) fn revoke(&mut self, name: &LeaseName, reason: RevokeReason) -> bool {
        let deadline_passed = self.deadline_passed();
        let Some(entry) = self.entries.get_mut(name) else {
            return false;
        };
        let Some(held) = entry.held.take() else {
            return false;
        };
        if entry.status == Status::Leader {
            entry.status = Status::Candidate;
        }
        self.dirty.push(name.clone());
        let term = held.term;
        if reason.is_voluntary() && self.mutant_is(MutantKind::ReleaseBeforeRevoke) {
            self.release(term.session, term.name.clone(), term.token);
            self.emit(Event::Revoked {
                term: term.clone(),
                reason,
            });
            if held.task_running {
                self.out
                    .push_back(Output::Task(TaskOrder::Interrupt { term: term.clone() }));
            }
            self.term_names.remove(&term.id);
            return true;
        }
        // 1. revoke
        self.emit(Event::Revoked {
            term: term.clone(),
            reason,
        });
        // 2. interrupt
        if held.task_running {
            self.out
                .push_back(Output::Task(TaskOrder::Interrupt { term: term.clone() }));
        }
        if !reason.is_voluntary() {
            // S6.3: lost involuntarily; nothing to hand over.
            self.term_names.remove(&term.id);
            return true;
        }
        if held.task_running && !deadline_passed {
            // 3. hold the lease until the task exits or the deadline (as of
            //    now) passes.
            let until = self.session.deadline.unwrap_or(self.now);
            if let Some(entry) = self.entries.get_mut(name) {
                entry.handover = Some(Handover { term, until });
            }
        } else {
            // 4. release with the term's token.
            self.term_names.remove(&term.id);
            self.release_voluntarily(term);
        }
        true
    }

    /// Releases a voluntarily ended term, unless the client is closing: then
    /// the one `CloseSession` releases every lease at once (S1.4).
    pub(super) fn release_voluntarily(&mut self, term: Term) {
        if self.closing || self.defer_release(term.session, &term.name, term.token) {
            return;
        }
        self.release(term.session, term.name, term.token);
    }

    /// S6.1 steps 4–5: the wait is over; release, then resolve what waited.
    pub(super) fn complete_handover(&mut self, name: &LeaseName) {
        let Some(h) = self.entries.get_mut(name).and_then(|e| e.handover.take()) else {
            return;
        };
        self.term_names.remove(&h.term.id);
        self.release_voluntarily(h.term);
        self.dirty.push(name.clone());
        self.after_handover_step(name);
    }

    /// After an involuntary loss of a term: a lock is gone for good (S5.3);
    /// an election competes again at once (S5.2).
    pub(super) fn after_involuntary_loss(&mut self, name: &LeaseName) {
        let now = self.now;
        let Some(entry) = self.entries.get_mut(name) else {
            return;
        };
        self.dirty.push(name.clone());
        if entry.stopping {
            return;
        }
        if entry.kind == Kind::Lock {
            let entry = entry.id;
            self.entries.remove(name);
            self.emit(Event::Ended {
                name: name.clone(),
                entry,
            });
            self.maybe_finish_close();
        } else if entry.status == Status::Candidate {
            entry.attempt = None;
            entry.next_attempt = Some(now);
        }
    }

    /// Completes what waits on a handover: removes a stopped entry, resolves
    /// `stop()`/`step_down()` with [`Event::Completed`], finishes a close.
    pub(super) fn after_handover_step(&mut self, name: &LeaseName) {
        let forget = self.mutant_is(MutantKind::ForgetCompletion);
        let Some(entry) = self.entries.get_mut(name) else {
            return;
        };
        if entry.handover.is_some() {
            return;
        }
        if entry.stopping && entry.kind == Kind::Partition {
            // A partition's hand-over is the group's business (S10.3).
            self.entries.remove(name);
            self.dirty.push(name.clone());
            self.partition_removed(name);
            self.maybe_finish_close();
        } else if entry.stopping {
            let entry = entry.id;
            self.entries.remove(name);
            self.dirty.push(name.clone());
            if !forget {
                self.emit(Event::Completed {
                    name: name.clone(),
                    entry,
                    handover: None,
                });
                self.emit(Event::Ended {
                    name: name.clone(),
                    entry,
                });
            }
            self.maybe_finish_close();
        } else if entry.pending_completion {
            entry.pending_completion = false;
            let entry = entry.id;
            self.dirty.push(name.clone());
            if !forget {
                self.emit(Event::Completed {
                    name: name.clone(),
                    entry,
                    handover: None,
                });
            }
        }
    }

    pub(super) fn on_task_exited(&mut self, term: TermId, outcome: TaskOutcome) {
        let Some(name) = self.term_names.get(&term).cloned() else {
            return;
        };
        let Some(entry) = self.entries.get_mut(&name) else {
            self.term_names.remove(&term);
            return;
        };
        if entry
            .held
            .as_ref()
            .is_some_and(|h| h.term.id == term && h.task_running)
        {
            // S6.5: the task ended on its own while the term is held.
            self.task_ended_in_term(&name, outcome);
            return;
        }
        if entry.handover.as_ref().is_some_and(|h| h.term.id == term) {
            // S6.1 step 4: the task has exited; release with the term's token.
            self.complete_handover(&name);
        }
    }

    /// S6.5: applies the election's [`TaskExitPolicy`] to a task that ended
    /// while its term is held.
    pub(super) fn task_ended_in_term(&mut self, name: &LeaseName, outcome: TaskOutcome) {
        let now = self.now;
        let lease = self.config.lease_duration();
        let interval = self.config.renew_interval();
        let keep_after_panic =
            outcome == TaskOutcome::Panicked && self.mutant_is(MutantKind::KeepTermAfterPanic);
        let Some(entry) = self.entries.get_mut(name) else {
            return;
        };
        let Some(held) = entry.held.as_mut() else {
            return;
        };
        // The task is gone: whatever happens next waits for nothing.
        held.task_running = false;
        let term = held.term.clone();
        let ran = now - held.term.elected_at;
        let action = match (entry.exit_policy, entry.kind) {
            _ if keep_after_panic => TaskExitAction::KeptTerm,
            (TaskExitPolicy::KeepTerm, _) => TaskExitAction::KeptTerm,
            (TaskExitPolicy::StopElection, _) | (_, Kind::Lock) => TaskExitAction::Stopped,
            (TaskExitPolicy::GiveUpTerm, Kind::Election | Kind::Partition)
                if !outcome.is_failure() =>
            {
                entry.task_failures = 0;
                TaskExitAction::Released
            }
            (TaskExitPolicy::GiveUpTerm, Kind::Election | Kind::Partition) => {
                // A task that ran for a lease duration or more starts the
                // count again: its failure is not part of a crash loop.
                entry.task_failures = if ran >= lease {
                    1
                } else {
                    entry.task_failures.saturating_add(1)
                };
                TaskExitAction::SteppedDown {
                    cooldown: task_failure_backoff(interval, entry.task_failures),
                    failures: entry.task_failures,
                }
            }
        };
        if !outcome.is_failure() && action != TaskExitAction::Released {
            entry.task_failures = 0;
        }
        self.emit(Event::TaskEnded {
            term,
            outcome,
            action,
        });
        match action {
            TaskExitAction::KeptTerm => {}
            TaskExitAction::Stopped => {
                if let Some(entry) = self.entries.get_mut(name) {
                    entry.stopping = true;
                    entry.status = Status::Stopped;
                    entry.attempt = None;
                    entry.cooldown_until = None;
                }
                let _ = self.revoke(name, RevokeReason::Stopped);
                self.after_handover_step(name);
            }
            TaskExitAction::Released => {
                let delay = self.retry_delay();
                let _ = self.revoke(name, RevokeReason::SteppedDown);
                if let Some(entry) = self.entries.get_mut(name) {
                    entry.attempt = None;
                    entry.next_attempt = Some(now + delay);
                }
            }
            TaskExitAction::SteppedDown { cooldown, .. } => {
                if let Some(entry) = self.entries.get_mut(name) {
                    entry.status = Status::CoolingDown;
                    entry.cooldown_until = Some(now + cooldown);
                    entry.attempt = None;
                }
                let _ = self.revoke(name, RevokeReason::SteppedDown);
            }
        }
        self.dirty.push(name.clone());
    }

    /// S7.7: nobody learned of the term, so it ends silently (no `Revoked`),
    /// its task never starts, and the election steps down for one lease duration.
    pub(super) fn on_elected_rejected(&mut self, term: TermId) {
        let Some(name) = self.term_names.get(&term).cloned() else {
            return;
        };
        let until = self.now + self.config.lease_duration();
        let Some(entry) = self.entries.get_mut(&name) else {
            return;
        };
        let Some(held) = entry.held.take_if(|h| h.term.id == term) else {
            return;
        };
        self.term_names.remove(&term);
        let kind = entry.kind;
        if kind != Kind::Lock {
            entry.status = Status::CoolingDown;
            entry.cooldown_until = Some(until);
        } else {
            entry.status = Status::Candidate;
        }
        self.out
            .retain(|o| !matches!(o, Output::Task(TaskOrder::Start { term: t }) if t.id == term));
        self.release(held.term.session, held.term.name, held.term.token);
        self.dirty.push(name.clone());
        if kind == Kind::Lock {
            self.lock_failed(&name);
        }
    }

    /// Emits a token-conditional release (S3.5) and remembers the token (S4.3).
    pub(super) fn release(&mut self, session: SessionId, name: LeaseName, token: Token) {
        if Some(session) == self.session.id {
            let max = self.released.entry(name.clone()).or_insert(token);
            if token > *max {
                *max = token;
            }
        }
        let op = self.op();
        self.stats.releases += 1;
        self.release_ops.insert(op, (name.clone(), token));
        self.releasing.insert(
            (name.clone(), token),
            super::Releasing {
                sent_at: None,
                answered_seq: None,
                heard: false,
            },
        );
        let key = (name.clone(), token);
        self.command(Command::Release {
            op,
            session,
            name,
            token,
        });
        let queued = self
            .waiting
            .iter()
            .rev()
            .any(|w| matches!(w, super::Waiting::Command(c) if c.op() == op));
        if !queued {
            if let Some(r) = self.releasing.get_mut(&key) {
                r.sent_at = Some(self.now);
            }
        }
    }

    /// S4.5: `name` stops competing without a term. If it sent an acquire
    /// on the current session since its last term, a backend that queues
    /// candidates may keep a place for it: withdraw that place, once. Not
    /// while closing (the `CloseSession` removes every place at once) nor
    /// without a usable session (its end removes them too).
    pub(super) fn give_up(&mut self, name: &LeaseName) {
        let Some(entry) = self.entries.get_mut(name) else {
            return;
        };
        if !std::mem::take(&mut entry.asked) {
            return;
        }
        if let Some(session) = self.session.id.filter(|_| self.can_acquire()) {
            self.withdraw(session, name.clone());
        }
    }

    /// Emits a [`Command::Withdraw`] of `session`'s wait for `name` (S4.5).
    pub(super) fn withdraw(&mut self, session: SessionId, name: LeaseName) {
        let op = self.op();
        self.withdraw_again.remove(&name);
        self.withdraws.insert(op, (self.now, session, name.clone()));
        self.prune_withdraws();
        self.stats.withdrawals += 1;
        self.partition_withdrawn(&name);
        self.command(Command::Withdraw { op, session, name });
    }

    /// S4.5: a withdraw of `session`'s place for `name` is not sent,
    /// because a new entry of `name` competes since: that entry now stands
    /// in the place, so if it stops before it has asked, it still
    /// withdraws it. Before, it withdrew only a place its own acquire had
    /// made: a partition that left a member's target and came back while
    /// the withdraw waited for a call slot, then left again before its new
    /// entry asked, kept the old place in the backend's queue for good; on
    /// ZooKeeper that place became the holder once the partition was
    /// released, and the partition stayed held by a member that did not
    /// know it (1,000 partitions: one partition unowned for 50 s, until
    /// the bench gave up).
    fn inherit_place(&mut self, session: SessionId, name: &LeaseName) {
        if self.session.id != Some(session) {
            // The session's end removed the place.
            return;
        }
        if let Some(entry) = self.entries.get_mut(name) {
            if entry.status == Status::Candidate && entry.held.is_none() {
                entry.asked = true;
            }
        }
    }

    /// Whether `name` competes (again): a withdraw decided before must not
    /// go out now (S4.5).
    fn competes(&self, name: &LeaseName) -> bool {
        self.entries.get(name).is_some_and(|e| {
            matches!(e.status, Status::Candidate | Status::Leader)
                || e.held.is_some()
                || e.handover.is_some()
        })
    }

    /// The session's end removes its places (S4.5): withdraws still waiting
    /// for a slot (S4.6) are not sent.
    pub(super) fn drop_waiting_withdraws(&mut self) {
        let mut dropped = Vec::new();
        self.waiting.retain(|w| match w {
            Waiting::Command(Command::Withdraw { op, .. }) => {
                dropped.push(*op);
                false
            }
            _ => true,
        });
        for op in dropped {
            self.withdraws.remove(&op);
        }
    }

    /// Forgets withdraws whose replies can no longer arrive (the driver
    /// drops every call at its call timeout, S2.4).
    fn prune_withdraws(&mut self) {
        let horizon = self.config.lease_duration().saturating_mul(4);
        while let Some(entry) = self.withdraws.first_entry() {
            if entry.get().0 + horizon < self.now {
                entry.remove();
            } else {
                break;
            }
        }
    }

    /// S4.5: after a successful renewal of `session`, withdraws again every
    /// name whose withdraw failed on it and that does not compete again
    /// (the renewal shows the backend answers again; one retry per
    /// renewal, so a backend that keeps failing is not called in a loop).
    pub(super) fn withdraw_failed_again(&mut self, session: SessionId) {
        self.withdraws_timed_out(session);
        if self.withdraw_again.is_empty() || !self.can_acquire() {
            return;
        }
        let again = std::mem::take(&mut self.withdraw_again);
        for name in again {
            if self.competes(&name) {
                self.inherit_place(session, &name);
            } else {
                self.withdraw(session, name);
            }
        }
    }

    /// A withdraw of `session` unanswered for its call timeout has failed
    /// (S2.4): reported, and sent again like one answered with a failure.
    /// The timeout counts from when the withdraw was sent: one still
    /// waiting for a call slot (S4.6) has not failed. Counting it from when
    /// it was decided made every withdraw that waited longer than a call
    /// timeout count as failed and go out again after each renewal, while
    /// the first still went out: with 1,000 partitions on etcd one member
    /// sent 19,621 withdraws for 1,825 `Held` replies.
    fn withdraws_timed_out(&mut self, session: SessionId) {
        let horizon = self.now.saturating_sub(self.call_timeout());
        let waiting: BTreeSet<OpId> = self
            .waiting
            .iter()
            .filter_map(|w| match w {
                Waiting::Command(Command::Withdraw { op, .. }) => Some(*op),
                _ => None,
            })
            .collect();
        let late: Vec<OpId> = self
            .withdraws
            .iter()
            .filter(|(op, (sent_at, s, _))| {
                *sent_at <= horizon && *s == session && !waiting.contains(op)
            })
            .map(|(op, _)| *op)
            .collect();
        for op in late {
            let timeout = self.call_timeout();
            self.on_withdraw_replied(
                op,
                Err(BackendError::new(
                    BackendErrorKind::Timeout,
                    format!("withdraw call did not finish within {timeout:?} (S2.4)"),
                )),
            );
        }
    }

    /// A reply to [`Command::Withdraw`]: nothing waits on it. A failure is
    /// reported, and the withdraw is sent again after the session's next
    /// successful renewal (S4.5): a place nobody wants must not wait for
    /// the session's end, where it could become the holder first.
    pub(super) fn on_withdraw_replied(&mut self, op: OpId, result: Result<(), BackendError>) {
        let Some((_, session, name)) = self.withdraws.remove(&op) else {
            self.stats.stale_replies += 1;
            return;
        };
        if let Err(error) = result {
            if self.session.id == Some(session) {
                self.withdraw_again.insert(name);
            }
            self.emit(Event::BackendFailed {
                command: "withdraw",
                error,
            });
        }
    }
}
