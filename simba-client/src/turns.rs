//! Same-name locks of one client wait their turn: a local FIFO per name.
//!
//! A client has one session, so two locks of one name on it would be one
//! lease (S7.4). Instead of refusing the second, [`Turns`] queues it: the
//! holder of a name's [`Turn`] is the only lock of that name the driver
//! knows; dropping the turn hands it to the longest waiter.

use futures::channel::oneshot;
use simba_core::LeaseName;
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

/// The per-name queues of one client. A name present in the map is taken;
/// its queue holds the waiters, oldest first.
#[derive(Default)]
pub(crate) struct Turns {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    next_id: u64,
    names: BTreeMap<LeaseName, VecDeque<(u64, oneshot::Sender<()>)>>,
}

/// The right to run the one lock of `name` on this client; passed on when dropped.
pub(crate) struct Turn {
    turns: Arc<Turns>,
    name: LeaseName,
}

impl Drop for Turn {
    fn drop(&mut self) {
        self.turns.pass(&self.name);
    }
}

/// A place in a name's queue; leaving it (the waiting future dropped)
/// removes the place, or passes the turn on if it had just been granted.
struct Waiting {
    turns: Arc<Turns>,
    name: LeaseName,
    id: u64,
    rx: oneshot::Receiver<()>,
    done: bool,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let mut st = self.turns.lock();
        if let Some(q) = st.names.get_mut(&self.name) {
            if let Some(pos) = q.iter().position(|(id, _)| *id == self.id) {
                q.remove(pos);
                return;
            }
        }
        drop(st);
        // No longer queued: `pass` granted us the turn (it sends while
        // holding the lock, and our receiver is still alive). Pass it on.
        self.turns.pass(&self.name);
    }
}

impl Turns {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Hands `name` to its oldest live waiter, or frees it.
    fn pass(&self, name: &LeaseName) {
        let mut st = self.lock();
        let Some(q) = st.names.get_mut(name) else {
            return;
        };
        while let Some((_, tx)) = q.pop_front() {
            if tx.send(()).is_ok() {
                return;
            }
        }
        st.names.remove(name);
    }

    /// The turn of `name` if nobody on this client has it or waits for it.
    pub(crate) fn try_take(self: &Arc<Self>, name: &LeaseName) -> Option<Turn> {
        let mut st = self.lock();
        if st.names.contains_key(name) {
            return None;
        }
        st.names.insert(name.clone(), VecDeque::new());
        Some(Turn {
            turns: self.clone(),
            name: name.clone(),
        })
    }

    /// Waits, first come first served, for the turn of `name`. Dropping the
    /// future gives up the place in the queue.
    pub(crate) async fn take(self: &Arc<Self>, name: &LeaseName) -> Turn {
        let mut waiting = {
            let mut st = self.lock();
            if !st.names.contains_key(name) {
                st.names.insert(name.clone(), VecDeque::new());
                return Turn {
                    turns: self.clone(),
                    name: name.clone(),
                };
            }
            let id = st.next_id;
            st.next_id += 1;
            let (tx, rx) = oneshot::channel();
            st.names
                .entry(name.clone())
                .or_default()
                .push_back((id, tx));
            Waiting {
                turns: self.clone(),
                name: name.clone(),
                id,
                rx,
                done: false,
            }
        };
        // The sender is dropped only after a successful send (`pass`), so
        // this resolves with the turn.
        let _ = (&mut waiting.rx).await;
        waiting.done = true;
        Turn {
            turns: self.clone(),
            name: name.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use futures::FutureExt;

    #[test]
    fn first_come_first_served_and_cancellation() {
        let turns = Arc::new(Turns::default());
        let n = LeaseName::new("n").unwrap();
        let first = turns.try_take(&n).unwrap();
        assert!(turns.try_take(&n).is_none());
        let mut b = Box::pin(turns.take(&n));
        let mut c = Box::pin(turns.take(&n));
        let mut d = Box::pin(turns.take(&n));
        assert!(b.as_mut().now_or_never().is_none());
        assert!(c.as_mut().now_or_never().is_none());
        assert!(d.as_mut().now_or_never().is_none());
        drop(c); // gives up its place
        drop(first);
        let b = b.now_or_never().expect("b is next");
        assert!(d.as_mut().now_or_never().is_none(), "d waits for b");
        drop(b);
        let d = d.now_or_never().expect("d is next (c left)");
        drop(d);
        assert!(turns.try_take(&n).is_some(), "free again");
        // A waiter granted the turn but dropped before seeing it passes it on.
        let first = turns.try_take(&n).unwrap();
        let mut e = Box::pin(turns.take(&n));
        let mut f = Box::pin(turns.take(&n));
        assert!(e.as_mut().now_or_never().is_none());
        assert!(f.as_mut().now_or_never().is_none());
        drop(first); // grants e
        drop(e); // which never looked
        assert!(f.now_or_never().is_some(), "f got the turn e left");
    }
}
