//! Schedule slots (S11): the engine claims a slot of a schedule for the
//! current term of the schedule's election and reports the answer.
//!
//! The schedule itself (when slots fall, cron expressions, waiting for the
//! wall clock) lives outside the engine, in `simba-client`: the engine's time
//! stays its monotonic [`Timestamp`], and slot numbers come from the caller.
//! What the engine adds is the term: a claim carries the current term's
//! token and session, is refused without a valid term, times out like every
//! backend call (S2.4), and may run only if its term is still valid when the
//! answer arrives (S11.1).

use super::{Engine, TimerKey};
use crate::error::{ApiError, BackendError, BackendErrorKind};
use crate::ids::{OpId, Token};
use crate::name::LeaseName;
use crate::protocol::{Command, Event, SlotClaim};
use crate::time::Timestamp;

/// A claim sent and not answered yet.
#[derive(Clone, Debug)]
pub(super) struct PendingClaim {
    name: LeaseName,
    token: Token,
    slot: u64,
    sent_at: Timestamp,
}

impl Engine {
    /// Claims `slot` of the schedule `name` for the current term of `name`,
    /// whose token must be `token` (S11.1): emits [`Command::ClaimSlot`]
    /// with that token and the term's session. Exactly one
    /// [`Event::SlotClaimed`] answers it: the backend's reply, or a timeout
    /// after [`Engine::call_timeout`] (S2.4); its `run` is true only if the
    /// backend answered [`SlotClaim::Claimed`] and the term was still
    /// current and valid then.
    ///
    /// Slot numbers are the caller's (Simba's client uses milliseconds since
    /// the Unix epoch of the slot's instant, S11.2); the backend records a
    /// slot only if it is later than the last one claimed for `name`.
    ///
    /// ```
    /// use simba_core::{ApiError, BackendProfile, Engine, LeaseName, SimbaConfig, Timestamp, Token};
    /// let mut engine = Engine::new(SimbaConfig::default(), BackendProfile::default(), Timestamp::ZERO);
    /// let name = LeaseName::new("reports.nightly")?;
    /// let token = Token::new(1).ok_or("zero")?;
    /// // No election of that name: nothing to claim with.
    /// assert!(matches!(
    ///     engine.claim_slot(Timestamp::ZERO, &name, token, 1_767_232_800_000),
    ///     Err(ApiError::NotStarted(_))
    /// ));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`ApiError::Closed`] while closing; [`ApiError::NotStarted`] if no
    /// election or lock `name` is started; [`ApiError::NoValidTerm`] if
    /// `name` has no current term with `token`, or the session's local
    /// deadline has passed. Nothing is sent then.
    pub fn claim_slot(
        &mut self,
        now: Timestamp,
        name: &LeaseName,
        token: Token,
        slot: u64,
    ) -> Result<(), ApiError> {
        self.advance(now);
        let result = self.send_claim(name, token, slot);
        self.finish();
        result
    }

    fn send_claim(&mut self, name: &LeaseName, token: Token, slot: u64) -> Result<(), ApiError> {
        if self.closing {
            return Err(ApiError::Closed);
        }
        let entry = self
            .entries
            .get(name)
            .ok_or_else(|| ApiError::NotStarted(name.clone()))?;
        let session = entry
            .held
            .as_ref()
            .map(|h| &h.term)
            .filter(|t| t.token == token && self.term_is_valid_now(t.session))
            .map(|t| t.session)
            .ok_or_else(|| ApiError::NoValidTerm(name.clone()))?;
        let op = self.op();
        self.claims.insert(
            op,
            PendingClaim {
                name: name.clone(),
                token,
                slot,
                sent_at: self.now,
            },
        );
        self.command(Command::ClaimSlot {
            op,
            session,
            name: name.clone(),
            token,
            slot,
        });
        Ok(())
    }

    /// Whether a term of `session` is valid now: the session is the current
    /// one and its local deadline has not passed (S3.3).
    fn term_is_valid_now(&self, session: crate::ids::SessionId) -> bool {
        self.session.id == Some(session) && !self.deadline_passed()
    }

    /// Whether `name`'s current term has `token` and is valid now.
    fn holds_valid(&self, name: &LeaseName, token: Token) -> bool {
        self.entries
            .get(name)
            .and_then(|e| e.held.as_ref())
            .is_some_and(|h| h.term.token == token && self.term_is_valid_now(h.term.session))
    }

    /// A reply to [`Command::ClaimSlot`].
    pub(super) fn on_slot_claimed(&mut self, op: OpId, result: Result<SlotClaim, BackendError>) {
        let Some(claim) = self.claims.remove(&op) else {
            // Stale: timed out already, or a duplicate.
            self.stats.stale_replies += 1;
            return;
        };
        let run =
            matches!(result, Ok(SlotClaim::Claimed)) && self.holds_valid(&claim.name, claim.token);
        if let Err(error) = &result {
            self.emit(Event::BackendFailed {
                command: "claim_slot",
                error: error.clone(),
            });
        }
        self.emit(Event::SlotClaimed {
            name: claim.name,
            token: claim.token,
            slot: claim.slot,
            result,
            run,
        });
    }

    /// When the oldest unanswered claim times out (S2.4).
    pub(super) fn claims_wake(&self) -> Option<Timestamp> {
        let timeout = self.call_timeout();
        self.claims.values().map(|c| c.sent_at + timeout).min()
    }

    /// Answers every claim older than the call timeout with a timeout: its
    /// slot does not run (the claim may or may not have been recorded).
    pub(super) fn on_claims_wake(&mut self) {
        let timeout = self.call_timeout();
        let now = self.now;
        let due: Vec<OpId> = self
            .claims
            .iter()
            .filter(|(_, c)| c.sent_at + timeout <= now)
            .map(|(op, _)| *op)
            .collect();
        for op in due {
            if let Some(c) = self.claims.remove(&op) {
                let error = BackendError::new(
                    BackendErrorKind::Timeout,
                    format!("claim_slot timed out after {timeout:?}"),
                );
                self.emit(Event::BackendFailed {
                    command: "claim_slot",
                    error: error.clone(),
                });
                self.emit(Event::SlotClaimed {
                    name: c.name,
                    token: c.token,
                    slot: c.slot,
                    result: Err(error),
                    run: false,
                });
            }
        }
        self.timers.set(&TimerKey::Claims, self.claims_wake());
    }
}
