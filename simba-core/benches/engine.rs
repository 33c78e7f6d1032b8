//! Criterion benches of the engine's hot paths (issue 2's performance bars):
//! - one input handled and its outputs drained, on a session holding 10
//!   leases: a renewal reply listing them, an acquire reply, a release
//!   broadcast (bar: median ≤ 1 µs);
//! - one renewal reply listing 10,000 owned leases (bar: ≤ 2 ms);
//! - the same inputs at 10 / 100 / 1,000 / 10,000 leases (bar: linear at most).
//!
//! Memory per held lease is measured by `benches/memory.rs`.
//!
//! ```text
//! cargo bench -p simba-core --bench engine -- --warm-up-time 1 --measurement-time 3
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]
// Benches time real work, so they read the real clock.
#![allow(clippy::disallowed_methods)]

mod common;

use common::{holding, name, Held};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use simba_core::{Command, Input};
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Times `handle(reply to the next renewal) + drain`, the rest untimed.
fn renewal_reply(held: &mut Held, iters: u64) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        let cmd = held.run_until(|c| matches!(c, Command::Renew { .. }));
        let reply = held.reply(&cmd, None).unwrap();
        let now = held.now;
        let start = Instant::now();
        held.engine.handle(now, reply);
        black_box(held.drain_count());
        total += start.elapsed();
    }
    total
}

/// Times `handle(Held reply to a candidate's acquire) + drain`.
fn acquire_reply(held: &mut Held, iters: u64) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        let cmd = held.run_until(|c| matches!(c, Command::Acquire { .. }));
        let reply = held.reply(&cmd, None).unwrap();
        let now = held.now;
        let start = Instant::now();
        held.engine.handle(now, reply);
        black_box(held.drain_count());
        total += start.elapsed();
    }
    total
}

/// Times `handle(ReleaseBroadcast) + drain` for a waiting candidate: it
/// sends its acquire at once (S4.2); the acquire is answered `Held`, untimed.
fn release_broadcast(held: &mut Held, iters: u64) -> Duration {
    let contender = name(usize::MAX >> 44);
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        let now = held.now;
        let input = Input::ReleaseBroadcast {
            name: contender.clone(),
        };
        let start = Instant::now();
        held.engine.handle(now, input);
        let outputs: Vec<_> = std::iter::from_fn(|| held.engine.poll_output()).collect();
        total += start.elapsed();
        for output in outputs {
            if let simba_core::Output::Command(cmd) = output {
                if let Some(reply) = held.reply(&cmd, None) {
                    held.engine.handle(now, reply);
                    held.drain_count();
                }
            }
        }
    }
    total
}

/// `n` leases held plus one election that keeps losing (the contender).
fn holding_with_contender(n: usize) -> Held {
    let mut held = holding(n);
    let now = held.now;
    held.engine
        .start_election(now, name(usize::MAX >> 44), false)
        .unwrap();
    held.drain_count();
    held
}

fn per_input_10_leases(c: &mut Criterion) {
    let mut group = c.benchmark_group("one_input_10_leases");
    group.bench_function("renewal_reply", |b| {
        let mut held = holding(10);
        b.iter_custom(|iters| renewal_reply(&mut held, iters));
    });
    group.bench_function("acquire_reply_held", |b| {
        let mut held = holding_with_contender(10);
        b.iter_custom(|iters| acquire_reply(&mut held, iters));
    });
    group.bench_function("release_broadcast", |b| {
        let mut held = holding_with_contender(10);
        let cmd = held.run_until(|c| matches!(c, Command::Acquire { .. }));
        let reply = held.reply(&cmd, None).unwrap();
        let now = held.now;
        held.engine.handle(now, reply);
        held.drain_count();
        b.iter_custom(|iters| release_broadcast(&mut held, iters));
    });
    group.finish();
}

fn scaling(c: &mut Criterion) {
    let mut group = c.benchmark_group("renewal_reply_by_leases");
    group.sample_size(20);
    for n in [10usize, 100, 1_000, 10_000] {
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, &n| {
            let mut held = holding(n);
            b.iter_custom(|iters| renewal_reply(&mut held, iters));
        });
    }
    group.finish();
    let mut group = c.benchmark_group("acquire_reply_by_leases");
    group.sample_size(20);
    for n in [10usize, 100, 1_000, 10_000] {
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, &n| {
            let mut held = holding_with_contender(n);
            b.iter_custom(|iters| acquire_reply(&mut held, iters));
        });
    }
    group.finish();
}

criterion_group!(benches, per_input_10_leases, scaling);
criterion_main!(benches);
