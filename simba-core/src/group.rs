//! Partitioned groups (S10): partition lease names and the assignment rule.
//! Pure functions of their arguments, shared by the engine, the simulation
//! and the tests.

use crate::ids::SessionId;
use crate::name::{LeaseName, NameError};
use std::collections::BTreeSet;

/// The separator between a group's name and a partition's index in the
/// partition's lease name (`orders:p7`).
pub const PARTITION_SEPARATOR: &str = ":p";

/// The lease name of partition `index` of `group`: `{group}:p{index}`,
/// valid under S3.1 whenever it fits in [`MAX_NAME_LEN`](crate::MAX_NAME_LEN).
///
/// ```
/// use simba_core::{partition_name, LeaseName};
/// let group = LeaseName::new("orders")?;
/// assert_eq!(partition_name(&group, 7)?.as_str(), "orders:p7");
/// # Ok::<(), simba_core::NameError>(())
/// ```
///
/// # Errors
/// [`NameError::TooLong`] if the group's name leaves no room for the index.
pub fn partition_name(group: &LeaseName, index: u32) -> Result<LeaseName, NameError> {
    LeaseName::new(format!("{group}{PARTITION_SEPARATOR}{index}"))
}

/// The group name and the partition index a partition lease name carries,
/// if it has the form `{group}:p{index}` (the inverse of [`partition_name`]).
///
/// ```
/// use simba_core::parse_partition_name;
/// assert_eq!(parse_partition_name("orders:p7"), Some(("orders", 7)));
/// assert_eq!(parse_partition_name("orders"), None);
/// assert_eq!(parse_partition_name("orders:p07"), None);
/// ```
pub fn parse_partition_name(name: &str) -> Option<(&str, u32)> {
    let (group, index) = name.rsplit_once(PARTITION_SEPARATOR)?;
    if group.is_empty() || index.is_empty() || !index.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // One spelling per index: no leading zeros.
    if index.len() > 1 && index.starts_with('0') {
        return None;
    }
    Some((group, index.parse().ok()?))
}

/// The fair share of the member at `rank` (0-based, in ascending session
/// order) among `members` members for `partitions` partitions (S10.2):
/// ⌈P/M⌉ for the first `P mod M` ranks, ⌊P/M⌋ for the others.
///
/// ```
/// use simba_core::fair_share;
/// assert_eq!((0..3).map(|r| fair_share(12, 3, r)).collect::<Vec<_>>(), [4, 4, 4]);
/// assert_eq!((0..3).map(|r| fair_share(10, 3, r)).collect::<Vec<_>>(), [4, 3, 3]);
/// assert_eq!(fair_share(10, 0, 0), 0);
/// ```
pub fn fair_share(partitions: u32, members: usize, rank: usize) -> u32 {
    let Ok(m) = u32::try_from(members) else {
        return 0;
    };
    if m == 0 || rank >= members {
        return 0;
    }
    let extra = u32::from(u32::try_from(rank).unwrap_or(u32::MAX) < partitions % m);
    partitions / m + extra
}

/// A fixed 64-bit mix (SplitMix64's finaliser): the same on every platform
/// and in every process, so every member computes the same assignment.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The part of a member's affinity for a partition ([`affinity_of`]) that
/// depends on the member alone: computed once
/// per member, not once per partition.
fn affinity_seed(session: SessionId) -> u64 {
    let bits = session.as_u128();
    // Truncations are the point: both halves of the id feed the mix.
    #[allow(clippy::cast_possible_truncation)]
    let (hi, lo) = ((bits >> 64) as u64, bits as u64);
    mix(hi ^ mix(lo))
}

/// How much the member of [`affinity_seed`] `seed` wants partition `index`
/// (higher first).
fn affinity_of(seed: u64, index: u32) -> u64 {
    mix(seed ^ u64::from(index))
}

/// The assignment rule (S10.2): the member every partition of a group should
/// belong to, given the group's live members. Returns, for each partition
/// index, the index of its member in `members`; empty if there are no
/// members.
///
/// `members` is the list a renewal reports ([`GroupView`](crate::GroupView)):
/// it is sorted and deduplicated here, so every member that sees the same set
/// computes the same assignment. Each member's capacity is its
/// [`fair_share`] by rank, so the assignment is balanced: every member gets
/// ⌊P/M⌋ or ⌈P/M⌉ partitions. Within the capacities, every (member,
/// partition) pair has a fixed affinity, and pairs are taken greedily from
/// the highest affinity down. A partition's owner therefore changes only when
/// the membership does, and mostly only for partitions of a member that left
/// or moving to a member that joined.
///
/// ```
/// use simba_core::{assign_partitions, SessionId};
/// let members = [SessionId::from_u128(1), SessionId::from_u128(2), SessionId::from_u128(3)];
/// let owners = assign_partitions(12, &members);
/// assert_eq!(owners.len(), 12);
/// for m in 0..3 {
///     assert_eq!(owners.iter().filter(|&&o| o == m).count(), 4);
/// }
/// ```
pub fn assign_partitions(partitions: u32, members: &[SessionId]) -> Vec<usize> {
    let mut sorted: Vec<SessionId> = members.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    if sorted.is_empty() {
        return Vec::new();
    }
    let m = sorted.len();
    let mut capacity: Vec<u32> = (0..m).map(|r| fair_share(partitions, m, r)).collect();
    let mut pairs: Vec<(u64, u32, usize)> = Vec::with_capacity(m * partitions as usize);
    for (r, session) in sorted.iter().enumerate() {
        let seed = affinity_seed(*session);
        for p in 0..partitions {
            pairs.push((affinity_of(seed, p), p, r));
        }
    }
    pairs.sort_unstable_by(|a, b| b.cmp(a));
    let mut owner: Vec<Option<usize>> = vec![None; partitions as usize];
    let mut left = partitions as usize;
    for (_, p, r) in pairs {
        if left == 0 {
            break;
        }
        let slot = &mut owner[p as usize];
        if slot.is_none() && capacity[r] > 0 {
            *slot = Some(r);
            capacity[r] -= 1;
            left -= 1;
        }
    }
    // Map ranks in `sorted` back to indexes in `members`.
    let index_of: Vec<usize> = sorted
        .iter()
        .map(|s| members.iter().position(|x| x == s).unwrap_or(0))
        .collect();
    owner
        .into_iter()
        .map(|r| r.map_or(0, |r| index_of[r]))
        .collect()
}

/// The partitions (indexes) that `me` should own among `members` (S10.2):
/// empty if `me` is not a member.
///
/// ```
/// use simba_core::{target_partitions, SessionId};
/// let members = [SessionId::from_u128(1), SessionId::from_u128(2)];
/// let mine = target_partitions(5, &members, SessionId::from_u128(1));
/// assert_eq!(mine.len(), 3);
/// assert!(target_partitions(5, &members, SessionId::from_u128(9)).is_empty());
/// ```
pub fn target_partitions(partitions: u32, members: &[SessionId], me: SessionId) -> Vec<u32> {
    let Some(my_index) = members.iter().position(|m| *m == me) else {
        return Vec::new();
    };
    assign_partitions(partitions, members)
        .into_iter()
        .zip(0u32..)
        .filter(|(owner, _)| *owner == my_index)
        .map(|(_, p)| p)
        .collect()
}

/// What one member knows when it computes its target (S10.2): besides the
/// live members, only what it holds and what the backend told it in replies
/// it receives anyway.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StickyInput {
    /// The partitions this member holds now (a term, not being handed over).
    pub held: BTreeSet<u32>,
    /// Partitions another live member held when this member last tried them
    /// (an acquire answered `Held`): not worth trying again for a while (the
    /// engine: until the holder's expiry the reply timed, or two renewal
    /// periods).
    pub taken: BTreeSet<u32>,
    /// Partitions likely free: their last known holder, or their owner by
    /// [`assign_partitions`] in the previous membership, is no member any
    /// more. Tried first (after `released`).
    pub likely_free: BTreeSet<u32>,
    /// Partitions the last membership change hands to this member
    /// ([`planned_by_change`]): tried before every other one, so members
    /// that take over from one that went ask for different partitions.
    pub planned: BTreeSet<u32>,
    /// Partitions a release broadcast named since a live member was last
    /// known to hold them (S4.2): free a moment ago, so tried before every
    /// other one. With a member leaving, the partitions it has released
    /// already come before those it still holds: asking for those first
    /// only met `Held`, while the released ones waited in no member's
    /// target (S10.3).
    pub released: BTreeSet<u32>,
    /// Partitions a release broadcast named before the last membership
    /// change, and that the change's own releases do not name: hand-overs
    /// of an earlier change, which their new owners most likely took long
    /// ago. Still worth a try, but after the likely free ones and before
    /// the rest: asked for among `released`, they came before the leave's
    /// own releases, each answered `Held` (S10.2).
    pub released_before: BTreeSet<u32>,
    /// Partitions among `released` that a release broadcast named again
    /// since the last membership change, with no live member known to hold
    /// them in between: a member won each and gave it up (a late win,
    /// S4.3, or a part that moved when the change's list grew), so each is
    /// more likely free than the other released ones, which the members
    /// the change gave them to have likely taken. Tried right after
    /// `planned`: asked for among `released` by affinity, a member short
    /// of its share walked the change's other releases one `Held` reply at
    /// a time before it reached the one left free (1,000 partitions: up to
    /// 1.5 s).
    pub released_again: BTreeSet<u32>,
    /// Partitions another live member held when this member tried them,
    /// long enough ago to be worth trying again (its holder may have
    /// released them without a broadcast reaching this member), oldest try
    /// first. Asked for only when no other partition is left to try, in
    /// that order: so a member short of its share tries every partition in
    /// turn, however many there are and however long each try takes.
    pub tried: Vec<u32>,
}

/// The sticky assignment rule (S10.2): the partitions `me` should own among
/// `members`, given what it holds and knows ([`StickyInput`]). Empty if `me`
/// is not a member.
///
/// The member's share is its [`fair_share`] by rank. It keeps the
/// partitions it holds, up to its share (those [`assign_partitions`] gives
/// it first, then by a fixed affinity), and adds exactly as many partitions
/// as it lacks, from those it does not hold and does not know to be taken,
/// those the last membership change hands to it first
/// ([`planned_by_change`]), then those a release broadcast named again
/// since the change, then those it named, then likely free ones, then those a broadcast named before the last change,
/// those tried before last. So a member never gives up a partition unless
/// it holds more than its share (which happens only when a member joins), and
/// never asks for more than it lacks: only the partitions of a member that
/// left, and the surplus that goes to a member that joined, move.
///
/// ```
/// use simba_core::{sticky_target, SessionId, StickyInput};
/// let (a, b) = (SessionId::from_u128(1), SessionId::from_u128(2));
/// // Alone, `a` wants every partition; `b` joins: `a` keeps the share it
/// // holds and `b` asks only for what `a` gives up.
/// let all = sticky_target(4, &[a], a, &StickyInput::default());
/// assert_eq!(all.len(), 4);
/// let held = StickyInput { held: all.clone(), ..StickyInput::default() };
/// let kept = sticky_target(4, &[a, b], a, &held);
/// let wanted = sticky_target(4, &[a, b], b, &StickyInput::default());
/// assert_eq!((kept.len(), wanted.len()), (2, 2));
/// assert!(kept.is_disjoint(&wanted));
/// ```
pub fn sticky_target(
    partitions: u32,
    members: &[SessionId],
    me: SessionId,
    known: &StickyInput,
) -> BTreeSet<u32> {
    let base: BTreeSet<u32> = target_partitions(partitions, members, me)
        .into_iter()
        .collect();
    sticky_target_from_base(partitions, members, me, &base, known)
}

/// [`sticky_target`] given `base`, the partitions [`target_partitions`]
/// gives `me` among `members`: a caller that computes many targets for one
/// membership (one per acquire reply, S10.2) computes the base rule, the
/// costly part with many partitions, once per membership.
///
/// ```
/// use simba_core::{sticky_target, sticky_target_from_base, target_partitions};
/// use simba_core::{SessionId, StickyInput};
/// let members = [SessionId::from_u128(1), SessionId::from_u128(2)];
/// let me = members[0];
/// let base = target_partitions(100, &members, me).into_iter().collect();
/// let known = StickyInput::default();
/// assert_eq!(
///     sticky_target_from_base(100, &members, me, &base, &known),
///     sticky_target(100, &members, me, &known),
/// );
/// ```
pub fn sticky_target_from_base(
    partitions: u32,
    members: &[SessionId],
    me: SessionId,
    base: &BTreeSet<u32>,
    known: &StickyInput,
) -> BTreeSet<u32> {
    let mut sorted: Vec<SessionId> = members.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let Ok(rank) = sorted.binary_search(&me) else {
        return BTreeSet::new();
    };
    let share = fair_share(partitions, sorted.len(), rank) as usize;
    // Higher first: partitions the base rule gives this member, then by
    // affinity, then by index (a total order, the same on every platform).
    // Each key is computed once per partition, not once per comparison.
    let seed = affinity_seed(me);
    let key = |p: u32| {
        (
            base.contains(&p),
            affinity_of(seed, p),
            std::cmp::Reverse(p),
        )
    };
    let mut held: Vec<u32> = known
        .held
        .iter()
        .copied()
        .filter(|&p| p < partitions)
        .collect();
    held.sort_by_cached_key(|&p| std::cmp::Reverse(key(p)));
    held.truncate(share);
    let need = share - held.len();
    let mut target: BTreeSet<u32> = held.into_iter().collect();
    if need > 0 {
        target.extend(lacking(partitions, need, base, seed, known));
    }
    target
}

/// The `need` partitions a member below its share asks for (step 3 of
/// S10.2), in no particular order: the highest by (planned, released
/// again, released, likely free, released before the change, base rule,
/// affinity, lower index) among those not held, not
/// taken and not tried; then tried ones, oldest try first.
///
/// It runs at every `Held` reply and release broadcast, so it costs one
/// pass over the partitions: one flag byte each instead of a set lookup per
/// comparison, and a selection of the first `need` instead of a sort of
/// all of them (the keys are distinct, so the set chosen is the one a full
/// sort would put first).
fn lacking(
    partitions: u32,
    need: usize,
    base: &BTreeSet<u32>,
    seed: u64,
    known: &StickyInput,
) -> Vec<u32> {
    const HELD: u16 = 1;
    const TAKEN: u16 = 2;
    const TRIED: u16 = 4;
    const PLANNED: u16 = 8;
    const RELEASED: u16 = 16;
    const LIKELY_FREE: u16 = 32;
    const BASE: u16 = 64;
    const RELEASED_BEFORE: u16 = 128;
    const RELEASED_AGAIN: u16 = 256;
    let mut flags = vec![0u16; partitions as usize];
    let sets = [
        (&known.held, HELD),
        (&known.taken, TAKEN),
        (&known.planned, PLANNED),
        (&known.released, RELEASED),
        (&known.released_again, RELEASED_AGAIN),
        (&known.likely_free, LIKELY_FREE),
        (&known.released_before, RELEASED_BEFORE),
        (base, BASE),
    ];
    let marks = sets
        .iter()
        .flat_map(|(ps, flag)| ps.iter().map(move |&p| (p, *flag)))
        .chain(known.tried.iter().map(|&p| (p, TRIED)));
    for (p, flag) in marks {
        if let Some(f) = flags.get_mut(p as usize) {
            *f |= flag;
        }
    }
    let has = |f: u16, flag: u16| f & flag != 0;
    let mut free: Vec<_> = (0..partitions)
        .zip(flags.iter().copied())
        .filter(|&(_, f)| !has(f, HELD | TAKEN | TRIED))
        .map(|(p, f)| {
            let key = (
                has(f, PLANNED),
                has(f, RELEASED_AGAIN),
                has(f, RELEASED),
                has(f, LIKELY_FREE),
                has(f, RELEASED_BEFORE),
                has(f, BASE),
                affinity_of(seed, p),
                std::cmp::Reverse(p),
            );
            (std::cmp::Reverse(key), p)
        })
        .collect();
    if free.len() > need {
        free.select_nth_unstable(need - 1);
        free.truncate(need);
    }
    let again = known.tried.iter().copied().filter(|&p| {
        flags
            .get(p as usize)
            .is_some_and(|&f| !has(f, HELD | TAKEN))
    });
    free.into_iter()
        .map(|(_, p)| p)
        .chain(again)
        .take(need)
        .collect()
}

/// The partitions whose owner by [`assign_partitions`] among `before` is
/// not in `after`: those a member that saw the membership change from
/// `before` to `after` expects to be free (S10.2).
///
/// ```
/// use simba_core::{assign_partitions, freed_by_change, SessionId};
/// let (a, b) = (SessionId::from_u128(1), SessionId::from_u128(2));
/// let freed = freed_by_change(6, &[a, b], &[a]);
/// let owners = assign_partitions(6, &[a, b]);
/// assert!(freed.iter().all(|&p| owners[p as usize] == 1));
/// assert_eq!(freed.len(), 3);
/// ```
pub fn freed_by_change(
    partitions: u32,
    before: &[SessionId],
    after: &[SessionId],
) -> BTreeSet<u32> {
    assign_partitions(partitions, before)
        .into_iter()
        .zip(0u32..)
        .filter(|(owner, _)| before.get(*owner).is_some_and(|m| !after.contains(m)))
        .map(|(_, p)| p)
        .collect()
}

/// The partitions that the change of membership from `before` to `after`
/// hands to `me`, by a split every member that saw the same change and the
/// same releases computes alike (S10.2). Each member in both `before` and
/// `after` takes as many as its fair share grew by:
///
/// 1. from `released`, the partitions release broadcasts named around the
///    change (those a member that left gave up), in the order they came:
///    each goes to the member with the highest affinity for it among those
///    not yet given as many as their share grew by. A partition's owner
///    depends only on the releases before it, so a member that has seen
///    some of the broadcasts already agrees with one that has seen them
///    all on every partition it has seen;
/// 2. then from [`freed_by_change`] (those the members who went owned by
///    the base rule, all a member knows after a crash, or before a leaver's
///    releases come), pairs (member, partition) taken greedily from the
///    highest affinity down.
///
/// When the members held their shares of `before` and `released` is what
/// the members who went held, the parts are disjoint and cover it, so each
/// freed partition is wanted by exactly one member and no two ask for the
/// same one. Otherwise they are only a good first guess.
///
/// ```
/// use simba_core::{freed_by_change, planned_by_change, SessionId};
/// use std::collections::BTreeSet;
/// let [a, b, c] = [1, 2, 3].map(SessionId::from_u128);
/// // After a crash nothing was released: the base rule's owners.
/// let freed = freed_by_change(12, &[a, b, c], &[a, b]);
/// let pa = planned_by_change(12, &[a, b, c], &[a, b], a, &[]);
/// let pb = planned_by_change(12, &[a, b, c], &[a, b], b, &[]);
/// assert_eq!((pa.len(), pb.len()), (2, 2));
/// assert!(pa.is_disjoint(&pb));
/// assert_eq!(pa.union(&pb).copied().collect::<BTreeSet<u32>>(), freed);
/// // `c` left gracefully holding 0, 5, 7 and 11 (not its base-rule
/// // partitions): the split is of what it released.
/// let released = [7, 0, 11, 5];
/// let pa = planned_by_change(12, &[a, b, c], &[a, b], a, &released);
/// let pb = planned_by_change(12, &[a, b, c], &[a, b], b, &released);
/// assert!(pa.is_disjoint(&pb));
/// assert_eq!(pa.union(&pb).copied().collect::<BTreeSet<u32>>(), BTreeSet::from(released));
/// // A member that has seen only the first two releases agrees on them.
/// let early = planned_by_change(12, &[a, b, c], &[a, b], a, &released[..2]);
/// assert!(early.iter().all(|p| !released[..2].contains(p) || pa.contains(p)));
/// ```
pub fn planned_by_change(
    partitions: u32,
    before: &[SessionId],
    after: &[SessionId],
    me: SessionId,
    released: &[u32],
) -> BTreeSet<u32> {
    let freed = freed_by_change(partitions, before, after);
    planned_from(partitions, before, after, me, released, &freed)
}

/// The members in both `before` and `after` whose fair share grew, in
/// session order, each with how much it grew by (S10.2).
fn grown(partitions: u32, before: &[SessionId], after: &[SessionId]) -> Vec<(SessionId, u32)> {
    let rank = |members: &[SessionId], s: SessionId| {
        let mut sorted = members.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        let n = sorted.len();
        sorted.binary_search(&s).ok().map(|r| (n, r))
    };
    let mut sorted_after = after.to_vec();
    sorted_after.sort_unstable();
    sorted_after.dedup();
    sorted_after
        .into_iter()
        .filter_map(|s| {
            let ((na, ra), (nb, rb)) = (rank(after, s)?, rank(before, s)?);
            let grew =
                fair_share(partitions, na, ra).saturating_sub(fair_share(partitions, nb, rb));
            (grew > 0).then_some((s, grew))
        })
        .collect()
}

/// How much the fair share of `me` grows from `before` to `after`: 0 if
/// it shrinks, or if `me` is not in both (S10.2).
pub(crate) fn grown_by(
    partitions: u32,
    before: &[SessionId],
    after: &[SessionId],
    me: SessionId,
) -> u32 {
    grown(partitions, before, after)
        .into_iter()
        .find(|&(s, _)| s == me)
        .map_or(0, |(_, grew)| grew)
}

/// How many partitions the change of membership from `before` to `after`
/// moves to the members in both: the sum of what their fair shares grew by
/// (S10.2). [`planned_by_change`] splits that many of the released
/// partitions and no more.
pub(crate) fn moved_by_change(partitions: u32, before: &[SessionId], after: &[SessionId]) -> usize {
    grown(partitions, before, after)
        .iter()
        .map(|&(_, grew)| grew as usize)
        .sum()
}

/// How many partitions the change of membership from `before` to `after`
/// moves in all: the sum of what the fair share of each member of `after`
/// grew by, a member that joined counted from nothing (S10.2). A member
/// takes the release broadcasts that come after it saw the change, up to
/// that many, as the change's own hand-overs.
pub(crate) fn moved_in_all(partitions: u32, before: &[SessionId], after: &[SessionId]) -> usize {
    let sorted = |members: &[SessionId]| {
        let mut v = members.to_vec();
        v.sort_unstable();
        v.dedup();
        v
    };
    let (before, after) = (sorted(before), sorted(after));
    after
        .iter()
        .enumerate()
        .map(|(rank, s)| {
            let now = fair_share(partitions, after.len(), rank);
            let was = before
                .binary_search(s)
                .map_or(0, |r| fair_share(partitions, before.len(), r));
            now.saturating_sub(was) as usize
        })
        .sum()
}

/// [`planned_by_change`] given `freed`, the [`freed_by_change`] of the
/// change: the engine computes it again at every release broadcast, the
/// base rule (thousands of pairs sorted with 1,000 partitions) once per
/// change.
pub(crate) fn planned_from(
    partitions: u32,
    before: &[SessionId],
    after: &[SessionId],
    me: SessionId,
    released: &[u32],
    freed: &BTreeSet<u32>,
) -> BTreeSet<u32> {
    // (member, its affinity seed, how many more it takes)
    let mut stayers: Vec<(SessionId, u64, u32)> = grown(partitions, before, after)
        .into_iter()
        .map(|(s, grew)| (s, affinity_seed(s), grew))
        .collect();
    if !stayers.iter().any(|(s, _, _)| *s == me) {
        return BTreeSet::new();
    }
    let mut mine = BTreeSet::new();
    let mut seen: BTreeSet<u32> = BTreeSet::new();
    for &p in released {
        if p >= partitions || !seen.insert(p) {
            continue;
        }
        let best = stayers
            .iter_mut()
            .filter(|(_, _, left)| *left > 0)
            .max_by_key(|(s, seed, _)| (affinity_of(*seed, p), *s));
        let Some((s, _, left)) = best else {
            break;
        };
        *left -= 1;
        if *s == me {
            mine.insert(p);
        }
    }
    let mut pairs: Vec<(u64, u32, usize)> = Vec::with_capacity(freed.len() * stayers.len());
    for (i, (_, seed, left)) in stayers.iter().enumerate() {
        if *left > 0 {
            pairs.extend(
                freed
                    .difference(&seen)
                    .map(|&p| (affinity_of(*seed, p), p, i)),
            );
        }
    }
    pairs.sort_unstable_by(|a, b| b.cmp(a));
    for (_, p, i) in pairs {
        let (s, _, left) = &mut stayers[i];
        if *left == 0 || !seen.insert(p) {
            continue;
        }
        *left -= 1;
        if *s == me {
            mine.insert(p);
        }
    }
    mine
}

/// What [`Engine::group`](crate::Engine::group) reports of one partitioned
/// group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupSnapshot {
    /// The group.
    pub group: LeaseName,
    /// How many partitions it has.
    pub partitions: u32,
    /// Its live members as the last renewal saw them (empty until a renewal
    /// lists this member).
    pub members: Vec<SessionId>,
    /// The partitions this member should own (S10.2).
    pub target: Vec<u32>,
    /// The partitions this member owns now (a term is held).
    pub owned: Vec<u32>,
    /// Whether `leave_group` was called.
    pub leaving: bool,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn ids(n: u128) -> Vec<SessionId> {
        (1..=n)
            .map(|i| SessionId::from_u128(i * 0x9e37_79b9))
            .collect()
    }

    #[test]
    fn balanced_for_every_size() {
        for m in 1..12u128 {
            for p in [0u32, 1, 7, 12, 100] {
                let members = ids(m);
                let owners = assign_partitions(p, &members);
                let mut counts = vec![0u32; members.len()];
                for o in owners {
                    counts[o] += 1;
                }
                let (min, max) = (counts.iter().min(), counts.iter().max());
                assert!(
                    max.zip(min).is_none_or(|(a, b)| a - b <= 1),
                    "{m} {p} {counts:?}"
                );
            }
        }
    }

    #[test]
    fn order_of_members_does_not_matter() {
        let members = ids(5);
        let mut reversed = members.clone();
        reversed.reverse();
        let a = assign_partitions(40, &members);
        let b = assign_partitions(40, &reversed);
        for p in 0..40 {
            assert_eq!(members[a[p]], reversed[b[p]]);
        }
    }

    #[test]
    fn names_round_trip() {
        let g = LeaseName::new("a:p1").unwrap();
        let n = partition_name(&g, 12).unwrap();
        assert_eq!(parse_partition_name(n.as_str()), Some(("a:p1", 12)));
    }

    /// Step 3 of S10.2 as the rulebook states it: sort every candidate by
    /// its key and take the first `need`, then tried ones in order. The
    /// selection in [`lacking`] must choose the same partitions.
    fn lacking_by_sort(
        partitions: u32,
        need: usize,
        base: &BTreeSet<u32>,
        seed: u64,
        known: &StickyInput,
    ) -> BTreeSet<u32> {
        let tried: BTreeSet<u32> = known.tried.iter().copied().collect();
        let mut free: Vec<u32> = (0..partitions)
            .filter(|p| !known.held.contains(p) && !known.taken.contains(p) && !tried.contains(p))
            .collect();
        free.sort_by_key(|&p| {
            std::cmp::Reverse((
                known.planned.contains(&p),
                known.released_again.contains(&p),
                known.released.contains(&p),
                known.likely_free.contains(&p),
                known.released_before.contains(&p),
                (
                    base.contains(&p),
                    affinity_of(seed, p),
                    std::cmp::Reverse(p),
                ),
            ))
        });
        let again =
            known.tried.iter().copied().filter(|&p| {
                p < partitions && !known.held.contains(&p) && !known.taken.contains(&p)
            });
        free.into_iter().chain(again).take(need).collect()
    }

    fn subset(max: u32) -> impl proptest::strategy::Strategy<Value = BTreeSet<u32>> {
        proptest::collection::btree_set(0..max, 0..(max as usize))
    }

    proptest::proptest! {
        #[test]
        fn s10_2_the_selection_of_what_a_member_lacks_is_the_sorted_rule(
            partitions in 1u32..64,
            need in 1usize..70,
            me in 1u128..1000,
            base in subset(70),
            held in subset(70),
            taken in subset(70),
            likely_free in subset(70),
            planned in subset(70),
            released in subset(70),
            released_before in subset(70),
            released_again in subset(70),
            tried in proptest::collection::vec(0u32..70, 0..20),
        ) {
            let known = StickyInput {
                held, taken, likely_free, planned, released, released_before, released_again,
                tried,
            };
            let seed = affinity_seed(SessionId::from_u128(me));
            let fast: BTreeSet<u32> = lacking(partitions, need, &base, seed, &known)
                .into_iter()
                .collect();
            proptest::prop_assert_eq!(fast, lacking_by_sort(partitions, need, &base, seed, &known));
        }
    }
}
