//! The timer table: one wake-up time per key, and the earliest of all.

use crate::time::Timestamp;
use std::collections::{BTreeMap, BTreeSet};

/// Wake-up times keyed by `K`; `next()` is the earliest. O(log n) updates.
#[derive(Debug)]
pub(crate) struct Timers<K: Ord + Clone> {
    by_key: BTreeMap<K, Timestamp>,
    queue: BTreeSet<(Timestamp, K)>,
}

impl<K: Ord + Clone> Timers<K> {
    pub(crate) fn new() -> Self {
        Timers {
            by_key: BTreeMap::new(),
            queue: BTreeSet::new(),
        }
    }

    /// Sets (or clears, with `None`) the wake-up time of `key`.
    pub(crate) fn set(&mut self, key: &K, at: Option<Timestamp>) {
        let old = self.by_key.get(key).copied();
        if old == at {
            return;
        }
        if let Some(old) = old {
            self.queue.remove(&(old, key.clone()));
            self.by_key.remove(key);
        }
        if let Some(at) = at {
            self.queue.insert((at, key.clone()));
            self.by_key.insert(key.clone(), at);
        }
    }

    /// The earliest wake-up time.
    pub(crate) fn next(&self) -> Option<Timestamp> {
        self.queue.first().map(|(at, _)| *at)
    }

    /// Whether `key` is due at `now`.
    pub(crate) fn is_due(&self, key: &K, now: Timestamp) -> bool {
        self.by_key.get(key).is_some_and(|at| *at <= now)
    }

    /// The earliest key due at `now`, if any.
    pub(crate) fn first_due(&self, now: Timestamp) -> Option<K> {
        self.queue
            .first()
            .filter(|(at, _)| *at <= now)
            .map(|(_, k)| k.clone())
    }

    /// The keys due at `now`, earliest first.
    pub(crate) fn due(&self, now: Timestamp) -> Vec<K> {
        self.queue
            .iter()
            .take_while(|(at, _)| *at <= now)
            .map(|(_, k)| k.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earliest_first_and_updates_replace() {
        let mut t = Timers::new();
        t.set(&1, Some(Timestamp::from_nanos(30)));
        t.set(&2, Some(Timestamp::from_nanos(10)));
        assert_eq!(t.next(), Some(Timestamp::from_nanos(10)));
        t.set(&2, Some(Timestamp::from_nanos(40)));
        assert_eq!(t.next(), Some(Timestamp::from_nanos(30)));
        assert_eq!(t.due(Timestamp::from_nanos(35)), vec![1]);
        t.set(&1, None);
        assert_eq!(t.due(Timestamp::from_nanos(100)), vec![2]);
    }
}
