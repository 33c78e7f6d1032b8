//! The run: nodes (`simba run` processes), the nemesis, then the checker.

use crate::check::{self, Fault, FaultKind};
use crate::db::Db;
use crate::mono_ns;
use rustix::process::{kill_process, kill_process_group, Pid, Signal};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// `simba-chaos run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// sqlite, postgres or mysql.
    #[arg(long)]
    pub backend: String,
    /// The server URL for postgres/mysql [default: the shared test servers].
    #[arg(long)]
    pub url: Option<String>,
    /// How long the nemesis runs (e.g. 60s).
    #[arg(long, default_value = "60s")]
    pub duration: String,
    /// The nemesis's seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Number of nodes (3-5).
    #[arg(long, default_value_t = 4)]
    pub nodes: u32,
    /// The lease duration of every node.
    #[arg(long, default_value = "2s")]
    pub lease: String,
    /// The faults to inject, comma-separated
    /// [default: pause-simba,pause-node,kill,term, plus restart-db with --restart-db].
    #[arg(long, value_delimiter = ',')]
    pub faults: Vec<String>,
    /// A shell command that restarts the database server (the restart-db fault).
    #[arg(long)]
    pub restart_db: Option<String>,
    /// The control: the children write without the fence and no overlap is tolerated.
    #[arg(long)]
    pub unfenced: bool,
    /// Always aim faults at the leader (default: 80% of the time).
    #[arg(long)]
    pub leader_only: bool,
    /// The `simba` binary [default: next to this one].
    #[arg(long)]
    pub simba: Option<PathBuf>,
    /// Where logs go [default: a new temporary directory, kept].
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

/// A small deterministic generator (splitmix64) for the nemesis.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
    fn millis(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(lo + self.below(hi.saturating_sub(lo) + 1))
    }
}

struct Node {
    index: u32,
    simba: Child,
}

struct Setup {
    simba_bin: PathBuf,
    simba_url: String,
    db_url: String,
    prefix: String,
    lease: String,
    dir: PathBuf,
    unfenced: bool,
}

impl Setup {
    fn spawn(&self, index: u32) -> Result<Node, String> {
        let me = std::env::current_exe().map_err(|e| e.to_string())?;
        let log = self.dir.join(format!("node{index}.log"));
        let err = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join(format!("node{index}.simba.txt")))
            .map_err(|e| e.to_string())?;
        let mut cmd = Command::new(&self.simba_bin);
        cmd.arg("--backend")
            .arg(&self.simba_url)
            .args(["--lease-duration", &self.lease, "run", "--grace", "500ms"])
            .arg("chaos")
            .arg("--")
            .arg(me)
            .args(["work", "--db", &self.db_url, "--prefix", &self.prefix])
            .arg("--node")
            .arg(index.to_string())
            .arg("--log")
            .arg(log);
        if self.unfenced {
            cmd.arg("--unfenced");
        }
        for (k, _) in std::env::vars_os() {
            if k.to_string_lossy().starts_with("SIMBA_") {
                cmd.env_remove(k);
            }
        }
        let simba = cmd
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(err)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", self.simba_bin.display()))?;
        Ok(Node { index, simba })
    }
}

fn pid(raw: u32) -> Option<Pid> {
    i32::try_from(raw).ok().and_then(Pid::from_raw)
}

/// The children of `simba`: (the worker, the guard), from /proc.
fn children(simba: u32) -> (Option<u32>, Option<u32>) {
    // A child belongs to the thread that spawned it: simba's runtime spawns
    // from any of its worker threads, so every thread's list is read.
    let mut list = String::new();
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{simba}/task")) {
        for task in tasks.flatten() {
            let path = task.path().join("children");
            list.push_str(&std::fs::read_to_string(path).unwrap_or_default());
            list.push(' ');
        }
    }
    let (mut worker, mut guard) = (None, None);
    for c in list
        .split_whitespace()
        .filter_map(|c| c.parse::<u32>().ok())
    {
        let cmdline = std::fs::read(format!("/proc/{c}/cmdline")).unwrap_or_default();
        if cmdline.windows(7).any(|w| w == b"__guard") {
            guard = Some(c);
        } else {
            worker = Some(c);
        }
    }
    (worker, guard)
}

fn stop_or_cont(raw: u32, group: bool, sig: Signal) {
    if let Some(p) = pid(raw) {
        let _ = if group {
            kill_process_group(p, sig)
        } else {
            kill_process(p, sig)
        };
    }
}

/// The nodes that run a worker (the leader, or a paused former one), but
/// `except`.
fn leaders_of(nodes: &[Node], except: Option<usize>) -> Vec<usize> {
    nodes
        .iter()
        .enumerate()
        .filter(|(i, n)| Some(*i) != except && children(n.simba.id()).0.is_some())
        .map(|(i, _)| i)
        .collect()
}

/// Polls [`leaders_of`] until one is found or `within` has passed.
async fn wait_for_leader(nodes: &[Node], except: Option<usize>, within: Duration) -> Vec<usize> {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let found = leaders_of(nodes, except);
        if !found.is_empty() || tokio::time::Instant::now() >= deadline {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn parse_kind(s: &str) -> Result<FaultKind, String> {
    FaultKind::ALL
        .iter()
        .copied()
        .find(|k| k.name() == s)
        .ok_or_else(|| format!("unknown fault {s:?}"))
}

/// Runs the whole thing; `Ok(true)` if the checker passed.
///
/// # Errors
/// Bad arguments or a set-up that fails.
pub async fn run(args: RunArgs) -> Result<bool, String> {
    let duration = humantime::parse_duration(&args.duration).map_err(|e| e.to_string())?;
    let lease = humantime::parse_duration(&args.lease).map_err(|e| e.to_string())?;
    if !(2..=8).contains(&args.nodes) {
        return Err("--nodes must be 2-8".into());
    }
    let dir = match &args.dir {
        Some(d) => {
            std::fs::create_dir_all(d).map_err(|e| e.to_string())?;
            d.clone()
        }
        None => {
            let d = std::env::temp_dir().join(format!(
                "simba-chaos-{}-{}",
                std::process::id(),
                args.seed
            ));
            std::fs::create_dir_all(&d).map_err(|e| e.to_string())?;
            d
        }
    };
    let prefix = format!("chaos{}x{}_", std::process::id(), mono_ns() % 1_000_000);
    let (simba_url, db_url) = match args.backend.as_str() {
        "sqlite" => (
            format!("sqlite://{}", dir.join("simba.db").display()),
            // The resource lives in a database of its own: a paused writer
            // holding its lock must not block the lease table.
            format!("sqlite://{}", dir.join("resource.db").display()),
        ),
        "postgres" => {
            let u = args
                .url
                .clone()
                .unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/test".into());
            (format!("{u}?simba_table_prefix={prefix}"), u)
        }
        "mysql" => {
            let u = args
                .url
                .clone()
                .unwrap_or_else(|| "mysql://root@127.0.0.1:3306/test".into());
            (format!("{u}?simba_table_prefix={prefix}"), u)
        }
        other => return Err(format!("unknown backend {other:?}")),
    };
    let mut kinds: Vec<FaultKind> = if args.faults.is_empty() {
        let mut k = vec![
            FaultKind::PauseSimba,
            FaultKind::PauseNode,
            FaultKind::Kill,
            FaultKind::Term,
        ];
        if args.restart_db.is_some() {
            k.push(FaultKind::RestartDb);
        }
        k
    } else {
        args.faults
            .iter()
            .map(|f| parse_kind(f))
            .collect::<Result<_, _>>()?
    };
    if args.restart_db.is_none() {
        kinds.retain(|k| *k != FaultKind::RestartDb);
    }
    let simba_bin = match &args.simba {
        Some(p) => p.clone(),
        None => std::env::current_exe()
            .map_err(|e| e.to_string())?
            .with_file_name("simba"),
    };
    let setup = Setup {
        simba_bin,
        simba_url,
        db_url: db_url.clone(),
        prefix: prefix.clone(),
        lease: args.lease.clone(),
        dir: dir.clone(),
        unfenced: args.unfenced,
    };
    let mut db = Db::connect(&db_url).await.map_err(|e| e.to_string())?;
    db.setup(&prefix).await.map_err(|e| e.to_string())?;
    // Create the lease schema once, before the nodes race to.
    let migrate = Command::new(&setup.simba_bin)
        .arg("--backend")
        .arg(&setup.simba_url)
        .arg("migrate")
        .stdout(Stdio::null())
        .status()
        .map_err(|e| e.to_string())?;
    if !migrate.success() {
        return Err(format!("simba migrate failed: {migrate}"));
    }
    eprintln!(
        "simba-chaos: {} nodes on {} for {}, lease {}, seed {}, faults [{}]{}; logs in {}",
        args.nodes,
        args.backend,
        args.duration,
        args.lease,
        args.seed,
        kinds.iter().map(|k| k.name()).collect::<Vec<_>>().join(","),
        if args.unfenced {
            ", UNFENCED control"
        } else {
            ""
        },
        dir.display()
    );

    let mut nodes = Vec::new();
    for i in 0..args.nodes {
        nodes.push(setup.spawn(i)?);
    }
    let mut rng = Rng(args.seed);
    let mut faults = Vec::new();
    let started = mono_ns();
    let end = started + u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX);
    let lease_ms = u64::try_from(lease.as_millis()).unwrap_or(2000);
    // Let a first leader settle.
    tokio::time::sleep(lease).await;
    while mono_ns() < end && !kinds.is_empty() {
        tokio::time::sleep(rng.millis(lease_ms / 2, lease_ms * 3 / 2)).await;
        let kind = kinds[usize::try_from(rng.below(kinds.len() as u64)).unwrap_or(0)];
        // Mostly the leader (the node with a worker), sometimes anyone.
        let aim = args.leader_only || rng.below(10) < 8;
        let mut leaders = leaders_of(&nodes, None);
        if aim && leaders.is_empty() {
            // Between terms (or a slow start on a loaded machine): wait
            // for the next leader rather than hit a follower by chance.
            leaders = wait_for_leader(&nodes, None, lease * 2).await;
        }
        let target = if !leaders.is_empty() && aim {
            leaders[usize::try_from(rng.below(leaders.len() as u64)).unwrap_or(0)]
        } else {
            usize::try_from(rng.below(nodes.len() as u64)).unwrap_or(0)
        };
        let simba_pid = nodes[target].simba.id();
        let at = mono_ns();
        match kind {
            FaultKind::PauseSimba => {
                stop_or_cont(simba_pid, false, Signal::STOP);
                tokio::time::sleep(rng.millis(lease_ms + 500, lease_ms * 2 + 1000)).await;
                stop_or_cont(simba_pid, false, Signal::CONT);
            }
            FaultKind::PauseNode => {
                let (worker, guard) = children(simba_pid);
                // Everything at once, as a paused VM would be.
                if let Some(g) = guard {
                    stop_or_cont(g, false, Signal::STOP);
                }
                if let Some(w) = worker {
                    stop_or_cont(w, true, Signal::STOP);
                }
                stop_or_cont(simba_pid, false, Signal::STOP);
                tokio::time::sleep(rng.millis(lease_ms + 500, lease_ms * 2 + 1000)).await;
                if worker.is_some() {
                    // A paused leader stays paused until the next leader's
                    // work has begun (bounded), so that waking it is the
                    // case that matters: an old term's work beside a new
                    // one. On a loaded machine the drawn pause alone may
                    // end before any other node has taken over.
                    if !wait_for_leader(&nodes, Some(target), lease * 3)
                        .await
                        .is_empty()
                    {
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                }
                // The worst order on waking (a scheduler may run any of
                // them first): the work first, simba and its guard 100 ms
                // later, so the work runs on a term that is over.
                if let Some(w) = worker {
                    stop_or_cont(w, true, Signal::CONT);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
                stop_or_cont(simba_pid, false, Signal::CONT);
                if let Some(g) = guard {
                    stop_or_cont(g, false, Signal::CONT);
                }
            }
            FaultKind::Kill | FaultKind::Term => {
                let sig = if kind == FaultKind::Kill {
                    Signal::KILL
                } else {
                    Signal::TERM
                };
                stop_or_cont(simba_pid, false, sig);
                let node = &mut nodes[target];
                let _ = tokio::time::timeout(Duration::from_secs(10), async {
                    while node.simba.try_wait().ok().flatten().is_none() {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                })
                .await;
                let _ = node.simba.kill();
                let _ = node.simba.wait();
                tokio::time::sleep(rng.millis(100, 1000)).await;
                *node = setup.spawn(node.index)?;
            }
            FaultKind::RestartDb => {
                if let Some(cmd) = &args.restart_db {
                    let status = tokio::process::Command::new("sh")
                        .arg("-c")
                        .arg(cmd)
                        .stdout(Stdio::null())
                        .status()
                        .await;
                    if !matches!(&status, Ok(s) if s.success()) {
                        eprintln!("simba-chaos: the restart command failed: {status:?}");
                    }
                }
            }
        }
        faults.push(Fault {
            kind,
            node: nodes[target].index,
            start: at,
            end: mono_ns(),
        });
    }
    // Stop every node gracefully, then make sure.
    for n in &nodes {
        stop_or_cont(n.simba.id(), false, Signal::CONT);
        stop_or_cont(n.simba.id(), false, Signal::TERM);
    }
    for n in &mut nodes {
        let done = tokio::time::timeout(Duration::from_secs(15), async {
            while n.simba.try_wait().ok().flatten().is_none() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
        if done.is_err() {
            let (worker, _) = children(n.simba.id());
            if let Some(w) = worker {
                stop_or_cont(w, true, Signal::KILL);
            }
            let _ = n.simba.kill();
        }
        let _ = n.simba.wait();
    }
    tokio::time::sleep(Duration::from_millis(200)).await;

    let mut db = Db::connect(&db_url).await.map_err(|e| e.to_string())?;
    let written = db
        .written_tokens(&prefix)
        .await
        .map_err(|e| e.to_string())?;
    let logs: Vec<PathBuf> = (0..args.nodes)
        .map(|i| dir.join(format!("node{i}.log")))
        .collect();
    let report = check::check(&read_logs(&logs), &written, &faults, args.unfenced);
    print!("{}", report.render(&args.backend, duration, args.seed));
    if args.backend != "sqlite" {
        let _ = db.teardown(&prefix).await;
        let _ = drop_lease_tables(&mut db, &prefix).await;
    }
    Ok(report.passed())
}

/// Every log line of the run's workers.
fn read_logs(paths: &[PathBuf]) -> Vec<String> {
    paths.iter().flat_map(|p: &PathBuf| read(p)).collect()
}

fn read(p: &Path) -> Vec<String> {
    std::fs::read_to_string(p)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Drops the lease tables `simba migrate` created under the run's prefix.
async fn drop_lease_tables(db: &mut Db, prefix: &str) -> Result<(), sqlx::Error> {
    db.drop_prefixed(prefix).await
}
