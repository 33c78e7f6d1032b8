//! Memory per held lease (issue 2's bar: ≤ 1 KiB): the heap bytes an engine
//! holds after winning `n` elections, minus what it held with its session
//! open and no election, divided by `n`. A counting global allocator
//! (`stats_alloc`) sees every allocation and free. Run with
//!
//! ```text
//! cargo bench -p simba-core --bench memory
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod common;

use simba_core::{BackendProfile, Command, Engine, Input, Output, SimbaConfig, Timestamp};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use std::alloc::System;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Net heap bytes still allocated since `region` started.
fn net(region: &Region<'_, System>) -> i128 {
    let c = region.change();
    c.bytes_allocated as i128 - c.bytes_deallocated as i128 + c.bytes_reallocated as i128
}

/// Heap bytes an engine holding `n` leases keeps after one renewal round
/// (the driver's own list of owned leases is dropped first).
fn engine_bytes(n: usize) -> i128 {
    let region = Region::new(GLOBAL);
    let mut held = common::holding(n);
    let cmd = held.run_until(|c| matches!(c, Command::Renew { .. }));
    let reply = held.reply(&cmd, None).unwrap();
    let now = held.now;
    held.engine.handle(now, reply);
    held.drain_count();
    held.owned = Vec::new();
    let bytes = net(&region);
    drop(held);
    bytes
}

/// Heap allocations made while one input is handled and its outputs
/// drained, on a session holding 10 leases (what `benches/engine.rs` times).
fn allocations_per_input() {
    let mut held = common::holding(10);
    let now = held.now;
    let contender = common::name(1 << 20);
    held.engine
        .start_election(now, contender.clone(), false)
        .unwrap();
    held.drain_count();
    // The contender's first acquire loses; it then waits for a retry.
    let cmd = held.run_until(|c| matches!(c, Command::Acquire { .. }));
    let reply = held.reply(&cmd, None).unwrap();
    let region = Region::new(GLOBAL);
    held.engine.handle(held.now, reply);
    held.drain_count();
    let acquire = region.change().allocations;
    let region = Region::new(GLOBAL);
    held.engine
        .handle(held.now, Input::ReleaseBroadcast { name: contender });
    let outputs: Vec<Output> = std::iter::from_fn(|| held.engine.poll_output()).collect();
    let broadcast = region.change().allocations;
    for o in outputs {
        if let Output::Command(cmd) = o {
            let reply = held.reply(&cmd, None).unwrap();
            held.engine.handle(held.now, reply);
            held.drain_count();
        }
    }
    let cmd = held.run_until(|c| matches!(c, Command::Renew { .. }));
    let reply = held.reply(&cmd, None).unwrap();
    let region = Region::new(GLOBAL);
    held.engine.handle(held.now, reply);
    held.drain_count();
    let renewal = region.change().allocations;
    println!(
        "allocations per input with 10 leases: renewal reply {renewal}, Held acquire reply {acquire}, \
         release broadcast (sends an acquire) {broadcast}"
    );
}

fn main() {
    // Arguments cargo bench passes (`--bench`, filters) are ignored.
    let base = engine_bytes(0);
    println!("memory per held lease: heap bytes the engine keeps (names included)");
    println!("session open, no lease: {base} bytes");
    println!("{:>8} {:>14} {:>10}", "leases", "engine bytes", "per lease");
    for n in [1usize, 10, 100, 1_000, 10_000] {
        let total = engine_bytes(n);
        let per = (total - base) as f64 / n as f64;
        println!("{n:>8} {total:>14} {per:>10.0}");
        // Tiny n pays for whole B-tree nodes; the bar is about many leases.
        if n >= 1_000 {
            assert!(per <= 1024.0, "{per} bytes per lease > 1 KiB");
        }
    }
    allocations_per_input();
    let region = Region::new(GLOBAL);
    let engine = Engine::new(
        SimbaConfig::default(),
        BackendProfile::default(),
        Timestamp::ZERO,
    );
    println!(
        "a fresh engine: {} heap bytes, {} bytes inline",
        net(&region),
        std::mem::size_of_val(&engine)
    );
}
