//! The etcd backend's waiter queue: which place of `P/q/NAME/` holds the
//! lease, which stand before a given place, and what a deletion seen by the
//! watch does to a waiting place (pure, no I/O).
//!
//! Every acquire of `NAME` by the session on etcd lease `L` creates the key
//! `P/q/NAME/L` (16 hex digits, on lease `L`, value = the session id) unless
//! it exists. The place with the lowest `create_revision` holds the lease;
//! the others wait in `create_revision` order. etcd's revision is global and
//! never decreases, so a place created later always has a higher revision
//! than every place that exists when it is created: no place can ever
//! appear *before* an existing one, and a waiting place becomes the holder
//! exactly when every place listed before it is gone, which deletions alone
//! can tell (S4.2, S4.5). A key deleted and created again is a new place
//! with a higher revision, behind every existing one; so a deletion of a
//! key at a revision above the one a listing was read at proves that the
//! place the listing showed under that key is gone.

use crate::queue::{stand, Place, Whose};
use std::collections::BTreeSet;

/// One place of a listing: its key's last segment (the owner's lease id,
/// 16 hex digits, for places Simba wrote), its `create_revision` and its
/// value (the owner's session id).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    pub suffix: String,
    pub rev: i64,
    pub value: Vec<u8>,
}

/// What one listing of `P/q/NAME/` says about the place of lease `me`.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct QueueView {
    /// The `create_revision` of the place under `me`, if it is listed and
    /// holds `sid`.
    pub ours: Option<i64>,
    /// The place under `me` is listed but holds another value (not ours).
    pub foreign: bool,
    /// The suffixes of the places before ours (every place if ours is not
    /// listed), except those seen deleted since the listing was read.
    pub blockers: BTreeSet<String>,
    /// The first place (the holder), except those seen deleted.
    pub first: Option<Entry>,
}

/// Judges a listing of a name's places for the place of lease `me` holding
/// `sid`; `gone` tells whether a key (by suffix) was seen deleted after the
/// listing was read (so the place the listing shows is gone). The reading
/// itself is the one the ZooKeeper backend uses too ([`stand`]).
pub(crate) fn judge(
    entries: &[Entry],
    me: &str,
    sid: &[u8],
    gone: impl Fn(&str) -> bool,
) -> QueueView {
    let places = entries.iter().map(|e| Place {
        order: e.rev,
        id: e.suffix.clone(),
        whose: match (e.suffix == me, e.value == sid) {
            (true, true) => Whose::Mine,
            (true, false) => Whose::Foreign,
            (false, _) => Whose::Other,
        },
        item: e,
    });
    let s = stand(places, gone);
    QueueView {
        ours: s.ours.map(|e| e.rev),
        foreign: s.foreign,
        blockers: s.blockers,
        first: s.first.cloned(),
    }
}

/// A place waiting in a queue, as the backend knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Waiting {
    /// The place's `create_revision` (its token once it holds).
    pub rev: i64,
    /// The revision the listing that named `blockers` was read at.
    pub read_rev: i64,
    /// The places standing before it that are not known deleted.
    pub blockers: BTreeSet<String>,
}

/// What a deletion of a name's place seen by the watch means to a waiting
/// place of that name.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Struck {
    /// Nothing (an older incarnation of the key, or an unrelated one).
    Nothing,
    /// A place before it is gone.
    Blocker,
    /// The waiting place itself is gone (expiry, or another client acting
    /// for the same session): it must be forgotten.
    Own,
}

/// Applies the deletion of the place with `suffix` at revision `deleted_at`
/// to `w`, the waiting place of lease `me`.
pub(crate) fn strike(w: &mut Waiting, me: &str, suffix: &str, deleted_at: i64) -> Struck {
    if deleted_at <= w.read_rev {
        // Deleted before the listing was read: it showed a later key, or none.
        return Struck::Nothing;
    }
    if suffix == me {
        return Struck::Own;
    }
    if w.blockers.remove(suffix) {
        Struck::Blocker
    } else {
        Struck::Nothing
    }
}

/// The `P/q/NAME/SUFFIX` parts of a key below `P/q/`, if it is one.
pub(crate) fn split_place(rest: &[u8]) -> Option<(&str, &str)> {
    let rest = std::str::from_utf8(rest).ok()?;
    let (name, suffix) = rest.split_once('/')?;
    (!suffix.is_empty() && !suffix.contains('/')).then_some((name, suffix))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(suffix: &str, rev: i64, value: &str) -> Entry {
        Entry {
            suffix: suffix.into(),
            rev,
            value: value.as_bytes().to_vec(),
        }
    }

    #[test]
    fn the_lowest_revision_holds_and_revisions_not_keys_order_the_queue() {
        let q = [e("b", 12, "B"), e("a", 10, "A"), e("c", 11, "C")];
        let j = judge(&q, "b", b"B", |_| false);
        assert_eq!(j.ours, Some(12));
        assert_eq!(j.blockers, BTreeSet::from(["a".to_owned(), "c".to_owned()]));
        assert_eq!(j.first, Some(e("a", 10, "A")));
        let ja = judge(&q, "a", b"A", |_| false);
        assert_eq!(ja.ours, Some(10));
        assert!(ja.blockers.is_empty());
        // Seen deleted: no longer in the way, and no longer the holder.
        let jb = judge(&q, "b", b"B", |s| s != "b");
        assert!(jb.blockers.is_empty());
        assert_eq!(jb.first, Some(e("b", 12, "B")));
    }

    #[test]
    fn a_place_with_a_foreign_value_is_not_ours_and_a_stranger_sees_every_place() {
        let q = [e("a", 10, "A"), e("b", 11, "X")];
        let j = judge(&q, "b", b"B", |_| false);
        assert_eq!(j.ours, None);
        assert!(j.foreign);
        let s = judge(&q, "z", b"Z", |_| false);
        assert_eq!(s.ours, None);
        assert_eq!(s.blockers.len(), 2);
        assert!(!s.foreign);
    }

    #[test]
    fn only_a_deletion_after_the_listing_strikes() {
        let mut w = Waiting {
            rev: 20,
            read_rev: 25,
            blockers: BTreeSet::from(["a".to_owned(), "b".to_owned()]),
        };
        // An older incarnation of `a`, deleted before the listing was read.
        assert_eq!(strike(&mut w, "me", "a", 25), Struck::Nothing);
        assert_eq!(w.blockers.len(), 2);
        assert_eq!(strike(&mut w, "me", "a", 26), Struck::Blocker);
        assert_eq!(strike(&mut w, "me", "a", 27), Struck::Nothing);
        assert_eq!(strike(&mut w, "me", "x", 28), Struck::Nothing);
        assert_eq!(w.blockers, BTreeSet::from(["b".to_owned()]));
        assert_eq!(strike(&mut w, "me", "me", 29), Struck::Own);
        assert_eq!(strike(&mut w, "me", "b", 30), Struck::Blocker);
        assert!(w.blockers.is_empty());
    }

    #[test]
    fn place_keys_split_into_name_and_owner() {
        assert_eq!(
            split_place(b"jobs/00000000000000ab"),
            Some(("jobs", "00000000000000ab"))
        );
        assert_eq!(split_place(b"jobs"), None);
        assert_eq!(split_place(b"jobs/"), None);
        assert_eq!(split_place(b"jobs/a/b"), None);
        assert_eq!(split_place(&[0xff, b'/', b'a']), None);
    }
}
