//! The ZooKeeper backend's waiter queue: which child of `<root>/leases/<name>`
//! holds the lease, and which stand before a given place (pure, no I/O).
//!
//! Every acquire of `name` creates one ephemeral sequential child
//! `c-<owner as 16 hex digits>-<sequence>` unless the session has one
//! already. The child with the lowest sequence number holds the lease; the
//! others wait in sequence order. ZooKeeper numbers a parent's children in
//! creation order and never reuses a number while the parent exists (and a
//! parent with children is never deleted), so no child can appear *before*
//! a place once that place exists: a waiter becomes the holder exactly when
//! every child listed before it is gone, which deletion events alone can tell
//! (S4.2, S4.5).

use crate::queue::{stand, Place, Whose};
use std::collections::BTreeSet;

/// The prefix of every place of the ZooKeeper session `zk_id`.
pub(crate) fn place_prefix(zk_id: i64) -> String {
    format!("c-{:016x}-", zk_id as u64)
}

/// A child's owner session and sequence number, if it is a place Simba
/// wrote (`c-<16 hex>-<digits>`).
pub(crate) fn parse_place(child: &str) -> Option<(i64, u64)> {
    let rest = child.strip_prefix("c-")?;
    let (owner, seq) = rest.split_once('-')?;
    if owner.len() != 16 || seq.is_empty() || !seq.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let owner = u64::from_str_radix(owner, 16).ok()? as i64;
    Some((owner, seq.parse().ok()?))
}

/// What one listing of `<root>/leases/<name>` says about the session `me`.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct QueueView {
    /// The session's first place (lowest sequence), if it has one.
    pub ours: Option<String>,
    /// The session's other places (left by a lost reply): to delete.
    pub extra: Vec<String>,
    /// The children before `ours` (all children if `ours` is `None`),
    /// except those already seen deleted. A child Simba cannot read counts
    /// as standing first: it is never skipped.
    pub blockers: BTreeSet<String>,
    /// The first child (the holder), if any.
    pub first: Option<String>,
    /// The owner of the first child, if it is a place Simba wrote.
    pub first_owner: Option<i64>,
}

/// Judges a listing of a lease's children for `me`; `gone` tells whether a
/// child (by name) was already seen deleted after the listing may have been
/// taken (a deleted child never comes back: its number is never reused).
/// A child Simba cannot read sorts first (it may be a holder of another
/// kind). The reading itself is the one the etcd backend uses too
/// ([`stand`]).
pub(crate) fn judge(children: &[String], me: i64, gone: impl Fn(&str) -> bool) -> QueueView {
    let places = children.iter().map(|c| {
        let parsed = parse_place(c);
        let owner = parsed.map(|(owner, _)| owner);
        Place {
            order: parsed.map(|(_, seq)| seq),
            id: c.clone(),
            whose: if owner == Some(me) {
                Whose::Mine
            } else {
                Whose::Other
            },
            item: (c, owner),
        }
    });
    let s = stand(places, gone);
    QueueView {
        ours: s.ours.map(|(c, _)| c.clone()),
        extra: s.extra.into_iter().map(|(c, _)| c.clone()).collect(),
        blockers: s.blockers,
        first: s.first.map(|(c, _)| c.clone()),
        first_owner: s.first.and_then(|(_, owner)| owner),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn places_parse_and_refuse_what_simba_did_not_write() {
        let me = 0x0100_0000_abcd_0001_i64;
        let p = format!("{}0000000042", place_prefix(me));
        assert_eq!(parse_place(&p), Some((me, 42)));
        assert_eq!(parse_place("holder"), None);
        assert_eq!(parse_place("c-00ff-0000000001"), None);
        assert_eq!(parse_place("c-0000000000000001-"), None);
        assert_eq!(parse_place("c-000000000000000g-0000000001"), None);
        assert_eq!(parse_place("c-0000000000000001-00x1"), None);
        // A negative session id round-trips through its 64 bits.
        let neg = -5_i64;
        assert_eq!(
            parse_place(&format!("{}0000000007", place_prefix(neg))),
            Some((neg, 7))
        );
    }

    #[test]
    fn the_first_place_holds_and_numbers_not_names_order_the_queue() {
        let (a, b) = (1_i64, 2_i64);
        let kids = names(&[
            &format!("{}0000000010", place_prefix(b)),
            &format!("{}0000000009", place_prefix(a)),
            &format!("{}0000000011", place_prefix(b)),
        ]);
        let j = judge(&kids, b, |_| false);
        assert_eq!(j.ours, Some(kids[0].clone()));
        assert_eq!(j.extra, vec![kids[2].clone()]);
        assert_eq!(j.blockers, BTreeSet::from([kids[1].clone()]));
        assert_eq!(j.first_owner, Some(a));
        assert_eq!(j.first, Some(kids[1].clone()));
        let ja = judge(&kids, a, |_| false);
        assert_eq!(ja.ours, Some(kids[1].clone()));
        assert!(ja.blockers.is_empty());
        // Seen deleted: no longer in the way.
        let jb = judge(&kids, b, |c| c == kids[1]);
        assert!(jb.blockers.is_empty());
        assert_eq!(jb.first_owner, Some(b));
    }

    #[test]
    fn an_unreadable_child_stands_first_and_a_stranger_sees_every_child() {
        let me = 3_i64;
        let kids = names(&["holder", &format!("{}0000000001", place_prefix(me))]);
        let j = judge(&kids, me, |_| false);
        assert_eq!(j.blockers, BTreeSet::from(["holder".to_owned()]));
        assert_eq!(j.first_owner, None);
        let stranger = judge(&kids, 4, |_| false);
        assert_eq!(stranger.ours, None);
        assert_eq!(stranger.blockers.len(), 2);
    }
}
