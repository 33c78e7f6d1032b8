//! A checker that never fired proves nothing: every deliberately broken core
//! (simba-core's `mutants` feature, every entry of `Mutant::ALL`) is caught
//! by the default campaign, `simulation --mutant NAME --seeds 1000`, within
//! seeds 0–999: each seed draws its own swarm of workloads and faults, and
//! those a mutant needs (a task that panics, a lease removed from outside,
//! a group) are among them. The seeds each one needed are printed
//! (`--nocapture`); `docs/FAULTS.md` has how many of seeds 0–999 catch each.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use simulation::core_api::Mutant;
use simulation::runner::hunt;
use simulation::Mode;

/// The checker family (prefixes of checker names) the rule each mutant
/// breaks belongs to. The match is exhaustive: a new mutant does not
/// compile until it is listed here, and then its test below must exist.
fn checkers(m: Mutant) -> &'static [&'static str] {
    match m {
        Mutant::IgnoreDrift | Mutant::IgnoreMargin | Mutant::DeadlineFromArrival => {
            &["mutual exclusion"]
        }
        Mutant::LateReplyExtends => &["deadline"],
        Mutant::AcceptLateAcquire => &["late acquire"],
        Mutant::SkipReleasedTokenCheck => &["fencing"],
        // In a run with batches (S4.7) the release travels after the
        // instant's events, so the order checker sees the revocation first;
        // it is still sent while the interrupted task runs.
        Mutant::ReleaseBeforeRevoke => &["revoke before release", "handover order (S6.1)"],
        // Taking a late reply to an abandoned attempt for the current one
        // also consumes the current attempt's slot while it is still in
        // flight, so the next attempt goes out beside it: the mutant breaks
        // S4.1 as directly as S3.2, and either checker may see it first.
        Mutant::AcceptAbandonedAttempts => &["fencing", "one attempt in flight (S4.1)"],
        // stop()/step_down() futures that never resolve: the election stays
        // "stepping down" or "stopping" in the checker's model of the API.
        Mutant::ForgetCompletion => &["completions (S7.3)", "callbacks (S7.3, S6.4)"],
        Mutant::KeepTermAfterPanic => &["task-exit policy (S6.5)"],
        Mutant::IgnoreTakenOver => &["taken over (S3.4)"],
        Mutant::RenewNeverTimesOut => &["renewal timeout (S2.4)"],
        Mutant::AcquireWhileInFlight => &["one attempt in flight (S4.1)"],
        Mutant::RetryBeforeExpiry => &["expiry timing (S4.4)"],
        Mutant::GroupIgnoresShare => &["group balance (S10.4)"],
        Mutant::GroupNotSticky => &["group stickiness (S10.2)"],
        Mutant::PartitionSkipsHandover => &["handover order (S6.1)"],
    }
}

/// `m` is caught by the default campaign within seeds 0–999, and the first
/// violation comes from the checker family its rule belongs to: a mutant
/// caught by some unrelated checker proves nothing about the checker meant
/// for it.
fn caught(m: Mutant) {
    let Some((seed, v)) = hunt(Mode::Default, Some(m), 0, 1_000) else {
        panic!("mutant {} not caught within 1000 seeds", m.name());
    };
    println!(
        "caught {} at seed {seed} ({} seeds): {v}\n  swarm: {}",
        m.name(),
        seed + 1,
        simulation::draw(seed, Mode::Default, Some(m)).swarm()
    );
    let family = checkers(m);
    assert!(
        family.iter().any(|c| v.checker.starts_with(c)),
        "{} caught by an unexpected checker: {v}",
        m.name()
    );
}

#[test]
fn ignore_drift_breaks_mutual_exclusion_s2_1() {
    caught(Mutant::IgnoreDrift);
}

#[test]
fn ignore_margin_breaks_mutual_exclusion_s2_1() {
    caught(Mutant::IgnoreMargin);
}

#[test]
fn deadline_from_arrival_breaks_mutual_exclusion_s2_1() {
    caught(Mutant::DeadlineFromArrival);
}

#[test]
fn late_reply_extending_a_passed_deadline_is_caught_s2_3() {
    caught(Mutant::LateReplyExtends);
}

#[test]
fn late_acquire_accepted_is_caught_s4_3() {
    caught(Mutant::AcceptLateAcquire);
}

#[test]
fn released_token_check_skipped_is_caught_s4_3() {
    caught(Mutant::SkipReleasedTokenCheck);
}

#[test]
fn release_before_revoke_is_caught_s3_5_s6_1() {
    caught(Mutant::ReleaseBeforeRevoke);
}

#[test]
fn abandoned_attempt_replies_accepted_are_caught_s4_3() {
    caught(Mutant::AcceptAbandonedAttempts);
}

#[test]
fn a_renewal_that_never_times_out_is_caught_s2_4() {
    caught(Mutant::RenewNeverTimesOut);
}

#[test]
fn a_second_acquire_in_flight_is_caught_s4_1() {
    caught(Mutant::AcquireWhileInFlight);
}

#[test]
fn forgotten_completions_are_caught_s7_3() {
    caught(Mutant::ForgetCompletion);
}

/// `RetryBeforeExpiry` (S4.4) is not a safety bug (the backend refuses an
/// early attempt), but it wastes a call, and the expiry-timing checker runs
/// in every seed run whose faults keep clocks within the drift bound. The
/// crash scenario of `crash_failover_at_expiry.rs` catches it too.
#[test]
fn retry_before_expiry_is_caught_s4_4() {
    caught(Mutant::RetryBeforeExpiry);
}

/// `KeepTermAfterPanic` (S6.5) needs a leader task that panics: the swarm
/// has tasks ending on their own (returning, failing or panicking) in
/// about a third of the seeds. `task_exit_policy.rs` catches it in a
/// hand-built scenario too.
#[test]
fn keeping_the_term_after_a_panic_is_caught_s6_5() {
    caught(Mutant::KeepTermAfterPanic);
}

/// `IgnoreTakenOver` (S3.4) keeps a term whose lease the renewal reply no
/// longer lists: it needs a lease removed from a live holder from outside,
/// a fault of the swarm in about 30% of the seeds, and is caught by the
/// S3.4 checker alone (mutual exclusion's exception covers the holder only
/// until that renewal's reply, the point where this checker judges).
#[test]
fn ignoring_a_lease_taken_away_is_caught_s3_4() {
    caught(Mutant::IgnoreTakenOver);
}

/// The group mutants (S10) need a group: the swarm has one, of 1 to 12
/// partitions, in about 30% of the seeds. `groups.rs` catches them in the
/// group workload too.
#[test]
fn group_ignoring_its_share_is_caught_s10_4() {
    caught(Mutant::GroupIgnoresShare);
}

/// `GroupNotSticky` (the assignment of the membership alone) gives up
/// partitions a member holds within its share when the membership changes.
#[test]
fn group_not_sticky_is_caught_s10_2() {
    caught(Mutant::GroupNotSticky);
}

#[test]
fn partition_skipping_the_handover_is_caught_s10_3() {
    caught(Mutant::PartitionSkipsHandover);
}

/// Every mutant has a checker family: the exhaustive match of [`checkers`]
/// does not compile until a new mutant is listed, and then it needs its
/// test above.
#[test]
fn every_mutant_has_a_checker_family() {
    for m in Mutant::ALL {
        assert!(!checkers(m).is_empty(), "{}", m.name());
    }
}
