//! `simba-bench`: Simba against its floors and its peers, in one run.
//!
//! `cargo run -p simba-bench --release -- [--quick] [--backend B]…`; the
//! set-up (peers, `simba` binary) is in `bench/README.md`.

use clap::{Parser, Subcommand};
use futures::future::join_all;
use simba_bench::measure::{self, lease_ratio, Notify};
use simba_bench::peers::{self, script_args, SqlLock};
use simba_bench::report::{self, Figure, Row};
use simba_bench::{plot, raw, servers, sys, Kind, Plan, Target, Tools};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::AsyncBufReadExt;

/// Simba's benchmark: floors, Simba and its peers per backend, in one run.
#[derive(Debug, Parser)]
#[command(name = "simba-bench")]
struct Cli {
    /// Fewer iterations and no 10,000-lease run: under two minutes.
    #[arg(long)]
    quick: bool,
    /// Only these backends (repeat or separate with commas): sqlite,
    /// postgres, mysql, redis, zookeeper, etcd. Default: all built in.
    #[arg(long = "backend", value_delimiter = ',')]
    backends: Vec<String>,
    /// Skip the peers.
    #[arg(long)]
    no_peers: bool,
    /// The `simba` binary for the `simba run` hand-over [default: next to
    /// this binary].
    #[arg(long)]
    simba: Option<PathBuf>,
    /// The Python of the peers' venv [default: the one bench/setup.sh makes].
    #[arg(long)]
    python: Option<PathBuf>,
    /// Base name of the results in bench/results/ [default: `latest`, or
    /// `quick` with --quick].
    #[arg(long)]
    out: Option<String>,
    /// The lease duration of every Simba client and peer session, in
    /// milliseconds (ZooKeeper's session timeout, etcd's TTL rounded up to
    /// whole seconds).
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(1000..=600_000))]
    lease_ms: u64,
    /// Only these sections (repeat or separate with commas): latency,
    /// handover, failover, holding, groups. Default: all.
    #[arg(long = "only", value_delimiter = ',')]
    only: Vec<Section>,
    /// Crash fail-overs per backend and peer [default: 30, or 3 with --quick].
    #[arg(long)]
    failovers: Option<usize>,
    #[command(subcommand)]
    helper: Option<Helper>,
}

/// A section of the full run (`--only`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Section {
    /// Floors and acquire+release.
    Latency,
    /// Graceful hand-overs and their floors.
    Handover,
    /// Crash fail-overs.
    Failover,
    /// Backend calls, CPU and RSS while holding many leases.
    Holding,
    /// Partitioned groups: partitions moved and unowned time per membership
    /// change (3 → 4 → 3 members and a crash; 8 and 1,000 partitions).
    Groups,
}

/// Helper processes the bench starts (not for direct use), and `load`.
#[derive(Debug, Subcommand)]
enum Helper {
    /// Many nodes on one database (issue 18): N clients, each with its own
    /// connection and session, contend for one name or many; prints
    /// connections, calls/s, CPU per node, latencies, and checks the
    /// connection budget, one renewal per period and no double grant
    /// (exit status 1 if a check broke).
    Load {
        /// sqlite, postgres or mysql.
        #[arg(long)]
        backend: String,
        /// The nodes' URL [default: the test server's `simba_load` database].
        #[arg(long)]
        url: Option<String>,
        /// Administrator URL for the counters [default: the test server's].
        #[arg(long)]
        admin: Option<String>,
        #[arg(long, default_value_t = 200)]
        nodes: usize,
        /// Names contended for; each by `--per-name` nodes.
        #[arg(long, default_value_t = 1)]
        names: usize,
        /// Nodes contending for each name [default: every node].
        #[arg(long)]
        per_name: Option<usize>,
        /// Seconds measured, after every node started.
        #[arg(long, default_value_t = 30)]
        secs: u64,
        /// Lease duration in ms (Simba's default: 15000).
        #[arg(long, default_value_t = 15000)]
        lease_ms: u64,
        /// Leave out nodes that cannot connect (count them) instead of failing.
        #[arg(long)]
        tolerate_connect_errors: bool,
    },
    /// Lead one election; print `elected` when elected.
    #[command(hide = true)]
    Hold {
        #[arg(long)]
        url: String,
        #[arg(long)]
        name: String,
        #[arg(long)]
        lease_ms: u64,
    },
    /// Hold `count` leases on one client; report CPU and RSS on request.
    #[command(hide = true)]
    HoldMany {
        #[arg(long)]
        url: String,
        #[arg(long)]
        count: usize,
        #[arg(long)]
        lease_ms: u64,
    },
    /// Hold the SQL peer's lock until killed; print `held`.
    #[command(hide = true)]
    PeerHold {
        #[arg(long)]
        url: String,
        #[arg(long)]
        key: String,
    },
}

fn main() {
    let cli = Cli::parse();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("simba-bench: cannot start a runtime: {e}");
            std::process::exit(1);
        }
    };
    let code = rt.block_on(async move {
        match cli.helper {
            Some(h) => helper(h).await,
            None => bench(cli).await,
        }
    });
    std::process::exit(code);
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn usage(cpu: bool) -> String {
    let c = if cpu { sys::cpu_secs() } else { None };
    format!(
        "{} {}",
        c.unwrap_or(f64::NAN),
        sys::rss_bytes().unwrap_or(f64::NAN)
    )
}

async fn helper(h: Helper) -> i32 {
    if let Helper::Load {
        backend,
        url,
        admin,
        nodes,
        names,
        per_name,
        secs,
        lease_ms,
        tolerate_connect_errors,
    } = h
    {
        let opts = simba_bench::load::LoadOpts {
            backend,
            url,
            admin,
            nodes,
            names,
            per_name: per_name.unwrap_or(nodes),
            duration: Duration::from_secs(secs),
            lease: Duration::from_millis(lease_ms),
            tolerate_connect_errors,
        };
        return match simba_bench::load::run(&opts).await {
            Ok(r) => {
                say(&r.to_string());
                i32::from(!r.failures.is_empty() || !r.shortfalls.is_empty())
            }
            Err(e) => {
                say(&format!("error {e}"));
                1
            }
        };
    }
    match run_helper(h).await {
        Ok(()) => 0,
        Err(e) => {
            say(&format!("error {e}"));
            1
        }
    }
}

async fn run_helper(h: Helper) -> Result<(), String> {
    match h {
        Helper::Load { .. } => Err("load is run by `helper`".into()),
        Helper::Hold {
            url,
            name,
            lease_ms,
        } => {
            let plan = Plan {
                lease: Duration::from_millis(lease_ms),
                ..Plan::new(true)
            };
            let (simba, _) = measure::client(&url, &plan).await?;
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
            let _election = simba
                .election(&name)
                .start(Notify(tx))
                .await
                .map_err(|e| e.to_string())?;
            while rx.recv().await.is_some() {
                say("elected");
            }
            Ok(())
        }
        Helper::HoldMany {
            url,
            count,
            lease_ms,
        } => {
            let plan = Plan {
                lease: Duration::from_millis(lease_ms),
                ..Plan::new(true)
            };
            say(&format!("base {}", usage(true)));
            let (simba, _) = measure::client(&url, &plan).await?;
            // Terms held now (elected minus revoked): a term lost and won
            // again during the acquire burst must not count twice.
            let elected = Arc::new(AtomicUsize::new(0));
            let notify = Arc::new(tokio::sync::Notify::new());
            struct Count(Arc<AtomicUsize>, Arc<tokio::sync::Notify>);
            impl simba_tokio::ElectionListener for Count {
                fn on_elected(&self, _term: &simba_tokio::Term) {
                    self.0.fetch_add(1, Ordering::SeqCst);
                    self.1.notify_one();
                }
                fn on_revoked(&self, _term: &simba_tokio::Term, _why: simba_tokio::RevokeReason) {
                    self.0.fetch_sub(1, Ordering::SeqCst);
                }
            }
            let tag = simba_bench::tag();
            let mut elections = Vec::with_capacity(count);
            for i in 0..count {
                elections.push(
                    simba
                        .election(format!("bench.many.{tag}.{i}"))
                        .start(Count(elected.clone(), notify.clone()))
                        .await
                        .map_err(|e| e.to_string())?,
                );
            }
            while elected.load(Ordering::SeqCst) < count {
                let _ = tokio::time::timeout(Duration::from_millis(200), notify.notified()).await;
            }
            say(&format!("ready {}", usage(true)));
            let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
            while let Ok(Some(l)) = lines.next_line().await {
                say(&format!("{} {}", l.trim(), usage(true)));
                if l.trim() == "end" {
                    break;
                }
            }
            simba.close().await;
            drop(elections);
            Ok(())
        }
        Helper::PeerHold { url, key } => {
            let t = Target {
                kind: if url.starts_with("postgres") {
                    Kind::Postgres
                } else {
                    Kind::Mysql
                },
                url: url.clone(),
                addr: None,
                admin: Some(url),
                counter: Err(String::new()),
                note: String::new(),
            };
            let lock = SqlLock::with_key(&t, &key)?;
            let h = lock.holder().await?;
            h.lock().await?;
            say("held");
            futures::future::pending::<()>().await;
            Ok(())
        }
    }
}

fn repo_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

fn tools(cli: &Cli) -> Tools {
    let me = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("simba-bench"));
    let simba = cli
        .simba
        .clone()
        .or_else(|| std::env::var_os("SIMBA_BENCH_SIMBA").map(PathBuf::from))
        .or_else(|| me.parent().map(|d| d.join("simba")))
        .filter(|p| p.is_file());
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    let python = cli
        .python
        .clone()
        .or_else(|| std::env::var_os("SIMBA_BENCH_PYTHON").map(PathBuf::from))
        .or_else(|| Some(cache.join("simba-bench/venv/bin/python")))
        .filter(|p| p.is_file());
    Tools {
        simba,
        python,
        etcdctl: simba_bench::which("etcdctl"),
        me,
        peers_dir: repo_dir().join("bench/peers"),
        scripts_dir: repo_dir().join("scripts"),
    }
}

fn missing(e: String) -> Figure {
    Figure::Missing(e)
}

fn fig(r: Result<Figure, String>) -> Figure {
    r.unwrap_or_else(missing)
}

/// The script-driven peer of `kind`: (script, label prefix, extra args).
fn script_peer(kind: Kind, tools: &Tools) -> Option<(&'static str, &'static str, Vec<String>)> {
    match kind {
        Kind::Redis => Some(("redis_lock.py", "redis-py Lock", vec![])),
        Kind::Zookeeper => Some(("kazoo_peer.py", "kazoo", vec![])),
        Kind::Etcd => Some((
            "etcdctl_peer.py",
            "etcdctl",
            vec![
                "--etcdctl".into(),
                tools
                    .etcdctl
                    .as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default(),
            ],
        )),
        _ => None,
    }
}

async fn run_script(
    tools: &Tools,
    kind: Kind,
    t: &Target,
    mode: &str,
    n: usize,
    plan: &Plan,
) -> Figure {
    let Some((file, _, extra)) = script_peer(kind, tools) else {
        return missing("no peer".into());
    };
    if kind == Kind::Etcd && tools.etcdctl.is_none() {
        return missing("etcdctl not found: run bench/setup.sh (Debian etcd-client)".into());
    }
    let Some(addr) = &t.addr else {
        return missing("no server address".into());
    };
    let mut args = script_args(mode, addr, n, plan);
    args.extend(extra);
    fig(peers::script(tools, file, &args).await)
}

/// Acquire+release peers, by kind.
async fn latency_rows(t: &Target, plan: &Plan, tools: &Tools, with_peers: bool) -> Vec<Row> {
    let k = t.kind;
    let mut sql_peer = None;
    if with_peers && matches!(k, Kind::Postgres | Kind::Mysql) {
        match SqlLock::new(t) {
            Ok(lock) => match lock.holder().await {
                Ok(h) => sql_peer = Some((peers::sql_peer_name(k).to_owned(), h.cycle_op())),
                Err(e) => say(&format!("{}: peer: {e}", k.name())),
            },
            Err(e) => say(&format!("{}: peer: {e}", k.name())),
        }
    }
    // etcd: the Lock RPC, interleaved with Simba's acquire+release as the
    // SQL peers are (the etcdctl peer runs on its own after).
    let mut lock_rpc_missing = None;
    if with_peers && k == Kind::Etcd {
        match raw::etcd_lock_cycle(t, plan).await {
            Ok(op) => sql_peer = Some((ETCD_LOCK_RPC.to_owned(), op)),
            Err(e) => lock_rpc_missing = Some(e),
        }
    }
    let mut rows = match measure::latency(t, plan, sql_peer).await {
        Ok(rows) => rows,
        Err(e) => vec![Row::new(k.name(), "floors and acquire+release", missing(e))],
    };
    if let Some(e) = lock_rpc_missing {
        for r in rows
            .iter_mut()
            .filter(|r| r.what.starts_with("acquire+release"))
        {
            r.peer = Some((ETCD_LOCK_RPC.to_owned(), missing(e.clone())));
        }
    }
    if with_peers {
        if let Some((_, label, _)) = script_peer(k, tools) {
            let lock = if k == Kind::Etcd {
                "lock-latency"
            } else {
                "latency"
            };
            let mode = if k == Kind::Redis { "latency" } else { lock };
            let f = run_script(tools, k, t, mode, plan.iters, plan).await;
            let pname = match k {
                Kind::Zookeeper => format!("{label} Lock"),
                Kind::Etcd => format!("{label} lock (one etcdctl process per lock)"),
                _ => label.to_owned(),
            };
            // A row that has a peer already (the etcd Lock RPC) keeps it in
            // a copy right after it.
            let mut out = Vec::with_capacity(rows.len() * 2);
            for mut r in rows {
                if !r.what.starts_with("acquire+release") {
                    out.push(r);
                    continue;
                }
                let before = r.peer.replace((pname.clone(), f.clone()));
                let copy = before.map(|p| Row {
                    peer: Some(p),
                    ..r.clone()
                });
                out.push(r);
                out.extend(copy);
            }
            rows = out;
        }
    }
    rows
}

/// The etcd Lock RPC peer's name in the table.
const ETCD_LOCK_RPC: &str = "etcd Lock/Unlock RPC (v3lock service, lease per holder)";

/// ZooKeeper and etcd: the hand-over floors (one delete seen by another
/// session's watch; and then that session's create), as floor rows.
async fn handover_floor_rows(t: &Target, plan: &Plan) -> Vec<Row> {
    let k = t.kind;
    if !matches!(k, Kind::Zookeeper | Kind::Etcd) {
        return vec![];
    }
    let (seen, created) = match raw::handover_floors(t, plan).await {
        Ok(f) => (f.delete_seen, f.delete_then_create),
        Err(e) => (missing(e.clone()), missing(e)),
    };
    let (seen_what, created_what) = if k == Kind::Zookeeper {
        (
            "floor: hand-over, one delete seen by another session's watch (ephemeral znode; persistent recursive watch; after the library hand-over's idle pause)",
            "floor: hand-over, delete seen by a watch then the watcher's create (ephemeral): two durable writes and a notification",
        )
    } else {
        (
            "floor: hand-over, one delete seen by another session's watch (key on a lease; prefix watch, deletes only; after the library hand-over's idle pause)",
            "floor: hand-over, delete seen by a watch then the watcher's create (txn create_revision = 0, put on its lease): two durable writes and a notification",
        )
    };
    vec![
        Row::new(k.name(), seen_what, seen),
        Row::new(k.name(), created_what, created),
    ]
}

async fn handover_rows(t: &Target, plan: &Plan, tools: &Tools, with_peers: bool) -> Vec<Row> {
    let k = t.kind;
    let (lib, breakdown) = match measure::handover(t, plan).await {
        Ok((f, b)) => (f, b),
        Err(e) => (missing(e), None),
    };
    let what = "graceful hand-over, library: stop() → next on_elected (2 clients, 1 process)";
    let mut row = Row::new(k.name(), what, lib.clone());
    match k {
        Kind::Postgres => row = row.goal("≤ 1.3 ms median (issue 32)"),
        Kind::Mysql => row = row.goal("≤ 5 ms median (issue 32)"),
        Kind::Zookeeper => row = row.goal("≤ 1.5 ms median (issue 11)"),
        Kind::Etcd => row = row.goal("≤ 1.5 ms median (issue 12)"),
        _ => {}
    }
    let mut extra = Vec::new();
    if with_peers {
        match k {
            Kind::Postgres | Kind::Mysql => {
                let f = match SqlLock::new(t) {
                    Ok(l) => fig(peers::sql_handover(&l, plan.handovers).await),
                    Err(e) => missing(e),
                };
                row = row.peer(peers::sql_peer_name(k), f);
            }
            Kind::Redis => {
                let f = run_script(tools, k, t, "handover", plan.handovers, plan).await;
                row = row.peer("redis-py Lock (blocking acquire, default 0.1 s poll)", f);
            }
            Kind::Zookeeper | Kind::Etcd => {
                let (lock, elect, ln, en) = if k == Kind::Zookeeper {
                    (
                        "lock-handover",
                        "election-handover",
                        "kazoo Lock",
                        "kazoo Election",
                    )
                } else {
                    (
                        "lock-handover",
                        "elect-handover",
                        "etcdctl lock",
                        "etcdctl elect",
                    )
                };
                let f = run_script(tools, k, t, lock, plan.handovers, plan).await;
                row = row.peer(ln, f);
                let f = run_script(tools, k, t, elect, plan.handovers, plan).await;
                extra.push(Row::new(k.name(), what, lib.clone()).peer(en, f));
                if k == Kind::Etcd {
                    let f = fig(raw::etcd_lock_handover(t, plan).await);
                    extra.push(Row::new(k.name(), what, lib.clone()).peer(
                        "etcd Lock/Unlock RPC (v3lock service): Unlock → the waiting Lock returns",
                        f,
                    ));
                }
            }
            Kind::Sqlite => {}
        }
    }
    let mut rows = vec![row];
    if let Some(b) = breakdown {
        rows.push(Row::new(
            k.name(),
            "graceful hand-over, library: its parts",
            Figure::Value(b),
        ));
    }
    rows.extend(extra);
    let cli = if tools.simba.is_some() {
        fig(measure::cli_handover(t, plan, tools).await)
    } else {
        missing(
            "no simba binary next to simba-bench: cargo build --release -p simba-cli --all-features"
                .into(),
        )
    };
    let mut row = Row::new(
        k.name(),
        "graceful hand-over, simba run: SIGTERM to the leader → the other prints `elected:` (2 processes)",
        cli,
    );
    if k == Kind::Sqlite {
        row = row.goal("≤ 50 ms median between processes (issue 15)");
    }
    rows.push(row);
    rows
}

async fn failover_rows(t: &Target, plan: &Plan, tools: &Tools, with_peers: bool) -> Vec<Row> {
    let k = t.kind;
    let what = format!(
        "crash fail-over: SIGKILL of the leader's process → next on_elected (lease {} s)",
        plan.lease.as_secs_f64()
    );
    let goal = "median ≤ 0.85×, p99 ≤ 1.0× lease_duration (issue 15)";
    let simba = measure::failover(t, plan, tools);
    let n = plan.failovers;
    let peer = async {
        if !with_peers {
            return vec![];
        }
        match k {
            Kind::Postgres | Kind::Mysql => {
                let f = match SqlLock::new(t) {
                    Ok(l) => fig(peers::sql_failover(&l, n, tools).await),
                    Err(e) => missing(e),
                };
                vec![(
                    format!(
                        "{} (the server sees the killed connection close at once; a crashed host waits for TCP keepalive)",
                        peers::sql_peer_name(k)
                    ),
                    f,
                )]
            }
            Kind::Redis => vec![(
                "redis-py Lock (timeout = lease, extended every lease/3)".to_owned(),
                run_script(tools, k, t, "failover", n, plan).await,
            )],
            Kind::Zookeeper => {
                let (a, b) = tokio::join!(
                    run_script(tools, k, t, "lock-failover", n, plan),
                    run_script(tools, k, t, "election-failover", n, plan)
                );
                vec![
                    ("kazoo Lock (session timeout = lease)".to_owned(), a),
                    ("kazoo Election (session timeout = lease)".to_owned(), b),
                ]
            }
            Kind::Etcd => {
                let (a, b) = tokio::join!(
                    run_script(tools, k, t, "lock-failover", n, plan),
                    run_script(tools, k, t, "elect-failover", n, plan)
                );
                vec![
                    ("etcdctl lock --ttl (lease)".to_owned(), a),
                    ("etcdctl elect (session TTL = lease)".to_owned(), b),
                ]
            }
            Kind::Sqlite => vec![],
        }
    };
    let (simba, peers) = tokio::join!(simba, peer);
    let simba = fig(simba);
    let mut rows = Vec::new();
    if peers.is_empty() {
        rows.push(
            Row::new(k.name(), &what, simba.clone())
                .relative(lease_ratio(&simba, plan.lease))
                .goal(goal),
        );
    }
    for (pname, f) in peers {
        let mut rel = lease_ratio(&simba, plan.lease);
        let pr = lease_ratio(&f, plan.lease);
        if !pr.is_empty() {
            rel = format!("{rel}; peer {pr}");
        }
        rows.push(
            Row::new(k.name(), &what, simba.clone())
                .relative(rel)
                .peer(&pname, f)
                .goal(goal),
        );
    }
    rows
}

fn now_utc() -> String {
    std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default()
}

fn git_rev() -> String {
    std::process::Command::new("git")
        .args([
            "-C",
            env!("CARGO_MANIFEST_DIR"),
            "rev-parse",
            "--short",
            "HEAD",
        ])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default()
}

async fn bench(cli: Cli) -> i32 {
    let started = Instant::now();
    let mut plan = Plan::new(cli.quick);
    plan.lease = Duration::from_millis(cli.lease_ms);
    if let Some(n) = cli.failovers {
        plan.failovers = n.max(1);
    }
    let runs = |s: Section| cli.only.is_empty() || cli.only.contains(&s);
    let mut kinds = Vec::new();
    for b in &cli.backends {
        match Kind::parse(b.trim()) {
            Some(k) => kinds.push(k),
            None => {
                eprintln!("simba-bench: unknown backend `{b}`");
                return 2;
            }
        }
    }
    if kinds.is_empty() {
        kinds = Kind::ALL.to_vec();
    }
    kinds.sort();
    kinds.dedup();
    let tools = tools(&cli);
    let with_peers = !cli.no_peers;
    say(&format!(
        "simba-bench: {} run, lease {} s, backends {:?}; simba binary {:?}, peers' Python {:?}, etcdctl {:?}",
        if plan.quick { "quick" } else { "full" },
        plan.lease.as_secs_f64(),
        kinds.iter().map(|k| k.name()).collect::<Vec<_>>(),
        tools.simba,
        tools.python,
        tools.etcdctl
    ));
    let tag = simba_bench::tag();
    let mut private = servers::Private::default();
    let prepared = servers::prepare(&kinds, &tools, &tag, &mut private).await;
    let mut targets = Vec::new();
    let mut by_kind: std::collections::BTreeMap<Kind, Vec<Row>> = Default::default();
    let mut notes = Vec::new();
    for (k, t) in prepared {
        match t {
            Ok(t) => {
                notes.push(format!("- {}: {}", k.name(), t.note));
                targets.push(t);
            }
            Err(why) => {
                say(&format!("{}: not measured: {why}", k.name()));
                by_kind
                    .entry(k)
                    .or_default()
                    .push(Row::new(k.name(), "everything", missing(why)));
            }
        }
    }
    let show = |rows: &[Row]| {
        for r in rows {
            say(&report::line(r));
        }
    };
    if runs(Section::Latency) {
        say(&format!(
            "-- floors and acquire+release ({} iterations)",
            plan.iters
        ));
    }
    for t in targets.iter().filter(|_| runs(Section::Latency)) {
        let rows = latency_rows(t, &plan, &tools, with_peers).await;
        show(&rows);
        by_kind.entry(t.kind).or_default().extend(rows);
    }
    if runs(Section::Handover) {
        say(&format!(
            "-- graceful hand-over ({} library, {} simba run)",
            plan.handovers, plan.cli_handovers
        ));
    }
    for t in targets.iter().filter(|_| runs(Section::Handover)) {
        let mut floors = handover_floor_rows(t, &plan).await;
        let mut rows = handover_rows(t, &plan, &tools, with_peers).await;
        // ZooKeeper and etcd: how the hand-over compares with the durable
        // write measured in the same run (on etcd two writes, the old
        // holder's delete and the next holder's create, plus the watch
        // notification between them; on ZooKeeper the delete and the
        // notification, the waiter's place being queued already), and with
        // the hand-over floor of one delete seen by a watch.
        let write = by_kind.get(&t.kind).and_then(|r| {
            r.iter()
                .find(|r| r.what.starts_with("floor: durable write"))
                .map(|r| r.simba.clone())
        });
        let one_delete = floors.first().map(|r| r.simba.clone());
        if let Some(w) = &write {
            for r in &mut floors {
                r.relative = format!("{} the write floor", report::ratio(&r.simba, w));
            }
        }
        for r in rows
            .iter_mut()
            .filter(|r| r.what.starts_with("graceful hand-over, library"))
        {
            let mut rel = Vec::new();
            if let Some(w) = &write {
                // ZooKeeper and etcd queue the waiter's place before the
                // release (one write on the hand-over path).
                let path = if matches!(t.kind, Kind::Zookeeper | Kind::Etcd) {
                    "the holder's delete and a notification: the waiter's place exists already"
                } else {
                    "two writes: delete, create; and a notification"
                };
                rel.push(format!(
                    "{} the write floor ({path})",
                    report::ratio(&r.simba, w)
                ));
            }
            if let Some(d) = &one_delete {
                let x = report::ratio(&r.simba, d);
                if !x.is_empty() {
                    rel.push(format!("{x} the one-delete hand-over floor"));
                }
            }
            if !rel.is_empty() {
                r.relative = rel.join("; ");
            }
        }
        show(&floors);
        show(&rows);
        let entry = by_kind.entry(t.kind).or_default();
        // Beside the backend's other floors.
        let at = entry
            .iter()
            .rposition(|r| r.what.starts_with("floor:"))
            .map_or(0, |i| i + 1);
        entry.splice(at..at, floors);
        entry.extend(rows);
    }
    if runs(Section::Failover) {
        say(&format!(
            "-- crash fail-over ({} per backend, backends in parallel)",
            plan.failovers
        ));
    }
    let all = join_all(
        targets
            .iter()
            .filter(|_| runs(Section::Failover))
            .map(|t| failover_rows(t, &plan, &tools, with_peers)),
    )
    .await;
    for (t, rows) in targets.iter().zip(all) {
        show(&rows);
        by_kind.entry(t.kind).or_default().extend(rows);
    }
    if runs(Section::Holding) {
        say(&format!(
            "-- holding {:?} leases: server-side calls over {} s, client CPU and RSS (backends in parallel)",
            plan.sizes,
            plan.window.as_secs()
        ));
    }
    let all = join_all(
        targets
            .iter()
            .filter(|_| runs(Section::Holding))
            .map(|t| measure::holding(t, &plan, &tools)),
    )
    .await;
    for (t, rows) in targets.iter().zip(all) {
        show(&rows);
        by_kind.entry(t.kind).or_default().extend(rows);
    }
    if runs(Section::Groups) {
        say("-- partitioned groups: 3 → 4 → 3 members and a crash, 8 and 1,000 partitions");
    }
    for t in targets.iter().filter(|_| runs(Section::Groups)) {
        let rows = simba_bench::groups::rows(t, &plan).await;
        show(&rows);
        by_kind.entry(t.kind).or_default().extend(rows);
    }
    private.stop().await;
    let rows: Vec<Row> = by_kind.into_values().flatten().collect();
    let took = started.elapsed().as_secs_f64();
    let base = cli
        .out
        .clone()
        .unwrap_or_else(|| if plan.quick { "quick" } else { "latest" }.into());
    let dir = repo_dir().join("bench/results");
    let mut extra = String::new();
    if cli.lease_ms != 2000 {
        extra.push_str(&format!(" --lease-ms {}", cli.lease_ms));
    }
    if !cli.only.is_empty() {
        let names: Vec<String> = cli
            .only
            .iter()
            .map(|s| format!("{s:?}").to_lowercase())
            .collect();
        extra.push_str(&format!(" --only {}", names.join(",")));
    }
    if let Some(n) = cli.failovers {
        extra.push_str(&format!(" --failovers {n}"));
    }
    let command = format!(
        "bash bench/setup.sh && cargo build --release -p simba-cli --all-features && cargo run -p simba-bench --release --features etcd --{}{extra}{}{}{}",
        if plan.quick { " --quick" } else { "" },
        if cli.backends.is_empty() {
            String::new()
        } else {
            format!(" --backend {}", cli.backends.join(","))
        },
        if cli.no_peers { " --no-peers" } else { "" },
        cli.out
            .as_ref()
            .map(|o| format!(" --out {o}"))
            .unwrap_or_default()
    );
    let mut md = String::new();
    md.push_str(&format!(
        "# Simba benchmark: {} run\n\nRegenerate (from the repository root, servers as in the README):\n\n```text\n{command}\n```\n\n",
        if plan.quick { "quick" } else { "full" }
    ));
    md.push_str(&format!(
        "Measured {} at commit `{}`, {} CPUs{}, in {:.0} s. Every Simba client here uses \
         `lease_duration` = {} s (so `renew_interval` = {} ms, retries every {}–{} ms, S4.1, S8); \
         peers with a lease or session use the same. Medians and p99 (nearest rank; the \
         maximum under 100 samples) with the sample count. Acquire+release rows are interleaved \
         with the floors one iteration at a time. Hand-over and fail-over times are from the \
         stop or kill to the next leader's `on_elected` (library) or its `elected:` line \
         (`simba run`); the next leader is always already competing. Backend calls are counted \
         on the server over {} s windows while a helper process holds the leases (elections on one \
         client); its CPU (`/proc/self/stat`, 10 ms ticks) and RSS growth (from before its first \
         election) are per held lease.\n\nServers:\n\n{}\n\n",
        now_utc(),
        git_rev(),
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(0),
        sys::cpu_idle()
            .map(|i| format!(" ({i})"))
            .unwrap_or_default(),
        took,
        plan.lease.as_secs_f64(),
        plan.renew_interval().as_millis(),
        plan.renew_interval().as_millis() / 2,
        plan.renew_interval().as_millis(),
        plan.window.as_secs(),
        notes.join("\n")
    ));
    md.push_str(&report::markdown(&rows));
    md.push_str("\n![plot](");
    md.push_str(&base);
    md.push_str(".png)\n");
    let md_path = dir.join(format!("{base}.md"));
    let png_path = dir.join(format!("{base}.png"));
    let _ = std::fs::create_dir_all(&dir);
    if let Err(e) = std::fs::write(&md_path, md) {
        eprintln!("simba-bench: cannot write {}: {e}", md_path.display());
        return 1;
    }
    let title = format!(
        "Simba {} benchmark, {} (lease {} s)",
        if plan.quick { "quick" } else { "full" },
        now_utc(),
        plan.lease.as_secs_f64()
    );
    if let Err(e) = plot::draw(&rows, &title, &png_path) {
        eprintln!("simba-bench: no plot: {e}");
    }
    say(&format!(
        "simba-bench: done in {took:.0} s: {} and {}",
        md_path.display(),
        png_path.display()
    ));
    0
}
