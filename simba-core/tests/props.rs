//! Property tests: arbitrary input streams never make the engine panic or
//! break its invariants (S2.3, S3.2, S3.5, S4.1, S4.3, S6.1, S7.1, S7.7).
//!
//! Each case drives one engine with 1–150 actions: API calls on three names
//! (elections and locks with every `LockWait`), replies to pending commands
//! (truthful from a model backend, or errors, `Expired`, `Held`, `Won` with
//! fresh, repeated, stale or arbitrary tokens and durations), duplicated,
//! dropped and reordered replies, replies with unknown op ids, release
//! broadcasts, task exits and refused `Elected`s for real or made-up terms,
//! and the clock moving forward, standing still and going backwards. After
//! every step the harness in `fuzz/harness.rs` (shared with the fuzz target)
//! checks the invariants; at the end it closes the client and checks that
//! every term was revoked exactly once.
//!
//! `PROPTEST_CASES` overrides the case count (10,000 by default).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "../fuzz/harness.rs"]
mod harness;

use harness::{Action, Answer, Remaining, Setup, TermPick, TimeMove, TokenPick, Wait};
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;

fn setup() -> impl Strategy<Value = Setup> {
    (
        0u8..3,
        any::<bool>(),
        any::<u64>(),
        prop::option::of(1usize..3),
    )
        .prop_map(|(config, zookeeper, seed, call_slots)| Setup {
            config,
            zookeeper,
            seed,
            mutant: 0,
            call_slots,
        })
}

fn token_pick() -> impl Strategy<Value = TokenPick> {
    prop_oneof![
        3 => Just(TokenPick::Fresh),
        2 => Just(TokenPick::Current),
        2 => (1u8..4).prop_map(TokenPick::Stale),
        1 => any::<u64>().prop_map(TokenPick::Raw),
    ]
}

fn remaining() -> impl Strategy<Value = Remaining> {
    prop_oneof![
        4 => Just(Remaining::Lease),
        1 => Just(Remaining::Zero),
        2 => (0u32..30_000).prop_map(Remaining::Millis),
        1 => Just(Remaining::Huge),
    ]
}

fn answer() -> impl Strategy<Value = Answer> {
    prop_oneof![
        16 => Just(Answer::Truthful),
        2 => Just(Answer::Fail),
        1 => Just(Answer::Expired),
        1 => Just(Answer::Held),
        2 => (token_pick(), remaining()).prop_map(|(t, r)| Answer::Won(t, r)),
    ]
}

fn term_pick() -> impl Strategy<Value = TermPick> {
    prop_oneof![
        4 => any::<u16>().prop_map(TermPick::Seen),
        1 => (0u64..20).prop_map(TermPick::Raw),
    ]
}

fn time_move() -> impl Strategy<Value = TimeMove> {
    prop_oneof![
        4 => (0u32..3_000).prop_map(TimeMove::Forward),
        1 => (0u32..60_000).prop_map(TimeMove::Forward),
        1 => Just(TimeMove::Still),
        1 => (0u32..5_000).prop_map(TimeMove::Back),
        3 => Just(TimeMove::ToTimeout),
        2 => (0u32..20_000).prop_map(TimeMove::Silent),
    ]
}

fn wait() -> impl Strategy<Value = Option<Wait>> {
    prop_oneof![
        3 => Just(None),
        1 => Just(Some(Wait::Try)),
        1 => (0u32..20_000).prop_map(|ms| Some(Wait::UntilMs(ms))),
        1 => Just(Some(Wait::Forever)),
    ]
}

fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        6 => (any::<u8>(), wait(), any::<bool>())
            .prop_map(|(name, lock, runs_task)| Action::Start { name, lock, runs_task }),
        1 => any::<u8>().prop_map(Action::Stop),
        1 => (any::<u8>(), 0u32..10_000).prop_map(|(n, ms)| Action::StepDown(n, ms)),
        1 => Just(Action::Close),
        30 => (any::<u16>(), answer(), prop::bool::weighted(0.1))
            .prop_map(|(pick, answer, keep)| Action::Reply { pick, answer, keep }),
        2 => any::<u16>().prop_map(Action::Drop),
        2 => any::<u16>().prop_map(Action::Replay),
        1 => (any::<u8>(), 0u64..64, answer())
            .prop_map(|(kind, op, answer)| Action::Unknown { kind, op, answer }),
        2 => (any::<u8>(), any::<bool>()).prop_map(|(name, leave)| Action::Rival { name, leave }),
        1 => any::<u8>().prop_map(Action::Broadcast),
        3 => (term_pick(), any::<u8>()).prop_map(|(t, o)| Action::TaskExited(t, o)),
        1 => term_pick().prop_map(Action::ElectedRejected),
        1 => Just(Action::RejectNextElected),
        12 => time_move().prop_map(Action::Time),
    ]
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "proptest-regressions/props.txt",
        ))),
        max_shrink_iters: 100_000,
        ..ProptestConfig::default()
    })]

    /// Never panics; after every step: Elected/Revoked pair up (S7.1, S7.7),
    /// tokens strictly increase (S3.2), terms come only from the current
    /// attempt, before the deadline, above released tokens (S4.3), no term
    /// outlives its deadline (S2.3), one acquire in flight (S4.1), releases
    /// follow revokes and task exits (S3.5, S6.1).
    #[test]
    fn engine_invariants_hold_over_arbitrary_input_streams(
        setup in setup(),
        actions in prop::collection::vec(action(), 1..160),
    ) {
        if harness::run(&setup, &actions).is_err() {
            // Run it again with a trace of every input and output.
            let e = harness::run_traced(&setup, &actions).unwrap_err();
            prop_assert!(false, "{}", e);
        }
    }
}

/// The streams are interesting: a fixed honest run creates and revokes terms.
#[test]
fn a_truthful_stream_elects_and_revokes() {
    let setup = plain_setup(1);
    let reply = Action::Reply {
        pick: 0,
        answer: Answer::Truthful,
        keep: false,
    };
    let mut actions = vec![reply.clone(), start(0, true), reply.clone()];
    for _ in 0..10 {
        actions.push(Action::Time(TimeMove::ToTimeout));
        actions.push(reply.clone());
    }
    actions.push(Action::StepDown(0, 1000));
    actions.push(Action::TaskExited(TermPick::Seen(0), 0));
    let stats = harness::run(&setup, &actions).unwrap();
    assert!(stats.elected >= 1, "{stats:?}");
    assert_eq!(stats.elected, stats.revoked + stats.rejected, "{stats:?}");
}

/// The generated streams stay interesting: most create terms, many revoke
/// them for several reasons, and some refuse them (S7.7).
#[test]
fn generated_streams_create_and_end_terms() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let strategy = (setup(), prop::collection::vec(action(), 1..160));
    let (mut cases, mut with_terms) = (0u32, 0u32);
    let mut total = harness::HarnessStats::default();
    for _ in 0..500 {
        let (setup, actions) = strategy.new_tree(&mut runner).unwrap().current();
        let stats = harness::run(&setup, &actions).unwrap();
        cases += 1;
        with_terms += u32::from(stats.elected > 0);
        total.elected += stats.elected;
        total.revoked += stats.revoked;
        total.rejected += stats.rejected;
        total.steps += stats.steps;
    }
    eprintln!("{cases} cases, {with_terms} with terms: {total:?}");
    assert!(
        with_terms * 2 > cases,
        "{with_terms} of {cases} cases made a term"
    );
    assert_eq!(total.elected, total.revoked + total.rejected);
    assert!(total.rejected > 0);
}

/// The first config, no ZooKeeper, no mutant, no call limit, `seed`.
const fn plain_setup(seed: u64) -> Setup {
    Setup {
        config: 0,
        zookeeper: false,
        seed,
        mutant: 0,
        call_slots: None,
    }
}

/// Starts an election (no lock) on the name numbered `name`.
const fn start(name: u8, runs_task: bool) -> Action {
    Action::Start {
        name,
        lock: None,
        runs_task,
    }
}

const fn reply(answer: Answer) -> Action {
    Action::Reply {
        pick: 0,
        answer,
        keep: false,
    }
}

/// Found by the property test: a renewal that no longer lists a lease ends
/// its term (`TakenOver`); the backend then answers the next acquire with
/// the same token. That must not become a second term with an equal token
/// (S3.2, S4.3).
#[test]
fn regression_taken_over_token_is_not_reused() {
    let setup = plain_setup(0);
    let actions = [
        reply(Answer::Held), // the session opens
        start(0, false),
        reply(Answer::Truthful), // won with token 1
        Action::Time(TimeMove::ToTimeout),
        reply(Answer::Held),     // the renewal lists nothing: TakenOver
        reply(Answer::Truthful), // the backend still says "yours, token 1"
        Action::Time(TimeMove::ToTimeout),
        reply(Answer::Truthful),
        reply(Answer::Truthful),
    ];
    harness::run_traced(&setup, &actions).unwrap();
}

/// Found by the property test: `step_down` with a cooldown shorter than
/// the task's exit left a due timer that never moved (ERROR diagnostic
/// "a deadline did not move past now").
#[test]
fn regression_cooldown_ending_during_handover_does_not_spin() {
    let setup = plain_setup(0);
    let actions = [
        start(2, true),
        reply(Answer::Truthful), // the session opens
        reply(Answer::Truthful), // won
        Action::StepDown(2, 0),
        Action::Time(TimeMove::Forward(10)),
        Action::TaskExited(TermPick::Seen(0), 0),
        Action::Time(TimeMove::ToTimeout),
    ];
    harness::run_traced(&setup, &actions).unwrap();
}

/// A checker that never fired proves nothing: with each deliberately broken
/// engine, some generated stream fails the checks.
/// `cargo test -p simba-core --features mutants --test props`
#[cfg(feature = "mutants")]
#[test]
fn the_checks_catch_the_safety_mutants() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    use simba_core::Mutant;
    // All the safety mutants: the drift, margin and arrival-time ones break
    // the S2.1 bound on every new deadline. `ForgetCompletion` is a liveness
    // bug of the API futures, which the simulation's completion checks catch.
    // These checks do not judge how long a renewal stays in flight
    // (`RenewNeverTimesOut`, S2.4, a liveness bug): rules.rs
    // `s2_4_mutant_renew_never_times_out_is_caught` and the simulation's
    // `renewal timeout (S2.4)` checker catch it. Nor do they
    // judge when a candidate retries (`RetryBeforeExpiry`, S4.4, an
    // efficiency bug): the simulation's `expiry timing (S4.4)` checker and
    // rules.rs `s4_4_mutant_retry_before_expiry_is_caught` catch it. The group
    // mutants need a group of several members: groups.rs
    // `s10_3_mutant_partition_skips_handover_is_caught` and
    // `s10_4_mutant_group_ignores_share_is_caught` and
    // `s10_2_mutant_group_not_sticky_is_caught` catch them.
    for (i, mutant) in Mutant::ALL.iter().enumerate() {
        if matches!(
            *mutant,
            Mutant::ForgetCompletion
                | Mutant::RenewNeverTimesOut
                | Mutant::RetryBeforeExpiry
                | Mutant::GroupIgnoresShare
                | Mutant::GroupNotSticky
                | Mutant::PartitionSkipsHandover
        ) {
            continue;
        }
        let mut runner = TestRunner::deterministic();
        let strategy = (setup(), prop::collection::vec(action(), 1..160));
        let caught = (0..20_000).find_map(|case| {
            let (mut setup, actions) = strategy.new_tree(&mut runner).unwrap().current();
            setup.mutant = u8::try_from(i + 1).unwrap();
            // Each mutant's check judges the output stream in order; waiting
            // for a slot (S4.6) reorders it (a release that waited may come
            // after the term a mutant wrongly made of its token).
            setup.call_slots = None;
            harness::run(&setup, &actions)
                .err()
                .map(|e| (case, e.lines().next().unwrap_or_default().to_owned()))
        });
        eprintln!("{mutant}: {caught:?}");
        assert!(caught.is_some(), "{mutant} was not caught");
        // Narrowly: by the check of the rule the mutant breaks, not by
        // whatever check happens to fail first.
        let expected = match *mutant {
            Mutant::IgnoreDrift | Mutant::IgnoreMargin | Mutant::DeadlineFromArrival => {
                "later than S2.1 allows"
            }
            Mutant::LateReplyExtends => "had passed, yet moved to",
            Mutant::AcceptLateAcquire => "created at or after the deadline",
            Mutant::SkipReleasedTokenCheck => "released by its session (S4.3)",
            Mutant::ReleaseBeforeRevoke => "before its revoke (S3.5)",
            Mutant::AcceptAbandonedAttempts => "other than the reply to its current attempt (S4.3)",
            Mutant::KeepTermAfterPanic => "is still held (S6.5)",
            Mutant::AcquireWhileInFlight => "still in flight (S4.1)",
            // A renewal reply that does not list a held term (`Answer::Held`
            // to a renewal) must end it; the simulation's `taken over (S3.4)`
            // checker catches it too (`--mode lease-removed`).
            Mutant::IgnoreTakenOver => "no longer lists it (S3.4 TakenOver)",
            other => panic!("no expected check named for {other}: add one"),
        };
        let first = caught.map(|(_, e)| e).unwrap_or_default();
        assert!(
            first.contains(expected),
            "{mutant} caught by another check than {expected:?}: {first}"
        );
    }
}

/// Found by the property test: an API call that fails (here `AlreadyStarted`)
/// at a `now` past a due deadline returned without running it, so
/// `poll_timeout()` was not after `now`.
#[test]
fn regression_failed_api_call_still_runs_due_deadlines() {
    let setup = plain_setup(0);
    let start = start(1, false);
    let actions = [
        start.clone(),
        Action::Time(TimeMove::Silent(5000)), // the open call times out now
        start,                                // AlreadyStarted
        Action::Stop(2),                      // NotStarted
        Action::Time(TimeMove::Silent(5000)),
        Action::StepDown(2, 0), // NotStarted
    ];
    harness::run_traced(&setup, &actions).unwrap();
}
