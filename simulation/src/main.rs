//! `simulation`: run seeds of Simba's deterministic cluster simulator.
//!
//! ```text
//! simulation --seeds N [--first-seed S]    run N seeds (each draws its own swarm of
//!                                          workloads and faults); exit non-zero iff violations
//! simulation --seed S                      replay one seed, printing its parameters and trace hash
//! simulation --mutant NAME --seeds N       exit 0 iff the broken core NAME is caught
//! simulation --mutant list                 list the broken cores
//! simulation --mode MODE --seeds N         documented failure modes (see docs/FAULTS.md)
//! simulation --mutant NAME --seeds N --count   run all N seeds; count those that catch it
//! simulation --speed                       measure speed: 5 nodes, 3 names, default timing
//! ```

use clap::Parser;
use simulation::core_api::Mutant;
use simulation::params::Mode;
use simulation::{run_seed, Summary};
use std::io::{IsTerminal, Write};
use std::process::ExitCode;

/// `println!` that ignores a closed stdout (e.g. piped into `head`) instead
/// of panicking.
macro_rules! say {
    ($($arg:tt)*) => {{
        let _ = writeln!(std::io::stdout().lock(), $($arg)*);
    }};
}

/// Simba's deterministic cluster simulator.
#[derive(Parser, Debug)]
#[command(name = "simulation", version, about)]
struct Cli {
    /// Run this many seeds.
    #[arg(long)]
    seeds: Option<u64>,
    /// The first seed of `--seeds`.
    #[arg(long, default_value_t = 0)]
    first_seed: u64,
    /// Replay exactly this seed, printing every drawn parameter and the trace hash.
    #[arg(long, conflicts_with = "seeds")]
    seed: Option<u64>,
    /// Run a deliberately broken core (`list` lists them); exit 0 iff caught.
    #[arg(long)]
    mutant: Option<String>,
    /// The kind of run: default, drift-beyond-bound, backend-clock-step,
    /// backend-state-loss (must be caught), pauses, lease-removed.
    #[arg(long, default_value = "default")]
    mode: String,
    /// With `--seed`: print every step and engine output to stderr.
    #[arg(long)]
    trace: bool,
    /// Measure simulated-time speed for 5 nodes and 3 names at default timing.
    #[arg(long)]
    speed: bool,
    /// With `--mutant` or a must-fail mode: do not stop at the first catch;
    /// run every seed and count the seeds that catch it, by checker.
    #[arg(long)]
    count: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match real_main(cli) {
        Ok(code) => code,
        Err(msg) => {
            eprintln!("error: {msg}");
            ExitCode::from(2)
        }
    }
}

fn real_main(cli: Cli) -> Result<ExitCode, String> {
    let mode = Mode::from_name(&cli.mode).ok_or_else(|| {
        let names: Vec<&str> = Mode::ALL.iter().map(|m| m.name()).collect();
        format!("unknown mode {:?}; one of: {}", cli.mode, names.join(", "))
    })?;
    if cli.speed {
        simulation::runner::speed_report();
        return Ok(ExitCode::SUCCESS);
    }
    let mutant = match cli.mutant.as_deref() {
        Some("list") => {
            for m in Mutant::ALL {
                say!("{}", m.name());
            }
            return Ok(ExitCode::SUCCESS);
        }
        Some(name) => Some(
            Mutant::from_name(name)
                .ok_or_else(|| format!("unknown mutant {name:?}; `--mutant list` lists them"))?,
        ),
        None => None,
    };
    if let Some(seed) = cli.seed {
        let params = simulation::draw(seed, mode, mutant);
        say!("{params}");
        say!("swarm: {}", params.swarm());
        let mut world = simulation::World::new(params);
        if cli.trace {
            world = world.traced();
        }
        let report = world.run();
        for v in &report.violations {
            say!("violation: {v}");
        }
        say!(
            "simulated {:?} in {} steps; terms {}; writes {} (unfenced stale {}, fenced refused {})",
            report.simulated,
            report.steps,
            report.terms,
            report.writes,
            report.unfenced_anomalies,
            report.fenced_rejections
        );
        say!("trace hash: {:016x}", report.trace_hash);
        say!("violations: {}", report.violations.len());
        return Ok(if report.violations.is_empty() {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        });
    }
    let n = cli
        .seeds
        .ok_or("give --seeds N, --seed S, --speed or --mutant list")?;
    if n == 0 {
        return Err("--seeds must be at least 1".into());
    }
    let hunting = mutant.is_some() || mode.must_fail();
    let progress = std::io::stderr().is_terminal();
    let mut summary = Summary::default();
    let mut caught_by: std::collections::BTreeMap<&'static str, u64> = Default::default();
    #[allow(clippy::disallowed_methods)] // wall-clock speed, reported only
    let started = std::time::Instant::now();
    let last = cli
        .first_seed
        .checked_add(n)
        .ok_or("--first-seed + --seeds overflows")?;
    for seed in cli.first_seed..last {
        let report = run_seed(seed, mode, mutant);
        summary.add(&report);
        if progress {
            draw_progress(seed - cli.first_seed + 1, n, summary.violations());
        }
        if hunting && !report.violations.is_empty() && cli.count {
            if let Some(v) = report.violations.first() {
                *caught_by.entry(v.checker).or_insert(0u64) += 1;
            }
        } else if hunting && !report.violations.is_empty() {
            if progress {
                eprintln!();
            }
            let what = match mutant {
                Some(m) => m.name(),
                None => mode.name(),
            };
            say!("caught {what} at seed {seed}");
            if let Some(v) = report.violations.first() {
                say!("  {v}");
            }
            say!("  swarm: {}", report.swarm);
            say!("seeds needed: {}", seed - cli.first_seed + 1);
            return Ok(ExitCode::SUCCESS);
        }
    }
    if progress {
        eprintln!();
    }
    let wall = started.elapsed().as_secs_f64().max(1e-9);
    say!(
        "speed: {:.0} seeds/s, {:.0}× real time (single thread, {:.1} s wall)",
        summary.seeds as f64 / wall,
        summary.simulated.as_secs_f64() / wall,
        wall
    );
    say!("{summary}");
    if hunting && cli.count {
        let what = mutant.map_or(mode.name(), Mutant::name);
        let caught: u64 = caught_by.values().sum();
        say!(
            "caught {what} in {caught} of {n} seeds ({}..{})",
            cli.first_seed,
            last - 1
        );
        for (checker, k) in &caught_by {
            say!("  first violation by {checker}: {k}");
        }
        return Ok(if caught > 0 {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        });
    }
    if hunting {
        let what = mutant.map_or(mode.name(), Mutant::name);
        say!("NOT caught: {what} in {n} seeds");
        return Ok(ExitCode::FAILURE);
    }
    Ok(if summary.violations() > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

fn draw_progress(done: u64, total: u64, violations: usize) {
    let width = 40;
    let filled = (done * width / total) as usize;
    let mut err = std::io::stderr();
    let _ = write!(
        err,
        "\r[{}{}] {done}/{total} seeds, {violations} violations",
        "#".repeat(filled),
        "-".repeat(width as usize - filled)
    );
    let _ = err.flush();
}
