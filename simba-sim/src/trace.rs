//! The event trace of one run: what happened, when, on which node. Its hash
//! is the determinism check; its tail per node is the failure's timeline.

use std::fmt::Write as _;
use std::time::Duration;

/// One event of a run's trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// Simulated time since the start of the run.
    pub at: Duration,
    /// The node it happened on (`None`: the backend or the fault injector).
    pub node: Option<usize>,
    /// What happened.
    pub text: String,
}

impl std::fmt::Display for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let who = match self.node {
            Some(n) => format!("node {n}"),
            None => "world".to_owned(),
        };
        write!(
            f,
            "{:>10.3}s  {who:<7}  {}",
            self.at.as_secs_f64(),
            self.text
        )
    }
}

#[derive(Default)]
pub(crate) struct Trace {
    pub(crate) events: Vec<Event>,
    hash: u64,
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

fn fnv(mut h: u64, bytes: &[u8]) -> u64 {
    if h == 0 {
        h = FNV_OFFSET;
    }
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(FNV_PRIME);
    }
    h
}

impl Trace {
    pub(crate) fn record(&mut self, at: Duration, node: Option<usize>, text: String) {
        let mut h = fnv(self.hash, &at.as_nanos().to_le_bytes());
        h = fnv(h, &node.map_or(u64::MAX, |n| n as u64).to_le_bytes());
        h = fnv(h, text.as_bytes());
        self.hash = h;
        self.events.push(Event { at, node, text });
    }

    pub(crate) fn hash(&self) -> u64 {
        self.hash
    }

    /// The last `per_node` events of each node and of the world, merged in
    /// time order.
    pub(crate) fn timeline(&self, nodes: usize, per_node: usize) -> String {
        let mut keep = vec![false; self.events.len()];
        for who in (0..nodes).map(Some).chain(std::iter::once(None)) {
            let mut left = per_node;
            for (i, e) in self.events.iter().enumerate().rev() {
                if left == 0 {
                    break;
                }
                if e.node == who {
                    keep[i] = true;
                    left -= 1;
                }
            }
        }
        let mut out = String::new();
        for (e, _) in self.events.iter().zip(keep).filter(|(_, k)| *k) {
            let _ = writeln!(out, "  {e}");
        }
        out
    }
}
