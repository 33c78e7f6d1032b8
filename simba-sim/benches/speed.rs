//! Speed of the user harness: simulated seconds per real second per core
//! for 3 nodes with faults on, and the real time for 1,000 seeds of a
//! 3-node, 60-simulated-second scenario. Prints figures; asserts nothing.
//!
//! `cargo bench -p simba-sim --bench speed` (`SEEDS=100` for a shorter run).

use simba_sim::{Fence, Sim};
use std::time::{Duration, Instant};

fn main() {
    let seeds: u64 = std::env::var("SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000);
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    for threads in [1, cores] {
        let sim = Sim::new(3)
            .duration(Duration::from_secs(60))
            .threads(threads);
        let t = Instant::now();
        let summary = sim.run(0..seeds, |node| async move {
            let ledger = node.map("ledger");
            let _task = node
                .simba()
                .run_while_leader("ledger", move |term| {
                    let ledger = ledger.clone();
                    async move {
                        while term.is_valid() {
                            let next = ledger.len();
                            tokio::time::sleep(Duration::from_millis(100)).await;
                            if term.is_valid() {
                                let _ = ledger.put(&Fence::from(&term), format!("{next:08}"), "e");
                            }
                        }
                    }
                })
                .await
                .map_err(|e| e.to_string())?;
            std::future::pending::<()>().await;
            Ok::<(), String>(())
        });
        let real = t.elapsed();
        match summary {
            Ok(s) => {
                let per_core = s.simulated.as_secs_f64() / real.as_secs_f64() / threads as f64;
                println!(
                    "threads {threads}: {} seeds x 3 nodes x 60 s simulated (faults on) in {:.2} s real; \
                     {:.0} simulated s per real s per core; {} trace events",
                    s.seeds,
                    real.as_secs_f64(),
                    per_core,
                    s.events
                );
            }
            Err(e) => println!("threads {threads}: FAILED: {e}"),
        }
    }
}
