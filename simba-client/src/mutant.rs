//! Deliberately broken variants of the client layer (feature `mutants`), so
//! the client campaign of the `simulation` binary can prove that each of its
//! checkers fires. Never enable the feature in production: with it off, no
//! mutant can be selected and every check below is a constant `false`.

#[cfg(feature = "mutants")]
use std::fmt;

/// One deliberate bug in `simba-client`, selected at run time with
/// [`SimbaBuilder::mutant`](crate::SimbaBuilder::mutant) (the engine's own
/// are [`simba_core::Mutant`], selected on the configuration).
///
/// ```
/// use simba_client::ClientMutant;
/// let m = ClientMutant::from_name("slot-claimed-after-run");
/// assert_eq!(m, Some(ClientMutant::SlotClaimedAfterRun));
/// assert_eq!(ClientMutant::ALL.len(), 4);
/// ```
#[cfg(feature = "mutants")]
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ClientMutant {
    /// On a voluntary hand-over of an election's term, the driver reports
    /// the leader task as exited as soon as it interrupts it, while the task
    /// still runs: the lease is released and the next term's task starts
    /// before the previous one has stopped (S6.1 steps 3–4).
    TaskStartsBeforeStop,
    /// A revocation is not delivered to the term the application holds: its
    /// `revoked()` never resolves, `is_valid()` stays true until the
    /// deadline, and the running task is neither cancelled nor dropped, so
    /// it keeps running past its term (S3.4, S6.1 step 1, S6.3).
    RevocationNotDelivered,
    /// A schedule runs a slot first and claims it afterwards, instead of
    /// claiming before the run (S11.1): a run whose claim then fails, or a
    /// slot another leader runs again, is run twice.
    SlotClaimedAfterRun,
    /// As [`ClientMutant::TaskStartsBeforeStop`], for a group's partition
    /// moving to another member (or left): the new owner's task starts
    /// before the old owner's has stopped (S10.3).
    PartitionStartsBeforeStop,
}

#[cfg(feature = "mutants")]
impl ClientMutant {
    /// Every client mutant.
    pub const ALL: [ClientMutant; 4] = [
        ClientMutant::TaskStartsBeforeStop,
        ClientMutant::RevocationNotDelivered,
        ClientMutant::SlotClaimedAfterRun,
        ClientMutant::PartitionStartsBeforeStop,
    ];

    /// The mutant's command-line name.
    pub fn name(self) -> &'static str {
        match self {
            ClientMutant::TaskStartsBeforeStop => "task-starts-before-stop",
            ClientMutant::RevocationNotDelivered => "revocation-not-delivered",
            ClientMutant::SlotClaimedAfterRun => "slot-claimed-after-run",
            ClientMutant::PartitionStartsBeforeStop => "partition-starts-before-stop",
        }
    }

    /// The mutant of that name.
    pub fn from_name(name: &str) -> Option<ClientMutant> {
        ClientMutant::ALL.into_iter().find(|m| m.name() == name)
    }
}

#[cfg(feature = "mutants")]
impl fmt::Display for ClientMutant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Without the `mutants` feature: the same names, never constructed, so
/// that every check is a constant `false`.
#[cfg(not(feature = "mutants"))]
#[derive(Clone, Copy)]
#[allow(dead_code)]
pub(crate) enum ClientMutant {
    TaskStartsBeforeStop,
    RevocationNotDelivered,
    SlotClaimedAfterRun,
    PartitionStartsBeforeStop,
}

/// The mutant a client runs with, if any.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Selected(#[cfg(feature = "mutants")] pub(crate) Option<ClientMutant>);

impl Selected {
    /// Whether `m` is the selected mutant.
    #[cfg(feature = "mutants")]
    pub(crate) fn is(self, m: ClientMutant) -> bool {
        self.0 == Some(m)
    }

    /// Without the feature: never.
    #[cfg(not(feature = "mutants"))]
    #[inline(always)]
    pub(crate) fn is(self, _m: ClientMutant) -> bool {
        false
    }
}
