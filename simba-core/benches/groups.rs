//! Partitioned groups (S10): figures for the two performance goals, printed
//! and checked. Run with `cargo bench -p simba-core --bench groups`:
//!
//! - a graceful leave of 1 of 10 members with 1,000 partitions: every moved
//!   partition is owned again within 3 backend round trips of its release;
//! - with 1,000 partitions held, each member makes one backend call (its
//!   renewal) per renewal interval, and no other.
//!
//! The cluster runs in rounds of one backend round trip (see
//! `tests/cluster/mod.rs`): a partition released in round `r` and gained in
//! round `r + k` was owned again `k` round trips after its release.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![allow(clippy::disallowed_methods)] // the wall time it prints is read from the host clock

#[path = "../tests/cluster/mod.rs"]
mod cluster;

use cluster::{Cluster, Happening};
use simba_core::SimbaConfig;
use std::time::{Duration, Instant};

fn config() -> SimbaConfig {
    SimbaConfig::builder()
        .lease_duration(Duration::from_secs(15))
        .seed(5)
        .build()
        .unwrap()
}

fn settle(c: &mut Cluster, members: &[usize]) -> u64 {
    let start = c.round;
    while c.settled(members).is_err() {
        c.step();
        assert!(
            c.round - start < 10_000,
            "not settled: {:?}",
            c.settled(members)
        );
    }
    c.round - start
}

fn main() {
    // Figure 1: a graceful leave of 1 of 10 members with 1,000 partitions.
    let rtt = Duration::from_millis(5);
    let mut c = Cluster::new("bench", 1_000, config(), rtt);
    for _ in 0..10 {
        c.add_node();
    }
    let wall = Instant::now();
    let rounds = settle(&mut c, &(0..10).collect::<Vec<_>>());
    println!(
        "groups/settle: 10 members, 1000 partitions settled in {rounds} round trips ({:?} wall)",
        wall.elapsed()
    );
    let from = c.round;
    c.leave(9);
    let wall = Instant::now();
    let rounds = settle(&mut c, &(0..9).collect::<Vec<_>>());
    let mut gaps: Vec<u64> = Vec::new();
    let mut moved_from_leaver = 0;
    let mut moved_between_stayers = 0;
    for h in c.history.values() {
        let h: Vec<&(u64, Happening)> = h.iter().filter(|(r, _)| *r >= from).collect();
        if let Some(rel) = h
            .iter()
            .position(|(_, e)| matches!(e, Happening::Released { .. }))
        {
            if let Happening::Released { node, .. } = h[rel].1 {
                if node == 9 {
                    moved_from_leaver += 1;
                } else {
                    moved_between_stayers += 1;
                }
            }
            let gained = h[rel..]
                .iter()
                .find(|(_, e)| matches!(e, Happening::Gained { .. }))
                .expect("every released partition is gained again");
            gaps.push(gained.0 - h[rel].0);
        }
    }
    gaps.sort_unstable();
    let max = gaps.last().copied().unwrap_or(0);
    let p50 = gaps.get(gaps.len() / 2).copied().unwrap_or(0);
    let within3 = gaps.iter().filter(|&&g| g <= 3).count();
    println!(
        "groups/leave: 1 of 10 members left gracefully; {} partitions moved ({moved_from_leaver} from the leaver, {moved_between_stayers} between staying members); \
         owned again after release: p50 {p50}, max {max} round trips; {within3}/{} within 3; settled in {rounds} round trips ({:?} wall)",
        gaps.len(),
        gaps.len(),
        wall.elapsed()
    );
    println!("groups/leave: counts per node now {:?}", c.owned_counts());
    assert!(c.violations.is_empty(), "{:?}", c.violations);

    // Figure 2: backend calls with 1,000 partitions held, by one member and
    // by ten, over 60 renewal intervals of a settled group.
    let mut worst_calls = 0.0f64;
    for members in [1usize, 10] {
        let mut c = Cluster::new("bench", 1_000, config(), rtt);
        for _ in 0..members {
            c.add_node();
        }
        settle(&mut c, &(0..members).collect::<Vec<_>>());
        let before = c.renewals.clone();
        let calls_before = c.calls.clone();
        let (acq, rel) = (c.counts.acquire, c.counts.release);
        let intervals = 60u32;
        c.run_for(config().renew_interval() * intervals);
        let per: Vec<u64> = before.iter().zip(&c.renewals).map(|(a, b)| b - a).collect();
        let calls: Vec<u64> = calls_before
            .iter()
            .zip(&c.calls)
            .map(|(a, b)| b - a)
            .collect();
        let max_rate = calls
            .iter()
            .map(|&n| n as f64 / f64::from(intervals))
            .fold(0.0, f64::max);
        worst_calls = worst_calls.max(max_rate);
        println!(
            "groups/renewals: {members} member(s) holding 1000 partitions ({:?} each): over {intervals} intervals, \
             renew calls per member {per:?}, backend calls of any kind per member {calls:?} \
             (at most {max_rate:.3} per member per interval); acquires {} and releases {} in that time",
            c.owned_counts(),
            c.counts.acquire - acq,
            c.counts.release - rel
        );
    }
    println!(
        "groups/summary: leave of 1 of 10 with 1000 partitions: {within3}/{moved} moved partitions owned again \
         within 3 round trips of their release (max {max}); steady state: at most {worst_calls:.3} backend calls \
         per member per renewal interval with 1000 partitions held",
        moved = gaps.len()
    );
    assert!(
        within3 == gaps.len(),
        "a moved partition took more than 3 round trips: max {max}"
    );
    assert!(
        worst_calls <= 1.0 + 1.0 / 60.0,
        "more than one backend call per member per interval: {worst_calls}"
    );
}
