//! `simulation`: run seeds of Simba's deterministic cluster simulator.
//!
//! ```text
//! simulation --seeds N [--first-seed S]    run N seeds of the engine campaign, then N
//!                                          seeds of the client campaign (each seed draws its
//!                                          own swarm of workloads and faults); exit non-zero
//!                                          iff violations. --client-seeds M: M client seeds
//!                                          instead (0: the engine campaign alone)
//! simulation --seed S                      replay one engine seed, printing its parameters and trace hash
//! simulation --client-seed S               replay one client seed, printing its workloads
//!                                          (and, if it fails, its timeline)
//! simulation --mutant NAME --seeds N       exit 0 iff the broken core or client NAME is caught
//!                                          (an engine mutant by the engine campaign, a client
//!                                          mutant by the client campaign)
//! simulation --mutant list                 list the broken cores and clients
//! simulation --mode MODE --seeds N         documented failure modes (see docs/FAULTS.md)
//! simulation --mutant NAME --seeds N --count   run all N seeds; count those that catch it
//! simulation --speed                       measure speed: 5 nodes, 3 names, default timing
//! simulation --client-speed [--seeds N]    measure the client campaign's speed: 3 nodes,
//!                                          every workload, faults on, one thread
//! ```

use clap::Parser;
use simulation::client::Broken;
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
    /// Seeds of the client campaign run after the engine campaign's
    /// (default: as many as `--seeds`; 0 skips it).
    #[arg(long)]
    client_seeds: Option<u64>,
    /// Replay exactly this seed of the client campaign.
    #[arg(long, conflicts_with_all = ["seeds", "seed"])]
    client_seed: Option<u64>,
    /// Threads for the client campaign (default: the CPUs available).
    #[arg(long)]
    threads: Option<usize>,
    /// Measure the client campaign's speed (3 nodes, every workload, faults
    /// on, one thread; `--seeds` runs, default 20).
    #[arg(long)]
    client_speed: bool,
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
    let threads = cli
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from))
        .max(1);
    if cli.client_speed {
        let seeds = cli.seeds.unwrap_or(20).max(1);
        let (speed, seeds, wall) =
            simulation::client::speed(seeds).map_err(|e| format!("client campaign: {e}"))?;
        say!(
            "client campaign speed: {speed:.0} simulated s per wall s per core \
             ({seeds} seeds x {} nodes x {:?} simulated, every workload, faults on, \
             1 thread, {wall:.1} s wall)",
            simulation::client::NODES,
            simulation::client::DURATION
        );
        return Ok(ExitCode::SUCCESS);
    }
    let broken = match cli.mutant.as_deref() {
        Some("list") => {
            for m in Mutant::ALL {
                say!("{}", m.name());
            }
            for m in simba_client::ClientMutant::ALL {
                say!("{} (client)", m.name());
            }
            return Ok(ExitCode::SUCCESS);
        }
        Some(name) => Some(
            Broken::from_name(name)
                .ok_or_else(|| format!("unknown mutant {name:?}; `--mutant list` lists them"))?,
        ),
        None => None,
    };
    if let Some(seed) = cli.client_seed {
        return client_replay(seed, broken);
    }
    if let Some(Broken::Client(_)) = broken {
        let n = cli.seeds.ok_or("give --seeds N with --mutant")?;
        return client_hunt(broken, cli.first_seed, n, threads, cli.count);
    }
    let mutant = match broken {
        Some(Broken::Core(m)) => Some(m),
        _ => None,
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
    let engine_failed = summary.violations() > 0;
    let client_n = cli.client_seeds.unwrap_or(n);
    if client_n == 0 || mode != Mode::Default {
        return Ok(if engine_failed {
            ExitCode::FAILURE
        } else {
            ExitCode::SUCCESS
        });
    }
    let client = client_campaign(cli.first_seed, client_n, threads)?;
    say!(
        "violations: {}",
        summary.violations() + usize::from(!client)
    );
    Ok(if engine_failed || !client {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// The client campaign over `n` seeds; `true` iff every seed passed.
fn client_campaign(first: u64, n: u64, threads: usize) -> Result<bool, String> {
    #[allow(clippy::disallowed_methods)] // wall-clock speed, reported only
    let started = std::time::Instant::now();
    say!(
        "client campaign: {n} seeds x {} nodes x {:?}, the real client under simba-sim, {threads} thread(s)",
        simulation::client::NODES,
        simulation::client::DURATION
    );
    match simulation::client::run(None, first, n, threads) {
        Ok(s) => {
            let wall = started.elapsed().as_secs_f64().max(1e-9);
            say!(
                "client campaign: {} seeds passed, 0 violations; {:.0}x real time ({:.1} s wall, {} trace events)",
                s.seeds,
                s.simulated.as_secs_f64() / wall,
                wall,
                s.events
            );
            Ok(true)
        }
        Err(simba_sim::SimError::Failed(f)) => {
            say!("client campaign: VIOLATION");
            say!("{f}");
            say!("  workloads: {}", simulation::client::draw(f.seed));
            say!("  replay: simulation --client-seed {}", f.seed);
            Ok(false)
        }
        Err(e) => {
            say!("client campaign: FAILED: {e}");
            Ok(false)
        }
    }
}

/// Hunts a client mutant with the client campaign.
fn client_hunt(
    broken: Option<Broken>,
    first: u64,
    n: u64,
    threads: usize,
    count: bool,
) -> Result<ExitCode, String> {
    let what = broken.map_or_else(String::new, |b| b.to_string());
    let last = first
        .checked_add(n)
        .ok_or("--first-seed + --seeds overflows")?;
    if count {
        let by = simulation::client::count(broken, first, n, threads).map_err(|e| e.to_string())?;
        let caught: u64 = by.values().sum();
        say!(
            "caught {what} in {caught} of {n} seeds ({first}..{})",
            last - 1
        );
        for (checker, k) in &by {
            say!("  first violation by {checker}: {k}");
        }
        return Ok(if caught > 0 {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        });
    }
    match simulation::client::hunt(broken, first, n, threads).map_err(|e| e.to_string())? {
        Some((seed, v)) => {
            say!("caught {what} at seed {seed}");
            say!("  {v}");
            say!("  workloads: {}", simulation::client::draw(seed));
            say!("seeds needed: {}", seed - first + 1);
            Ok(ExitCode::SUCCESS)
        }
        None => {
            say!("NOT caught: {what} in {n} seeds");
            Ok(ExitCode::FAILURE)
        }
    }
}

/// Replays one seed of the client campaign.
fn client_replay(seed: u64, broken: Option<Broken>) -> Result<ExitCode, String> {
    say!("client seed {seed}: {}", simulation::client::draw(seed));
    match simulation::client::run(broken, seed, 1, 1) {
        Ok(s) => {
            say!("passed: {} trace events", s.events);
            Ok(ExitCode::SUCCESS)
        }
        Err(simba_sim::SimError::Failed(f)) => {
            say!("{f}");
            Ok(ExitCode::FAILURE)
        }
        Err(e) => Err(e.to_string()),
    }
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
