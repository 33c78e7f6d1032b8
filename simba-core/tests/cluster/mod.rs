//! A round-based cluster for partitioned-group tests and benchmarks: several
//! engines over one model backend. Every command sent in one round is
//! executed by the backend at the start of the next (in an order a seed may
//! shuffle), and its reply and any broadcast it causes are delivered right
//! after: one round is one backend round trip. Time advances by `rtt` per
//! round. Partition tasks stop `task_stop_rounds` rounds after their
//! interrupt, so a hand-over that does not wait for them shows as overlap.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use simba_core::*;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

#[derive(Clone, Debug, Default)]
pub struct Counts {
    pub renew: u64,
    pub acquire: u64,
    pub release: u64,
    pub withdraw: u64,
    pub join: u64,
    pub leave: u64,
    pub other: u64,
    /// Batches sent (S4.7), each one call carrying several of the above.
    pub batches: u64,
}

struct Lease {
    holder: Option<SessionId>,
    token: u64,
}

/// The model backend: sessions, leases and group memberships on the
/// cluster's one true clock.
#[derive(Default)]
pub struct Model {
    sessions: BTreeMap<SessionId, (Timestamp, Duration)>,
    leases: BTreeMap<LeaseName, Lease>,
    groups: BTreeMap<LeaseName, BTreeSet<SessionId>>,
    next_session: u128,
    /// Announces no join or leave (S10.5), as the SQL and Redis backends.
    pub quiet_groups: bool,
}

impl Model {
    fn live(&self, s: SessionId, now: Timestamp) -> Option<Duration> {
        self.sessions
            .get(&s)
            .filter(|(exp, _)| *exp > now)
            .map(|(exp, _)| *exp - now)
    }

    /// Executes one command through the core's mapping
    /// ([`Command::call`]); returns its reply and the names it broadcasts.
    fn execute(&mut self, cmd: &Command, now: Timestamp) -> (Option<Input>, Vec<LeaseName>) {
        if matches!(cmd, Command::ClaimSlot { .. }) {
            return (None, Vec::new());
        }
        let mut at = At {
            model: self,
            now,
            casts: Vec::new(),
        };
        let reply = cmd.clone().call(&mut at);
        (Some(reply), at.casts)
    }

    /// Forgets `session`'s membership of `group`, as a backend that lost it
    /// would; returns whether it was a member.
    pub fn drop_member(&mut self, group: &LeaseName, session: SessionId) -> bool {
        self.groups
            .get_mut(group)
            .is_some_and(|m| m.remove(&session))
    }

    /// The live members of `group` at `now`, ascending.
    pub fn live_members(&self, group: &LeaseName, now: Timestamp) -> Vec<SessionId> {
        self.groups
            .get(group)
            .map(|m| {
                m.iter()
                    .copied()
                    .filter(|s| self.live(*s, now).is_some())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The live holder of `name`, if any.
    pub fn holder(&self, name: &LeaseName, now: Timestamp) -> Option<SessionId> {
        self.leases
            .get(name)
            .and_then(|l| l.holder)
            .filter(|h| self.live(*h, now).is_some())
    }
}

/// One partition term as a node saw it.
#[derive(Clone, Debug)]
pub struct HeldTerm {
    pub name: LeaseName,
    pub token: Token,
    pub session: SessionId,
}

pub struct Node {
    pub engine: Engine,
    pub alive: bool,
    /// Terms held (Elected, not yet Revoked), by term id.
    pub held: BTreeMap<TermId, HeldTerm>,
    /// Tasks running, by term id: `Some(round)` once interrupted, the round
    /// it will exit.
    pub tasks: BTreeMap<TermId, (LeaseName, Option<u64>)>,
    inbox: Vec<Input>,
}

/// What happened to a partition, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Happening {
    Gained {
        node: usize,
        token: Token,
    },
    Lost {
        node: usize,
        token: Token,
        reason: RevokeReason,
    },
    TaskStarted {
        node: usize,
    },
    TaskStopped {
        node: usize,
    },
    Released {
        node: usize,
        token: Token,
    },
    /// The backend ran a release that freed the partition (after its
    /// command waited for a connection, [`Cluster::connections`]).
    Freed {
        node: usize,
    },
}

pub struct Cluster {
    pub nodes: Vec<Node>,
    pub model: Model,
    pub now: Timestamp,
    pub round: u64,
    pub rtt: Duration,
    pub config: SimbaConfig,
    pub group: LeaseName,
    pub partitions: u32,
    pub task_stop_rounds: u64,
    /// Commands sent last round, executed at the start of the next.
    inflight: Vec<(usize, Command)>,
    pub counts: Counts,
    /// Renew commands per node.
    pub renewals: Vec<u64>,
    /// Backend calls (every command) per node.
    pub calls: Vec<u64>,
    /// Per partition lease name: (round, happening).
    pub history: BTreeMap<LeaseName, Vec<(u64, Happening)>>,
    /// Violations of "at most one valid owner" and "no task overlap".
    pub violations: Vec<String>,
    shuffle: Option<fastrand::Rng>,
    /// The backend profile of nodes added from now on (S4.6's slots).
    pub profile: BackendProfile,
    /// Connections per node, as a driver over a pool of that many
    /// (`simba-client`'s call queue): each round a node's backend calls
    /// other than renewals, openings and withdraws run at most this many, oldest
    /// first; the rest wait, and an acquire that waited past its call
    /// timeout is not sent (its attempt was abandoned, S2.4). `None`: every
    /// call runs in the round after it was sent.
    pub connections: Option<usize>,
    /// Calls waiting for a connection: (node, round sent, command).
    queued: Vec<(usize, u64, Command)>,
    /// Each node gets the replies and broadcasts of a round as one batch
    /// ([`Engine::handle_all`], as the client's driver feeds what is ready
    /// at once), not one [`Engine::handle`] each.
    pub batched: bool,
    /// Release broadcasts reach node `i` only in rounds where
    /// `(round + i) % polled == 0`, all that came since at once, in the
    /// order of their releases: a backend whose broadcasts a node reads
    /// from a log every so often (MariaDB's waker). `None`: each broadcast
    /// comes in the round of its release.
    pub polled: Option<u64>,
    /// Broadcasts not yet read, per node ([`Cluster::polled`]).
    unread: Vec<Vec<LeaseName>>,
}

impl Cluster {
    pub fn new(group: &str, partitions: u32, config: SimbaConfig, rtt: Duration) -> Cluster {
        Cluster {
            nodes: Vec::new(),
            model: Model::default(),
            now: Timestamp::from_nanos(1_000_000_000),
            round: 0,
            rtt,
            config,
            group: LeaseName::new(group).unwrap(),
            partitions,
            task_stop_rounds: 6,
            inflight: Vec::new(),
            counts: Counts::default(),
            renewals: Vec::new(),
            calls: Vec::new(),
            history: BTreeMap::new(),
            violations: Vec::new(),
            shuffle: None,
            profile: BackendProfile::default(),
            connections: None,
            queued: Vec::new(),
            batched: false,
            polled: None,
            unread: Vec::new(),
        }
    }

    /// Executes each round's commands in an order drawn from `seed`.
    /// Delivers each round's inputs to a node as one batch ([`Cluster::batched`]).
    pub fn batched(mut self, batched: bool) -> Self {
        self.batched = batched;
        self
    }

    /// Nodes added from now on send up to `max` acquires, releases and
    /// withdraws decided at one instant as one call (S4.7).
    pub fn batches(mut self, max: usize) -> Self {
        self.profile.batch = max;
        self
    }

    pub fn shuffled(mut self, seed: u64) -> Self {
        self.shuffle = Some(fastrand::Rng::with_seed(seed));
        self
    }

    /// Adds a node that joins the group with partition tasks; returns its index.
    pub fn add_node(&mut self) -> usize {
        let i = self.nodes.len();
        let config = self
            .config
            .to_builder()
            .seed(self.config.seed().wrapping_add(i as u64 * 7919))
            .build()
            .unwrap();
        let mut engine = Engine::new(config, self.profile, self.now);
        engine
            .join_group(
                self.now,
                self.group.clone(),
                self.partitions,
                true,
                TaskExitPolicy::default(),
            )
            .unwrap();
        self.nodes.push(Node {
            engine,
            alive: true,
            held: BTreeMap::new(),
            tasks: BTreeMap::new(),
            inbox: Vec::new(),
        });
        self.renewals.push(0);
        self.calls.push(0);
        self.unread.push(Vec::new());
        self.drain(i);
        i
    }

    /// The node leaves the group gracefully (S10.3).
    pub fn leave(&mut self, i: usize) {
        let now = self.now;
        let group = self.group.clone();
        let _ = self.nodes[i].engine.leave_group(now, &group);
        self.drain(i);
    }

    /// The node's process dies: no more calls, no release; its session
    /// expires on the backend. Its tasks die with it.
    pub fn crash(&mut self, i: usize) {
        self.nodes[i].alive = false;
        let tasks = std::mem::take(&mut self.nodes[i].tasks);
        for (name, _) in tasks.into_values() {
            self.log(&name, Happening::TaskStopped { node: i });
        }
        self.nodes[i].held.clear();
        self.inflight.retain(|(n, _)| *n != i);
        self.queued.retain(|(n, _, _)| *n != i);
    }

    fn log(&mut self, name: &LeaseName, h: Happening) {
        self.history
            .entry(name.clone())
            .or_default()
            .push((self.round, h));
    }

    /// Drains node `i`'s outputs: commands go out next round, events are
    /// recorded, tasks start and are interrupted.
    fn drain(&mut self, i: usize) {
        while let Some(out) = self.nodes[i].engine.poll_output() {
            match out {
                Output::Command(cmd) => {
                    self.calls[i] += 1;
                    // A batch (S4.7) is one call; what it carries is counted
                    // call by call.
                    let each: &[Command] = match &cmd {
                        Command::Batch { calls } => {
                            self.counts.batches += 1;
                            calls
                        }
                        one => std::slice::from_ref(one),
                    };
                    let mut released = Vec::new();
                    for one in each {
                        match one {
                            Command::Renew { .. } => {
                                self.counts.renew += 1;
                                self.renewals[i] += 1;
                            }
                            Command::Acquire { .. } => self.counts.acquire += 1,
                            Command::Release { name, token, .. } => {
                                self.counts.release += 1;
                                released.push((name.clone(), *token));
                            }
                            Command::Withdraw { .. } => self.counts.withdraw += 1,
                            Command::JoinGroup { .. } => self.counts.join += 1,
                            Command::LeaveGroup { .. } => self.counts.leave += 1,
                            _ => self.counts.other += 1,
                        }
                    }
                    for (name, token) in released {
                        self.log(&name, Happening::Released { node: i, token });
                    }
                    self.inflight.push((i, cmd));
                }
                Output::Event(Event::Elected { term }) => {
                    self.log(
                        &term.name,
                        Happening::Gained {
                            node: i,
                            token: term.token,
                        },
                    );
                    self.nodes[i].held.insert(
                        term.id,
                        HeldTerm {
                            name: term.name.clone(),
                            token: term.token,
                            session: term.session,
                        },
                    );
                }
                Output::Event(Event::Revoked { term, reason }) => {
                    self.log(
                        &term.name,
                        Happening::Lost {
                            node: i,
                            token: term.token,
                            reason,
                        },
                    );
                    self.nodes[i].held.remove(&term.id);
                }
                Output::Event(Event::Diagnostic {
                    level: Level::Error,
                    message,
                }) => self.violations.push(format!("node {i}: {message}")),
                Output::Event(_) => {}
                Output::Task(TaskOrder::Start { term }) => {
                    self.log(&term.name, Happening::TaskStarted { node: i });
                    self.nodes[i]
                        .tasks
                        .insert(term.id, (term.name.clone(), None));
                }
                Output::Task(TaskOrder::Interrupt { term }) => {
                    let stop = self.round + self.task_stop_rounds;
                    if let Some(t) = self.nodes[i].tasks.get_mut(&term.id) {
                        t.1 = Some(stop);
                    }
                }
            }
        }
    }

    /// One round: time advances by one round trip; last round's commands
    /// are executed; replies, broadcasts and task exits are delivered;
    /// timers fire; new commands are collected.
    pub fn step(&mut self) {
        self.round += 1;
        self.now = self.now + self.rtt;
        let now = self.now;
        let mut batch = std::mem::take(&mut self.inflight);
        if let Some(max) = self.connections {
            batch = self.through_connections(batch, max);
        }
        if let Some(rng) = self.shuffle.as_mut() {
            rng.shuffle(&mut batch);
        }
        for (i, cmd) in batch {
            let (reply, casts) = self.model.execute(&cmd, now);
            let each: &[Command] = match &cmd {
                Command::Batch { calls } => calls,
                one => std::slice::from_ref(one),
            };
            for one in each {
                if let Command::Release { name, .. } = one {
                    if casts.contains(name) {
                        self.log(name, Happening::Freed { node: i });
                    }
                }
            }
            // Polled: a node's own releases reach its stream at once, before
            // the release's reply (MariaDB's waker yields them unread).
            if self.polled.is_some() && self.nodes[i].alive {
                for name in casts.iter().filter(|n| is_partition(n)) {
                    self.nodes[i]
                        .inbox
                        .push(Input::ReleaseBroadcast { name: name.clone() });
                }
            }
            if let Some(reply) = reply {
                if self.nodes[i].alive {
                    self.nodes[i].inbox.push(reply);
                }
            }
            for name in casts {
                for (k, n) in self.nodes.iter_mut().enumerate().filter(|(_, n)| n.alive) {
                    if self.polled.is_some() {
                        if k != i || !is_partition(&name) {
                            self.unread[k].push(name.clone());
                        }
                    } else {
                        n.inbox.push(Input::ReleaseBroadcast { name: name.clone() });
                    }
                }
            }
        }
        if let Some(every) = self.polled {
            for k in 0..self.nodes.len() {
                if (self.round + k as u64) % every.max(1) == 0 {
                    // The releases first, then the groups whose members
                    // changed (the waker's read yields them in that order).
                    let mut unread = std::mem::take(&mut self.unread[k]);
                    unread.sort_by_key(|n| !is_partition(n));
                    for name in unread {
                        self.nodes[k].inbox.push(Input::ReleaseBroadcast { name });
                    }
                }
            }
        }
        for i in 0..self.nodes.len() {
            if !self.nodes[i].alive {
                continue;
            }
            let inbox = std::mem::take(&mut self.nodes[i].inbox);
            if self.batched {
                self.nodes[i].engine.handle_all(now, inbox);
                self.drain(i);
            } else {
                for input in inbox {
                    self.nodes[i].engine.handle(now, input);
                    self.drain(i);
                }
            }
            // Tasks whose stop round has come exit.
            let exiting: Vec<(TermId, LeaseName)> = self.nodes[i]
                .tasks
                .iter()
                .filter(|(_, (_, stop))| stop.is_some_and(|s| s <= self.round))
                .map(|(id, (n, _))| (*id, n.clone()))
                .collect();
            for (id, name) in exiting {
                self.nodes[i].tasks.remove(&id);
                self.log(&name, Happening::TaskStopped { node: i });
                self.nodes[i].engine.handle(
                    now,
                    Input::TaskExited {
                        term: id,
                        outcome: TaskOutcome::Returned,
                    },
                );
                self.drain(i);
            }
            self.nodes[i].engine.handle_timeout(now);
            self.drain(i);
        }
        self.check_instant();
    }

    /// The calls of `batch` that get a connection this round (see
    /// [`Cluster::connections`]); the others wait in `queued`.
    fn through_connections(
        &mut self,
        batch: Vec<(usize, Command)>,
        max: usize,
    ) -> Vec<(usize, Command)> {
        let round = self.round;
        let mut run = Vec::new();
        for (i, cmd) in batch {
            // Renewals and openings never wait (the driver's rule); a
            // withdraw costs no call here: this model, like the SQL and
            // Redis backends, keeps nothing for a `Held` acquire (S4.5).
            if matches!(
                cmd,
                Command::Renew { .. } | Command::OpenSession { .. } | Command::Withdraw { .. }
            ) {
                run.push((i, cmd));
            } else {
                self.queued.push((i, round, cmd));
            }
        }
        let mut used = vec![0usize; self.nodes.len()];
        let mut left = Vec::new();
        for (i, sent, cmd) in std::mem::take(&mut self.queued) {
            let waited = self.rtt * u32::try_from(round - sent).unwrap_or(u32::MAX);
            let timeout = self.nodes[i].engine.call_timeout();
            if matches!(cmd, Command::Acquire { .. }) && waited >= timeout {
                continue;
            }
            if used[i] < max {
                used[i] += 1;
                run.push((i, cmd));
            } else {
                left.push((i, sent, cmd));
            }
        }
        self.queued = left;
        run
    }

    pub fn run(&mut self, rounds: u64) {
        for _ in 0..rounds {
            self.step();
        }
    }

    pub fn run_for(&mut self, d: Duration) {
        let rounds = d.as_nanos() / self.rtt.as_nanos().max(1);
        self.run(rounds as u64);
    }

    /// At this true instant: at most one node holds a valid term of each
    /// partition (S3.3), and at most one task of each runs (S10.3).
    fn check_instant(&mut self) {
        let now = self.now;
        let mut valid: BTreeMap<LeaseName, usize> = BTreeMap::new();
        let mut running: BTreeMap<LeaseName, usize> = BTreeMap::new();
        for n in self.nodes.iter().filter(|n| n.alive) {
            let deadline = n.engine.session_deadline();
            for t in n.held.values() {
                let ok = deadline.is_some_and(|(s, d)| s == t.session && now < d);
                if ok {
                    *valid.entry(t.name.clone()).or_default() += 1;
                }
            }
            for (name, _) in n.tasks.values() {
                *running.entry(name.clone()).or_default() += 1;
            }
        }
        for (name, c) in valid {
            if c > 1 {
                self.violations
                    .push(format!("round {}: {c} valid owners of {name}", self.round));
            }
        }
        for (name, c) in running {
            if c > 1 {
                self.violations.push(format!(
                    "round {}: {c} tasks of {name} run at once",
                    self.round
                ));
            }
        }
    }

    /// Partitions held (a valid term) per alive node.
    pub fn owned_counts(&self) -> Vec<usize> {
        self.nodes
            .iter()
            .map(|n| if n.alive { n.held.len() } else { 0 })
            .collect()
    }

    /// The alive nodes that are members (joined and not leaving).
    pub fn sessions(&self) -> Vec<Option<SessionId>> {
        self.nodes
            .iter()
            .map(|n| {
                if n.alive {
                    n.engine.session_deadline().map(|(s, _)| s)
                } else {
                    None
                }
            })
            .collect()
    }

    /// Whether the group is settled: every member has a session, every
    /// partition is owned by exactly one of the members still in, and max −
    /// min partitions per member ≤ 1 (S10.2, S10.4).
    pub fn settled(&self, members: &[usize]) -> Result<(), String> {
        for &i in members {
            if self.nodes[i].engine.session_deadline().is_none() {
                return Err(format!("node {i} has no session"));
            }
        }
        for p in 0..self.partitions {
            let name = partition_name(&self.group, p).unwrap();
            let holders: Vec<usize> = members
                .iter()
                .copied()
                .filter(|&i| self.nodes[i].held.values().any(|t| t.name == name))
                .collect();
            if holders.len() != 1 {
                return Err(format!("partition {p} is held by nodes {holders:?}"));
            }
        }
        let counts: Vec<usize> = members.iter().map(|&i| self.nodes[i].held.len()).collect();
        let (min, max) = (
            counts.iter().min().copied().unwrap_or(0),
            counts.iter().max().copied().unwrap_or(0),
        );
        if max - min > 1 || counts.iter().sum::<usize>() != self.partitions as usize {
            return Err(format!("unbalanced: {counts:?}"));
        }
        Ok(())
    }

    /// How many times each partition's owner changed since `round`.
    pub fn moves_since(&self, round: u64) -> BTreeMap<LeaseName, usize> {
        self.history
            .iter()
            .map(|(n, h)| {
                let moves = h
                    .iter()
                    .filter(|(r, e)| *r >= round && matches!(e, Happening::Gained { .. }))
                    .count();
                (n.clone(), moves)
            })
            .collect()
    }

    /// Tokens of every partition strictly increase over its gains.
    pub fn tokens_increase(&self) -> Result<(), String> {
        for (n, h) in &self.history {
            let tokens: Vec<Token> = h
                .iter()
                .filter_map(|(_, e)| match e {
                    Happening::Gained { token, .. } => Some(*token),
                    _ => None,
                })
                .collect();
            if tokens.windows(2).any(|w| w[0] >= w[1]) {
                return Err(format!("{n}: tokens {tokens:?}"));
            }
        }
        Ok(())
    }
}

/// The model at one instant, as the core's command mapping calls it; it
/// collects the names the calls broadcast.
struct At<'a> {
    model: &'a mut Model,
    now: Timestamp,
    casts: Vec<LeaseName>,
}

impl Calls for At<'_> {
    fn open_session(&mut self, lease_duration: Duration) -> Result<SessionGrant, BackendError> {
        let m = &mut *self.model;
        m.next_session += 1;
        let s = SessionId::from_u128(m.next_session.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        m.sessions
            .insert(s, (self.now + lease_duration, lease_duration));
        Ok(SessionGrant {
            session: s,
            remaining: lease_duration,
        })
    }

    fn renew(&mut self, session: SessionId) -> Result<Renewal, RenewError> {
        let (m, now) = (&mut *self.model, self.now);
        if m.live(session, now).is_none() {
            return Err(RenewError::Expired);
        }
        let d = m.sessions[&session].1;
        m.sessions.insert(session, (now + d, d));
        let owned = m
            .leases
            .iter()
            .filter(|(_, l)| l.holder == Some(session))
            .map(|(n, l)| (n.clone(), Token::new(l.token).unwrap()))
            .collect();
        let groups = m
            .groups
            .iter()
            .filter(|(_, members)| members.contains(&session))
            .map(|(g, members)| GroupView {
                group: g.clone(),
                members: members
                    .iter()
                    .copied()
                    .filter(|s| m.live(*s, now).is_some())
                    .collect(),
            })
            .collect();
        Ok(Renewal {
            remaining: d,
            owned,
            groups,
        })
    }

    fn acquire(
        &mut self,
        session: SessionId,
        name: &LeaseName,
    ) -> Result<AcquireOutcome, BackendError> {
        let (m, now) = (&mut *self.model, self.now);
        let Some(remaining) = m.live(session, now) else {
            return Ok(AcquireOutcome::Expired);
        };
        let holder_remaining = m
            .leases
            .get(name)
            .and_then(|l| l.holder)
            .filter(|h| *h != session)
            .and_then(|h| m.live(h, now));
        let lease = m.leases.entry(name.clone()).or_insert(Lease {
            holder: None,
            token: 0,
        });
        if holder_remaining.is_some() {
            return Ok(AcquireOutcome::Held {
                holder: lease.holder,
                token: Token::new(lease.token),
                holder_remaining,
            });
        }
        if lease.holder != Some(session) {
            lease.holder = Some(session);
            lease.token += 1;
        }
        Ok(AcquireOutcome::Won {
            token: Token::new(lease.token).unwrap(),
            remaining,
        })
    }

    fn release(
        &mut self,
        session: SessionId,
        name: &LeaseName,
        token: Token,
    ) -> Result<(), BackendError> {
        if let Some(l) = self.model.leases.get_mut(name) {
            if l.holder == Some(session) && l.token == token.get() {
                l.holder = None;
                self.casts.push(name.clone());
            }
        }
        Ok(())
    }

    // This backend keeps nothing for a `Held` acquire (S4.5): the provided
    // `withdraw` answers `Ok`.

    fn close_session(&mut self, session: SessionId) -> Result<(), BackendError> {
        let m = &mut *self.model;
        m.sessions.remove(&session);
        for (n, l) in m.leases.iter_mut() {
            if l.holder == Some(session) {
                l.holder = None;
                self.casts.push(n.clone());
            }
        }
        let quiet = m.quiet_groups;
        for (g, members) in m.groups.iter_mut() {
            if members.remove(&session) && !quiet {
                self.casts.push(g.clone());
            }
        }
        Ok(())
    }

    fn join_group(&mut self, session: SessionId, group: &LeaseName) -> Result<(), BackendError> {
        let m = &mut *self.model;
        // Joining with a session that is not live is a no-op.
        if m.live(session, self.now).is_some()
            && m.groups.entry(group.clone()).or_default().insert(session)
            && !m.quiet_groups
        {
            self.casts.push(group.clone());
        }
        Ok(())
    }

    fn leave_group(&mut self, session: SessionId, group: &LeaseName) -> Result<(), BackendError> {
        if self
            .model
            .groups
            .get_mut(group)
            .is_some_and(|members| members.remove(&session))
            && !self.model.quiet_groups
        {
            self.casts.push(group.clone());
        }
        Ok(())
    }

    /// Never called: [`Model::execute`] answers no slot claim.
    fn claim_slot(
        &mut self,
        _: SessionId,
        _: &LeaseName,
        _: Token,
        _: u64,
    ) -> Result<SlotClaim, BackendError> {
        Err(BackendError::new(
            BackendErrorKind::Unsupported,
            "the cluster model records no slots",
        ))
    }
}

/// Whether a broadcast names a partition (not a group).
fn is_partition(name: &LeaseName) -> bool {
    parse_partition_name(name.as_str()).is_some()
}
