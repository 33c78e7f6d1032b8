//! Deliberately broken variants of the engine (feature `mutants`), so the
//! simulation can prove that each of its checkers fires. Never enable the
//! feature in production: with it off, none of this code exists.

use std::fmt;

/// One deliberate bug, selected at run time with
/// [`SimbaConfigBuilder::mutant`](crate::SimbaConfigBuilder::mutant).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Mutant {
    /// The `× (1 − drift)` factor of S2.1 is left out.
    IgnoreDrift,
    /// The `− margin` term of S2.1 is left out.
    IgnoreMargin,
    /// The deadline is counted from the reply's arrival instead of the send (S2.1).
    DeadlineFromArrival,
    /// A renewal reply arriving after the deadline still extends it (S2.3).
    LateReplyExtends,
    /// An acquire reply arriving after the deadline still makes a term (S4.3).
    AcceptLateAcquire,
    /// A won token not above one this session released still makes a term (S4.3).
    SkipReleasedTokenCheck,
    /// The lease is released before the term is revoked and its task has exited (S3.5, S6.1).
    ReleaseBeforeRevoke,
    /// A reply to an abandoned attempt is accepted as the current one (S4.3).
    AcceptAbandonedAttempts,
    /// `stop()` and `step_down()` never complete: their [`Event::Completed`](crate::Event::Completed) is dropped (S7.3).
    ForgetCompletion,
    /// A leader task that panics leaves its term held, with nothing running (S6.5).
    KeepTermAfterPanic,
    /// A renewal reply that no longer lists a held lease leaves its term
    /// held instead of revoking it as `TakenOver` (S3.4).
    IgnoreTakenOver,
    /// A renewal call never times out: a stuck one holds the single renewal
    /// slot until the session's deadline passes (S2.4).
    RenewNeverTimesOut,
    /// A candidate sends a new acquire while its previous attempt is still
    /// in flight, abandoning it early (S4.1).
    AcquireWhileInFlight,
    /// A candidate times its next attempt after a `Held` reply by the
    /// *earliest* instant the backend could have expired the holder (the
    /// S2.1 formula, `sent_at + holder_remaining × (1 − drift) − margin`)
    /// instead of the latest (S4.4): not unsafe (the backend refuses), but a
    /// wasted call before the holder's expiry.
    RetryBeforeExpiry,
    /// A group member targets every partition instead of its fair share
    /// (S10.2): members fight over partitions and never balance.
    GroupIgnoresShare,
    /// A group member computes its target from the membership alone (the
    /// stateless rule of [`assign_partitions`](crate::assign_partitions)),
    /// not from what it holds: balanced, but a membership change moves
    /// partitions between members who stay (S10.2).
    GroupNotSticky,
    /// A partition moving away is released at once, while its task still
    /// runs: the new owner's task starts before the old one's has stopped
    /// (S10.3, S6.1).
    PartitionSkipsHandover,
}

impl Mutant {
    /// Every mutant.
    pub const ALL: [Mutant; 17] = [
        Mutant::IgnoreDrift,
        Mutant::IgnoreMargin,
        Mutant::DeadlineFromArrival,
        Mutant::LateReplyExtends,
        Mutant::AcceptLateAcquire,
        Mutant::SkipReleasedTokenCheck,
        Mutant::ReleaseBeforeRevoke,
        Mutant::AcceptAbandonedAttempts,
        Mutant::ForgetCompletion,
        Mutant::KeepTermAfterPanic,
        Mutant::IgnoreTakenOver,
        Mutant::RenewNeverTimesOut,
        Mutant::AcquireWhileInFlight,
        Mutant::RetryBeforeExpiry,
        Mutant::GroupIgnoresShare,
        Mutant::PartitionSkipsHandover,
        Mutant::GroupNotSticky,
    ];

    /// The mutant's command-line name.
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
            Mutant::ForgetCompletion => "forget-completion",
            Mutant::KeepTermAfterPanic => "keep-term-after-panic",
            Mutant::IgnoreTakenOver => "ignore-taken-over",
            Mutant::RenewNeverTimesOut => "renew-never-times-out",
            Mutant::AcquireWhileInFlight => "acquire-while-in-flight",
            Mutant::RetryBeforeExpiry => "retry-before-expiry",
            Mutant::GroupIgnoresShare => "group-ignores-share",
            Mutant::PartitionSkipsHandover => "partition-skips-handover",
            Mutant::GroupNotSticky => "group-not-sticky",
        }
    }

    /// The mutant of that name.
    pub fn from_name(name: &str) -> Option<Mutant> {
        Mutant::ALL.into_iter().find(|m| m.name() == name)
    }
}

impl fmt::Display for Mutant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
