//! Cases for partitioned groups (S10.1: membership lives with the session and
//! rides on the renewal) and schedule slots (S11.1: a slot is claimed at most
//! once, only by the lease's holder with its token, and the record outlives
//! sessions and leases).
//!
//! Every session acts through the client that opened it (a ZooKeeper session
//! is bound to its client), and expiry is waited out with the same margin as
//! the takeover case ([`PAST_SHORT`] after the last call of a [`SHORT`]
//! session).

use super::{name, sleep, two_clients, won, Factory, Step, LONG, PAST_SHORT, SHORT};
use crate::Backend;
use simba_core::{GroupView, LeaseName, RenewError, SessionId, SlotClaim, Token};
use std::collections::BTreeMap;

/// The groups a renewal of `s` lists, checked for the contract's shape
/// (members ascending, without duplicates; each group once; `s` a member of
/// every group listed).
async fn groups_of<B: Backend>(
    b: &B,
    s: SessionId,
) -> Result<BTreeMap<LeaseName, Vec<SessionId>>, Step> {
    let r = b.renew(s).await?;
    views(s, r.groups)
}

fn views(
    s: SessionId,
    groups: Vec<GroupView>,
) -> Result<BTreeMap<LeaseName, Vec<SessionId>>, Step> {
    let mut out = BTreeMap::new();
    for g in groups {
        check!(
            g.members.windows(2).all(|w| w[0] < w[1]),
            "group `{}` lists members out of order or twice: {:?}",
            g.group,
            g.members
        );
        check!(
            g.members.contains(&s),
            "the renewal of {s} lists group `{}` without {s} in it: {:?}",
            g.group,
            g.members
        );
        if let Some(prev) = out.insert(g.group.clone(), g.members) {
            return Err(Step::Fail(format!(
                "group `{}` listed twice (first {prev:?})",
                g.group
            )));
        }
    }
    Ok(out)
}

fn sorted(mut v: Vec<SessionId>) -> Vec<SessionId> {
    v.sort();
    v
}

async fn claim<B: Backend>(
    b: &B,
    s: SessionId,
    n: &LeaseName,
    t: Token,
    slot: u64,
) -> Result<SlotClaim, Step> {
    Ok(b.claim_slot(s, n, t, slot).await?)
}

/// Claims `slot` as [`claim`] does; the answer must be `want` (`what`
/// names the claim in the failure).
async fn claim_is<B: Backend>(
    b: &B,
    s: SessionId,
    n: &LeaseName,
    t: Token,
    slot: u64,
    want: SlotClaim,
    what: &str,
) -> Result<(), Step> {
    let got = claim(b, s, n, t, slot).await?;
    check!(got == want, "{what}: {got:?}");
    Ok(())
}

/// S10.1: join, join again (a no-op), leave, leave again; two sessions of two
/// clients see each other in their renewals; groups are listed apart.
pub(super) async fn join_and_leave<F: Factory>(f: &F, ns: &str) -> Result<(), Step> {
    let (b, c, a, o) = two_clients(f, ns).await?;
    let g = name("workers")?;
    let h = name("workers.other")?;
    let none = groups_of(&b, a).await?;
    check!(
        none.is_empty(),
        "a session that joined nothing lists {none:?}"
    );
    b.join_group(a, &g).await?;
    b.join_group(a, &g).await?; // twice: a no-op
    let seen = groups_of(&b, a).await?;
    check!(
        seen.len() == 1 && seen.get(&g) == Some(&vec![a]),
        "after one join the renewal lists {seen:?}, expected `{g}` = [{a}]"
    );
    c.join_group(o, &g).await?;
    let both = sorted(vec![a, o]);
    let mine = groups_of(&b, a).await?;
    let theirs = groups_of(&c, o).await?;
    check!(
        mine.get(&g) == Some(&both) && theirs.get(&g) == Some(&both),
        "two members: a lists {mine:?}, o lists {theirs:?}, expected {both:?}"
    );
    b.join_group(a, &h).await?;
    let mine = groups_of(&b, a).await?;
    check!(
        mine.len() == 2 && mine.get(&h) == Some(&vec![a]) && mine.get(&g) == Some(&both),
        "after joining a second group a lists {mine:?}"
    );
    let theirs = groups_of(&c, o).await?;
    check!(
        theirs.len() == 1,
        "o lists a group it never joined: {theirs:?}"
    );
    b.leave_group(a, &g).await?;
    b.leave_group(a, &g).await?; // twice: a no-op
    let mine = groups_of(&b, a).await?;
    let theirs = groups_of(&c, o).await?;
    check!(
        mine.len() == 1 && mine.contains_key(&h),
        "after leaving `{g}` a lists {mine:?}"
    );
    check!(
        theirs.get(&g) == Some(&vec![o]),
        "after a left, o lists {theirs:?}"
    );
    c.leave_group(o, &h).await?; // not a member: a no-op
    let theirs = groups_of(&c, o).await?;
    check!(
        theirs.get(&g) == Some(&vec![o]) && theirs.len() == 1,
        "leaving a group it never joined changed o's listing: {theirs:?}"
    );
    // The membership is the session's, not the lease's: owning leases
    // changes nothing, and the renewal still lists them.
    let n = name("workers.lease")?;
    let t = won(&b, a, &n).await?;
    let r = b.renew(a).await?;
    check!(
        r.owned == vec![(n.clone(), t)] && views(a, r.groups)?.len() == 1,
        "a renewal with a lease and a group lists {:?}",
        r.owned
    );
    Ok(())
}

/// S10.1: a membership ends when its session is closed or expires; a closed
/// session cannot join; an expired member is never listed.
pub(super) async fn membership_ends_with_the_session<F: Factory>(
    f: &F,
    ns: &str,
) -> Result<(), Step> {
    let b = f.connect(ns).await?;
    let c = f.connect(ns).await?;
    let d = f.connect(ns).await?;
    let a = b.open_session(LONG).await?.session;
    let closed = c.open_session(LONG).await?.session;
    let short = d.open_session(SHORT).await?.session;
    let g = name("members")?;
    b.join_group(a, &g).await?;
    c.join_group(closed, &g).await?;
    d.join_group(short, &g).await?;
    let all = sorted(vec![a, closed, short]);
    let seen = groups_of(&b, a).await?;
    check!(
        seen.get(&g) == Some(&all),
        "three members: a lists {seen:?}, expected {all:?}"
    );
    c.close_session(closed).await?;
    let after_close = sorted(vec![a, short]);
    let seen = groups_of(&b, a).await?;
    check!(
        seen.get(&g) == Some(&after_close),
        "after a member's close a lists {seen:?}, expected {after_close:?}"
    );
    // A closed session joining is a no-op (its renewal says Expired).
    c.join_group(closed, &g).await?;
    let seen = groups_of(&b, a).await?;
    check!(
        seen.get(&g) == Some(&after_close),
        "a closed session joined: a lists {seen:?}"
    );
    // The short session is left to expire; a keeps renewing meanwhile.
    sleep(PAST_SHORT).await;
    let seen = groups_of(&b, a).await?;
    check!(
        seen.get(&g) == Some(&vec![a]),
        "{PAST_SHORT:?} after its last call, the expired member {short} is still listed: {seen:?}"
    );
    check!(
        matches!(d.renew(short).await, Err(RenewError::Expired)),
        "the expired member renewed"
    );
    Ok(())
}

/// S10.1, at scale: four sessions in thirty groups each (and one group of
/// a single member); every renewal lists all of them, in one call.
pub(super) async fn many_groups_in_one_renewal<F: Factory>(f: &F, ns: &str) -> Result<(), Step> {
    const GROUPS: usize = 30;
    let mut clients = Vec::new();
    let mut sessions = Vec::new();
    for _ in 0..4 {
        let b = f.connect(ns).await?;
        sessions.push(b.open_session(LONG).await?.session);
        clients.push(b);
    }
    let groups: Vec<LeaseName> = (0..GROUPS)
        .map(|i| name(&format!("many.{i}")))
        .collect::<Result<_, _>>()?;
    for (b, s) in clients.iter().zip(&sessions) {
        for g in &groups {
            b.join_group(*s, g).await?;
        }
    }
    let alone = name("many.alone")?;
    clients[0].join_group(sessions[0], &alone).await?;
    let everyone = sorted(sessions.clone());
    for (i, (b, s)) in clients.iter().zip(&sessions).enumerate() {
        let seen = groups_of(b, *s).await?;
        let want = GROUPS + usize::from(i == 0);
        check!(
            seen.len() == want,
            "session {i} lists {} groups, expected {want}",
            seen.len()
        );
        for g in &groups {
            check!(
                seen.get(g) == Some(&everyone),
                "session {i} lists `{g}` as {:?}, expected {everyone:?}",
                seen.get(g)
            );
        }
        if i == 0 {
            check!(
                seen.get(&alone) == Some(&vec![*s]),
                "`{alone}` listed as {:?}",
                seen.get(&alone)
            );
        }
    }
    Ok(())
}

/// S11.1: only the holder with its token claims, and only forward; slot 0 is
/// a slot like any other; slots beyond 2^53 compare exactly.
pub(super) async fn claim_slot_by_the_holder_only_forward<F: Factory>(
    f: &F,
    ns: &str,
) -> Result<(), Step> {
    let (b, c, a, o) = two_clients(f, ns).await?;
    let n = name("sched")?;
    let t = won(&b, a, &n).await?;
    claim_is(&b, a, &n, t, 0, SlotClaim::Claimed, "first claim of slot 0").await?;
    claim_is(
        &b,
        a,
        &n,
        t,
        0,
        SlotClaim::AlreadyClaimed { last: 0 },
        "slot 0 again",
    )
    .await?;
    claim_is(&b, a, &n, t, 5, SlotClaim::Claimed, "slot 5 after 0").await?;
    for again in [5, 3, 0] {
        claim_is(
            &b,
            a,
            &n,
            t,
            again,
            SlotClaim::AlreadyClaimed { last: 5 },
            &format!("slot {again} after 5"),
        )
        .await?;
    }
    // Another session, or the holder with a wrong token: refused, nothing
    // recorded.
    claim_is(
        &c,
        o,
        &n,
        t,
        6,
        SlotClaim::NotHolder,
        "a non-holder claimed",
    )
    .await?;
    if let Some(wrong) = Token::new(t.get() + 1) {
        claim_is(
            &b,
            a,
            &n,
            wrong,
            6,
            SlotClaim::NotHolder,
            "the holder with a wrong token claimed",
        )
        .await?;
    }
    let unheld = name("sched.unheld")?;
    claim_is(
        &b,
        a,
        &unheld,
        t,
        1,
        SlotClaim::NotHolder,
        "a claim on a lease nobody holds",
    )
    .await?;
    claim_is(
        &b,
        a,
        &n,
        t,
        6,
        SlotClaim::Claimed,
        "slot 6 after the refused claims",
    )
    .await?;
    // Exact beyond a double's 53-bit mantissa.
    let big = name("sched.big")?;
    let tb = won(&b, a, &big).await?;
    let hi = (1_u64 << 53) + 1;
    claim_is(&b, a, &big, tb, hi, SlotClaim::Claimed, "slot 2^53+1").await?;
    claim_is(
        &b,
        a,
        &big,
        tb,
        hi - 1,
        SlotClaim::AlreadyClaimed { last: hi },
        "slot 2^53 after 2^53+1",
    )
    .await?;
    let top = i64::MAX.unsigned_abs();
    claim_is(&b, a, &big, tb, top, SlotClaim::Claimed, "slot 2^63-1").await?;
    Ok(())
}

/// S11.1: the record outlives the holder's close and a later holder sees
/// `last`; a stale token (an earlier term of the same session, or of a closed
/// session) is refused.
pub(super) async fn slot_record_outlives_the_holder<F: Factory>(
    f: &F,
    ns: &str,
) -> Result<(), Step> {
    let (b, c, a, o) = two_clients(f, ns).await?;
    let n = name("sched.handover")?;
    let t1 = won(&b, a, &n).await?;
    claim_is(&b, a, &n, t1, 10, SlotClaim::Claimed, "slot 10").await?;
    b.close_session(a).await?;
    claim_is(
        &b,
        a,
        &n,
        t1,
        11,
        SlotClaim::NotHolder,
        "a closed holder claimed",
    )
    .await?;
    let t2 = won(&c, o, &n).await?;
    check!(t2 > t1, "token {t2} after the close is not above {t1}");
    claim_is(
        &c,
        o,
        &n,
        t2,
        10,
        SlotClaim::AlreadyClaimed { last: 10 },
        "the next holder claimed slot 10 again",
    )
    .await?;
    claim_is(
        &c,
        o,
        &n,
        t2,
        11,
        SlotClaim::Claimed,
        "the next holder, slot 11",
    )
    .await?;
    // A later term of the same session: the earlier token is stale.
    c.release(o, &n, t2).await?;
    claim_is(
        &c,
        o,
        &n,
        t2,
        12,
        SlotClaim::NotHolder,
        "a released term claimed",
    )
    .await?;
    let t3 = won(&c, o, &n).await?;
    check!(t3 > t2, "token {t3} after the release is not above {t2}");
    claim_is(
        &c,
        o,
        &n,
        t2,
        12,
        SlotClaim::NotHolder,
        "a stale token of the same session claimed",
    )
    .await?;
    claim_is(
        &c,
        o,
        &n,
        t3,
        12,
        SlotClaim::Claimed,
        "the third term, slot 12",
    )
    .await?;
    Ok(())
}

/// S11.1: a holder whose session expired claims nothing, even while nobody
/// has taken the lease over (liveness by the backend's clock).
pub(super) async fn expired_holder_claims_nothing<F: Factory>(f: &F, ns: &str) -> Result<(), Step> {
    let b = f.connect(ns).await?;
    let a = b.open_session(SHORT).await?.session;
    let n = name("sched.expiry")?;
    let t = won(&b, a, &n).await?;
    claim_is(&b, a, &n, t, 1, SlotClaim::Claimed, "slot 1").await?;
    sleep(PAST_SHORT).await;
    claim_is(
        &b,
        a,
        &n,
        t,
        2,
        SlotClaim::NotHolder,
        &format!("{PAST_SHORT:?} after its last call, an expired holder claimed"),
    )
    .await?;
    let c = f.connect(ns).await?;
    let o = c.open_session(LONG).await?.session;
    let t2 = won(&c, o, &n).await?;
    let got = claim(&c, o, &n, t2, 1).await?;
    check!(
        got == SlotClaim::AlreadyClaimed { last: 1 },
        "after the expiry the record reads {got:?}, expected last 1"
    );
    Ok(())
}
