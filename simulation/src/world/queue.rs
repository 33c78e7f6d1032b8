//! Event scheduling: the world's events in true time, earliest first, ties
//! in the order they were scheduled (so a seed replays exactly).

use super::types::ApiCall;
use simba_core::{Command, Input, LeaseName, TermId, Token};
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// Something that happens at a true instant.
#[derive(Clone, Debug)]
pub(super) enum Ev {
    Timer {
        node: usize,
        gen: u64,
    },
    ToNode {
        node: usize,
        inc: u64,
        input: Input,
    },
    ToBackend {
        node: usize,
        inc: u64,
        cmd: Command,
    },
    BackendExpiry {
        gen: u64,
    },
    Scripted {
        node: usize,
        call: ApiCall,
    },
    Api {
        node: usize,
        inc: u64,
        call: ApiCall,
    },
    TaskWrite {
        node: usize,
        inc: u64,
        term: TermId,
    },
    WriteSend {
        node: usize,
        inc: u64,
        name: LeaseName,
        order: u64,
        token: Token,
    },
    WriteArrives {
        name: LeaseName,
        order: u64,
        token: Token,
    },
    TaskExit {
        node: usize,
        inc: u64,
        term: TermId,
    },
    /// The task of `term` panics on its own (S6.5).
    TaskCrash {
        node: usize,
        inc: u64,
        term: TermId,
    },
    FaultStart(usize),
    FaultEnd(usize),
    Resume {
        node: usize,
        inc: u64,
    },
    Unpartition {
        node: usize,
    },
    Restart {
        node: usize,
        inc: u64,
    },
    Heal,
    End,
}

impl Ev {
    /// The event's kind, as the trace hash counts it.
    pub(super) fn code(&self) -> u64 {
        match self {
            Ev::Timer { .. } => 1,
            Ev::ToNode { .. } => 2,
            Ev::ToBackend { .. } => 3,
            Ev::BackendExpiry { .. } => 4,
            Ev::Api { .. } => 5,
            Ev::TaskWrite { .. } => 6,
            Ev::WriteSend { .. } => 7,
            Ev::WriteArrives { .. } => 8,
            Ev::TaskExit { .. } => 9,
            Ev::TaskCrash { .. } => 18,
            Ev::FaultStart(_) => 10,
            Ev::FaultEnd(_) => 11,
            Ev::Resume { .. } => 12,
            Ev::Unpartition { .. } => 17,
            Ev::Restart { .. } => 13,
            Ev::Heal => 14,
            Ev::Scripted { .. } => 16,
            Ev::End => 15,
        }
    }

    /// The node whose process must run to handle this event, if any.
    pub(super) fn process_node(&self) -> Option<usize> {
        match self {
            Ev::Timer { node, .. }
            | Ev::ToNode { node, .. }
            | Ev::Api { node, .. }
            | Ev::TaskWrite { node, .. }
            | Ev::WriteSend { node, .. }
            | Ev::TaskExit { node, .. }
            | Ev::TaskCrash { node, .. }
            | Ev::Scripted { node, .. } => Some(*node),
            _ => None,
        }
    }
}

struct Entry {
    at: u64,
    seq: u64,
    ev: Ev,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    fn cmp(&self, other: &Self) -> Ordering {
        // Min-heap on (time, sequence).
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

/// The event queue and the true time.
#[derive(Default)]
pub(super) struct Queue {
    /// True time, ns: the instant of the event being handled.
    pub(super) now: u64,
    seq: u64,
    heap: BinaryHeap<Entry>,
}

impl Queue {
    /// Schedules `ev` at true time `at` (not before now).
    pub(super) fn push(&mut self, at: u64, ev: Ev) {
        self.seq += 1;
        self.heap.push(Entry {
            at: at.max(self.now),
            seq: self.seq,
            ev,
        });
    }

    /// The earliest event; true time moves to its instant.
    pub(super) fn pop(&mut self) -> Option<(u64, Ev)> {
        let Entry { at, ev, .. } = self.heap.pop()?;
        self.now = at;
        Some((at, ev))
    }
}
