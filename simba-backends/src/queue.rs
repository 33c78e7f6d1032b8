//! What the etcd and ZooKeeper backends share about their waiter queues:
//! how a listing of a queue is read ([`stand`]) and the one watch's
//! bookkeeping ([`Tracker`]). Each backend keeps a queue of
//! places per lease name (etcd: keys `P/q/NAME/L` ordered by
//! `create_revision`, see `etcd_queue`; ZooKeeper: sequential children of
//! `<root>/leases/NAME`, see `zookeeper_queue`), and one watch per backend
//! reports the places deleted. A listing read before a deletion that the
//! watch has already reported must be judged without that place, so the
//! tracker remembers recent deletions by name and place; and it hands every
//! freed name on to the release broadcast's subscribers (S4.2).

use futures::stream::BoxStream;
use simba_core::{BackendError, LeaseName};
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::future::Future;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// At most this many calls (renewals aside) in flight at once; see
/// [`Backend::max_concurrent_calls`](crate::Backend::max_concurrent_calls).
pub(crate) const MAX_CALLS_IN_FLIGHT: usize = 32;

/// Whose a place of a listing is, to the session reading it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Whose {
    /// The session's own place.
    Mine,
    /// Written under the session's own key, but holding another value: not
    /// the session's, and never in its way (etcd only; a ZooKeeper child's
    /// name says its owner).
    #[cfg_attr(not(feature = "etcd"), allow(dead_code))]
    Foreign,
    /// Another session's place, or one Simba cannot read.
    Other,
}

/// One place of a listing, as [`stand`] reads it: where it stands in the
/// queue (`order`: etcd's `create_revision`, ZooKeeper's sequence number),
/// its name in the queue (`id`: the key's last segment, or the child's
/// name), whose it is, and what the backend keeps of it (`item`).
pub(crate) struct Place<K, T> {
    pub order: K,
    pub id: String,
    pub whose: Whose,
    pub item: T,
}

/// Where a session stands in one listing of a queue.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Standing<T> {
    /// The first place (the holder), except those seen deleted.
    pub first: Option<T>,
    /// The session's first place, if it has one.
    pub ours: Option<T>,
    /// The session's other places (left by a lost reply): to delete
    /// (ZooKeeper; an etcd session has one key per name).
    #[cfg_attr(not(feature = "zookeeper"), allow(dead_code))]
    pub extra: Vec<T>,
    /// A place under the session's key holds another value (etcd).
    #[cfg_attr(not(feature = "etcd"), allow(dead_code))]
    pub foreign: bool,
    /// The ids of the places before ours, or of every place that is not
    /// ours (nor foreign) when the session has none; a place seen deleted
    /// is in nobody's way.
    pub blockers: BTreeSet<String>,
}

/// Reads a listing of one name's queue for one session: the place with the
/// lowest `order` holds the lease, and the others wait in `order` (S4.2).
/// `gone` tells whether a place (by id) was seen deleted after the listing
/// may have been read; such a place neither holds nor blocks. Ties in
/// `order` (which neither backend makes) are broken by id.
pub(crate) fn stand<K: Ord, T: Clone>(
    places: impl IntoIterator<Item = Place<K, T>>,
    gone: impl Fn(&str) -> bool,
) -> Standing<T> {
    let mut order: Vec<Place<K, T>> = places.into_iter().filter(|p| !gone(&p.id)).collect();
    order.sort_by(|a, b| (&a.order, &a.id).cmp(&(&b.order, &b.id)));
    let mut out = Standing {
        first: order.first().map(|p| p.item.clone()),
        ours: None,
        extra: Vec::new(),
        foreign: false,
        blockers: BTreeSet::new(),
    };
    for p in order {
        match p.whose {
            Whose::Mine if out.ours.is_none() => out.ours = Some(p.item),
            Whose::Mine => out.extra.push(p.item),
            Whose::Foreign => out.foreign = true,
            Whose::Other => {
                if out.ours.is_none() {
                    out.blockers.insert(p.id);
                }
            }
        }
    }
    out
}

/// How long the holder an acquire read is trusted to filter release
/// broadcasts (a deletion of another place frees nothing while the holder
/// stands, S4.2): a holder whose deletion the watch missed silences the
/// name's broadcasts no longer than this.
pub(crate) const HOLDER_FRESH: Duration = Duration::from_secs(60);

/// At most this many names' holders are remembered (then forgotten at once).
pub(crate) const MAX_HOLDERS: usize = 65_536;

/// At most this many places are remembered by [`Queues`] (then all are
/// forgotten at once, and every deletion is announced until the queues
/// are seen again).
pub(crate) const MAX_QUEUED: usize = 262_144;

/// The places the watch saw created and not yet deleted, per name, with
/// their order in the queue (ZooKeeper: the child's sequence number; etcd:
/// the place's create revision), so that a deletion of a place that stands
/// behind another is known as a waiter withdrawing, not a release (S4.2),
/// even by a node that never read the name's queue. A place whose creation
/// the watch did not see (made before it ran, or while it was down) is
/// older than every place it saw: its deletion may free the lease.
///
/// Without it, a member's withdraw of a partition's acquire reached every
/// member that had not read that partition's holder as a release: a
/// partition named again after another member had won it moved to the end
/// of their lists of a leave's releases, the members split the leave
/// differently (S10.2), and a few partitions of a 1,000-partition leave
/// waited a renewal period (ZooKeeper and etcd, issue 30).
#[derive(Debug, Default)]
pub(crate) struct Queues {
    by_name: std::collections::HashMap<String, std::collections::BTreeMap<String, i64>>,
    len: usize,
}

impl Queues {
    /// The watch saw place `id` of `name` created, at `order`.
    pub(crate) fn created(&mut self, name: &str, id: &str, order: i64) {
        if self.len >= MAX_QUEUED {
            self.clear();
        }
        let q = self.by_name.entry(name.to_owned()).or_default();
        if q.insert(id.to_owned(), order).is_none() {
            self.len += 1;
        }
    }

    /// The watch saw place `id` of `name` deleted: whether a place the watch
    /// saw created stands before it (so its deletion frees nothing). A place
    /// whose creation it did not see may have been the first: `false`.
    pub(crate) fn deleted(&mut self, name: &str, id: &str) -> bool {
        let Some(q) = self.by_name.get_mut(name) else {
            return false;
        };
        let Some(order) = q.remove(id) else {
            return false;
        };
        self.len -= 1;
        let behind = q.values().any(|&o| o < order);
        if q.is_empty() {
            self.by_name.remove(name);
        }
        behind
    }

    /// Forgets every place (the watch may have missed events).
    pub(crate) fn clear(&mut self) {
        self.by_name.clear();
        self.len = 0;
    }
}

/// How many recent deletions of places the watch remembers, and for how
/// long, so a listing that crossed a deletion is judged without it.
const DELETED_KEPT: usize = 65_536;
const DELETED_FOR: Duration = Duration::from_secs(120);

/// What a backend's one watch feeds: whether it runs, the release
/// broadcast's subscribers, and the places seen deleted lately with a mark
/// of each deletion `V` (etcd: the revision it happened at, the latest one
/// kept; ZooKeeper: nothing, `()`, since a child's name never comes back).
pub(crate) struct Tracker<V> {
    /// Whether the watch runs.
    pub(crate) running: bool,
    /// Release broadcasts' subscribers (S4.2).
    subscribers: Vec<futures::channel::mpsc::UnboundedSender<LeaseName>>,
    /// Places seen deleted lately, oldest first: when, lease name, place.
    order: VecDeque<(Instant, String, String)>,
    /// The same places by lease name: one name's listing is judged against
    /// that name's deletions only, whatever the backend's other names saw.
    by_name: HashMap<String, HashMap<String, V>>,
}

impl<V> Default for Tracker<V> {
    fn default() -> Self {
        Tracker {
            running: false,
            subscribers: Vec::new(),
            order: VecDeque::new(),
            by_name: HashMap::new(),
        }
    }
}

impl<V: Copy + Ord> Tracker<V> {
    /// Remembers that the place `place` of lease `name` was deleted (`mark`:
    /// when, in the backend's terms; a place deleted again keeps the
    /// greater), forgetting deletions older than two minutes or beyond the
    /// 65,536 latest.
    pub(crate) fn note_deleted(&mut self, name: &str, place: &str, mark: V) {
        let now = Instant::now();
        while self.order.len() >= DELETED_KEPT
            || self
                .order
                .front()
                .is_some_and(|(at, _, _)| now.saturating_duration_since(*at) > DELETED_FOR)
        {
            let Some((_, old_name, old_place)) = self.order.pop_front() else {
                break;
            };
            if let Some(places) = self.by_name.get_mut(&old_name) {
                places.remove(&old_place);
                if places.is_empty() {
                    self.by_name.remove(&old_name);
                }
            }
        }
        let places = self.by_name.entry(name.to_owned()).or_default();
        match places.get_mut(place) {
            Some(m) => *m = (*m).max(mark),
            None => {
                places.insert(place.to_owned(), mark);
                self.order
                    .push_back((now, name.to_owned(), place.to_owned()));
            }
        }
    }

    /// The places of lease `name` seen deleted lately, with their marks:
    /// a lookup that costs nothing for the deletions of other names.
    pub(crate) fn deleted(&self, name: &str) -> Option<&HashMap<String, V>> {
        self.by_name.get(name)
    }
}

impl<V> Tracker<V> {
    /// A new subscriber's stream of freed names.
    pub(crate) fn subscribe(&mut self) -> BoxStream<'static, LeaseName> {
        let (tx, rx) = futures::channel::mpsc::unbounded();
        self.subscribers.push(tx);
        Box::pin(rx)
    }

    /// Hands `names` to every subscriber; one whose stream is gone is
    /// dropped.
    pub(crate) fn announce(&mut self, names: &[LeaseName]) {
        self.subscribers
            .retain(|tx| names.iter().all(|n| tx.unbounded_send(n.clone()).is_ok()));
    }

    /// The watch ended: the subscribers' streams end (they subscribe
    /// again, which starts a new watch).
    #[cfg(any(test, feature = "zookeeper"))]
    pub(crate) fn stopped(&mut self) {
        self.running = false;
        self.subscribers.clear();
    }
}

/// Runs `start` (which starts the watch and marks `tracker` running)
/// unless the watch runs, one start at a time: `starting` serializes the
/// starts, and a start that waited for another checks again.
pub(crate) async fn ensure_running<V>(
    tracker: &Mutex<Tracker<V>>,
    starting: &futures::lock::Mutex<()>,
    start: impl Future<Output = Result<(), BackendError>>,
) -> Result<(), BackendError> {
    let running = || tracker.lock().unwrap_or_else(|p| p.into_inner()).running;
    if running() {
        return Ok(());
    }
    let _start = starting.lock().await;
    if running() {
        return Ok(());
    }
    start.await
}

/// The calls that the backends with waiter queues on the server (etcd,
/// ZooKeeper) make the same way, for their `impl Backend`: the bound on
/// calls in flight, and the release broadcast (S4.2) that the backend's one
/// watch feeds (the backend has `ensure_tracker` and `inner.tracker`, and
/// `lock` in its module).
macro_rules! queue_backend_common {
    () => {
        fn max_concurrent_calls(&self) -> Option<usize> {
            // Calls share one connection, but each acquire or release is a
            // write that the server commits one after the other: beyond a
            // few dozen in flight, more only wait inside the server while
            // their call timeouts (S2.4) run down. A burst of elections
            // waits in the client instead.
            Some($crate::queue::MAX_CALLS_IN_FLIGHT)
        }

        fn subscribe_releases(
            &self,
        ) -> futures::future::BoxFuture<
            '_,
            Result<Option<futures::stream::BoxStream<'static, LeaseName>>, BackendError>,
        > {
            futures::FutureExt::boxed(async move {
                self.ensure_tracker().await?;
                Ok(Some(lock(&self.inner.tracker).subscribe()))
            })
        }

        fn broadcasts_releases(&self) -> bool {
            true
        }
    };
}
pub(crate) use queue_backend_common;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_place_behind_another_seen_frees_nothing_and_an_unseen_one_may() {
        let mut q = Queues::default();
        // A place made before the watch ran: its deletion may free the lease.
        assert!(!q.deleted("n", "old"));
        q.created("n", "a", 5);
        q.created("n", "b", 7);
        q.created("m", "c", 6);
        // `b` stands behind `a`: a waiter withdrawing.
        assert!(q.deleted("n", "b"));
        // `a` was the first the watch saw: a release.
        assert!(!q.deleted("n", "a"));
        // Another name's places do not count; a second deletion is unseen.
        assert!(!q.deleted("m", "c"));
        assert!(!q.deleted("m", "c"));
        q.created("n", "d", 9);
        q.clear();
        assert!(!q.deleted("n", "d"));
        assert_eq!(q.len, 0);
    }

    fn p(order: u32, id: &str, whose: Whose) -> Place<u32, String> {
        Place {
            order,
            id: id.to_owned(),
            whose,
            item: id.to_owned(),
        }
    }

    #[test]
    fn the_lowest_order_holds_and_the_places_before_ours_block_it() {
        let q = [
            p(12, "me", Whose::Mine),
            p(10, "a", Whose::Other),
            p(11, "c", Whose::Other),
            p(14, "z", Whose::Other),
            p(13, "me2", Whose::Mine),
        ];
        let s = stand(q, |_| false);
        assert_eq!(s.first.as_deref(), Some("a"));
        assert_eq!(s.ours.as_deref(), Some("me"));
        assert_eq!(s.extra, vec!["me2".to_owned()]);
        assert_eq!(s.blockers, BTreeSet::from(["a".to_owned(), "c".to_owned()]));
        assert!(!s.foreign);
    }

    #[test]
    fn a_place_seen_deleted_neither_holds_nor_blocks() {
        let q = [p(10, "a", Whose::Other), p(11, "me", Whose::Mine)];
        let s = stand(q, |id| id == "a");
        assert_eq!(s.first.as_deref(), Some("me"));
        assert_eq!(s.ours.as_deref(), Some("me"));
        assert!(s.blockers.is_empty());
    }

    #[test]
    fn without_a_place_every_other_place_blocks_but_a_foreign_one_does_not() {
        let q = [
            p(10, "a", Whose::Other),
            p(11, "mine-but-foreign", Whose::Foreign),
            p(12, "b", Whose::Other),
        ];
        let s = stand(q, |_| false);
        assert_eq!(s.ours, None);
        assert!(s.foreign);
        assert_eq!(s.blockers, BTreeSet::from(["a".to_owned(), "b".to_owned()]));
        assert_eq!(s.first.as_deref(), Some("a"));
    }

    #[test]
    fn ties_in_order_are_broken_by_id_and_an_empty_listing_has_no_holder() {
        let s = stand([p(5, "b", Whose::Other), p(5, "a", Whose::Other)], |_| {
            false
        });
        assert_eq!(s.first.as_deref(), Some("a"));
        let none = stand(Vec::<Place<u32, String>>::new(), |_| false);
        assert_eq!(none.first, None);
        assert!(none.blockers.is_empty());
    }

    #[test]
    fn deletions_are_kept_by_name_with_the_greatest_mark() {
        let mut t = Tracker::<i64>::default();
        t.note_deleted("a", "p1", 10);
        t.note_deleted("a", "p1", 7);
        t.note_deleted("b", "p1", 3);
        assert_eq!(t.deleted("a").and_then(|d| d.get("p1")), Some(&10));
        assert_eq!(t.deleted("b").and_then(|d| d.get("p1")), Some(&3));
        assert!(t.deleted("c").is_none());
        t.note_deleted("a", "p1", 12);
        assert_eq!(t.deleted("a").and_then(|d| d.get("p1")), Some(&12));
        assert_eq!(t.order.len(), 2);
    }

    #[test]
    fn at_most_the_latest_deletions_are_kept() {
        let mut t = Tracker::<()>::default();
        for i in 0..=DELETED_KEPT {
            t.note_deleted("n", &i.to_string(), ());
        }
        assert_eq!(t.order.len(), DELETED_KEPT);
        let n = t.deleted("n").map_or(0, HashMap::len);
        assert_eq!(n, DELETED_KEPT);
        assert!(t.deleted("n").is_some_and(|d| !d.contains_key("0")));
    }

    #[test]
    fn announcements_reach_live_subscribers_and_drop_gone_ones() {
        use futures::StreamExt;
        let mut t = Tracker::<()>::default();
        let mut live = t.subscribe();
        drop(t.subscribe());
        let n = LeaseName::new("x").ok();
        let names: Vec<LeaseName> = n.into_iter().collect();
        t.announce(&names);
        assert_eq!(t.subscribers.len(), 1);
        let got = futures::executor::block_on(live.next());
        assert_eq!(got.as_ref().map(LeaseName::as_str), Some("x"));
        t.stopped();
        assert!(futures::executor::block_on(live.next()).is_none());
    }
}
