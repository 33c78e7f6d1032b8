//! The session lifecycle (S1, S2, S8.3, S8.4): opening, renewing and
//! closing the one session, its local deadline and renewal period, and the
//! end of every term when the session ends.

use super::{Engine, MutantKind};
use crate::election::Status;
use crate::error::{BackendError, BackendErrorKind};
use crate::ids::{OpId, SessionId, Token};
use crate::lease::{local_validity, renew_period, renewal_backoff};
use crate::name::LeaseName;
use crate::protocol::{
    Command, Event, Level, RenewError, Renewal, RevokeReason, SessionGrant, SessionState,
};
use crate::time::Timestamp;
use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum CallKind {
    Open,
    Renew,
    Close,
}

impl CallKind {
    fn label(self) -> &'static str {
        match self {
            CallKind::Open => "open",
            CallKind::Renew => "renew",
            CallKind::Close => "close",
        }
    }
}

/// The one session call in flight (open, renew or close).
#[derive(Clone, Copy, Debug)]
pub(super) struct Call {
    pub(super) op: OpId,
    pub(super) kind: CallKind,
    pub(super) sent_at: Timestamp,
    pub(super) sent_seq: u64,
}

#[derive(Debug)]
pub(super) struct Session {
    pub(super) state: SessionState,
    pub(super) id: Option<SessionId>,
    pub(super) deadline: Option<Timestamp>,
    pub(super) period: Duration,
    pub(super) shortened_reported: bool,
    pub(super) call: Option<Call>,
    pub(super) next_call: Option<Timestamp>,
    pub(super) open_failures: u32,
    /// A group's membership changed since the renewal in flight was sent:
    /// renew again as soon as it returns (S10.5).
    pub(super) renew_soon: bool,
    /// The renewals' round trip (send to reply): the last one, or a
    /// quarter less than the estimate before it if that is longer, so a
    /// slow renewal is remembered for a few more (S10.2: how long a
    /// member waits for the rest of a change's releases).
    pub(super) round_trip: Option<Duration>,
}

impl Engine {
    /// Closes the client (S1.4): stops every election and lock, waits for
    /// their handovers, closes the session (releasing all its leases at
    /// once), then emits [`Event::Closed`]. Calling it again does nothing.
    pub fn close(&mut self, now: Timestamp) {
        self.advance(now);
        if self.closing {
            self.finish();
            return;
        }
        self.closing = true;
        let names: Vec<LeaseName> = self.entries.keys().cloned().collect();
        for name in &names {
            if let Some(entry) = self.entries.get_mut(name) {
                if !entry.stopping {
                    entry.stopping = true;
                    entry.status = Status::Stopped;
                    entry.attempt = None;
                    entry.cooldown_until = None;
                    let _ = self.revoke(name, RevokeReason::Stopped);
                }
            }
            self.after_handover_step(name);
        }
        self.maybe_finish_close();
        self.finish();
    }

    pub(super) fn session_wake(&self) -> Option<Timestamp> {
        let s = &self.session;
        let mut wake = s.next_call;
        let renew_never_times_out = self.mutant_is(MutantKind::RenewNeverTimesOut);
        if let Some(call) = s
            .call
            .filter(|c| !(renew_never_times_out && c.kind == CallKind::Renew))
        {
            let t = call.sent_at + s.period;
            wake = Some(wake.map_or(t, |w| w.min(t)));
        }
        if s.id.is_some() {
            if let Some(d) = s.deadline {
                let late_reply_may_extend = self.mutant_late_reply_extends()
                    && matches!(
                        s.call,
                        Some(Call {
                            kind: CallKind::Renew,
                            ..
                        })
                    );
                if !late_reply_may_extend {
                    wake = Some(wake.map_or(d, |w| w.min(d)));
                }
            }
        }
        wake
    }

    #[cfg(feature = "mutants")]
    pub(super) fn mutant_late_reply_extends(&self) -> bool {
        self.mutant_is(MutantKind::LateReplyExtends)
    }

    #[cfg(not(feature = "mutants"))]
    pub(super) fn mutant_late_reply_extends(&self) -> bool {
        false
    }

    // ----- the session (S1, S2, S8.3, S8.4) ------------------------------

    pub(super) fn set_state(&mut self, state: SessionState) {
        if self.session.state != state {
            self.session.state = state;
            let session = self.session.id;
            self.emit(Event::SessionStateChanged { state, session });
        }
    }

    pub(super) fn on_session_wake(&mut self) {
        let now = self.now;
        // S2.3: the local deadline has passed; the session is over.
        if self.session.id.is_some()
            && self.deadline_passed()
            && !(self.mutant_late_reply_extends()
                && matches!(
                    self.session.call,
                    Some(Call {
                        kind: CallKind::Renew,
                        ..
                    })
                ))
        {
            self.end_session(RevokeReason::DeadlinePassed);
            return;
        }
        // S2.4: a call that outlives the renewal period in force has failed.
        let renew_never_times_out = self.mutant_is(MutantKind::RenewNeverTimesOut);
        if let Some(call) = self
            .session
            .call
            .filter(|c| !(renew_never_times_out && c.kind == CallKind::Renew))
        {
            if now >= call.sent_at + self.session.period {
                self.session.call = None;
                let error = BackendError::new(
                    BackendErrorKind::Timeout,
                    format!("{} call timed out", call.kind.label()),
                );
                match call.kind {
                    CallKind::Open => self.open_failed(error),
                    CallKind::Renew => self.renew_failed(error),
                    CallKind::Close => self.finalize_close(),
                }
                return;
            }
        }
        if self.session.call.is_none() && self.session.next_call.is_some_and(|t| t <= now) {
            self.session.next_call = None;
            // While closing, keep renewing: handovers may still be waiting.
            match (self.session.id, self.closing) {
                (None, false) => self.send_open(),
                (Some(session), _) => self.send_renew(session),
                (None, true) => {}
            }
        }
    }

    pub(super) fn send_open(&mut self) {
        let op = self.op();
        self.session.call = Some(Call {
            op,
            kind: CallKind::Open,
            sent_at: self.now,
            sent_seq: self.seq,
        });
        self.command(Command::OpenSession {
            op,
            lease_duration: self.config.lease_duration(),
        });
    }

    pub(super) fn send_renew(&mut self, session: SessionId) {
        let op = self.op();
        self.session.call = Some(Call {
            op,
            kind: CallKind::Renew,
            sent_at: self.now,
            sent_seq: self.seq,
        });
        self.stats.renewals += 1;
        self.session.renew_soon = false;
        self.command(Command::Renew { op, session });
    }

    pub(super) fn open_failed(&mut self, error: BackendError) {
        self.emit(Event::BackendFailed {
            command: "open",
            error,
        });
        self.session.open_failures = self.session.open_failures.saturating_add(1);
        let exp = self.session.open_failures.min(16);
        let backoff = self
            .config
            .min_backoff()
            .saturating_mul(1 << (exp - 1))
            .min(self.config.renew_interval());
        self.session.next_call = Some(self.now + backoff);
    }

    pub(super) fn renew_failed(&mut self, error: BackendError) {
        self.stats.renewal_failures += 1;
        self.emit(Event::BackendFailed {
            command: "renew",
            error,
        });
        self.set_state(SessionState::Suspended);
        let left = self
            .session
            .deadline
            .map_or(Duration::ZERO, |d| d - self.now);
        let backoff = renewal_backoff(left, self.session.period, self.config.min_backoff());
        self.session.next_call = Some(self.now + backoff);
    }

    /// The local validity one reply proves, as S2.1 computes it.
    pub(super) fn validity(&self, remaining: Duration) -> Duration {
        let drift = if self.mutant_is(MutantKind::IgnoreDrift) {
            0.0
        } else {
            self.config.drift()
        };
        let margin = if self.mutant_is(MutantKind::IgnoreMargin) {
            Duration::ZERO
        } else {
            self.config.margin()
        };
        local_validity(remaining, self.profile.renewal_proves, drift, margin)
    }

    /// `sent_at + validity` (S2.1): counted from the send, never the arrival.
    pub(super) fn deadline_from(&self, sent_at: Timestamp, remaining: Duration) -> Timestamp {
        let base = if self.mutant_is(MutantKind::DeadlineFromArrival) {
            self.now
        } else {
            sent_at
        };
        base + self.validity(remaining)
    }

    /// Applies S8.4 to the validity one reply proved.
    pub(super) fn apply_period(&mut self, validity: Duration) {
        let (period, shortened) = renew_period(self.config.renew_interval(), validity);
        let period = period.max(Duration::from_millis(1));
        if period != self.session.period {
            self.session.period = period;
            self.mark_all_dirty();
        }
        if shortened && !self.session.shortened_reported {
            if let Some(session) = self.session.id {
                self.session.shortened_reported = true;
                self.emit(Event::SessionLeaseShortened {
                    session,
                    validity,
                    renew_period: self.session.period,
                });
                self.emit(Event::Diagnostic {
                    level: Level::Warn,
                    message: format!(
                        "the backend grants a local validity of {validity:?}, too short for two renewals \
                         every {:?}; renewing every {:?} instead (S8.4)",
                        self.config.renew_interval(),
                        self.session.period
                    ),
                });
            }
        }
    }

    pub(super) fn set_deadline(&mut self, deadline: Timestamp) {
        if self.session.deadline != Some(deadline) {
            self.session.deadline = Some(deadline);
            if let Some(session) = self.session.id {
                self.emit(Event::DeadlineChanged { session, deadline });
            }
        }
    }

    pub(super) fn on_session_opened(
        &mut self,
        op: OpId,
        result: Result<SessionGrant, BackendError>,
    ) {
        let current =
            matches!(self.session.call, Some(c) if c.op == op && c.kind == CallKind::Open);
        if !current {
            self.stats.stale_replies += 1;
            // A late grant for an abandoned open: close that session so it
            // holds nothing until it expires (never our current session).
            if let Ok(grant) = result {
                if Some(grant.session) != self.session.id {
                    self.send_close_of(grant.session);
                }
            }
            return;
        }
        let Some(call) = self.session.call.take() else {
            return;
        };
        match result {
            Err(error) => self.open_failed(error),
            Ok(grant) => {
                if self.closing {
                    self.send_close_of(grant.session);
                    self.maybe_finish_close();
                    return;
                }
                let deadline = self.deadline_from(call.sent_at, grant.remaining);
                if deadline <= self.now {
                    // The grant was used up in transit: useless, and unsafe to use.
                    self.send_close_of(grant.session);
                    self.open_failed(BackendError::new(
                        BackendErrorKind::Timeout,
                        "the session grant expired before its reply arrived",
                    ));
                    return;
                }
                self.stats.sessions += 1;
                self.session.open_failures = 0;
                self.session.id = Some(grant.session);
                self.session.shortened_reported = false;
                self.released.clear();
                self.set_state(SessionState::Live);
                let validity = self.validity(grant.remaining);
                self.apply_period(validity);
                self.set_deadline(deadline);
                self.session.next_call = Some((call.sent_at + self.session.period).max(self.now));
                self.mark_all_dirty();
                self.send_joins();
            }
        }
    }

    pub(super) fn on_renew_replied(&mut self, op: OpId, result: Result<Renewal, RenewError>) {
        let current =
            matches!(self.session.call, Some(c) if c.op == op && c.kind == CallKind::Renew);
        if !current || self.session.id.is_none() {
            self.stats.stale_replies += 1;
            return;
        }
        let Some(call) = self.session.call.take() else {
            return;
        };
        // S2.3: once the deadline has passed, a late reply changes nothing.
        if self.deadline_passed() && !self.mutant_late_reply_extends() {
            self.stats.stale_replies += 1;
            return;
        }
        match result {
            Ok(renewal) => {
                let took = self.now.saturating_duration_since(call.sent_at);
                let decayed = self.session.round_trip.map(|d| d - d / 4);
                self.session.round_trip = Some(decayed.map_or(took, |d| d.max(took)));
                let deadline = self.deadline_from(call.sent_at, renewal.remaining);
                let validity = self.validity(renewal.remaining);
                self.apply_period(validity);
                self.set_state(SessionState::Live);
                self.set_deadline(deadline);
                let next = if self.session.renew_soon {
                    call.sent_at + self.config.min_backoff()
                } else {
                    call.sent_at + self.session.period
                };
                self.session.next_call = Some(next.max(self.now));
                self.check_owned(renewal.owned, call.sent_seq);
                if !self.groups.is_empty() {
                    self.on_group_views(renewal.groups, call.sent_seq);
                }
                if let Some(session) = self.session.id {
                    self.withdraw_failed_again(session);
                }
            }
            Err(RenewError::Expired) => self.end_session(RevokeReason::SessionExpired),
            Err(RenewError::Backend(error)) => self.renew_failed(error),
        }
    }

    /// S3.4 `TakenOver`, and orphans: compares the leases the backend says
    /// this session owns with the terms it holds. Both sides are walked in
    /// name order, so this is linear after sorting the reply.
    pub(super) fn check_owned(&mut self, mut owned: Vec<(LeaseName, Token)>, renew_seq: u64) {
        if !owned.is_sorted() {
            owned.sort_unstable();
        }
        let mut lost: Vec<LeaseName> = Vec::new();
        let mut orphans: Vec<(LeaseName, Token)> = Vec::new();
        let mut i = 0;
        let ignore_taken_over = self.mutant_is(MutantKind::IgnoreTakenOver);
        for (name, entry) in &self.entries {
            while i < owned.len() && owned[i].0 < *name {
                orphans.push(owned[i].clone());
                i += 1;
            }
            let start = i;
            while i < owned.len() && owned[i].0 == *name {
                i += 1;
            }
            let listed = &owned[start..i];
            if let Some(held) = &entry.held {
                // Only a term won before this renewal was sent is surely
                // visible to it (the backend may run calls in any order).
                if held.created_seq < renew_seq
                    && !ignore_taken_over
                    && !listed.iter().any(|(_, t)| *t == held.term.token)
                {
                    lost.push(name.clone());
                }
            }
            for (n, token) in listed {
                let known = entry.held.as_ref().is_some_and(|h| h.term.token == *token)
                    || entry
                        .handover
                        .as_ref()
                        .is_some_and(|h| h.term.token == *token);
                if !known && entry.attempt.is_none() {
                    orphans.push((n.clone(), *token));
                }
            }
        }
        orphans.extend_from_slice(&owned[i..]);
        for name in lost {
            // S3.2, S4.3: the backend says this session no longer owns the
            // term's token, so no later grant of it may become a new term.
            let token = self
                .entries
                .get(&name)
                .and_then(|e| e.held.as_ref())
                .map(|h| h.term.token);
            if let Some(token) = token {
                let max = self.released.entry(name.clone()).or_insert(token);
                *max = (*max).max(token);
            }
            if self.revoke(&name, RevokeReason::TakenOver) {
                self.after_involuntary_loss(&name);
            }
        }
        // A release still pending, or answered after this renewal was sent,
        // may simply not show in it yet: releasing again at every renewal
        // queued one more release per renewal behind the call slots (S4.6),
        // and a member giving up hundreds of partitions flooded its
        // backend. A release answered before the renewal was sent whose
        // lease is still listed failed: it is sent again.
        let (now, timeout) = (self.now, self.call_timeout());
        orphans.retain(|(name, token)| {
            !self
                .releasing
                .get(&(name.clone(), *token))
                .is_some_and(|r| match r.answered_seq {
                    None => r.sent_at.is_none_or(|t| now < t + timeout),
                    Some(seq) => seq >= renew_seq,
                })
        });
        // Forget the releases this renewal shows applied (it was sent after
        // their reply and lists them no more) and those lost.
        let listed: std::collections::BTreeSet<(&LeaseName, Token)> =
            owned.iter().map(|(n, t)| (n, *t)).collect();
        self.releasing
            .retain(|(name, token), r| match r.answered_seq {
                None => r.sent_at.is_none_or(|t| now < t + timeout),
                Some(seq) => seq >= renew_seq || listed.contains(&(name, *token)),
            });
        self.release_ops
            .retain(|_, key| self.releasing.contains_key(key));
        if let Some(session) = self.session.id {
            for (name, token) in orphans {
                // Owned but unknown: a lost acquire reply or a failed release.
                self.release(session, name, token);
            }
        }
    }

    /// The session is over (S1.2, S2.3): every term ends with `reason`, and
    /// a new session is opened (unless the client is closing).
    pub(super) fn end_session(&mut self, reason: RevokeReason) {
        let old = self.session.id;
        let names: Vec<LeaseName> = self.entries.keys().cloned().collect();
        let now = self.now;
        for name in &names {
            let lost = self.revoke(name, reason);
            if let Some(entry) = self.entries.get_mut(name) {
                // Attempts on the old session are abandoned; candidates try
                // again as soon as the new session is open. Its end removes
                // every place it waited in: nothing to withdraw (S4.5).
                entry.attempt = None;
                entry.asked = false;
                if entry.status == Status::Candidate {
                    entry.next_attempt = Some(now);
                }
                // A handover waits no longer: the deadline passed or the
                // session is gone, so the lease is not ours to hold.
                if let Some(h) = entry.handover.take() {
                    self.term_names.remove(&h.term.id);
                }
            }
            if lost {
                self.after_involuntary_loss(name);
            }
            self.after_handover_step(name);
        }
        self.groups_on_session_end();
        if self.session.state == SessionState::Closed {
            // A close finished while the terms ended: nothing to reopen.
            return;
        }
        if reason == RevokeReason::DeadlinePassed {
            if let Some(old) = old {
                // The backend may still count the session alive: close it so
                // its leases free up without waiting for its expiry.
                self.send_close_of(old);
            }
        }
        self.session.id = None;
        // The session's end removes its places: nothing to withdraw again.
        self.withdraw_again.clear();
        self.drop_waiting_withdraws();
        self.session.deadline = None;
        self.session.call = None;
        self.session.period = self.config.renew_interval();
        self.released.clear();
        self.set_state(SessionState::Opening);
        self.mark_all_dirty();
        if self.closing {
            self.maybe_finish_close();
        } else {
            self.session.next_call = Some(self.now);
        }
    }

    pub(super) fn send_close_of(&mut self, session: SessionId) {
        let op = self.op();
        self.command(Command::CloseSession { op, session });
    }

    pub(super) fn on_session_closed(&mut self, op: OpId, result: Result<(), BackendError>) {
        let current =
            matches!(self.session.call, Some(c) if c.op == op && c.kind == CallKind::Close);
        if let Err(error) = result {
            self.emit(Event::BackendFailed {
                command: "close",
                error,
            });
        }
        if current {
            self.finalize_close();
        }
    }

    /// Once closing and every handover is done: close the session, then `Closed`.
    pub(super) fn maybe_finish_close(&mut self) {
        if !self.closing || self.session.state == SessionState::Closed || !self.entries.is_empty() {
            return;
        }
        if matches!(self.session.call, Some(c) if c.kind == CallKind::Close) {
            return;
        }
        match self.session.id {
            Some(session) if !self.deadline_passed() => {
                let op = self.op();
                self.session.call = Some(Call {
                    op,
                    kind: CallKind::Close,
                    sent_at: self.now,
                    sent_seq: self.seq,
                });
                self.session.next_call = None;
                self.command(Command::CloseSession { op, session });
            }
            Some(session) => {
                self.send_close_of(session);
                self.finalize_close();
            }
            None => self.finalize_close(),
        }
    }

    pub(super) fn finalize_close(&mut self) {
        if self.session.state == SessionState::Closed {
            return;
        }
        self.session.call = None;
        self.session.next_call = None;
        self.set_state(SessionState::Closed);
        self.session.id = None;
        self.withdraw_again.clear();
        self.drop_waiting_withdraws();
        self.session.deadline = None;
        self.send_held();
        self.emit(Event::Closed);
    }
}
