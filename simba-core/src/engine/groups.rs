//! Partitioned groups (S10): joining and leaving, the membership each
//! renewal reports, and the partitions this member should own (S10.2).
//!
//! Each partition is an ordinary entry of kind [`Kind::Partition`]: it is
//! acquired, held, revoked and handed over exactly like an election's lease
//! (S4, S6), with its own term and fencing token. This module only decides
//! which partitions should have a candidate entry (the member's target) and
//! stops those that should not (S10.3).

use super::{Engine, MutantKind};
use crate::election::{Entry, Kind, LockWait, Status};
use crate::error::{ApiError, BackendError, BackendErrorKind};
use crate::group::{
    freed_by_change, grown_by, moved_by_change, moved_in_all, parse_partition_name, partition_name,
    planned_from, sticky_target_from_base, target_partitions, GroupSnapshot, StickyInput,
};
use crate::ids::{EntryId, OpId, SessionId, Token};
use crate::name::LeaseName;
use crate::protocol::{Command, Event, GroupView, RevokeReason, TaskExitPolicy};
use crate::time::Timestamp;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::time::Duration;

/// What a `Held` reply told of a partition's holder (S10.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Known {
    holder: SessionId,
    /// The holder's token, where the reply told it.
    token: Option<Token>,
    /// A release broadcast came since an earlier `Held` reply named the
    /// same holder and token: on this backend, withdrawing a waiting place
    /// is seen as a release (etcd, ZooKeeper), and that echo is no release
    /// of the holder's term.
    echo: bool,
    /// The withdraws this member sent for the partition since the reply:
    /// with `echo`, as many release broadcasts are taken for their echoes.
    withdrawn: u32,
    /// Not worth asking again before this instant unless the partition is
    /// released (S4.4): the holder's expiry as the reply timed it.
    until: Option<Timestamp>,
    /// When the reply came: once the mark is old, the oldest tries are
    /// tried again first (S10.2).
    at: Timestamp,
}

impl Known {
    /// Whether the mark still says the partition is taken (S10.2): until
    /// the holder's expiry the reply timed (S4.4) or, without one, for two
    /// renewal periods (`period`) after the reply. Counted in time, not in
    /// renewals: every release broadcast of a partition this member does
    /// not want brings a renewal (S10.3), so on a backend that echoes
    /// withdraws a mark counted in renewals lapsed within milliseconds.
    fn fresh(&self, now: Timestamp, period: Duration) -> bool {
        match self.until {
            Some(until) => now < until,
            None => now < self.at + period.saturating_mul(2),
        }
    }
}

/// Where this member's membership of a group stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Join {
    /// A `JoinGroup` must be sent (with the next session, or after a failure).
    Needed,
    /// A `JoinGroup` is in flight since `sent_at`.
    Joining {
        op: OpId,
        session: SessionId,
        sent_at: Timestamp,
    },
    /// The backend confirmed the membership of `session`; `seq` is the
    /// engine's input sequence number of the confirmation.
    Joined { session: SessionId, seq: u64 },
}

/// Where a `leave_group` stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Leave {
    /// Not leaving.
    No,
    /// A `LeaveGroup` must be sent.
    Needed,
    /// A `LeaveGroup` is in flight since `sent_at`.
    Leaving { op: OpId, sent_at: Timestamp },
    /// The membership has ended (left, or the session is gone).
    Left,
}

/// One partitioned group this engine has joined.
#[derive(Clone, Debug)]
pub(super) struct Group {
    /// The id `join_group` returned; every partition's entry carries it.
    pub(super) id: EntryId,
    pub(super) partitions: u32,
    pub(super) runs_task: bool,
    pub(super) policy: TaskExitPolicy,
    pub(super) join: Join,
    pub(super) leave: Leave,
    /// The live members the last renewal listed, this member among them.
    pub(super) members: Vec<SessionId>,
    /// The partitions this member should own (S10.2).
    pub(super) target: BTreeSet<u32>,
    /// Holders that `Held` replies named (S10.2).
    pub(super) known: BTreeMap<u32, Known>,
    /// The holder and token of marks a release broadcast cleared: a `Held`
    /// reply naming them again shows the broadcast was an echo (S10.2).
    pub(super) cleared: BTreeMap<u32, (SessionId, Option<Token>)>,
    /// The last operation id issued when a release broadcast of each
    /// partition last came: a late `Held` reply to an acquire issued up to
    /// then may describe the term that release ended (S10.2).
    pub(super) heard: BTreeMap<u32, u64>,
    /// The partitions the last membership change freed, by the base rule.
    pub(super) freed: BTreeSet<u32>,
    /// The partitions a release broadcast named since a live member was
    /// last known to hold them: a new entry of one takes the next free
    /// acquire slot ahead of the others (S4.6, S10.3).
    pub(super) released: BTreeSet<u32>,
    /// Partitions `released` held when a membership change was seen that
    /// the change's releases do not name: an earlier change's hand-overs,
    /// most likely taken since (S10.2). A broadcast of one makes it
    /// `released` again.
    pub(super) released_before: BTreeSet<u32>,
    /// The partitions the last membership change hands to this member
    /// ([`planned_by_change`](crate::planned_by_change), S10.2).
    pub(super) planned: BTreeSet<u32>,
    /// Partitions a release broadcast named (not an echo of this member's
    /// withdraw), each with the engine's step it came at, since the last
    /// renewal sent before it that listed the membership unchanged: the
    /// releases a membership change not yet seen may explain (S10.2).
    /// Each is flagged when the change this member saw last took it as
    /// its own (named while that change had named fewer partitions than it
    /// moves in all): once that change is complete, the next one is not
    /// split from it.
    pub(super) window: Vec<(u32, u64, bool)>,
    /// Partitions whose latest release broadcast was of this member's own
    /// release (a hand-over it made, S10.3).
    pub(super) own_named: BTreeSet<u32>,
    /// The last membership change this member saw, and what its part
    /// ([`planned_by_change`](crate::planned_by_change)) is split from.
    pub(super) change: Option<Change>,
    /// The members the last `GroupChanged` named.
    pub(super) announced: Vec<SessionId>,
    /// The base rule's partitions for this member (S10.2), and the member
    /// and membership they were computed for: computed once per
    /// membership, not at every acquire reply (with 1,000 partitions it
    /// sorts thousands of pairs).
    pub(super) base: Option<(SessionId, Vec<SessionId>, BTreeSet<u32>)>,
    /// Releases of partitions handed over by a leave, held back until the
    /// backend has answered the `LeaveGroup` (S10.3): the members who stay
    /// renew on their broadcasts and must find the leaver gone.
    pub(super) deferred: Vec<(SessionId, LeaseName, Token)>,
}

/// A membership change a member saw (S10.2): its part of the partitions
/// that move is split from the partitions released around it.
#[derive(Clone, Debug)]
pub(super) struct Change {
    pub(super) before: Vec<SessionId>,
    pub(super) after: Vec<SessionId>,
    /// The partitions release broadcasts named around the change, in the
    /// order they came (one named again counts where it came last): those
    /// in the window when the change was seen, and all that came after,
    /// until the membership changes again. Closing the list at the next
    /// renewal made the members disagree: each renews at its own time, so
    /// a member that renewed early split fewer releases than the others,
    /// asked for partitions they took, and left partitions they had left
    /// to it unowned until it searched them out (PostgreSQL, 1,000
    /// partitions: 3 partitions unowned 300 ms). Closing it once it named
    /// as many partitions as the change moves did too, for a member whose
    /// window still held releases of the change before (its renewal
    /// spanned both): they filled the list before the leaver's releases
    /// named them again.
    pub(super) released: Vec<u32>,
    /// The partitions the base rule gave the members who went
    /// ([`freed_by_change`]), computed once per change.
    pub(super) freed: BTreeSet<u32>,
    /// How many partitions the change moves to the members who stay
    /// ([`moved_by_change`](crate::group::moved_by_change)).
    pub(super) moves: usize,
    /// When the last release broadcast added to `released` came (for
    /// those in the window when the change was seen, that instant).
    pub(super) last_release: Option<Timestamp>,
    /// Whether the part must be computed again (`released` grew).
    pub(super) replan: bool,
    /// How many partitions the change moves in all, to the members who
    /// joined too ([`moved_in_all`]): up to that many release broadcasts
    /// after it was seen are its own hand-overs.
    pub(super) expected: usize,
    /// When this member saw the change.
    pub(super) seen_at: Timestamp,
    /// When a member the change before gave partitions to left: that
    /// change's hand-overs this member saw nobody take, in index order.
    /// A member that leaves while a join's hand-overs are under way holds
    /// fewer than its share, and releases only what it holds; once its
    /// releases pause (or, if none came, a pause after the change was
    /// seen) with fewer named than the change moves, these join the list
    /// after them (S10.2).
    pub(super) carry: Vec<u32>,
    /// Partitions a release broadcast named while `released` held them
    /// already ([`StickyInput::released_again`]).
    pub(super) again: BTreeSet<u32>,
    /// The partitions this member handed over while this change was the
    /// last it saw: those it held and gave up for a member the change
    /// gave them to (S10.3).
    pub(super) handed: BTreeSet<u32>,
    /// When this change undoes the change before (the members that joined
    /// it left again): the partitions this member handed over for that
    /// change, which are its part of this one (S10.2). Empty otherwise.
    pub(super) returns: BTreeSet<u32>,
    /// The change before's own hand-overs whose first naming was still in
    /// the window when this change was seen, and that no broadcast named
    /// again since: not released by the member that left.
    pub(super) unreleased: BTreeSet<u32>,
}

/// Whether `a` and `b` list the same members, in any order.
fn same_members(a: &[SessionId], b: &[SessionId]) -> bool {
    let set = |m: &[SessionId]| m.iter().copied().collect::<BTreeSet<SessionId>>();
    set(a) == set(b)
}

impl Change {
    /// Whether the change has named as many partitions as it moves in all
    /// (S10.2): the releases it named are then its own hand-overs, and the
    /// next change is not split from them.
    fn complete(&self) -> bool {
        self.released.len() >= self.expected
    }
}

impl Group {
    /// S10.2: a `Held` reply at `now` named `holder` (with `token`) of
    /// partition `p`: marks it. The mark is an echo mark when a release
    /// broadcast came since an earlier reply named the same holder and
    /// token (the broadcast did not end that term), or when the mark it
    /// replaces was one.
    fn mark(
        &mut self,
        p: u32,
        holder: SessionId,
        token: Option<Token>,
        until: Option<Timestamp>,
        now: Timestamp,
    ) {
        let same = |h: SessionId, t: Option<Token>| h == holder && t == token;
        let cleared = self.cleared.remove(&p).is_some_and(|(h, t)| same(h, t));
        let previous = self.known.get(&p).copied();
        let echo = cleared || previous.is_some_and(|k| k.echo && same(k.holder, k.token));
        let withdrawn = previous
            .filter(|k| same(k.holder, k.token))
            .map_or(0, |k| k.withdrawn);
        self.known.insert(
            p,
            Known {
                holder,
                token,
                echo,
                withdrawn,
                until,
                at: now,
            },
        );
    }
}

impl Engine {
    // ----- API -----------------------------------------------------------

    /// Joins the partitioned group `group` of `partitions` partitions (S10):
    /// the membership is added to the session (re-added with every new
    /// session), every renewal reports the group's live members, and this
    /// member competes for its fair share of the partitions (S10.2). Each
    /// partition it wins is a term of its own, delivered as
    /// [`Event::Elected`] and [`Event::Revoked`] for the lease name
    /// [`partition_name`]`(group, index)`; with `runs_task`, each term starts
    /// a task and a partition moves only after that task has exited (S10.3).
    ///
    /// ```
    /// use simba_core::*;
    /// let now = Timestamp::ZERO;
    /// let mut engine = Engine::new(SimbaConfig::default(), BackendProfile::default(), now);
    /// let group = LeaseName::new("orders")?;
    /// engine.join_group(now, group.clone(), 12, true, TaskExitPolicy::default())?;
    /// assert_eq!(engine.group(&group).map(|g| g.partitions), Some(12));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`ApiError::InvalidGroup`] for zero partitions or a group name too
    /// long for its partition names (S3.1); [`ApiError::AlreadyStarted`] if
    /// the group is joined already or one of its partition names is an
    /// election or lock of this engine; [`ApiError::Closed`] once `close`
    /// was called.
    pub fn join_group(
        &mut self,
        now: crate::time::Timestamp,
        group: LeaseName,
        partitions: u32,
        runs_task: bool,
        policy: TaskExitPolicy,
    ) -> Result<EntryId, ApiError> {
        self.advance(now);
        let result = self.try_join(group, partitions, runs_task, policy);
        self.finish();
        result
    }

    fn try_join(
        &mut self,
        group: LeaseName,
        partitions: u32,
        runs_task: bool,
        policy: TaskExitPolicy,
    ) -> Result<EntryId, ApiError> {
        if self.closing {
            return Err(ApiError::Closed);
        }
        if partitions == 0 {
            return Err(ApiError::InvalidGroup {
                group,
                reason: "a group needs at least one partition".into(),
            });
        }
        if let Err(e) = partition_name(&group, partitions - 1) {
            return Err(ApiError::InvalidGroup {
                group,
                reason: format!("its partition names would be invalid: {e}"),
            });
        }
        if self.groups.contains_key(&group) {
            return Err(ApiError::AlreadyStarted(group));
        }
        let prefix = format!("{group}{}", crate::group::PARTITION_SEPARATOR);
        let taken = self
            .entries
            .range::<str, _>((Bound::Included(prefix.as_str()), Bound::Unbounded))
            .take_while(|(n, _)| n.as_str().starts_with(prefix.as_str()))
            .find(|(n, _)| {
                parse_partition_name(n.as_str())
                    .is_some_and(|(g, p)| g == group.as_str() && p < partitions)
            })
            .map(|(n, _)| n.clone());
        if let Some(taken) = taken {
            return Err(ApiError::AlreadyStarted(taken));
        }
        let id = self.next_entry_id();
        self.groups.insert(
            group.clone(),
            Group {
                id,
                partitions,
                runs_task,
                policy,
                join: Join::Needed,
                leave: Leave::No,
                members: Vec::new(),
                target: BTreeSet::new(),
                known: BTreeMap::new(),
                cleared: BTreeMap::new(),
                heard: BTreeMap::new(),
                freed: BTreeSet::new(),
                released: BTreeSet::new(),
                released_before: BTreeSet::new(),
                planned: BTreeSet::new(),
                window: Vec::new(),
                own_named: BTreeSet::new(),
                change: None,
                announced: Vec::new(),
                base: None,
                deferred: Vec::new(),
            },
        );
        self.send_joins();
        Ok(id)
    }

    /// Leaves `group` (S10.3): the membership ends at once (the other
    /// members take over on their next renewal), and every partition this
    /// member holds is handed over in the order of S6.1. Once every
    /// partition is released, [`Event::Completed`] names the group.
    ///
    /// # Errors
    /// [`ApiError::NotStarted`] if the group was not joined.
    pub fn leave_group(
        &mut self,
        now: crate::time::Timestamp,
        group: &LeaseName,
    ) -> Result<(), ApiError> {
        self.advance(now);
        let Some(g) = self.groups.get_mut(group) else {
            self.finish();
            return Err(ApiError::NotStarted(group.clone()));
        };
        if g.leave == Leave::No {
            // Even a membership never confirmed is left: a join whose reply
            // was lost may have been applied. Without a session there is
            // nothing to leave (`send_leaves` ends it at once).
            g.leave = Leave::Needed;
            g.target.clear();
            self.send_leaves();
            self.reconcile(group);
            self.maybe_group_left(group);
        }
        self.finish();
        Ok(())
    }

    /// What this engine knows of `group`, if it joined it.
    pub fn group(&self, group: &LeaseName) -> Option<GroupSnapshot> {
        let g = self.groups.get(group)?;
        let owned = self
            .partition_entries(group)
            .iter()
            .filter_map(|n| {
                let e = self.entries.get(n)?;
                e.held.as_ref()?;
                parse_partition_name(n.as_str()).map(|(_, p)| p)
            })
            .collect();
        Some(GroupSnapshot {
            group: group.clone(),
            partitions: g.partitions,
            members: g.members.clone(),
            target: g.target.iter().copied().collect(),
            owned,
            leaving: g.leave != Leave::No,
        })
    }

    // ----- replies -------------------------------------------------------

    /// A reply to [`Command::JoinGroup`].
    pub(super) fn on_group_joined(&mut self, op: OpId, result: Result<(), BackendError>) {
        let seq = self.seq;
        let Some((name, session)) = self.groups.iter().find_map(|(n, g)| match g.join {
            Join::Joining { op: o, session, .. } if o == op => Some((n.clone(), session)),
            _ => None,
        }) else {
            self.stats.stale_replies += 1;
            return;
        };
        let current = self.session.id == Some(session);
        match result {
            Ok(()) if current => {
                if let Some(g) = self.groups.get_mut(&name) {
                    g.join = Join::Joined { session, seq };
                }
                // S10.2: the first target needs a renewal that lists this
                // member; ask for it now, not a renewal interval later.
                self.renew_now();
            }
            Ok(()) => {
                // Joined with a session that is gone: join again with this one.
                if let Some(g) = self.groups.get_mut(&name) {
                    g.join = Join::Needed;
                }
                self.send_joins();
            }
            Err(error) => {
                let unsupported = error.kind == BackendErrorKind::Unsupported;
                self.emit(Event::BackendFailed {
                    command: "join_group",
                    error: error.clone(),
                });
                if unsupported {
                    // It can never succeed: the group is gone.
                    if let Some(g) = self.groups.remove(&name) {
                        self.emit(Event::GroupFailed {
                            group: name.clone(),
                            error,
                        });
                        self.emit(Event::Ended { name, entry: g.id });
                    }
                } else if let Some(g) = self.groups.get_mut(&name) {
                    // Tried again after the next renewal, which goes
                    // `min_backoff` from now, not a renewal interval.
                    g.join = Join::Needed;
                    let at = self.now + self.config.min_backoff();
                    self.renew_by(at);
                }
            }
        }
        // A leave that waited for this reply goes now (even after a failed
        // join: the failure may have been a lost reply to an applied join).
        self.send_leaves();
    }

    /// A reply to [`Command::LeaveGroup`].
    pub(super) fn on_group_left(&mut self, op: OpId, result: Result<(), BackendError>) {
        let Some(name) = self.groups.iter().find_map(|(n, g)| {
            matches!(g.leave, Leave::Leaving { op: o, .. } if o == op).then(|| n.clone())
        }) else {
            self.stats.stale_replies += 1;
            return;
        };
        let ok = result.is_ok();
        if let Err(error) = result {
            self.emit(Event::BackendFailed {
                command: "leave_group",
                error,
            });
        }
        if let Some(g) = self.groups.get_mut(&name) {
            // A failed leave is sent again after the next renewal: a member
            // that stays listed would be given partitions nobody takes.
            g.leave = if ok { Leave::Left } else { Leave::Needed };
        }
        if !ok {
            // That renewal goes `min_backoff` from now: the partitions are
            // released below, and until the leave is applied the others
            // still list this member and leave them unowned (MariaDB,
            // 1,000 partitions: a renewal interval, 684 ms).
            let at = self.now + self.config.min_backoff();
            self.renew_by(at);
        }
        // Answered, or failed (a failed leave is sent again, but the
        // partitions are not kept from the others meanwhile).
        self.send_deferred(&name);
        self.maybe_group_left(&name);
    }

    /// S10.3: whether the release of `name` (a partition handed over by a
    /// leave whose `LeaveGroup` is not yet answered) waits for that answer;
    /// if so it is kept to be sent then.
    pub(super) fn defer_release(
        &mut self,
        session: SessionId,
        name: &LeaseName,
        token: Token,
    ) -> bool {
        if Some(session) != self.session.id {
            return false;
        }
        let Some(g) = parse_partition_name(name.as_str()).and_then(|(g, _)| self.groups.get_mut(g))
        else {
            return false;
        };
        if !matches!(g.leave, Leave::Needed | Leave::Leaving { .. }) {
            return false;
        }
        g.deferred.push((session, name.clone(), token));
        true
    }

    /// Sends the releases a leave held back (S10.3), unless the client is
    /// closing: its `CloseSession` releases every lease at once (S1.4).
    fn send_deferred(&mut self, group: &LeaseName) {
        let Some(g) = self.groups.get_mut(group) else {
            return;
        };
        let deferred = std::mem::take(&mut g.deferred);
        if self.closing {
            return;
        }
        for (session, name, token) in deferred {
            self.release(session, name, token);
        }
    }

    /// S10.2: every renewal lists the live members of each joined group;
    /// a changed membership changes this member's target.
    pub(super) fn on_group_views(&mut self, views: Vec<GroupView>, renew_seq: u64) {
        let Some(me) = self.session.id else {
            return;
        };
        let (now, timeout) = (self.now, self.call_timeout());
        let mut renew = false;
        let names: Vec<LeaseName> = self.groups.keys().cloned().collect();
        for name in names {
            let Some(g) = self.groups.get_mut(&name) else {
                continue;
            };
            // S2.4: a join or leave whose reply has not come within a call
            // timeout is abandoned (its late reply counts as stale) and sent
            // again: a lost reply must not stall the membership for good.
            if matches!(g.join, Join::Joining { sent_at, .. } if now >= sent_at + timeout) {
                g.join = Join::Needed;
            }
            if matches!(g.leave, Leave::Leaving { sent_at, .. } if now >= sent_at + timeout) {
                g.leave = Leave::Needed;
                self.send_deferred(&name);
                continue;
            }
            if g.leave != Leave::No {
                continue;
            }
            let mut members: Vec<SessionId> = views
                .iter()
                .find(|v| v.group == name)
                .map(|v| v.members.clone())
                .unwrap_or_default();
            members.sort_unstable();
            members.dedup();
            if !members.contains(&me) {
                // Not a member as far as this renewal saw. If the backend had
                // confirmed the membership before the renewal was sent, it
                // lost it: join again.
                if matches!(g.join, Join::Joined { session, seq } if session == me && seq < renew_seq)
                {
                    g.join = Join::Needed;
                }
                // Confirmed after it was sent, the membership could not be
                // listed: the renewal that can list it goes now, not
                // `min_backoff` after this one was sent (S10.2: the first
                // target one round trip after the join). ZooKeeper
                // announces a join's own node before its reply, and the
                // member's renewal on that broadcast came back without it:
                // the first partition came 100 ms late.
                if matches!(g.join, Join::Joined { session, seq } if session == me && seq > renew_seq)
                {
                    renew = true;
                }
                members.clear();
            }
            if members != g.members {
                // Added to what release broadcasts freed: replacing those
                // forgot partitions released while the membership changed,
                // which then waited behind every held one (S10.2). A stale
                // entry costs one acquire: a `Held` reply naming a live
                // member, or a win, removes it.
                // A member's first view is a change too, from the others
                // to the others and itself: its hand-overs to this member
                // are that change's, not releases a later one may explain.
                // Split from them, the joiner's part of a leave right after
                // its join named partitions it held (S10.2).
                let before: Vec<SessionId> = if g.members.is_empty() {
                    members.iter().copied().filter(|&s| s != me).collect()
                } else {
                    g.members.clone()
                };
                let freed = freed_by_change(g.partitions, &before, &members);
                g.freed.extend(freed.iter().copied());
                // The part is split from what was released around the
                // change, not only from the base rule's owners: after
                // sticky moves a member that leaves holds other
                // partitions than the base rule gave it (S10.2).
                // Not from the releases the change before named, if
                // they were as many as it moves: those were its own
                // hand-overs. A member whose renewal spanned a join
                // and a leave right after it split that leave from the
                // join's hand-overs first, and its part shifted with
                // each release of the leaver that named one of them
                // again.
                let theirs = g.change.as_ref().is_some_and(Change::complete);
                let released: Vec<u32> = g
                    .window
                    .iter()
                    .filter(|&&(_, _, named)| !(theirs && named))
                    .map(|&(p, _, _)| p)
                    .collect();
                let moves = moved_by_change(g.partitions, &before, &members);
                let expected = moved_in_all(g.partitions, &before, &members);
                // A member the change before gave partitions to leaves:
                // that change's hand-overs this member saw nobody take are
                // kept aside, in index order, for this change's list should
                // its releases fall short of what it moves (S10.2).
                let carry: Vec<u32> = g
                    .change
                    .as_ref()
                    .filter(|c| {
                        c.after
                            .iter()
                            .any(|s| !c.before.contains(s) && !members.contains(s))
                    })
                    .map(|c| {
                        let mut carry: Vec<u32> = c
                            .released
                            .iter()
                            .copied()
                            .filter(|p| g.released.contains(p))
                            .collect();
                        carry.sort_unstable();
                        carry
                    })
                    .unwrap_or_default();
                // Releases heard before the change that its list does not
                // name are an earlier change's hand-overs, most likely
                // taken since: they come after the likely free partitions.
                // Asked for among the change's own releases, they each met
                // `Held` before the one the leave left free (ZooKeeper,
                // 1,000 partitions: 154 replies, 602 ms).
                let old: Vec<u32> = g
                    .released
                    .iter()
                    .copied()
                    .filter(|p| !released.contains(p))
                    .collect();
                for p in old {
                    g.released.remove(&p);
                    g.freed.remove(&p);
                    g.released_before.insert(p);
                }
                // The change before's hand-overs still named only by their
                // first naming, or by this member's own release, are not
                // released by a member that left.
                let unreleased: BTreeSet<u32> = g
                    .window
                    .iter()
                    .filter(|&&(p, _, named)| named || g.own_named.contains(&p))
                    .map(|&(p, _, _)| p)
                    .collect();
                // The window's releases are this change's now.
                if released.len() <= expected {
                    for entry in &mut g.window {
                        entry.2 = true;
                    }
                }
                // A change that undoes the change before (a member that
                // joined left again, before any other change): each member
                // takes back what it handed over for the join. Every
                // member knows its own hand-overs, whatever releases it
                // heard or missed and in whatever order, so the parts
                // agree and no member asks for another's.
                let returns = g
                    .change
                    .as_ref()
                    .filter(|c| {
                        same_members(&c.before, &members) && same_members(&c.after, &before)
                    })
                    .map(|c| c.handed.clone())
                    // Only if they are what its share grows by: a member
                    // that had not reached its share before the join, or
                    // gave up partitions for other reasons, splits the
                    // change from its releases as any other.
                    .filter(|h| h.len() == grown_by(g.partitions, &before, &members, me) as usize)
                    .unwrap_or_default();
                g.change = Some(Change {
                    before,
                    after: members.clone(),
                    last_release: (!released.is_empty()).then_some(now),
                    released,
                    freed,
                    moves,
                    replan: true,
                    expected,
                    seen_at: now,
                    carry,
                    again: BTreeSet::new(),
                    handed: BTreeSet::new(),
                    returns,
                    unreleased,
                });
                g.members = members;
            }
            // Releases before a renewal that lists the membership are
            // explained by it (a hand-over to a joiner, a release of a
            // member that has left); those after it may come with a change
            // the next renewal shows.
            g.window.retain(|&(_, seq, _)| seq > renew_seq);
            self.retarget(&name);
        }
        if renew {
            self.renew_now();
        }
        self.send_joins();
        self.send_leaves();
    }

    /// The partitions this member holds of `group` (a term, not handed over).
    fn held_partitions(&self, group: &LeaseName) -> BTreeSet<u32> {
        let mut held = BTreeSet::new();
        self.for_partitions(group, |p, _, e| {
            if e.held.is_some() && !e.stopping {
                held.insert(p);
            }
        });
        held
    }

    /// S10.2: computes this member's target of `group` from the members the
    /// last renewal listed, what it holds and what replies told it; a
    /// changed target is announced and reconciled.
    pub(super) fn retarget(&mut self, name: &LeaseName) {
        if let Some(after) = &mut self.retarget_after {
            after.insert(name.clone());
            return;
        }
        let Some(me) = self.session.id else {
            return;
        };
        let held = self.held_partitions(name);
        let now = self.now;
        let period = self.call_timeout();
        // How long a pause in a change's releases ends the wait for the
        // rest (S10.2): `min_backoff`, or four renewal round trips if
        // longer, never more than a renewal period.
        let pause = self
            .session
            .round_trip
            .map_or(period, |rt| {
                rt.saturating_mul(4).max(self.config.min_backoff())
            })
            .min(period);
        let not_sticky = self.mutant_is(MutantKind::GroupNotSticky);
        let ignore_share = self.mutant_is(MutantKind::GroupIgnoresShare);
        let Some(g) = self.groups.get_mut(name) else {
            return;
        };
        if g.leave != Leave::No {
            return;
        }
        // S10.2: the change's releases paused short of what it moves, and
        // a member the change before gave partitions to left: that
        // change's hand-overs nobody was seen to take join the list.
        let mut carry_at = None;
        if let Some(change) = g.change.as_mut() {
            if change.returns.is_empty()
                && !change.carry.is_empty()
                && change.released.len() < change.moves
            {
                let at = change.last_release.unwrap_or(change.seen_at) + pause;
                if now >= at {
                    for p in std::mem::take(&mut change.carry) {
                        if !change.released.contains(&p) {
                            change.released.push(p);
                        }
                    }
                    change.replan = true;
                } else {
                    carry_at = Some(at);
                }
            }
        }
        if let Some(change) = g.change.as_mut().filter(|c| c.replan) {
            change.replan = false;
            // The base rule's partitions of the members who went are a
            // guess for a crash, where nothing is released. Once a release
            // of the change has come, the releases are the part: the
            // guesses shifted from member to member as releases took their
            // places, and a member won a partition another's part held,
            // to hand it over a round later (S10.2).
            // A change with hand-overs kept aside is split from them until
            // its first release, and a member asks only for the partitions
            // of its part released since the change was seen (or with it),
            // the rest a pause after the change or its last release. Split
            // from the base rule's guesses instead, members won partitions
            // the split of the releases then gave to others, who were at
            // their share already, and the members short of their share
            // searched for the rest one `Held` reply at a time (a joiner
            // leaving 10 to 390 ms after its join, 1,000 partitions: up to
            // 1.6 s, and a release unowned up to 87 round trips). Split
            // from nothing, a member whose list of the change's releases
            // was empty (it had counted them as the join's, whose own list
            // it had not seen whole) waited a pause for a released
            // partition (SQLite, 8 partitions: 102 ms).
            let none = BTreeSet::new();
            let (list, guesses) = match (change.released.is_empty(), change.carry.is_empty()) {
                (true, true) => (&change.released, &change.freed),
                (true, false) => (&change.carry, &none),
                (false, _) => (&change.released, &none),
            };
            g.planned = if change.returns.is_empty() {
                planned_from(
                    g.partitions,
                    &change.before,
                    &change.after,
                    me,
                    list,
                    guesses,
                )
            } else {
                // A change that undoes the one before: this member's own
                // hand-overs for it, whatever the releases said.
                change.returns.clone()
            };
        }
        let mut known = StickyInput {
            held,
            taken: BTreeSet::new(),
            likely_free: g.freed.clone(),
            planned: g.planned.clone(),
            released: g.released.clone(),
            released_before: g.released_before.clone(),
            released_again: g.change.as_ref().map_or_else(BTreeSet::new, |c| {
                c.again.intersection(&g.released).copied().collect()
            }),
            tried: Vec::new(),
        };
        let mut tried: Vec<(Timestamp, u32)> = Vec::new();
        for (&p, k) in &g.known {
            // S4.4: asking before the holder's expiry the reply timed would
            // be a wasted call; only a release (its broadcast clears this)
            // or that instant makes it worth asking again.
            if k.until.is_some_and(|u| now < u) && g.members.contains(&k.holder) {
                known.likely_free.remove(&p);
                known.taken.insert(p);
            } else if !g.members.contains(&k.holder) {
                known.likely_free.insert(p);
            } else if k.holder != me && k.until.is_none() && k.fresh(now, period) {
                known.taken.insert(p);
            } else {
                // An old mark: tried again, oldest first, only once every
                // other partition was tried. Forgetting it instead sent the
                // member back to its favourite partitions, held by others,
                // before it reached a free one far down its order: with 1,000
                // partitions and one acquire at a time, a free partition
                // stayed unowned for good.
                known.likely_free.remove(&p);
                tried.push((k.at, p));
            }
        }
        tried.sort_unstable();
        known.tried = tried.into_iter().map(|(_, p)| p).collect();
        let fresh = g
            .base
            .as_ref()
            .is_some_and(|(of, members, _)| *of == me && *members == g.members);
        if !fresh {
            let base = target_partitions(g.partitions, &g.members, me)
                .into_iter()
                .collect();
            g.base = Some((me, g.members.clone(), base));
        }
        let empty = BTreeSet::new();
        let base = g.base.as_ref().map_or(&empty, |(_, _, b)| b);
        let mut target = sticky_target_from_base(g.partitions, &g.members, me, base, &known);
        // While the releases of a change still come (fewer than it moves,
        // the last within a pause), a member asks only for its part of
        // them and waits for the rest of its share: asking meanwhile for
        // released partitions by affinity took partitions the others' parts
        // held, and left the member's own to a search (S10.2).
        // A part that another member holds shows that the members split
        // differently (one saw releases the other did not): the member
        // then looks for the rest at once, as step 3 says.
        // The pause is short: a change may release fewer partitions than
        // it moves (a member that leaves while a join's hand-overs are
        // still under way held fewer than its share), and waiting a
        // renewal period for releases that never come left the rest
        // unowned that long (a traced Redis leave, 1,000 partitions:
        // 704 ms).
        // A change with hand-overs kept aside waits so from when it was
        // seen, released or not (see the split above).
        // A change that undoes the one before: the member asks at once for
        // its hand-overs the leaver has released since, and for the rest
        // (those the joiner never took) once the leaver's releases pause.
        // Not for the hand-overs' own first namings, still in the window
        // when the change was seen: asked for at once, those the joiner
        // still held were each answered `Held` (up to 66 of a leave of
        // 250 partitions).
        let returning = g
            .change
            .as_ref()
            .filter(|c| !c.returns.is_empty())
            .and_then(|c| {
                let named: BTreeSet<u32> = c
                    .released
                    .iter()
                    .copied()
                    .filter(|p| !c.unreleased.contains(p))
                    .collect();
                let end = c.last_release.unwrap_or(c.seen_at) + pause;
                (now < end && !c.returns.is_subset(&named)).then_some((end, named))
            });
        let return_end = returning.as_ref().map(|(end, _)| *end);
        if let Some((_, named)) = returning {
            target.retain(|p| known.held.contains(p) || named.contains(p));
        }
        let wait_end = g
            .change
            .as_ref()
            .filter(|c| c.returns.is_empty() && c.released.len() < c.moves)
            .and_then(|c| {
                c.last_release
                    .or_else(|| (!c.carry.is_empty()).then_some(c.seen_at))
            })
            .map(|t| t + pause)
            .filter(|&end| now < end && !g.planned.iter().any(|p| known.taken.contains(p)));
        if wait_end.is_some() {
            // Of its part, only what was released since the change was
            // seen (or in the releases that came with it): the kept-aside
            // hand-overs, split before the first release, are asked for
            // as their releases come, or once the wait is over.
            target.retain(|p| {
                known.held.contains(p) || (g.planned.contains(p) && g.released.contains(p))
            });
        }
        if not_sticky {
            // The mutant: the stateless rule of the membership alone.
            target = target_partitions(g.partitions, &g.members, me)
                .into_iter()
                .collect();
        }
        if ignore_share && !g.members.is_empty() {
            // The mutant: every member wants every partition.
            target = (0..g.partitions).collect();
        }
        let members_changed = g.announced != g.members;
        // The wait ends with a renewal, whose reply computes the target
        // again (and adds the partitions kept aside to the list): a pause
        // after the change's last release, not at the next interval.
        if let Some(end) = wait_end.into_iter().chain(carry_at).chain(return_end).min() {
            self.renew_by(end);
        }
        let Some(g) = self.groups.get_mut(name) else {
            return;
        };
        if target == g.target && !members_changed {
            return;
        }
        g.target = target;
        g.announced = g.members.clone();
        let event = Event::GroupChanged {
            group: name.clone(),
            members: g.members.clone(),
            target: g.target.iter().copied().collect(),
        };
        self.emit(event);
        self.reconcile(name);
    }

    /// S10.2: an acquire of a partition was answered `Held` by `holder`: a
    /// live member keeps it, so this member looks for another one.
    pub(super) fn partition_held(
        &mut self,
        name: &LeaseName,
        holder: Option<SessionId>,
        token: Option<Token>,
        until: Option<Timestamp>,
    ) {
        let (Some(holder), Some((group, p))) = (holder, parse_partition_name(name.as_str())) else {
            return;
        };
        let Ok(group) = LeaseName::new(group) else {
            return;
        };
        if self.session.id == Some(holder) {
            return;
        }
        let Some(g) = self.groups.get_mut(&group) else {
            return;
        };
        // A holder that is no member (leaving, or its session about to
        // expire) will free the partition: this member keeps waiting for it,
        // timed by `until` (S4.4) or the release's broadcast.
        let member = g.members.contains(&holder);
        g.mark(p, holder, token, until, self.now);
        if member {
            // A live member won it since it was released: not free.
            g.freed.remove(&p);
            g.released.remove(&p);
            g.released_before.remove(&p);
            self.retarget(&group);
        }
    }

    /// A late `Held` reply (after its call timeout, S2.4, or to an attempt
    /// given up) to the acquire `op` of a partition: S10.2, a live member
    /// holding it marks it taken as a timely reply does, so the member asks
    /// for another one; S4.4, a new entry of it waits for the holder's
    /// expiry all the same. Not if a release broadcast of the partition
    /// came after `op` was issued: the reply may describe the term that
    /// release ended (a broadcast can overtake the reply), so the
    /// partition stays free to ask for, as a timely reply's attempt freed
    /// meanwhile does (S4.2). Marked, a joiner left it unowned until the
    /// holder's lease would have expired (Redis, 1,000 partitions: 2 s).
    pub(super) fn partition_held_late(
        &mut self,
        op: OpId,
        name: &LeaseName,
        holder: Option<SessionId>,
        token: Option<Token>,
        until: Option<Timestamp>,
    ) {
        let (Some(holder), Some((group, p))) = (holder, parse_partition_name(name.as_str())) else {
            return;
        };
        if self.session.id == Some(holder) {
            return;
        }
        let Ok(group) = LeaseName::new(group) else {
            return;
        };
        let Some(g) = self.groups.get_mut(&group) else {
            return;
        };
        if p >= g.partitions || g.heard.get(&p).is_some_and(|&h| h >= op.0) {
            return;
        }
        g.mark(p, holder, token, until, self.now);
        let wanted = g.target.contains(&p);
        if g.members.contains(&holder) {
            g.released.remove(&p);
            g.released_before.remove(&p);
        }
        if g.members.contains(&holder) && wanted {
            g.freed.remove(&p);
            self.retarget(&group);
        }
        let Some(until) = until else {
            return;
        };
        if let Some(entry) = self.entries.get_mut(name) {
            if entry.kind == Kind::Partition
                && entry.status == Status::Candidate
                && entry.attempt.is_none()
                && entry.next_attempt.is_some_and(|t| t < until)
            {
                entry.next_attempt = Some(until);
                entry.waits_for = Some(until);
                self.dirty.push(name.clone());
            }
        }
    }

    /// S4.1 for partition `name`: until when a new acquire of it must wait,
    /// if an acquire of an earlier entry of it (given up while in flight) or
    /// a release of this member's is still in flight: until the last of
    /// their call timeouts, unless answered before. An acquire sent beside a
    /// release of the same partition could run first and be answered with
    /// the very term the release then ends, which then counts for nothing
    /// (S4.3): after a late win that S4.3 released, a broadcast older than
    /// that release sent the member asking at once, and the partition stayed
    /// unowned until the next retry (Redis, 1,000 partitions: up to 688 ms in one run).
    pub(super) fn partition_busy_until(&self, name: &LeaseName) -> Option<Timestamp> {
        let (now, timeout, session) = (self.now, self.call_timeout(), self.session.id);
        let acquires = self
            .acquires
            .values()
            .filter(|a| &a.name == name && Some(a.session) == session)
            .map(|a| a.sent_at + timeout);
        let first = Token::new(1).map(|t| (name.clone(), t));
        let releases = first
            .into_iter()
            .flat_map(|from| self.releasing.range(from..))
            .take_while(|((n, _), _)| n == name)
            .filter(|(_, r)| r.answered_seq.is_none())
            .map(|(_, r)| r.sent_at.unwrap_or(now) + timeout);
        acquires.chain(releases).filter(|t| now < *t).max()
    }

    /// S4.1: an acquire or a release of partition `name` that a new entry
    /// of it may wait for was answered: the entry asks now, unless the
    /// holder's expiry a reply timed (S4.4) or another call still in flight
    /// holds it back. Before, it asked only at the call timeout, though the
    /// reply had come: a joiner that gave a partition up, heard its release
    /// and wanted it again left it unowned a renewal period (Redis, 1,000
    /// partitions, 3 → 4 members: 8 partitions, 652 ms). The entry's wait
    /// is recognised by [`Entry::waits_for`], not by the call's timeout: a
    /// release that waited for a call slot (S4.6) times out later than the
    /// wait counted from when it was queued, and its reply left the entry
    /// waiting out that count (694 ms in one run).
    ///
    /// [`Entry::waits_for`]: crate::election::Entry::waits_for
    pub(super) fn partition_wait_over(&mut self, name: &LeaseName) {
        let Some((group, p)) = parse_partition_name(name.as_str()) else {
            return;
        };
        let Ok(group) = LeaseName::new(group) else {
            return;
        };
        let other = self.not_before(&group, p);
        let now = self.now;
        let Some(entry) = self.entries.get_mut(name) else {
            return;
        };
        if entry.kind != Kind::Partition
            || entry.status != Status::Candidate
            || entry.attempt.is_some()
            || entry.next_attempt.is_none()
            || entry.next_attempt != entry.waits_for
        {
            return;
        }
        let at = other.unwrap_or(now);
        entry.next_attempt = Some(at);
        entry.waits_for = Some(at);
        self.dirty.push(name.clone());
    }

    /// S10.2: this member won a partition: what it knew of its holder is old.
    pub(super) fn partition_won(&mut self, name: &LeaseName) {
        let Some((group, p)) = parse_partition_name(name.as_str()) else {
            return;
        };
        if let Some(g) = self.groups.get_mut(group) {
            g.known.remove(&p);
            g.cleared.remove(&p);
            g.freed.remove(&p);
            g.released.remove(&p);
            g.released_before.remove(&p);
        }
    }

    /// S10.2: this member sent a withdraw of its waiting place for `name`:
    /// on a backend that echoes withdraws, one more release broadcast of it
    /// is that echo.
    pub(super) fn partition_withdrawn(&mut self, name: &LeaseName) {
        let Some((group, p)) = parse_partition_name(name.as_str()) else {
            return;
        };
        if let Some(k) = self.groups.get_mut(group).and_then(|g| g.known.get_mut(&p)) {
            k.withdrawn = k.withdrawn.saturating_add(1);
        }
    }

    /// S10.5: a broadcast of a joined group's name announces a membership
    /// change: renew now to learn it, instead of at the next interval.
    /// A broadcast of one of its partitions says the partition was released:
    /// whoever held it before, it is likely free now (S10.2).
    pub(super) fn on_group_broadcast(&mut self, name: &LeaseName) {
        let (now, period, seq) = (self.now, self.call_timeout(), self.seq);
        let issued = self.next_op;
        if let Some((group, p)) = parse_partition_name(name.as_str()) {
            // A broadcast of a name this member releases (its own release, or
            // another's after it), and whether it is the first since its own
            // release was decided: that one is its own.
            let own = self.releasing.keys().any(|(n, _)| n == name);
            let first_own = self
                .releasing
                .iter_mut()
                .find(|((n, _), r)| n == name && !r.heard)
                .map(|(_, r)| r.heard = true)
                .is_some();
            if let Some(g) = self.groups.get_mut(group).filter(|g| p < g.partitions) {
                match g.known.get_mut(&p) {
                    // The echo of this member's own withdraw (S4.5), not a
                    // release: the holder a `Held` reply named twice, across
                    // a broadcast, keeps the partition. Clearing the mark
                    // sent the member back to asking for it, whose withdraw
                    // echoed again, while a free partition further down its
                    // order stayed unowned for good.
                    Some(k) if k.echo && k.withdrawn > 0 && k.fresh(now, period) => {
                        k.withdrawn -= 1;
                    }
                    _ => {
                        if let Some(k) = g.known.remove(&p) {
                            g.cleared.insert(p, (k.holder, k.token));
                        }
                        g.freed.insert(p);
                        g.released.insert(p);
                        g.released_before.remove(&p);
                        g.heard.insert(p, issued);
                        // Named by the change this member saw last, while it
                        // has named fewer partitions than it moves, for the
                        // first time. Named again while its first naming
                        // is still in the window or the change's list, it
                        // was taken since and released again (by a joiner
                        // that leaves): a release the next change may
                        // explain. Counted as the change's, a member whose
                        // list of a join had missed a hand-over (it counted
                        // it for the change before) took the joiner's
                        // releases for the join's, split its leave from an
                        // empty list and waited a pause for its part
                        // (MariaDB, 8 partitions: 105 ms).
                        let again = g.window.iter().any(|&(q, _, _)| q == p)
                            || g.change.as_ref().is_some_and(|c| c.released.contains(&p));
                        let named = !again && g.change.as_ref().is_some_and(|c| !c.complete());
                        g.window.retain(|&(q, _, _)| q != p);
                        g.window.push((p, seq, named));
                        if first_own {
                            g.own_named.insert(p);
                        } else {
                            g.own_named.remove(&p);
                        }
                        // In the order the broadcasts came: a partition
                        // named again (its earlier release was a hand-over
                        // the window still held) counts where it comes now,
                        // as on a member that saw only this broadcast.
                        if let Some(change) = g.change.as_mut() {
                            if change.released.contains(&p) {
                                change.again.insert(p);
                            }
                            if !first_own {
                                change.unreleased.remove(&p);
                            }
                            change.released.retain(|&q| q != p);
                            change.released.push(p);
                            change.replan = true;
                            change.last_release = Some(now);
                        }
                    }
                }
                // A partition this member does not want was released: its
                // holder left or holds more than its share, so the
                // membership may have changed. Renew now to learn it (S10.3)
                // rather than at the next interval: a backend need not
                // announce joins and leaves (S10.5), and a release comes
                // only with a change, never in a steady state (S1.1).
                // Not for the echo of this member's own release.
                let renew = g.leave == Leave::No && !g.target.contains(&p) && !own;
                if let Ok(group) = LeaseName::new(group) {
                    self.retarget(&group);
                }
                if renew {
                    self.renew_now();
                }
            }
        }
        if !self.groups.contains_key(name) {
            return;
        }
        self.renew_now();
    }

    /// Renews now (or right after the renewal in flight) instead of at the
    /// next interval (S10.5).
    fn renew_now(&mut self) {
        if self.session.id.is_none() {
            return;
        }
        self.session.renew_soon = true;
        let now = self.now;
        self.renew_by(now);
    }

    /// Renews at `at` at the latest (unless a renewal is in flight: its
    /// reply comes first), instead of at the next interval.
    fn renew_by(&mut self, at: Timestamp) {
        if self.session.id.is_some() && self.session.call.is_none() {
            let next = self.session.next_call.map_or(at, |t| t.min(at));
            self.session.next_call = Some(next);
        }
    }

    // ----- session changes -----------------------------------------------

    /// The session ended (S10.1): every membership ended with it; the target
    /// is empty until a renewal of the next session lists this member again.
    pub(super) fn groups_on_session_end(&mut self) {
        let names: Vec<LeaseName> = self.groups.keys().cloned().collect();
        for name in names {
            if let Some(g) = self.groups.get_mut(&name) {
                g.join = Join::Needed;
                if g.leave != Leave::No {
                    g.leave = Leave::Left;
                }
                g.target.clear();
                g.announced.clear();
                // The session's end freed the partitions with everything
                // else it held.
                g.deferred.clear();
                if !g.members.is_empty() {
                    g.members.clear();
                    self.emit(Event::GroupChanged {
                        group: name.clone(),
                        members: Vec::new(),
                        target: Vec::new(),
                    });
                }
            }
            self.reconcile(&name);
            self.maybe_group_left(&name);
        }
    }

    /// Sends a `JoinGroup` for every group that needs one, on the current
    /// session.
    pub(super) fn send_joins(&mut self) {
        let Some(session) = self.session.id else {
            return;
        };
        if self.closing || !self.can_acquire() {
            return;
        }
        let names: Vec<LeaseName> = self
            .groups
            .iter()
            .filter(|(_, g)| g.join == Join::Needed && g.leave == Leave::No)
            .map(|(n, _)| n.clone())
            .collect();
        for name in names {
            let op = self.op();
            if let Some(g) = self.groups.get_mut(&name) {
                g.join = Join::Joining {
                    op,
                    session,
                    sent_at: self.now,
                };
            }
            self.command(Command::JoinGroup {
                op,
                session,
                group: name,
            });
        }
    }

    /// Sends a `LeaveGroup` for every group that needs one. Not while its
    /// `JoinGroup` is in flight: the backend may run two calls in flight in
    /// either order, and a leave run before the join would leave this
    /// session a member that owns nothing, forever counted by the others.
    /// The join's reply sends the leave.
    fn send_leaves(&mut self) {
        let session = self.session.id.filter(|_| self.can_acquire());
        let names: Vec<LeaseName> = self
            .groups
            .iter()
            .filter(|(_, g)| g.leave == Leave::Needed && !matches!(g.join, Join::Joining { .. }))
            .map(|(n, _)| n.clone())
            .collect();
        for name in names {
            let Some(session) = session else {
                // No session: no membership to end.
                if let Some(g) = self.groups.get_mut(&name) {
                    g.leave = Leave::Left;
                }
                self.maybe_group_left(&name);
                continue;
            };
            let op = self.op();
            if let Some(g) = self.groups.get_mut(&name) {
                g.leave = Leave::Leaving {
                    op,
                    sent_at: self.now,
                };
            }
            self.command(Command::LeaveGroup {
                op,
                session,
                group: name,
            });
        }
    }

    // ----- the target ----------------------------------------------------

    /// The partition entries of `group` that exist now, by name.
    fn partition_entries(&self, group: &LeaseName) -> Vec<LeaseName> {
        let mut names = Vec::new();
        self.for_partitions(group, |_, name, _| names.push(name.clone()));
        names
    }

    /// Calls `f` with the index, name and entry of each partition entry of
    /// `group` that exists now, without copying names: it runs at every
    /// `Held` reply and release broadcast (S10.2).
    fn for_partitions(&self, group: &LeaseName, mut f: impl FnMut(u32, &LeaseName, &Entry)) {
        let prefix = format!("{group}{}", crate::group::PARTITION_SEPARATOR);
        let range = self
            .entries
            .range::<str, _>((Bound::Included(prefix.as_str()), Bound::Unbounded))
            .take_while(|(n, _)| n.as_str().starts_with(prefix.as_str()));
        for (name, entry) in range {
            if entry.kind != Kind::Partition {
                continue;
            }
            if let Some((g, p)) = parse_partition_name(name.as_str()) {
                if g == group.as_str() {
                    f(p, name, entry);
                }
            }
        }
    }

    /// Whether `name` is a partition name of a joined group (S7.4: an
    /// election or lock may not take it).
    pub(super) fn reserved_by_group(&self, name: &LeaseName) -> bool {
        parse_partition_name(name.as_str())
            .is_some_and(|(g, p)| self.groups.get(g).is_some_and(|group| p < group.partitions))
    }

    /// S10.3: makes the entries of `group` match its target: a candidate
    /// entry for every target partition, and every other partition handed
    /// over (revoke, interrupt, wait for the task, release).
    pub(super) fn reconcile(&mut self, group: &LeaseName) {
        let Some(g) = self.groups.get(group) else {
            return;
        };
        let target: Vec<u32> = if self.closing || g.leave != Leave::No {
            Vec::new()
        } else {
            g.target.iter().copied().collect()
        };
        let (id, runs_task, policy) = (g.id, g.runs_task, g.policy);
        // Names are made only for the entries that change: this runs at
        // every changed target, and most partitions keep theirs.
        let mut existing = BTreeSet::new();
        let mut unwanted = Vec::new();
        self.for_partitions(group, |p, name, e| {
            existing.insert(p);
            if !e.stopping && target.binary_search(&p).is_err() {
                unwanted.push(name.clone());
            }
        });
        for name in unwanted {
            self.stop_partition(&name);
        }
        for p in target {
            if existing.contains(&p) {
                continue;
            }
            let Ok(name) = partition_name(group, p) else {
                continue;
            };
            if !self.entries.contains_key(&name) {
                let mut entry =
                    Entry::new(id, Kind::Partition, runs_task, LockWait::Forever, self.now);
                entry.exit_policy = policy;
                entry.hinted = self
                    .groups
                    .get(group)
                    .is_some_and(|g| g.released.contains(&p));
                if let Some(at) = self.not_before(group, p) {
                    entry.next_attempt = Some(at);
                    entry.waits_for = Some(at);
                }
                self.entries.insert(name.clone(), entry);
                self.dirty.push(name);
            }
        }
    }

    /// The instant before which a new entry of partition `p` must not ask
    /// for it: S4.4, a `Held` reply timed its holder's expiry (and no
    /// release was broadcast since); S4.1, an acquire of an entry of it that
    /// was given up, or a release of it, may still be in flight
    /// ([`Engine::partition_busy_until`]).
    fn not_before(&self, group: &LeaseName, p: u32) -> Option<Timestamp> {
        let name = partition_name(group, p).ok()?;
        let held_until = self
            .groups
            .get(group)
            .and_then(|g| g.known.get(&p))
            .and_then(|k| k.until);
        let in_flight = self.partition_busy_until(&name);
        let at = held_until.max(in_flight)?;
        (at > self.now).then_some(at)
    }

    /// Hands a partition over (S6.1 order) and forgets its entry once done.
    fn stop_partition(&mut self, name: &LeaseName) {
        let Some(entry) = self.entries.get_mut(name) else {
            return;
        };
        if entry.stopping {
            return;
        }
        entry.stopping = true;
        entry.status = Status::Stopped;
        entry.attempt = None;
        entry.cooldown_until = None;
        let held = entry.held.is_some();
        self.give_up(name);
        // S10.3: a partition given up by `leave` or `close` is `Stopped`; one
        // that moves to another member is `Rebalanced`.
        let leaving = self.closing
            || parse_partition_name(name.as_str())
                .and_then(|(g, _)| self.groups.get(g))
                .is_some_and(|g| g.leave != Leave::No);
        if held && !leaving {
            // A hand-over for the change this member saw last: should
            // that change be undone, the partition comes back here.
            if let Some((g, p)) = parse_partition_name(name.as_str()) {
                if let Some(c) = self.groups.get_mut(g).and_then(|g| g.change.as_mut()) {
                    c.handed.insert(p);
                }
            }
        }
        let reason = if leaving {
            RevokeReason::Stopped
        } else {
            RevokeReason::Rebalanced
        };
        let _ = self.revoke(name, reason);
        if self.mutant_is(MutantKind::PartitionSkipsHandover) {
            // The mutant: release now, while the partition's task still runs.
            self.complete_handover(name);
        }
        self.after_handover_step(name);
    }

    /// A partition entry is gone (its hand-over is complete): the group may
    /// want it back (its target changed again meanwhile), or may be done
    /// leaving.
    pub(super) fn partition_removed(&mut self, name: &LeaseName) {
        let Some((group, _)) = parse_partition_name(name.as_str()) else {
            return;
        };
        let Ok(group) = LeaseName::new(group) else {
            return;
        };
        if !self.groups.contains_key(&group) {
            return;
        }
        self.reconcile_one(&group, name);
        self.maybe_group_left(&group);
    }

    /// [`Engine::reconcile`] for one partition.
    fn reconcile_one(&mut self, group: &LeaseName, name: &LeaseName) {
        let Some(g) = self.groups.get(group) else {
            return;
        };
        let Some((_, p)) = parse_partition_name(name.as_str()) else {
            return;
        };
        let wanted = !self.closing && g.leave == Leave::No && g.target.contains(&p);
        if wanted && !self.entries.contains_key(name) {
            let mut entry = Entry::new(
                g.id,
                Kind::Partition,
                g.runs_task,
                LockWait::Forever,
                self.now,
            );
            entry.exit_policy = g.policy;
            entry.hinted = g.released.contains(&p);
            if let Some(at) = self.not_before(group, p) {
                entry.next_attempt = Some(at);
                entry.waits_for = Some(at);
            }
            self.entries.insert(name.clone(), entry);
            self.dirty.push(name.clone());
        }
    }

    /// Ends a leave once the membership is over and every partition is
    /// released: the group is forgotten and [`Event::Completed`] names it.
    fn maybe_group_left(&mut self, group: &LeaseName) {
        let done = self
            .groups
            .get(group)
            .is_some_and(|g| g.leave == Leave::Left)
            && self.partition_entries(group).is_empty();
        if done {
            if let Some(g) = self.groups.remove(group) {
                self.emit(Event::Completed {
                    name: group.clone(),
                    entry: g.id,
                    handover: None,
                });
                self.emit(Event::Ended {
                    name: group.clone(),
                    entry: g.id,
                });
            }
        }
    }
}
