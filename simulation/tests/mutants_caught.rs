//! A checker that never fired proves nothing: every deliberately broken core
//! (simba-core's `mutants` feature) is caught within 1,000 seeds, starting
//! from seed 0, of the default mode, or of the mode whose faults reach its
//! rule (`lease-removed` for S3.4). The seeds each one needed are printed
//! (`--nocapture`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use simulation::core_api::Mutant;
use simulation::runner::hunt;
use simulation::Mode;

/// `m` is caught, and the first violation comes from the one checker
/// family (`checkers` lists prefixes of its names) that the mutant's rule
/// belongs to: a mutant caught by some unrelated checker proves nothing
/// about the checker meant for it.
fn caught(m: Mutant, checkers: &[&str]) {
    caught_in(Mode::Default, m, checkers);
}

/// [`caught`], in the runs of `mode`.
fn caught_in(mode: Mode, m: Mutant, checkers: &[&str]) {
    let Some((seed, v)) = hunt(mode, Some(m), 0, 1_000) else {
        panic!("mutant {} not caught within 1000 seeds", m.name());
    };
    println!(
        "caught {} at seed {seed} ({} seeds): {v}",
        m.name(),
        seed + 1
    );
    assert!(
        checkers.iter().any(|c| v.checker.starts_with(c)),
        "{} caught by an unexpected checker: {v}",
        m.name()
    );
}

#[test]
fn ignore_drift_breaks_mutual_exclusion_s2_1() {
    caught(Mutant::IgnoreDrift, &["mutual exclusion"]);
}

#[test]
fn ignore_margin_breaks_mutual_exclusion_s2_1() {
    caught(Mutant::IgnoreMargin, &["mutual exclusion"]);
}

#[test]
fn deadline_from_arrival_breaks_mutual_exclusion_s2_1() {
    caught(Mutant::DeadlineFromArrival, &["mutual exclusion"]);
}

#[test]
fn late_reply_extending_a_passed_deadline_is_caught_s2_3() {
    caught(Mutant::LateReplyExtends, &["deadline"]);
}

#[test]
fn late_acquire_accepted_is_caught_s4_3() {
    caught(Mutant::AcceptLateAcquire, &["late acquire"]);
}

#[test]
fn released_token_check_skipped_is_caught_s4_3() {
    caught(Mutant::SkipReleasedTokenCheck, &["fencing"]);
}

#[test]
fn release_before_revoke_is_caught_s3_5_s6_1() {
    caught(Mutant::ReleaseBeforeRevoke, &["revoke before release"]);
}

#[test]
fn abandoned_attempt_replies_accepted_are_caught_s4_3() {
    // Taking a late reply to an abandoned attempt for the current one also
    // consumes the current attempt's slot while it is still in flight, so
    // the next attempt goes out beside it: the mutant breaks S4.1 as
    // directly as S3.2, and either checker may see it first.
    caught(
        Mutant::AcceptAbandonedAttempts,
        &["fencing", "one attempt in flight (S4.1)"],
    );
}

#[test]
fn a_renewal_that_never_times_out_is_caught_s2_4() {
    caught(Mutant::RenewNeverTimesOut, &["renewal timeout (S2.4)"]);
}

#[test]
fn a_second_acquire_in_flight_is_caught_s4_1() {
    caught(
        Mutant::AcquireWhileInFlight,
        &["one attempt in flight (S4.1)"],
    );
}

#[test]
fn forgotten_completions_are_caught_s7_3() {
    // stop()/step_down() futures that never resolve: the election stays
    // "stepping down" or "stopping" in the checker's model of the API.
    caught(
        Mutant::ForgetCompletion,
        &["completions (S7.3)", "callbacks (S7.3, S6.4)"],
    );
}

/// `RetryBeforeExpiry` (S4.4) is not a safety bug (the backend refuses an
/// early attempt), but it wastes a call, and the expiry-timing checker runs
/// in every seed run whose faults keep clocks within the drift bound. The
/// crash scenario of `crash_failover_at_expiry.rs` catches it too.
#[test]
fn retry_before_expiry_is_caught_s4_4() {
    caught(Mutant::RetryBeforeExpiry, &["expiry timing (S4.4)"]);
}

/// `IgnoreTakenOver` (S3.4) keeps a term whose lease the renewal reply no
/// longer lists. The default faults never take a lease from a live
/// session, so it is hunted in `--mode lease-removed`, where an outside
/// actor removes leases from live holders, and must be caught by the S3.4
/// checker alone (the mode's mutual-exclusion exception covers the holder
/// only until that renewal's reply, the point where this checker judges).
/// `simulation --mode lease-removed --mutant ignore-taken-over --seeds 200
/// --count`: 194 of seeds 0–199, all first by `taken over (S3.4)`.
#[test]
fn ignoring_a_lease_taken_away_is_caught_s3_4() {
    caught_in(
        Mode::LeaseRemoved,
        Mutant::IgnoreTakenOver,
        &["taken over (S3.4)"],
    );
}
