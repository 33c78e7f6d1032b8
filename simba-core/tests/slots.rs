//! Rule tests for schedule slots (S11), driving the sans-IO engine directly:
//! `Engine::claim_slot` sends `Command::ClaimSlot` with the current term's
//! token, and `Event::SlotClaimed` says whether the slot may run.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod harness;

use harness::*;
use simba_core::{
    ApiError, BackendError, BackendErrorKind, Command, Event, Input, Output, SlotClaim, Term, Token,
};

fn claims(out: &[Output]) -> Vec<(simba_core::LeaseName, Token, u64)> {
    out.iter()
        .filter_map(|o| match o {
            Output::Command(Command::ClaimSlot {
                name, token, slot, ..
            }) => Some((name.clone(), *token, *slot)),
            _ => None,
        })
        .collect()
}

fn answers(out: &[Output]) -> Vec<(u64, Result<SlotClaim, BackendError>, bool)> {
    out.iter()
        .filter_map(|o| match o {
            Output::Event(Event::SlotClaimed {
                slot, result, run, ..
            }) => Some((*slot, result.clone(), *run)),
            _ => None,
        })
        .collect()
}

fn take_claim(h: &mut H) -> simba_core::OpId {
    h.take(|c| matches!(c, Command::ClaimSlot { .. })).op()
}

/// A live session elected on "job" with token 7, its task running.
fn elected() -> (H, Term) {
    let mut h = H::live(fast_config());
    let term = h.elect("job", 7, true);
    (h, term)
}

/// Claims `slot` on `term` and takes the claim sent.
fn claim(h: &mut H, term: &Term, slot: u64) -> simba_core::OpId {
    h.engine
        .claim_slot(h.now, &name("job"), term.token, slot)
        .unwrap();
    h.drain();
    take_claim(h)
}

/// The backend's answer to the claim `op`.
fn claim_answered(
    h: &mut H,
    op: simba_core::OpId,
    result: Result<SlotClaim, BackendError>,
) -> Vec<Output> {
    h.input(Input::SlotClaimed { op, result })
}

#[test]
fn s11_1_a_claim_carries_the_current_terms_token_and_session() {
    let (mut h, term) = elected();
    h.engine
        .claim_slot(h.now, &name("job"), term.token, 1_000)
        .unwrap();
    let out = h.drain();
    assert_eq!(claims(&out), vec![(name("job"), tok(7), 1_000)]);
    let session = match h.pending.last() {
        Some(Command::ClaimSlot { session, .. }) => *session,
        other => panic!("no claim: {other:?}"),
    };
    assert_eq!(session, term.session);
}

#[test]
fn s11_1_claimed_on_a_valid_term_runs() {
    let (mut h, term) = elected();
    let op = claim(&mut h, &term, 1_000);
    let out = claim_answered(&mut h, op, Ok(SlotClaim::Claimed));
    assert_eq!(answers(&out), vec![(1_000, Ok(SlotClaim::Claimed), true)]);
}

#[test]
fn s11_1_already_claimed_and_not_holder_do_not_run() {
    let (mut h, term) = elected();
    for (slot, answer) in [
        (1_000, SlotClaim::AlreadyClaimed { last: 2_000 }),
        (3_000, SlotClaim::NotHolder),
    ] {
        let op = claim(&mut h, &term, slot);
        let out = claim_answered(&mut h, op, Ok(answer));
        assert_eq!(answers(&out), vec![(slot, Ok(answer), false)]);
    }
}

#[test]
fn s11_1_a_claim_answered_after_the_term_ended_does_not_run() {
    let (mut h, term) = elected();
    let op = claim(&mut h, &term, 1_000);
    // The term ends (stop) before the answer comes.
    h.engine.stop(h.now, &name("job")).unwrap();
    h.drain();
    let out = claim_answered(&mut h, op, Ok(SlotClaim::Claimed));
    assert_eq!(answers(&out), vec![(1_000, Ok(SlotClaim::Claimed), false)]);
}

#[test]
fn s11_1_a_claim_answered_after_the_deadline_does_not_run() {
    let (mut h, term) = elected();
    let op = claim(&mut h, &term, 1_000);
    // No renewal answered: the deadline passes (the claim times out first).
    let d = h.deadline();
    let out = h.advance(d - h.now + ms(1));
    let timed_out = answers(&out);
    assert_eq!(timed_out.len(), 1, "the claim timed out: {out:?}");
    assert!(!timed_out[0].2);
    // The late answer is stale: nothing more.
    let out = claim_answered(&mut h, op, Ok(SlotClaim::Claimed));
    assert!(answers(&out).is_empty(), "{out:?}");
}

#[test]
fn s11_1_no_claim_without_a_valid_term_of_that_token() {
    let mut h = H::live(fast_config());
    assert!(matches!(
        h.engine.claim_slot(h.now, &name("job"), tok(1), 1),
        Err(ApiError::NotStarted(_))
    ));
    let term = h.elect("job", 7, true);
    assert!(matches!(
        h.engine.claim_slot(h.now, &name("job"), tok(6), 1),
        Err(ApiError::NoValidTerm(_))
    ));
    h.engine.stop(h.now, &name("job")).unwrap();
    h.drain();
    assert!(h
        .engine
        .claim_slot(h.now, &name("job"), term.token, 1)
        .is_err());
    assert!(claims(&h.drain()).is_empty());
}

#[test]
fn s11_1_a_failed_or_lost_claim_is_answered_once_and_never_runs() {
    let (mut h, term) = elected();
    let op = claim(&mut h, &term, 1_000);
    let error = BackendError::new(BackendErrorKind::Unavailable, "down");
    let out = claim_answered(&mut h, op, Err(error.clone()));
    assert_eq!(answers(&out), vec![(1_000, Err(error), false)]);
    // A duplicate of the same reply is stale.
    let out = claim_answered(&mut h, op, Ok(SlotClaim::Claimed));
    assert!(answers(&out).is_empty());
    // S2.4: a claim nobody answers times out after the renewal period.
    h.engine
        .claim_slot(h.now, &name("job"), term.token, 2_000)
        .unwrap();
    h.drain();
    let timeout = h.engine.call_timeout();
    let out = h.advance(timeout - ms(1));
    assert!(answers(&out).is_empty());
    let out = h.advance(ms(2));
    let a = answers(&out);
    assert_eq!(a.len(), 1, "{out:?}");
    assert!(matches!(&a[0].1, Err(e) if e.kind == BackendErrorKind::Timeout));
    assert!(!a[0].2);
}
