//! Partitioned groups (S10): the assignment rule, the hand-over of moving
//! partitions, convergence without flapping. Several engines run over one
//! model backend in rounds of one round trip each (`cluster/mod.rs`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cluster;

use cluster::{Cluster, Happening};
use proptest::prelude::*;
use simba_core::*;
use std::collections::BTreeSet;
use std::time::Duration;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// 3 s lease, 1 s renewals; a round trip of 10 ms.
fn config() -> SimbaConfig {
    SimbaConfig::builder()
        .lease_duration(Duration::from_secs(3))
        .margin(ms(10))
        .seed(11)
        .build()
        .unwrap()
}

fn cluster(members: usize, partitions: u32) -> Cluster {
    cluster_with(config(), members, partitions)
}

/// `members` nodes in the group "orders" of `partitions`, on `config`.
fn cluster_with(config: SimbaConfig, members: usize, partitions: u32) -> Cluster {
    let mut c = Cluster::new("orders", partitions, config, ms(10));
    for _ in 0..members {
        c.add_node();
    }
    c
}

/// Runs until members 0, 1 and 2 have settled; fails after 5 s.
fn settled_three(c: &mut Cluster) {
    settle(c, &[0, 1, 2], Duration::from_secs(5));
}

/// [`config`] on the deliberately broken engine `mutant`.
#[cfg(feature = "mutants")]
fn mutant_config(mutant: Mutant) -> SimbaConfig {
    config().to_builder().mutant(Some(mutant)).build().unwrap()
}

/// The op of the `JoinGroup` among the commands `e` emitted since the last call.
fn join_sent(e: &mut Engine) -> Option<OpId> {
    drain(e).into_iter().find_map(|c| match c {
        Command::JoinGroup { op, .. } => Some(op),
        _ => None,
    })
}

/// The commands `e` emitted since the last call.
fn drain(e: &mut Engine) -> Vec<Command> {
    std::iter::from_fn(|| e.poll_output())
        .filter_map(|o| match o {
            Output::Command(c) => Some(c),
            _ => None,
        })
        .collect()
}

/// A renewal's reply to `op`, 3 s left, owning nothing, listing `members`
/// of `group` (no group at all for `None`).
fn renewed(op: OpId, group: Option<(&LeaseName, Vec<SessionId>)>) -> Input {
    Input::RenewReplied {
        op,
        result: Ok(Renewal {
            remaining: Duration::from_secs(3),
            owned: Vec::new(),
            groups: group
                .map(|(g, members)| GroupView {
                    group: g.clone(),
                    members,
                })
                .into_iter()
                .collect(),
        }),
    }
}

/// An engine that joined the group `g` of `partitions` at `t0` and whose
/// session (id 7, 3 s left) opened at `at`.
fn joined(partitions: u32, t0: Timestamp, at: Timestamp) -> (Engine, LeaseName, SessionId) {
    let mut e = Engine::new(config(), BackendProfile::default(), t0);
    let g = LeaseName::new("g").unwrap();
    e.join_group(t0, g.clone(), partitions, false, TaskExitPolicy::default())
        .unwrap();
    let open = drain(&mut e)
        .into_iter()
        .find_map(|c| match c {
            Command::OpenSession { op, .. } => Some(op),
            _ => None,
        })
        .unwrap();
    let session = SessionId::from_u128(7);
    e.handle(
        at,
        Input::SessionOpened {
            op: open,
            result: Ok(SessionGrant {
                session,
                remaining: Duration::from_secs(3),
            }),
        },
    );
    (e, g, session)
}

/// Runs until `settled` holds or `limit` passes; returns the time it took.
fn settle(c: &mut Cluster, members: &[usize], limit: Duration) -> Duration {
    let start = c.now;
    while c.now - start < limit {
        if c.settled(members).is_ok() {
            return c.now - start;
        }
        c.step();
    }
    panic!("not settled after {limit:?}: {:?}", c.settled(members));
}

#[test]
fn s10_2_three_members_twelve_partitions_four_each() {
    let mut c = cluster(3, 12);
    settled_three(&mut c);
    assert_eq!(c.owned_counts(), vec![4, 4, 4]);
    assert!(c.violations.is_empty(), "{:?}", c.violations);
}

#[test]
fn s10_2_a_member_not_listed_targets_nothing() {
    let mut c = cluster(1, 4);
    settle(&mut c, &[0], Duration::from_secs(5));
    // The backend loses the membership: the next renewal does not list the
    // member, so it targets nothing and joins again.
    let group = c.group.clone();
    let snap = c.nodes[0].engine.group(&group).unwrap();
    assert_eq!(snap.target.len(), 4);
    assert_eq!(snap.owned.len(), 4);
    let (me, _) = c.nodes[0].engine.session_deadline().unwrap();
    assert!(c.model.drop_member(&group, me));
    let mut emptied = false;
    for _ in 0..300 {
        c.step();
        let snap = c.nodes[0].engine.group(&group).unwrap();
        if snap.members.is_empty() {
            assert!(snap.target.is_empty(), "{snap:?}");
            emptied = true;
            break;
        }
    }
    assert!(emptied, "no renewal reported the lost membership");
    // It joins again and takes its partitions back.
    settle(&mut c, &[0], Duration::from_secs(5));
    assert_eq!(c.owned_counts(), vec![4]);
    c.tokens_increase().unwrap();
    assert!(c.violations.is_empty(), "{:?}", c.violations);
}

#[test]
fn s10_2_join_refuses_bad_groups_and_taken_names() {
    let mut e = Engine::new(config(), BackendProfile::default(), Timestamp::ZERO);
    let now = Timestamp::ZERO;
    let g = LeaseName::new("g").unwrap();
    assert!(matches!(
        e.join_group(now, g.clone(), 0, false, TaskExitPolicy::default()),
        Err(ApiError::InvalidGroup { .. })
    ));
    e.start_election(now, LeaseName::new("g:p3").unwrap(), false)
        .unwrap();
    assert_eq!(
        e.join_group(now, g.clone(), 8, false, TaskExitPolicy::default()),
        Err(ApiError::AlreadyStarted(LeaseName::new("g:p3").unwrap()))
    );
    let h = LeaseName::new("h").unwrap();
    e.join_group(now, h.clone(), 8, false, TaskExitPolicy::default())
        .unwrap();
    assert_eq!(
        e.join_group(now, h.clone(), 8, false, TaskExitPolicy::default()),
        Err(ApiError::AlreadyStarted(h))
    );
    // S7.4: a partition name of a joined group is not free for an election.
    assert!(matches!(
        e.start_election(now, LeaseName::new("h:p7").unwrap(), false),
        Err(ApiError::AlreadyStarted(_))
    ));
    let long = LeaseName::new("x".repeat(MAX_NAME_LEN)).unwrap();
    assert!(matches!(
        e.join_group(now, long, 2, false, TaskExitPolicy::default()),
        Err(ApiError::InvalidGroup { .. })
    ));
}

/// S10.3: a leave asked for while the `JoinGroup` is in flight waits for
/// its reply. The backend may run two calls in flight in either order; a
/// leave run first would leave the session a member for good, counted by
/// every other member and given partitions nobody takes.
#[test]
fn s10_3_a_leave_waits_for_the_join_in_flight() {
    let t0 = Timestamp::from_nanos(1_000_000_000);
    let t1 = t0 + ms(10);
    let (mut e, g, session) = joined(4, t0, t1);
    let join = join_sent(&mut e).expect("a JoinGroup with the new session");
    e.leave_group(t1, &g).unwrap();
    assert!(
        !drain(&mut e)
            .iter()
            .any(|c| matches!(c, Command::LeaveGroup { .. })),
        "a LeaveGroup was sent while the JoinGroup was in flight"
    );
    e.handle(
        t1 + ms(10),
        Input::GroupJoined {
            op: join,
            result: Ok(()),
        },
    );
    let leave = drain(&mut e)
        .into_iter()
        .find_map(|c| match c {
            Command::LeaveGroup { op, session: s, .. } if s == session => Some(op),
            _ => None,
        })
        .expect("the LeaveGroup follows the join's reply");
    e.handle(
        t1 + ms(20),
        Input::GroupLeft {
            op: leave,
            result: Ok(()),
        },
    );
    assert!(e.group(&g).is_none(), "left once the leave is confirmed");
}

/// S10.1, S10.3: a `JoinGroup` or `LeaveGroup` that fails (InnoDB's
/// deadlock victim, a dropped connection) is sent again after the renewal
/// that goes `min_backoff` after the failure, not a renewal interval
/// later. A failed leave's partitions are released at once (S10.3), and
/// until the leave is applied the others still list the leaver and leave
/// them unowned: a MariaDB leave of 1,000 partitions waited a renewal
/// interval (684 ms) so. On the engine before, neither was sent again
/// within 900 ms.
#[test]
fn s10_1_s10_3_a_failed_join_or_leave_is_sent_again_after_min_backoff() {
    let t0 = Timestamp::from_nanos(1_000_000_000);
    let (mut e, g, session) = joined(4, t0, t0);
    let failed = || {
        Err(BackendError::new(
            BackendErrorKind::Other,
            "deadlock victim",
        ))
    };
    // Answers renewals (listing `members`) until `want` is sent; returns its
    // op and when it was sent, or `None` after `limit`.
    let until_sent = |e: &mut Engine,
                      from: Timestamp,
                      members: Vec<SessionId>,
                      want: fn(&Command) -> Option<OpId>,
                      limit: Duration|
     -> Option<(OpId, Timestamp)> {
        let mut now = from;
        while now - from <= limit {
            let sent = drain(e);
            if sent.is_empty() {
                now = e.poll_timeout()?;
                e.handle_timeout(now);
            }
            for c in sent {
                if let Some(op) = want(&c) {
                    return Some((op, now));
                }
                if let Command::Renew { op, .. } = c {
                    e.handle(now, renewed(op, Some((&g, members.clone()))));
                }
            }
        }
        None
    };
    let join = |c: &Command| match c {
        Command::JoinGroup { op, .. } => Some(*op),
        _ => None,
    };
    let leave = |c: &Command| match c {
        Command::LeaveGroup { op, .. } => Some(*op),
        _ => None,
    };
    let first = join_sent(&mut e).expect("a JoinGroup");
    let at = t0 + ms(5);
    e.handle(
        at,
        Input::GroupJoined {
            op: first,
            result: failed(),
        },
    );
    let (again, sent) =
        until_sent(&mut e, at, vec![], join, ms(900)).expect("the failed join was not sent again");
    assert!(
        sent - at <= e.config().min_backoff() + ms(1),
        "sent again {:?} after the failure",
        sent - at
    );
    let at = sent + ms(5);
    e.handle(
        at,
        Input::GroupJoined {
            op: again,
            result: Ok(()),
        },
    );
    e.leave_group(at, &g).unwrap();
    let (first, _) = until_sent(&mut e, at, vec![session], leave, ms(900)).expect("a LeaveGroup");
    let at = at + ms(5);
    e.handle(
        at,
        Input::GroupLeft {
            op: first,
            result: failed(),
        },
    );
    let (again, sent) = until_sent(&mut e, at, vec![session], leave, ms(900))
        .expect("the failed leave was not sent again");
    assert!(
        sent - at <= e.config().min_backoff() + ms(1),
        "sent again {:?} after the failure",
        sent - at
    );
    e.handle(
        sent + ms(5),
        Input::GroupLeft {
            op: again,
            result: Ok(()),
        },
    );
    assert!(e.group(&g).is_none(), "left once the leave is confirmed");
}

/// S2.4 for groups: a `JoinGroup` whose reply is lost is abandoned after a
/// call timeout and sent again (seen at the next renewal reply), so a lossy
/// link cannot keep a member out of its group for good.
#[test]
fn s10_1_a_join_whose_reply_is_lost_is_sent_again() {
    let t0 = Timestamp::from_nanos(1_000_000_000);
    let (mut e, _, _) = joined(4, t0, t0);
    let first = join_sent(&mut e).unwrap();
    // The reply to `first` never comes. Renewals go on, listing no group.
    let mut again = None;
    let mut now = t0;
    for _ in 0..10 {
        now = e.poll_timeout().unwrap();
        e.handle_timeout(now);
        for c in drain(&mut e) {
            match c {
                Command::Renew { op, .. } => e.handle(now, renewed(op, None)),
                Command::JoinGroup { op, .. } => again = Some(op),
                _ => {}
            }
        }
        if again.is_none() {
            again = drain(&mut e).into_iter().find_map(|c| match c {
                Command::JoinGroup { op, .. } => Some(op),
                _ => None,
            });
        }
        if again.is_some() {
            break;
        }
    }
    let again = again.expect("the join was never sent again");
    assert_ne!(again, first);
    assert!(
        now - t0 >= e.call_timeout(),
        "sent again before the timeout"
    );
    // The late reply to the first join is stale; the second one counts.
    let stale = e.stats().stale_replies;
    e.handle(
        now,
        Input::GroupJoined {
            op: first,
            result: Ok(()),
        },
    );
    assert_eq!(e.stats().stale_replies, stale + 1);
}

/// S10.3: a graceful leave hands every partition over in the order of S6.1:
/// revoked (`Stopped`: the member asked for it), task stopped, released, then gained elsewhere
/// with a higher token; moved partitions are owned again within 3 round
/// trips of their release.
#[test]
fn s10_3_leave_hands_over_in_order_within_three_round_trips() {
    let mut c = cluster(3, 12);
    settled_three(&mut c);
    let from = c.round;
    c.leave(2);
    settle(&mut c, &[0, 1], Duration::from_secs(5));
    assert_eq!(c.owned_counts()[..2], [6, 6]);
    for (name, h) in &c.history {
        let h: Vec<&(u64, Happening)> = h.iter().filter(|(r, _)| *r >= from).collect();
        let lost = h
            .iter()
            .position(|(_, e)| matches!(e, Happening::Lost { node: 2, .. }));
        let Some(lost) = lost else { continue };
        let stopped = h
            .iter()
            .position(|(_, e)| matches!(e, Happening::TaskStopped { node: 2 }))
            .expect("task stopped");
        let released = h
            .iter()
            .position(|(_, e)| matches!(e, Happening::Released { node: 2, .. }))
            .expect("released");
        // The history from `from` on also holds what happened earlier in
        // that round (node 2's own gain, when the group settled in it).
        let gained = h
            .iter()
            .position(|(_, e)| matches!(e, Happening::Gained { node, .. } if *node != 2))
            .expect("gained elsewhere");
        assert!(
            lost < stopped && stopped < released && released < gained,
            "{name}: {h:?}"
        );
        assert!(
            matches!(
                h[lost].1,
                Happening::Lost {
                    reason: RevokeReason::Stopped,
                    ..
                }
            ),
            "{h:?}"
        );
        let started = h
            .iter()
            .position(|(_, e)| matches!(e, Happening::TaskStarted { node } if *node != 2))
            .expect("new task");
        assert!(
            stopped < started,
            "{name}: the new task started before the old one stopped"
        );
        let rtts = h[gained].0 - h[released].0;
        assert!(
            rtts <= 3,
            "{name}: owned again {rtts} round trips after its release"
        );
    }
    c.tokens_increase().unwrap();
    assert!(c.violations.is_empty(), "{:?}", c.violations);
}

/// S10.3 on a backend that broadcasts releases but announces no join or
/// leave (S10.5; the SQL and Redis backends): the release's broadcast of a
/// partition the others do not want makes them renew at once, so the leave
/// still hands each partition over within three round trips of its
/// release, not at their next renewal (a renewal interval, 1 s, later).
#[test]
fn s10_3_a_leave_hands_over_within_three_round_trips_without_announcements() {
    let mut c = cluster(3, 12);
    c.model.quiet_groups = true;
    settled_three(&mut c);
    // Away from the renewals of the others, which all follow the last join.
    c.run_for(ms(400));
    let from = c.round;
    c.leave(2);
    settle(&mut c, &[0, 1], Duration::from_secs(5));
    let mut moved = 0;
    for h in c.history.values() {
        let h: Vec<&(u64, Happening)> = h.iter().filter(|(r, _)| *r >= from).collect();
        let released = h
            .iter()
            .find(|(_, e)| matches!(e, Happening::Released { node: 2, .. }));
        let gained = h
            .iter()
            .find(|(_, e)| matches!(e, Happening::Gained { node, .. } if *node != 2));
        if let (Some(released), Some(gained)) = (released, gained) {
            moved += 1;
            let rtts = gained.0 - released.0;
            assert!(
                rtts <= 3,
                "owned again {rtts} round trips after its release"
            );
        }
    }
    assert_eq!(moved, 4);
    assert!(c.violations.is_empty(), "{:?}", c.violations);
}

/// S10.3: after a crash nothing is released; the partitions move once the
/// session has expired, to the remaining members, 4/4/4 → 6/6.
#[test]
fn s10_3_crash_moves_partitions_after_expiry() {
    let mut c = cluster(3, 12);
    settled_three(&mut c);
    let crashed_at = c.now;
    c.crash(2);
    let took = settle(&mut c, &[0, 1], Duration::from_secs(10));
    assert_eq!(c.owned_counts()[..2], [6, 6]);
    // Not before the lease (3 s) has run out on the backend.
    assert!(took >= Duration::from_secs(3), "moved after {took:?}");
    let _ = crashed_at;
    c.tokens_increase().unwrap();
    assert!(c.violations.is_empty(), "{:?}", c.violations);
}

/// S10.3 with the mutant: releasing before the task has stopped lets the
/// new owner's task overlap the old one's, and the checker sees it.
#[cfg(feature = "mutants")]
#[test]
fn s10_3_mutant_partition_skips_handover_is_caught() {
    let config = mutant_config(Mutant::PartitionSkipsHandover);
    let mut c = cluster_with(config, 3, 12);
    settled_three(&mut c);
    c.leave(2);
    c.run_for(Duration::from_secs(2));
    assert!(
        c.violations.iter().any(|v| v.contains("tasks of")),
        "the overlap checker did not fire: {:?}",
        c.violations
    );
}

/// S10.4 with the mutant: a member that targets every partition never
/// lets the group balance.
#[cfg(feature = "mutants")]
#[test]
fn s10_4_mutant_group_ignores_share_is_caught() {
    let config = mutant_config(Mutant::GroupIgnoresShare);
    let mut c = cluster_with(config, 3, 12);
    c.run_for(Duration::from_secs(10));
    assert!(c.settled(&[0, 1, 2]).is_err());
}

/// S1.1 with groups: one renewal per member per interval, however many
/// partitions it holds.
#[test]
fn s10_1_one_renewal_per_interval_with_many_partitions() {
    let mut c = cluster(2, 200);
    settle(&mut c, &[0, 1], Duration::from_secs(5));
    let before = c.renewals.clone();
    c.run_for(Duration::from_secs(20));
    for (i, (a, b)) in before.iter().zip(&c.renewals).enumerate() {
        let n = b - a;
        assert!(
            (19..=21).contains(&n),
            "node {i}: {n} renewals in 20 intervals"
        );
    }
}

/// The node that owns each partition now (`None`: nobody).
fn owners(c: &Cluster) -> Vec<Option<usize>> {
    (0..c.partitions)
        .map(|p| {
            let name = partition_name(&c.group, p).unwrap();
            (0..c.nodes.len()).find(|&i| c.nodes[i].held.values().any(|t| t.name == name))
        })
        .collect()
}

/// How many gains each partition had since `round` (a move is a gain).
fn gains_since(c: &Cluster, round: u64) -> Vec<usize> {
    let moves = c.moves_since(round);
    (0..c.partitions)
        .map(|p| {
            let name = partition_name(&c.group, p).unwrap();
            moves.get(&name).copied().unwrap_or(0)
        })
        .collect()
}

/// S10.2: 3 → 4 → 3 members (a join, a graceful leave) and then a crash,
/// each settled before the next: on the join only partitions that go to
/// the joiner move, each once; on the leave and the crash only the
/// partitions of the member that went move, each once. Returns the moves
/// per change, or what broke the rule.
fn sticky_moves(
    partitions: u32,
    config: SimbaConfig,
    batched: bool,
) -> Result<([usize; 3], [Duration; 3]), String> {
    let mut c = Cluster::new("orders", partitions, config, ms(10)).batched(batched);
    for _ in 0..3 {
        c.add_node();
    }
    let limit = Duration::from_secs(10);
    settle(&mut c, &[0, 1, 2], limit);
    let mut moved = [0; 3];
    let mut took = [Duration::ZERO; 3];
    // The join.
    let before = owners(&c);
    let from = c.round + 1;
    let joiner = c.add_node();
    took[0] = settle(&mut c, &[0, 1, 2, 3], limit);
    // S10.3: a partition that moves to the joiner is `Rebalanced`.
    for h in c.history.values() {
        for (r, e) in h {
            if let Happening::Lost { reason, .. } = e {
                if *r >= from && *reason != RevokeReason::Rebalanced {
                    return Err(format!("join: a partition was lost as {reason:?}"));
                }
            }
        }
    }
    let (after, gains) = (owners(&c), gains_since(&c, from));
    for p in 0..partitions as usize {
        let changed = before[p] != after[p];
        if changed && after[p] != Some(joiner) {
            return Err(format!(
                "join: partition {p} moved {:?} → {:?}",
                before[p], after[p]
            ));
        }
        if gains[p] > usize::from(changed) {
            return Err(format!("join: partition {p} gained {} times", gains[p]));
        }
    }
    moved[0] = gains.iter().sum();
    // The graceful leave of an old member, then the crash of another.
    for (k, (gone, stay)) in [(1usize, [0usize, 2, 3]), (2, [0, 3, 3])]
        .into_iter()
        .enumerate()
    {
        let before = owners(&c);
        let from = c.round + 1;
        if k == 0 {
            c.leave(gone);
        } else {
            c.crash(gone);
        }
        let mut stay = stay.to_vec();
        stay.dedup();
        took[k + 1] = settle(&mut c, &stay, limit);
        let (after, gains) = (owners(&c), gains_since(&c, from));
        for p in 0..partitions as usize {
            let was_gones = before[p] == Some(gone);
            if before[p] != after[p] && !was_gones {
                return Err(format!(
                    "{}: partition {p} moved {:?} → {:?} between members who stay",
                    ["leave", "crash"][k],
                    before[p],
                    after[p]
                ));
            }
            if gains[p] > usize::from(was_gones) {
                return Err(format!("partition {p} gained {} times", gains[p]));
            }
        }
        moved[k + 1] = gains.iter().sum();
    }
    c.tokens_increase()?;
    if !c.violations.is_empty() {
        return Err(format!("{:?}", c.violations));
    }
    Ok((moved, took))
}

#[test]
fn s10_2_only_the_partitions_that_must_move_move() {
    // Each round's inputs one by one, and as one batch (`handle_all`).
    for (partitions, batched) in [1, 2, 7, 8, 12, 40, 1000]
        .into_iter()
        .flat_map(|p| [(p, false), (p, true)])
    {
        let (moved, took) = sticky_moves(partitions, config(), batched).unwrap();
        // The minimum: the joiner's share of 4; the leaver's of 4; the
        // crashed member's of 3.
        let (p, share) = (partitions as usize, |p: usize, m: usize| p / m);
        assert!(
            (share(p, 4)..=p.div_ceil(4)).contains(&moved[0]),
            "{partitions}: {moved:?}"
        );
        assert!(
            (share(p, 4)..=p.div_ceil(4)).contains(&moved[1]),
            "{partitions}: {moved:?}"
        );
        assert!(
            (share(p, 3)..=p.div_ceil(3)).contains(&moved[2]),
            "{partitions}: {moved:?}"
        );
        println!(
            "{partitions} partitions (batched: {batched}): moved {moved:?}, settled after {took:?} (join, leave, crash)"
        );
    }
}

/// S10.2 with the mutant: the stateless rule of the membership alone moves
/// partitions between members who stay, and the move count sees it.
#[cfg(feature = "mutants")]
#[test]
fn s10_2_mutant_group_not_sticky_is_caught() {
    let config = mutant_config(Mutant::GroupNotSticky);
    let broken = sticky_moves(40, config, true).unwrap_err();
    println!("caught: {broken}");
}

/// S10.2: a lone first member owns its partitions within a few round
/// trips of starting, not a renewal interval (1 s) later.
#[test]
fn s10_2_a_first_member_owns_its_partitions_at_once() {
    let mut c = cluster(1, 8);
    let took = settle(&mut c, &[0], Duration::from_secs(5));
    assert!(took <= ms(60), "settled after {took:?}");
}

/// S10.2, S10.5: a renewal sent before the member's join was confirmed
/// cannot list it. ZooKeeper announces the join's own node before the
/// join's reply, and the member renews on that broadcast: the renewal that
/// follows goes as soon as that reply comes, not `min_backoff` (100 ms)
/// after the first was sent. Before, a lone first member's first partition
/// came about 100 ms late in most ZooKeeper bench runs (116–130 ms against
/// 15–22 ms).
#[test]
fn s10_2_a_renewal_sent_before_the_join_was_confirmed_is_followed_at_once() {
    let t0 = Timestamp::from_nanos(1_000_000_000);
    let (mut e, g, session) = joined(8, t0, t0);
    let join = join_sent(&mut e).unwrap();
    let renewal = |e: &mut Engine| {
        drain(e).into_iter().find_map(|c| match c {
            Command::Renew { op, .. } => Some(op),
            _ => None,
        })
    };
    e.handle(t0, Input::ReleaseBroadcast { name: g.clone() });
    e.handle_timeout(t0);
    let first = renewal(&mut e).expect("a renewal on the group's broadcast");
    let t1 = t0 + ms(1);
    e.handle(
        t1,
        Input::GroupJoined {
            op: join,
            result: Ok(()),
        },
    );
    let t2 = t1 + ms(1);
    let reply = |op, members| renewed(op, Some((&g, members)));
    e.handle(t2, reply(first, Vec::new()));
    e.handle_timeout(t2);
    let second = renewal(&mut e).expect("a renewal as soon as the first's reply came");
    // Its reply lists the member, which asks for its partitions at once.
    e.handle(t2 + ms(1), reply(second, vec![session]));
    e.handle_timeout(t2 + ms(1));
    let asked = drain(&mut e)
        .iter()
        .filter(|c| matches!(c, Command::Acquire { .. } | Command::Batch { .. }))
        .count();
    assert!(
        asked > 0,
        "no acquire after the renewal that listed the member"
    );
}

/// What a proptest run does to the group.
#[derive(Clone, Debug)]
enum Op {
    Add,
    Leave(usize),
    Crash(usize),
    Wait(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => Just(Op::Add),
        1 => (0usize..8).prop_map(Op::Leave),
        1 => (0usize..8).prop_map(Op::Crash),
        3 => (1u64..300).prop_map(Op::Wait),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// S10.4: whatever joins, leaves and crashes happen (in any order of
    /// backend execution), once they stop: every partition is owned by the
    /// member the rule gives it, max − min ≤ 1, within one lease duration
    /// plus a few renewal intervals; after every member has seen the final
    /// membership each partition moves at most once, and then never again.
    /// At no instant do two members hold a valid term of one partition or
    /// run two tasks of it.
    #[test]
    fn s10_4_converges_balanced_without_flapping(
        ops in proptest::collection::vec(op(), 1..12),
        partitions in 1u32..40,
        seed in any::<u64>(),
        batched in any::<bool>(),
    ) {
        // Batched: each round's replies and broadcasts reach a member as
        // one `handle_all`, which computes its target once for all of them.
        let mut c = Cluster::new("orders", partitions, config(), ms(10))
            .shuffled(seed)
            .batched(batched);
        c.add_node();
        for op in ops {
            match op {
                Op::Add => { c.add_node(); }
                Op::Leave(i) => {
                    let alive: Vec<usize> = (0..c.nodes.len()).filter(|&n| c.nodes[n].alive).collect();
                    if alive.len() > 1 { c.leave(alive[i % alive.len()]); }
                }
                Op::Crash(i) => {
                    let alive: Vec<usize> = (0..c.nodes.len()).filter(|&n| c.nodes[n].alive).collect();
                    if alive.len() > 1 { c.crash(alive[i % alive.len()]); }
                }
                Op::Wait(r) => c.run(r),
            }
        }
        let members: Vec<usize> = (0..c.nodes.len())
            .filter(|&n| {
                c.nodes[n].alive
                    && c.nodes[n].engine.group(&c.group).is_some_and(|g| !g.leaving)
            })
            .collect();
        if members.is_empty() {
            return Ok(());
        }
        // Wait until every member has seen the final membership: the
        // sessions of all the members (a member added last may not have
        // opened its session yet), once the backend lists exactly them (a
        // crashed member stays listed until its session expires; before its
        // join was applied a member may have seen the final set briefly).
        let seen_by_all = |c: &Cluster| {
            let mut final_members: Vec<SessionId> = members
                .iter()
                .filter_map(|&i| c.nodes[i].engine.session_deadline().map(|(s, _)| s))
                .collect();
            final_members.sort_unstable();
            final_members.len() == members.len()
                && c.model.live_members(&c.group, c.now) == final_members
                && members.iter().all(|&i| {
                    c.nodes[i].engine.group(&c.group).is_some_and(|g| g.members == final_members)
                })
        };
        let start = c.now;
        while !seen_by_all(&c) && c.now - start < Duration::from_secs(5) {
            c.step();
        }
        prop_assert!(seen_by_all(&c), "members never agreed on the membership");
        let seen_round = c.round;
        // Bound: a crashed member's session expires within one lease (3 s);
        // then every member renews within one interval (1 s) and the moves
        // take a few round trips. Stated bound: lease + 2 intervals.
        let took = settle(&mut c, &members, Duration::from_secs(5));
        prop_assert!(took <= Duration::from_secs(5));
        // Moves logged in `seen_round` itself may precede the seeing (a
        // reply handled earlier in the same round).
        let moves = c.moves_since(seen_round + 1);
        prop_assert!(moves.values().all(|&m| m <= 1), "a partition moved twice: {:?}", moves);
        // From now on nothing moves (the gains logged in `c.round` itself
        // are the ones that settled the group).
        let settled_round = c.round;
        c.run_for(Duration::from_secs(5));
        let moves = c.moves_since(settled_round + 1);
        prop_assert!(moves.values().all(|&m| m == 0), "flapping after settling: {:?}", moves);
        prop_assert!(c.settled(&members).is_ok());
        c.tokens_increase().map_err(TestCaseError::fail)?;
        prop_assert!(c.violations.is_empty(), "{:?}", c.violations);
    }
}

/// S10.2: a member short of its share finds every free partition, however
/// far down its order. With one acquire at a time (S4.6, a pool of one
/// connection) and 1,000 partitions, three members joining a round apart
/// left partitions unowned for good: each `Held` mark lapsed at the
/// holder's expiry (3 s, 300 tries), and the member went back to its
/// favourite partitions, held by others, before it reached a free one.
#[test]
fn s10_2_a_member_short_of_its_share_finds_every_free_partition() {
    for (first, second) in [(1, 1), (50, 3)] {
        let mut c = Cluster::new("orders", 1000, config(), ms(10));
        c.profile.call_slots = Some(1);
        c.add_node();
        c.run(first);
        c.add_node();
        c.run(second);
        c.add_node();
        settle(&mut c, &[0, 1, 2], Duration::from_secs(20));
        assert_eq!(c.owned_counts(), vec![334, 333, 333]);
        assert!(c.violations.is_empty(), "{:?}", c.violations);
    }
}

/// Rounds from the leaver's loss, and from its release, to the new owner's
/// gain, for every partition `leaver` lost since `from`.
/// Member 3 of 4 leaves; runs until members 0, 1 and 2 have settled
/// (within `limit`). Returns how many partitions it held, how long the
/// others took to settle, and the rounds from each of its releases to the
/// new owner's gain ([`leave_gaps`]).
fn last_leaves(c: &mut Cluster, limit: Duration) -> (usize, Duration, Vec<u64>) {
    let held = c.nodes[3].held.len();
    let from = c.round;
    c.leave(3);
    let took = settle(c, &[0, 1, 2], limit);
    let (_, gaps) = leave_gaps(c, 3, from);
    (held, took, gaps)
}

fn leave_gaps(c: &Cluster, leaver: usize, from: u64) -> (Vec<u64>, Vec<u64>) {
    let (mut since_lost, mut since_released) = (Vec::new(), Vec::new());
    for h in c.history.values() {
        let h: Vec<&(u64, Happening)> = h.iter().filter(|(r, _)| *r >= from).collect();
        let lost = h
            .iter()
            .find(|(_, e)| matches!(e, Happening::Lost { node, .. } if *node == leaver));
        let released = h
            .iter()
            .find(|(_, e)| matches!(e, Happening::Freed { node } if *node == leaver));
        let gained = h
            .iter()
            .find(|(_, e)| matches!(e, Happening::Gained { node, .. } if *node != leaver));
        if let (Some(lost), Some(released), Some(gained)) = (lost, released, gained) {
            since_lost.push(gained.0 - lost.0);
            since_released.push(gained.0 - released.0);
        }
    }
    since_lost.sort_unstable();
    since_released.sort_unstable();
    (since_lost, since_released)
}

fn p50_p99_max(v: &[u64]) -> (u64, u64, u64) {
    let at = |q: usize| v[(v.len() * q / 100).min(v.len() - 1)];
    (at(50), at(99), v.last().copied().unwrap_or(0))
}

/// S10.3 with S4.6: 1,000 partitions, one connection per member (one
/// acquire slot, and the leaver's 250 releases run one at a time): 4 → 3.
/// Returns the rounds from the leaver's loss, and from the backend running
/// its release, to the new owner's gain, per moved partition.
fn thousand_partition_leave() -> (Vec<u64>, Vec<u64>) {
    thousand_partition_leave_in(1).0
}

/// [`thousand_partition_leave`] with up to `batch` calls in one (S4.7);
/// also the calls the leaver and the others sent from the leave on.
fn thousand_partition_leave_in(batch: usize) -> ((Vec<u64>, Vec<u64>), (u64, u64)) {
    let mut c = Cluster::new("orders", 1000, config(), ms(10)).batches(batch);
    c.model.quiet_groups = true;
    c.profile.call_slots = Some(1);
    c.connections = Some(1);
    for _ in 0..4 {
        c.add_node();
    }
    settle(&mut c, &[0, 1, 2, 3], Duration::from_secs(60));
    c.run_for(ms(400));
    let from = c.round;
    let calls = c.calls.clone();
    c.leave(3);
    settle(&mut c, &[0, 1, 2], Duration::from_secs(60));
    assert!(c.violations.is_empty(), "{:?}", c.violations);
    c.tokens_increase().unwrap();
    let leaver = c.calls[3] - calls[3];
    let others = (0..3).map(|i| c.calls[i] - calls[i]).sum();
    (leave_gaps(&c, 3, from), (leaver, others))
}

/// S4.7 with S10.3 and S4.6: the same leave of 250 of 1,000 partitions
/// through one connection per member, with batches of up to 64 calls.
/// The leaver releases its 250 partitions in 4 calls instead of 250, and
/// each member asks for its part of them in a call or two: from its loss
/// (the leaver's task stopped), no partition is unowned for more than 13
/// round trips (p50 11), where one call per partition left it so for up to
/// 257 (p50 134: the leaver's releases one after the other); from its
/// release, 2 either way. The members sent 30 calls instead of 1,089,
/// the leaver 6 instead of 254.
#[test]
fn s4_7_s10_3_with_batches_a_thousand_partition_leave_moves_in_a_few_round_trips() {
    let ((lost_one, released_one), (leaver_one, others_one)) = thousand_partition_leave_in(1);
    let ((lost, released), (leaver, others)) = thousand_partition_leave_in(64);
    assert_eq!(released.len(), 250);
    println!(
        "one call each: from the loss p50/p99/max {:?}, from the release {:?}, calls: leaver {leaver_one}, others {others_one}",
        p50_p99_max(&lost_one),
        p50_p99_max(&released_one)
    );
    println!(
        "batches of 64: from the loss p50/p99/max {:?}, from the release {:?}, calls: leaver {leaver}, others {others}",
        p50_p99_max(&lost),
        p50_p99_max(&released)
    );
    let (_, _, max_lost) = p50_p99_max(&lost);
    let (_, _, max_released) = p50_p99_max(&released);
    assert!(max_released <= 3, "from the release: {released:?}");
    // From the loss: the tasks' 6 rounds to stop, the leave's answer, the
    // 4 release calls on the one connection, then the broadcast's acquire.
    assert!(max_lost <= 6 + 1 + 4 + 2, "from the loss: {lost:?}");
    assert!(
        leaver * 10 < leaver_one,
        "leaver's calls: {leaver} against {leaver_one}"
    );
}

/// S10.3, S10.2 and S4.6: with one acquire slot, a partition the leaver
/// has released is owned again a round trip or two later, though 250 are
/// released one after the other and each remaining member asks for 83 of
/// them one at a time. Each member takes first the part of the leaver's
/// partitions the change hands to it (`planned_by_change`: no two members
/// ask for the same one), then those a broadcast says are released, and a
/// release's broadcast sends its acquire ahead of the others waiting for
/// the slot. Before, the members spent their one slot asking for partitions
/// the leaver still held while released ones waited in no member's target:
/// 14 / 180 / 246 round trips (p50 / p99 / max) from the release; with the
/// targets but no priority for the slot, 10 / 79 / 80; now 1 / 2 / 2. The
/// bound: the acquire in flight on the slot, the acquire itself and one
/// more for a partition two members asked for at once, with one to spare.
#[test]
fn s10_3_s4_6_a_released_partition_is_asked_for_first_with_one_acquire_slot() {
    let (lost, released) = thousand_partition_leave();
    assert_eq!(released.len(), 250);
    let (p50, p99, max) = p50_p99_max(&released);
    println!(
        "moved {}; round trips from the loss p50/p99/max {:?}; from the release {:?}",
        lost.len(),
        p50_p99_max(&lost),
        (p50, p99, max)
    );
    assert!(
        max <= 4,
        "owned again {max} round trips after its release: {released:?}"
    );
}

/// S10.3: a leaver's partitions are released only once the backend has
/// answered its `LeaveGroup` (or the call failed). The members who stay
/// renew on a release's broadcast; a release that ran before the leave
/// left them a renewal that still listed the leaver, so they did not take
/// the partition until one more renewal (Redis, 8 partitions: 102 ms
/// instead of about 1 ms in `simba-bench --only groups`).
#[test]
fn s10_3_a_leaver_releases_its_partitions_once_its_leave_is_answered() {
    for leave_ok in [true, false] {
        let t0 = Timestamp::from_nanos(1_000_000_000);
        let mut now = t0 + ms(10);
        let (mut e, g, me) = joined(2, t0, now);
        // Join, renew (listing this member alone), win both partitions.
        let mut won = 0;
        for _ in 0..20 {
            now = now + ms(10);
            e.handle_timeout(now);
            for c in drain(&mut e) {
                let input = match c {
                    Command::JoinGroup { op, .. } => Input::GroupJoined { op, result: Ok(()) },
                    Command::Renew { op, .. } => renewed(op, Some((&g, vec![me]))),
                    Command::Acquire { op, .. } => {
                        won += 1;
                        Input::AcquireReplied {
                            op,
                            result: Ok(AcquireOutcome::Won {
                                token: Token::new(won).unwrap(),
                                remaining: Duration::from_secs(3),
                            }),
                        }
                    }
                    _ => continue,
                };
                e.handle(now, input);
            }
            if won == 2 {
                break;
            }
        }
        assert_eq!(e.group(&g).unwrap().owned.len(), 2, "both partitions owned");
        now = now + ms(10);
        e.leave_group(now, &g).unwrap();
        let sent = drain(&mut e);
        let leave = sent
            .iter()
            .find_map(|c| match c {
                Command::LeaveGroup { op, .. } => Some(*op),
                _ => None,
            })
            .expect("the leave is sent at once");
        assert!(
            !sent.iter().any(|c| matches!(c, Command::Release { .. })),
            "a partition was released before the leave was answered: {sent:?}"
        );
        now = now + ms(10);
        e.handle(
            now,
            Input::GroupLeft {
                op: leave,
                result: if leave_ok {
                    Ok(())
                } else {
                    Err(BackendError::new(BackendErrorKind::Unavailable, "down"))
                },
            },
        );
        let released = drain(&mut e)
            .iter()
            .filter(|c| matches!(c, Command::Release { .. }))
            .count();
        assert_eq!(released, 2, "leave answered ok = {leave_ok}");
    }
}

/// S3.4, S4.6, S10.3: a lone member holding 1,000 partitions through 2
/// connections gives up 666 when two more join: each is released once.
/// Before, a renewal that listed a partition whose release still waited
/// for a connection counted it an orphan and queued one more release, at
/// every renewal (and the member renewed on the broadcast of each of its
/// own releases): 143,572 releases, never settled, on a PostgreSQL bench
/// run 108,674 releases in 53 s and 83 partitions unowned after 50 s.
#[test]
fn s3_4_s10_3_a_release_waiting_for_a_connection_is_not_an_orphan() {
    let mut c = cluster(0, 1000);
    c.connections = Some(2);
    c.profile.call_slots = Some(2);
    c.add_node();
    settle(&mut c, &[0], Duration::from_secs(30));
    let (releases, renewals) = (c.counts.release, c.counts.renew);
    c.add_node();
    c.add_node();
    settle(&mut c, &[0, 1, 2], Duration::from_secs(60));
    assert_eq!(
        c.counts.release - releases,
        666,
        "each moved partition released once"
    );
    let renewals = c.counts.renew - renewals;
    let before = c.counts.release;
    c.run_for(Duration::from_secs(10));
    assert_eq!(c.counts.release, before, "no release once settled");
    assert!(
        renewals < 700,
        "{renewals} renewals while 666 partitions moved (one per broadcast at most)"
    );
}

/// S10.2, S10.3: after a join moved partitions to the joiner (so no member
/// holds its partitions of the base rule any more), a graceful leave hands
/// each partition over one round after its release, and costs one acquire
/// per moved partition from the first release on, whether each member is
/// fed what came at once as one batch (`Engine::handle_all`, as the
/// client's driver does) or one input at a time: each member that stays asks only for partitions the
/// leaver released, and no two ask for the same one. A member's part of the
/// change is split from the partitions the release broadcasts named, in the
/// order they came, not from the base rule's owners.
///
/// Before (the part split from the base rule's owners alone), on the same
/// runs: 8 partitions, an old member leaving, 5 acquires and 4 rounds for 2
/// moved partitions in 2 of 6 seeds; 1,000 partitions, batched, 489–874
/// acquires for 250, the last owned 66–267 rounds after its release. Now
/// 250 acquires and 1 round. Fed one input at a time, a member that had
/// seen some of the releases guessed at the rest, so more were asked for
/// (about 345 for 250), and a partition was owned again within 3 rounds of
/// its release up to 40 partitions, 5 with 1,000 (before: 60–114); now a
/// member asks only for its part while the change's releases come, and
/// drops the base rule's guesses once one has come: one acquire per moved
/// partition and one round, fed one by one or batched.
#[test]
fn s10_2_s10_3_a_graceful_leave_asks_once_per_moved_partition() {
    for partitions in [8, 12, 40, 1000] {
        let seeds = if partitions < 1000 { 6 } else { 2 };
        for seed in 0..seeds {
            for (leaver, batched) in [(3, false), (3, true), (1, true)] {
                // Every member renews after the join's hand-overs: a
                // change within a renewal of the one before it may be split
                // from releases of that one (S10.2).
                let (run, max, asked, moved) = leave_after_join(
                    partitions,
                    seed,
                    batched,
                    leaver,
                    config().renew_interval() * 2,
                );
                println!("{run}");
                // Fed one input at a time too: a member asks only for its
                // part while the change's releases come, and drops the
                // base rule's guesses once one has come (S10.2). Before,
                // with 1,000 partitions, about 345 acquires for 250 and up
                // to 5 rounds; up to 3 with 40.
                assert!(max <= 1, "{run}");
                assert_eq!(asked, moved, "{run}");
            }
        }
    }
}

/// S10.2, S10.3: a graceful leave right after a join (the bench's 3 → 4 →
/// 3, where the leave comes as soon as the join has settled), of the
/// joiner or of an old member, fed one input at a time or in batches:
/// every moved partition is owned one round after its release, and each
/// member asks once per moved partition from the first release on. A
/// member whose renewal spanned the join and the leave split the leave
/// from the join's hand-overs first; each release of the leaver named one
/// of them again and shifted its part, members won partitions of the
/// others' parts and handed them over, and a partition nobody's part held
/// waited behind stale releases (1,000 partitions: up to 81 rounds; an old
/// member leaving, up to 80). The joiner, whose first view made no change,
/// split the leave from the hand-overs that gave it its partitions.
#[test]
fn s10_2_s10_3_a_leave_right_after_a_join_is_split_alike() {
    for partitions in [8, 40, 1000] {
        let seeds = if partitions < 1000 { 6 } else { 2 };
        for seed in 0..seeds {
            for rounds in [0u32, 20, 90] {
                for (leaver, batched) in [(3, false), (3, true), (1, false), (0, true)] {
                    let after = ms(10) * rounds;
                    let (run, max, asked, moved) =
                        leave_after_join(partitions, seed, batched, leaver, after);
                    assert!(max <= 1, "{run}");
                    assert_eq!(asked, moved, "{run}");
                }
            }
        }
    }
}

/// 3 → 4 → 3 members of a group of `partitions` (a round trip of 10 ms,
/// inputs shuffled by `seed`, fed as batches or one at a time): the fourth
/// joins, `after` the join has settled member `leaver` leaves. Returns how
/// the run went, the most rounds a moved partition waited from its
/// release, the acquires sent from the first release on, and the
/// partitions moved (each checked to have been released by the leaver).
fn leave_after_join(
    partitions: u32,
    seed: u64,
    batched: bool,
    leaver: usize,
    after: Duration,
) -> (String, u64, usize, usize) {
    let mut c = Cluster::new("orders", partitions, config(), ms(10))
        .shuffled(seed)
        .batched(batched);
    for _ in 0..3 {
        c.add_node();
    }
    let limit = Duration::from_secs(20);
    settle(&mut c, &[0, 1, 2], limit);
    c.add_node();
    settle(&mut c, &[0, 1, 2, 3], limit);
    c.run_for(after);
    let from = c.round;
    c.leave(leaver);
    // The members learn of the leave before its releases (the leaver's
    // tasks stop first) and may ask for a partition the leaver still holds
    // meanwhile; what counts is what they ask for once the releases come.
    let freed = |c: &Cluster| {
        c.history
            .values()
            .flatten()
            .any(|(r, h)| *r >= from && matches!(h, Happening::Freed { node } if *node == leaver))
    };
    let mut acquires = c.counts.acquire;
    while !freed(&c) {
        acquires = c.counts.acquire;
        c.step();
    }
    let stay: Vec<usize> = (0..4).filter(|&i| i != leaver).collect();
    settle(&mut c, &stay, limit);
    assert!(c.violations.is_empty(), "{:?}", c.violations);
    // The join's last gains may come in the round the leave is called in.
    let moved: usize = gains_since(&c, from + 1).iter().sum();
    let asked = (c.counts.acquire - acquires) as usize;
    let (_, gaps) = leave_gaps(&c, leaver, from);
    let run = format!(
        "{partitions} partitions, seed {seed}, leaver {leaver} {after:?} after the join, \
         batched {batched}: {asked} acquires for {moved} moved partitions, rounds from \
         the release p50/p99/max {:?}",
        p50_p99_max(&gaps)
    );
    assert_eq!(gaps.len(), moved, "{run}");
    (run, gaps.last().copied().unwrap_or(0), asked, moved)
}

/// S10.2: the joiner leaves while the join's hand-overs are under way (its
/// acquires wait for its 8 call slots, S4.6), holding part of its share or
/// none: its leave releases fewer partitions than the leave moves. Until
/// its first release such a leave is split from the join's hand-overs, and
/// from when a member sees it until a pause after its last release, the
/// member asks only for the partitions of its part released since; a pause
/// after the last release, the join's hand-overs nobody was seen to take
/// join the list. A leave 1 to 39 rounds after the join (10 to 390 ms; the
/// joiner then holds 0 to 238 partitions) is checked, each shuffled
/// differently: each partition the joiner released is owned again within
/// three round trips of its release (S10.3), and the group is balanced
/// within 600 ms of the leave. The bound: the old members' tasks stop (6
/// rounds), the joiner's releases run 8 at a time (up to 32 rounds), the
/// pause (`min_backoff`, 10 rounds) and a few round trips. Now: at most
/// 480 ms, and each release owned again one round trip after it.
///
/// Before, the part was split from the base rule's guesses until the first
/// release, and a member asked for all of it: members won partitions the
/// split of the releases then gave to others, who were at their share
/// already, and the members short of their share searched for the rest
/// one `Held` reply at a time. Over 117 such leaves (1 to 39 rounds after
/// the join, 3 shuffles each, run outside the suite): up to 1.59 s to a
/// balanced group and a release unowned up to 87 rounds before; at most
/// 480 ms and one round now. Reverted one at a time, each of these fails
/// the test: without the wait from when the leave is seen, or with the
/// member asking for its whole part while it waits, a release of the
/// leave 21 rounds after the join is owned again 61 rounds after it;
/// without the partitions named again asked for first (a late win of the
/// joiner, released), the leave 3 rounds after the join takes 1.33 s.
/// (Split from the base rule's guesses rather than the join's hand-overs
/// before the first release, the test still passes: what the member may
/// ask for while it waits holds the guesses back.)
#[test]
fn s10_2_a_joiner_that_leaves_while_its_hand_overs_are_under_way() {
    for rounds in 1..40u64 {
        let mut c = Cluster::new("orders", 1000, config(), ms(10)).shuffled(rounds);
        for _ in 0..3 {
            c.add_node();
        }
        let limit = Duration::from_secs(20);
        settle(&mut c, &[0, 1, 2], limit);
        c.profile.call_slots = Some(8);
        c.add_node();
        c.run(rounds);
        let (held, took, gaps) = last_leaves(&mut c, limit);
        let worst = gaps.last().copied().unwrap_or(0);
        println!(
            "left {rounds} rounds after the join holding {held}: settled after {took:?}, \
             each release owned again within {worst} rounds"
        );
        assert!(held < 250, "the joiner held its share already: {held}");
        assert_eq!(gaps.len(), held, "left holding {held}: {gaps:?}");
        assert!(
            worst <= 3,
            "left {rounds} rounds after the join holding {held}: a release owned again \
             {worst} rounds after it"
        );
        assert!(
            took <= ms(600),
            "left {rounds} rounds after the join holding {held}: settled after {took:?}"
        );
    }
}

/// S10.3 on a backend whose broadcasts a member reads every few round
/// trips (MariaDB's waker reads its release log so): 3 → 4 → 3 members,
/// the joiner leaving 0 to 3 rounds after the join settled, reads every 2
/// or 4 rounds (each member at its own phase), 8 and 40 partitions. Each
/// partition the leaver released is owned again within the read's delay
/// and two round trips (its broadcast read, the new owner's acquire), and
/// no two members hold one at once.
#[test]
fn s10_3_a_leave_hands_over_promptly_when_broadcasts_are_read_by_polling() {
    for partitions in [8u32, 40] {
        for every in [2u64, 4] {
            for extra in 0..4u64 {
                for seed in 0..2u64 {
                    let mut c = Cluster::new("orders", partitions, config(), ms(5))
                        .shuffled(extra * 131 + seed * 7 + every);
                    c.polled = Some(every);
                    for _ in 0..3 {
                        c.add_node();
                    }
                    let limit = Duration::from_secs(20);
                    settle(&mut c, &[0, 1, 2], limit);
                    c.run(seed * 3);
                    c.add_node();
                    settle(&mut c, &[0, 1, 2, 3], limit);
                    c.run(extra);
                    let (held, took, gaps) = last_leaves(&mut c, limit);
                    let worst = gaps.last().copied().unwrap_or(0);
                    let run = format!(
                        "{partitions} partitions, read every {every} rounds, left {extra} rounds \
                         after the join settled holding {held} (seed {seed}): settled after \
                         {took:?}, rounds from the release p50/p99/max {:?}",
                        p50_p99_max(&gaps)
                    );
                    assert!(c.violations.is_empty(), "{run}: {:?}", c.violations);
                    assert_eq!(gaps.len(), held, "{run}");
                    assert!(worst <= every + 2, "{run}");
                }
            }
        }
    }
}

/// The partitions node `i` holds, by name.
fn owned(c: &Cluster, i: usize) -> BTreeSet<LeaseName> {
    c.nodes[i].held.values().map(|h| h.name.clone()).collect()
}

/// S10.2: a change that undoes the change before (the joiner leaves while
/// its join's hand-overs are still under way, 1,000 partitions) gives
/// each member back exactly what it handed over: every member knows its
/// own hand-overs, whatever releases it heard, so the parts agree. Each
/// member asks for its own as the leaver releases them, and for those the
/// joiner never took once the leaver's releases pause (S10.3).
///
/// Three backend profiles (batches of 64 through 10 connections; one call
/// per acquire through 32 or 8), broadcasts in the round of their release
/// or read every 3 rounds, the joiner leaving after its first partition
/// or its 50th; the seeds are those where, split from the releases each
/// member heard, the members split the leave differently: up to 575
/// acquires for 250 moved partitions, settled only after 1.65 s.
/// Now: each member ends with the partitions it held before the join (the
/// old split failed this at the first case), all have settled within 1 s
/// (measured: at most 370 ms), and every acquire a member sends wins: it
/// asks at once only for hand-overs the leaver released, not for those
/// whose first naming (the join's own hand-over) was still in its window
/// (asked for too, 3 acquires met `Held` in one case of the 108 here).
#[test]
fn s10_2_a_joiner_that_leaves_during_its_join_gives_each_member_its_hand_overs_back() {
    for seed in [1u64, 2, 13, 14, 17, 20, 25, 26, 32] {
        for held in [1usize, 50] {
            for polled in [None, Some(3)] {
                let config = config().to_builder().seed(seed).build().unwrap();
                let profile = (seed % 3) as usize;
                let mut c = Cluster::new("orders", 1000, config, ms(10))
                    .batches([1, 64, 1][profile])
                    .shuffled(seed);
                c.connections = Some([32, 10, 8][profile]);
                c.profile.call_slots = c.connections;
                c.polled = polled;
                for _ in 0..3 {
                    c.add_node();
                }
                settle(&mut c, &[0, 1, 2], Duration::from_secs(60));
                c.run((seed * 7) % 50);
                let before: Vec<BTreeSet<LeaseName>> = (0..3).map(|i| owned(&c, i)).collect();
                c.add_node();
                let start = c.now;
                while c.nodes[3].held.len() < held {
                    assert!(c.now - start < Duration::from_secs(5), "the join stalled");
                    c.step();
                }
                let stats: Vec<Stats> = (0..3).map(|i| c.nodes[i].engine.stats()).collect();
                c.leave(3);
                let took = settle(&mut c, &[0, 1, 2], Duration::from_secs(5));
                let case = format!("seed {seed}, leave at {held} held, polled {polled:?}");
                assert!(c.violations.is_empty(), "{case}: {:?}", c.violations);
                for i in 0..3 {
                    assert_eq!(
                        owned(&c, i),
                        before[i],
                        "{case}: member {i} got other partitions back"
                    );
                    let now = c.nodes[i].engine.stats();
                    let sent = now.acquires - stats[i].acquires;
                    let won = now.terms - stats[i].terms;
                    assert!(
                        sent == won,
                        "{case}: member {i} sent {sent} acquires and won {won}"
                    );
                }
                assert!(
                    took <= Duration::from_secs(1),
                    "{case}: settled after {took:?}"
                );
            }
        }
    }
}
