//! The network between the nodes and the backend: delays (with a tail),
//! loss, duplication, partitions per direction, and the extra reply delay
//! of a slow backend. Every draw comes from the world's one random stream,
//! in the order the messages are sent.

use super::queue::Ev;
use super::types::{chance, nanos, uniform};
use super::World;
use crate::params::NetParams;
use simba_core::{Command, Input};
use std::collections::BTreeMap;
use std::time::Duration;

/// Index of the node-to-backend direction in [`Network::partitions`].
pub(super) const UP: usize = 0;
/// Index of the backend-to-node direction in [`Network::partitions`].
pub(super) const DOWN: usize = 1;

/// The network's state: which links are cut, and how slow the backend is.
pub(super) struct Network {
    /// Per node: the partitions in force, by direction ([`UP`], [`DOWN`]).
    pub(super) partitions: Vec<[u32; 2]>,
    /// The extra reply delays of the `slow backend` faults in force, by fault.
    pub(super) slow: BTreeMap<usize, Duration>,
    /// Messages lost to loss or partitions.
    pub(super) lost: u64,
}

impl Network {
    /// The network of `nodes` nodes, every link up.
    pub(super) fn new(nodes: usize) -> Network {
        Network {
            partitions: vec![[0, 0]; nodes],
            slow: BTreeMap::new(),
            lost: 0,
        }
    }

    /// One message's delay, ns: a tail delay with its chance, else the
    /// minimum plus jitter (no tail once healed).
    pub(super) fn delay(rng: &mut fastrand::Rng, net: &NetParams, healed: bool) -> u64 {
        if !healed && chance(rng, net.tail_permille) {
            uniform(rng, net.tail_max)
        } else {
            nanos(net.min_delay) + uniform(rng, net.jitter)
        }
    }

    /// How many copies of a message arrive: 0 (lost, or `partitioned`),
    /// 1, or 2 (duplicated); always 1 once healed.
    pub(super) fn copies(
        &mut self,
        rng: &mut fastrand::Rng,
        net: &NetParams,
        healed: bool,
        partitioned: bool,
    ) -> u32 {
        if healed {
            return 1;
        }
        if partitioned || chance(rng, net.loss_permille) {
            self.lost += 1;
            return 0;
        }
        if chance(rng, net.dup_permille) {
            2
        } else {
            1
        }
    }

    /// Cuts or restores `node`'s links in `dirs`.
    pub(super) fn cut(&mut self, node: usize, dirs: &[usize], start: bool) {
        for &d in dirs {
            let c = &mut self.partitions[node][d];
            *c = if start { *c + 1 } else { c.saturating_sub(1) };
        }
    }

    /// Every link up, the backend at its normal speed.
    pub(super) fn heal(&mut self) {
        for p in &mut self.partitions {
            *p = [0, 0];
        }
        self.slow.clear();
    }
}

impl World {
    /// One message's delay, ns.
    pub(super) fn delay(&mut self) -> u64 {
        Network::delay(&mut self.rng, &self.p.net, self.healed)
    }

    /// Sends `cmd` from `node` (process incarnation `inc`) to the backend.
    pub(super) fn send_up(&mut self, node: usize, inc: u64, cmd: Command) {
        let blocked = self.net.partitions[node][UP] > 0;
        let copies = self
            .net
            .copies(&mut self.rng, &self.p.net, self.healed, blocked);
        for _ in 0..copies {
            let d = self.delay();
            self.queue.push(
                self.queue.now + d,
                Ev::ToBackend {
                    node,
                    inc,
                    cmd: cmd.clone(),
                },
            );
        }
    }

    /// Sends `input` from the backend to `node` (process incarnation `inc`).
    pub(super) fn send_down(&mut self, node: usize, inc: u64, input: Input) {
        let blocked = self.net.partitions[node][DOWN] > 0;
        let copies = self
            .net
            .copies(&mut self.rng, &self.p.net, self.healed, blocked);
        let slow = self.net.slow.values().copied().max().unwrap_or_default();
        for _ in 0..copies {
            let d = self.delay() + uniform(&mut self.rng, slow);
            self.queue.push(
                self.queue.now + d,
                Ev::ToNode {
                    node,
                    inc,
                    input: input.clone(),
                },
            );
        }
    }
}
