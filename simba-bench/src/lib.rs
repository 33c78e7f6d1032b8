//! Simba's benchmark (issue 15): Simba's figures on every backend built in,
//! next to the backend's floors and to the peers users would pick instead,
//! in one run. Run it with `cargo run -p simba-bench --release -- [--quick]
//! [--backend B]`; see `bench/README.md` for the set-up and
//! `bench/results/latest.md` for the latest figures.
//!
//! The library part holds what the binary is made of: the statistics and
//! the table ([`stats`], [`report`]), the plot ([`plot`]), process
//! accounting ([`sys`]), private servers ([`servers`]), server-side call
//! counters ([`counters`]), Simba's measurements ([`measure`]), the
//! hand-over floors and the etcd Lock RPC on the backends' own clients
//! ([`raw`]) and the peers' ([`peers`]).

pub mod calls;
pub mod counters;
pub mod groups;
pub mod load;
pub mod measure;
pub mod peers;
pub mod plot;
pub mod raw;
pub mod report;
pub mod servers;
pub mod stats;
pub mod sys;
pub mod trace;

use std::path::PathBuf;
use std::time::Duration;

/// A backend the bench knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// SQLite (a file in a temporary directory).
    Sqlite,
    /// PostgreSQL.
    Postgres,
    /// MySQL or MariaDB.
    Mysql,
    /// Redis.
    Redis,
    /// ZooKeeper.
    Zookeeper,
    /// etcd.
    Etcd,
}

impl Kind {
    /// Every backend, in table order.
    pub const ALL: [Kind; 6] = [
        Kind::Sqlite,
        Kind::Postgres,
        Kind::Mysql,
        Kind::Redis,
        Kind::Zookeeper,
        Kind::Etcd,
    ];

    /// The name used on the command line and in the table.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Sqlite => "sqlite",
            Kind::Postgres => "postgres",
            Kind::Mysql => "mysql",
            Kind::Redis => "redis",
            Kind::Zookeeper => "zookeeper",
            Kind::Etcd => "etcd",
        }
    }

    /// The kind named `s` (also `pg`, `mariadb`, `zk`).
    ///
    /// ```
    /// assert_eq!(simba_bench::Kind::parse("zk"), Some(simba_bench::Kind::Zookeeper));
    /// ```
    pub fn parse(s: &str) -> Option<Kind> {
        match s {
            "sqlite" => Some(Kind::Sqlite),
            "postgres" | "pg" | "postgresql" => Some(Kind::Postgres),
            "mysql" | "mariadb" => Some(Kind::Mysql),
            "redis" => Some(Kind::Redis),
            "zookeeper" | "zk" => Some(Kind::Zookeeper),
            "etcd" => Some(Kind::Etcd),
            _ => None,
        }
    }

    /// Whether this build has the backend's feature.
    pub fn built_in(self) -> bool {
        match self {
            Kind::Sqlite => cfg!(feature = "sqlite"),
            Kind::Postgres => cfg!(feature = "postgres"),
            Kind::Mysql => cfg!(feature = "mysql"),
            Kind::Redis => cfg!(feature = "redis"),
            Kind::Zookeeper => cfg!(feature = "zookeeper"),
            Kind::Etcd => cfg!(feature = "etcd"),
        }
    }
}

/// How much to measure.
#[derive(Clone, Debug)]
pub struct Plan {
    /// `--quick`.
    pub quick: bool,
    /// The lease duration of every Simba client and peer session here.
    pub lease: Duration,
    /// Iterations of the floors and acquire+release.
    pub iters: usize,
    /// Library-level hand-overs (also the samples of the hand-over floors
    /// and of the etcd Lock RPC hand-over).
    pub handovers: usize,
    /// Hand-overs through `simba run`.
    pub cli_handovers: usize,
    /// Crash fail-overs.
    pub failovers: usize,
    /// Lease counts held while counting backend calls.
    pub sizes: Vec<usize>,
    /// How long backend calls are counted for each count.
    pub window: Duration,
}

impl Plan {
    /// The quick plan (under two minutes) or the full one.
    pub fn new(quick: bool) -> Plan {
        let lease = Duration::from_secs(2);
        if quick {
            Plan {
                quick,
                lease,
                iters: 100,
                handovers: 6,
                cli_handovers: 3,
                failovers: 3,
                sizes: vec![1, 100],
                window: Duration::from_secs(5),
            }
        } else {
            Plan {
                quick,
                lease,
                iters: 1000,
                handovers: 40,
                cli_handovers: 15,
                failovers: 30,
                sizes: vec![1, 100, 10_000],
                window: Duration::from_secs(30),
            }
        }
    }

    /// The renewal interval that goes with the lease (S8: a third of it).
    pub fn renew_interval(&self) -> Duration {
        self.lease / 3
    }
}

/// Where the tools the bench drives are.
#[derive(Clone, Debug, Default)]
pub struct Tools {
    /// The `simba` binary (for `simba run` hand-overs).
    pub simba: Option<PathBuf>,
    /// The Python of the peers' venv (redis-py, kazoo).
    pub python: Option<PathBuf>,
    /// `etcdctl`.
    pub etcdctl: Option<PathBuf>,
    /// This binary (for helper processes).
    pub me: PathBuf,
    /// `bench/peers`.
    pub peers_dir: PathBuf,
    /// The repository's `scripts/` (for a private ZooKeeper).
    pub scripts_dir: PathBuf,
}

/// What to reach each backend with.
#[derive(Clone, Debug)]
pub struct Target {
    /// Which backend.
    pub kind: Kind,
    /// Simba's URL (with a per-run table/key prefix or root).
    pub url: String,
    /// The server's address for peers and counters (host:port), if any.
    pub addr: Option<String>,
    /// An administrator URL (SQL), for counters and clean-up.
    pub admin: Option<String>,
    /// How calls are counted on the server, or why they cannot be.
    pub counter: Result<counters::Counter, String>,
    /// Notes for the table (private server, settings).
    pub note: String,
}

/// Searches `PATH` for `name`.
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// A short random tag for names of this run.
pub fn tag() -> String {
    format!("{:08x}", fastrand::u32(..))
}
