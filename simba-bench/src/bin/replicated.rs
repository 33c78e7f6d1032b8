//! `replicated`: Simba on a replicated backend while its members fail
//! (docs/BACKENDS.md, "Replicated deployments"; started by
//! `scripts/replicated/run.sh`).
//!
//! `--nodes` Simba clients (the `simba-client` API on tokio, each with a
//! backend connection of its own to `--url`) contend for one election. Each
//! term's work is a loop every 50 ms: a **tick** (the work the term does,
//! logged only while [`Term::is_valid`]) and a **fenced write** (SPEC S9)
//! to a resource that lives apart from the coordination backend: a table on
//! the single PostgreSQL `--resource`, where the fence (the highest token
//! seen) and the write commit in one transaction. Meanwhile a nemesis,
//! through the deployment's control script `--ctl` (`… leader`, `… kill N`,
//! `… stop N`, `… cont N`, `… start N`, `… promote`), kills, freezes and
//! restarts one member at a time (the leader or primary included), promotes
//! a replica, and makes the holder step down (so that terms change).
//! Alongside, `--history-clients` raw backend clients issue random calls on
//! another name, checked afterwards by the history checker
//! (`simba_backends::testkit::history`).
//!
//! The report (stdout, Markdown) has the checks and the figures:
//!
//! * **overlap**: a tick of a term after a later term's first tick (two
//!   valid terms at once). Fails the run with `--strict` (etcd, ZooKeeper,
//!   synchronous PostgreSQL: replication promises it); counted otherwise.
//! * **token order**: terms begin in increasing token order, no token is
//!   issued to the terms of two clients (a fail-over that lost the acquire
//!   issuing it could reissue it, and no fence tells them apart); the resource
//!   accepted tokens in non-decreasing order, and no write was accepted
//!   that began after a greater token's write had committed. Always fails
//!   the run.
//! * **history**: linearizable against the lease model, invariants hold
//!   (`--strict` only: an asynchronous fail-over can lose a win).
//! * **figures**: per fault kind, the longest time without a working
//!   leader after the fault, as a multiple of the lease; the share of the
//!   run a leader was working; fenced writes accepted and refused.
//!
//! The controls that must fail: `--broken-client` keeps working for three
//! leases after its term is no longer valid (the overlap check fires);
//! with `--broken-fence` too, the resource accepts every token (the token
//! order check fires).

#[cfg(not(all(feature = "postgres", feature = "zookeeper")))]
fn main() {
    eprintln!("replicated: build simba-bench with --all-features");
    std::process::exit(2);
}

#[cfg(all(feature = "postgres", feature = "zookeeper"))]
fn main() -> std::process::ExitCode {
    use clap::Parser;
    let args = run::Args::parse();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("replicated: cannot start the runtime: {e}");
            return std::process::ExitCode::from(70);
        }
    };
    match rt.block_on(run::run(args)) {
        Ok(true) => std::process::ExitCode::SUCCESS,
        Ok(false) => std::process::ExitCode::from(1),
        Err(e) => {
            eprintln!("replicated: {e}");
            std::process::ExitCode::from(70)
        }
    }
}

#[cfg(all(feature = "postgres", feature = "zookeeper"))]
mod run {
    use simba_backends::testkit::history;
    use simba_backends::BackendConfig;
    use simba_core::LeaseName;
    use simba_tokio::{LeaderTask, Simba, SimbaConfig, Term};
    use std::collections::BTreeMap;
    use std::fmt::Write as _;
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    /// Simba on a replicated backend under member faults.
    #[derive(Debug, clap::Parser)]
    #[command(name = "replicated")]
    pub struct Args {
        /// The label of the deployment in the report (e.g. `etcd 3 members`).
        #[arg(long)]
        pub label: String,
        /// The Simba backend URL (every member's address).
        #[arg(long)]
        pub url: String,
        /// The deployment's control command; the verb and member follow.
        #[arg(long)]
        pub ctl: String,
        /// Members, numbered 1..=N.
        #[arg(long, default_value_t = 3)]
        pub members: u32,
        /// Faults, comma-separated: kill-leader, stop-leader, restart-leader,
        /// kill, stop, promote, step-down.
        #[arg(long, value_delimiter = ',')]
        pub faults: Vec<String>,
        /// How long the nemesis runs.
        #[arg(long, default_value = "60s")]
        pub duration: String,
        /// The lease of every client.
        #[arg(long, default_value = "2s")]
        pub lease: String,
        /// How long a frozen or killed member stays down.
        #[arg(long, default_value = "4s")]
        pub down: String,
        /// Simba clients in the election.
        #[arg(long, default_value_t = 3)]
        pub nodes: usize,
        /// Raw backend clients for the history check (0: none).
        #[arg(long, default_value_t = 3)]
        pub history_clients: usize,
        /// The history checker's allowance for a lease that outlives its
        /// expiry (a new leader or primary restarts the clock of leases).
        #[arg(long, default_value = "3s")]
        pub late: String,
        /// The nemesis's seed.
        #[arg(long, default_value_t = 1)]
        pub seed: u64,
        /// The fenced resource (a single PostgreSQL).
        #[arg(long, default_value = "postgres://postgres@127.0.0.1:5432/test")]
        pub resource: String,
        /// Replication promises one valid term at a time: an overlap and a
        /// history violation fail the run.
        #[arg(long)]
        pub strict: bool,
        /// Control: keep working three leases past the term.
        #[arg(long)]
        pub broken_client: bool,
        /// Control: the resource accepts every token.
        #[arg(long)]
        pub broken_fence: bool,
    }

    #[derive(Clone, Copy, Debug)]
    enum Ev {
        Tick {
            token: u64,
            at: u64,
            /// The client whose term ticked.
            node: usize,
        },
        Write {
            token: u64,
            start: u64,
            end: u64,
            outcome: Outcome,
        },
    }

    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum Outcome {
        Accepted,
        Refused,
        Failed,
    }

    #[derive(Clone, Debug)]
    struct Fault {
        kind: String,
        member: Option<u32>,
        start: u64,
        end: u64,
    }

    type Log = Arc<Mutex<Vec<Ev>>>;

    fn push(log: &Log, ev: Ev) {
        if let Ok(mut l) = log.lock() {
            l.push(ev);
        }
    }

    /// Microseconds since `t0`.
    fn us(t0: Instant) -> u64 {
        u64::try_from(t0.elapsed().as_micros()).unwrap_or(u64::MAX)
    }

    fn dur(s: &str) -> Result<Duration, String> {
        humantime_like(s).ok_or_else(|| format!("bad duration {s:?} (e.g. 500ms, 2s, 1m)"))
    }

    /// `500ms`, `2s`, `1m`.
    fn humantime_like(s: &str) -> Option<Duration> {
        let s = s.trim();
        let (n, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit())?);
        let n: u64 = n.parse().ok()?;
        match unit {
            "ms" => Some(Duration::from_millis(n)),
            "s" => Some(Duration::from_secs(n)),
            "m" => Some(Duration::from_secs(n * 60)),
            _ => None,
        }
    }

    struct Resource {
        pool: sqlx::PgPool,
        table: String,
        broken: bool,
    }

    impl Resource {
        async fn setup(url: &str, broken: bool) -> Result<Resource, String> {
            let pool = sqlx::postgres::PgPoolOptions::new()
                .max_connections(8)
                .acquire_timeout(Duration::from_secs(2))
                .connect(url)
                .await
                .map_err(|e| format!("the resource {url}: {e}"))?;
            let table = format!("replicated{}", std::process::id());
            for sql in [
                format!("CREATE TABLE IF NOT EXISTS {table}_fence (resource text PRIMARY KEY, token bigint NOT NULL)"),
                format!("CREATE TABLE IF NOT EXISTS {table}_writes (id bigserial PRIMARY KEY, token bigint NOT NULL)"),
            ] {
                sqlx::query(&sql)
                    .execute(&pool)
                    .await
                    .map_err(|e| e.to_string())?;
            }
            Ok(Resource {
                pool,
                table,
                broken,
            })
        }

        /// The fence and the write in one transaction (S9).
        async fn write(&self, token: u64) -> Result<Outcome, sqlx::Error> {
            let t = i64::try_from(token).unwrap_or(i64::MAX);
            let p = &self.table;
            let guard = if self.broken {
                ""
            } else {
                "WHERE f.token <= EXCLUDED.token"
            };
            let mut tx = self.pool.begin().await?;
            let row: Option<i64> = sqlx::query_scalar(&format!(
                "INSERT INTO {p}_fence AS f (resource, token) VALUES ('r', $1) \
                 ON CONFLICT (resource) DO UPDATE SET token = EXCLUDED.token {guard} RETURNING token"
            ))
            .bind(t)
            .fetch_optional(&mut *tx)
            .await?;
            if row.is_none() {
                return Ok(Outcome::Refused);
            }
            sqlx::query(&format!("INSERT INTO {p}_writes (token) VALUES ($1)"))
                .bind(t)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok(Outcome::Accepted)
        }

        async fn written(&self) -> Result<Vec<i64>, String> {
            sqlx::query_scalar(&format!(
                "SELECT token FROM {}_writes ORDER BY id",
                self.table
            ))
            .fetch_all(&self.pool)
            .await
            .map_err(|e| e.to_string())
        }

        async fn drop_tables(&self) {
            for s in ["fence", "writes"] {
                let _ = sqlx::query(&format!("DROP TABLE IF EXISTS {}_{s}", self.table))
                    .execute(&self.pool)
                    .await;
            }
        }
    }

    /// One term's work: ticks and fenced writes while the term is valid
    /// (or, broken, three leases longer).
    async fn work(
        node: usize,
        term: Term,
        res: Arc<Resource>,
        log: Log,
        t0: Instant,
        lease: Duration,
        broken: bool,
    ) {
        let token = term.token();
        let mut last_valid = Instant::now();
        loop {
            let at = us(t0);
            if term.is_valid() {
                last_valid = Instant::now();
            } else if !broken || last_valid.elapsed() > lease * 3 {
                return;
            }
            push(&log, Ev::Tick { token, at, node });
            let start = us(t0);
            let outcome = match tokio::time::timeout(Duration::from_secs(1), res.write(token)).await
            {
                Ok(Ok(o)) => o,
                _ => Outcome::Failed,
            };
            push(
                &log,
                Ev::Write {
                    token,
                    start,
                    end: us(t0),
                    outcome,
                },
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn connect(
        url: &str,
        within: Duration,
    ) -> Result<Box<dyn simba_backends::Backend>, String> {
        let cfg = BackendConfig::parse(url).map_err(|e| e.to_string())?;
        let deadline = Instant::now() + within;
        loop {
            match cfg.connect().await {
                Ok(b) => return Ok(b),
                Err(e) if Instant::now() > deadline => return Err(e.to_string()),
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    }

    async fn ctl(cmd: &str, verb: &str, member: Option<u32>) -> Result<String, String> {
        let full = match member {
            Some(m) => format!("{cmd} {verb} {m}"),
            None => format!("{cmd} {verb}"),
        };
        let out = tokio::process::Command::new("sh")
            .arg("-c")
            .arg(&full)
            .output()
            .await
            .map_err(|e| format!("{full}: {e}"))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
        } else {
            Err(format!(
                "{full}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    }

    async fn leader(cmd: &str) -> Option<u32> {
        for _ in 0..20 {
            if let Ok(s) = ctl(cmd, "leader", None).await {
                if let Ok(n) = s.parse() {
                    return Some(n);
                }
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        None
    }

    struct Rng(u64);
    impl Rng {
        fn below(&mut self, n: u64) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            (z ^ (z >> 31)) % n.max(1)
        }
    }

    /// Runs everything; `Ok(true)` if every check held.
    pub async fn run(a: Args) -> Result<bool, String> {
        let duration = dur(&a.duration)?;
        let lease = dur(&a.lease)?;
        let down = dur(&a.down)?;
        let late = dur(&a.late)?;
        const KINDS: [&str; 7] = [
            "kill-leader",
            "stop-leader",
            "restart-leader",
            "kill",
            "stop",
            "promote",
            "step-down",
        ];
        if let Some(bad) = a.faults.iter().find(|f| !KINDS.contains(&f.as_str())) {
            return Err(format!(
                "unknown fault {bad:?}; known: {}",
                KINDS.join(", ")
            ));
        }
        if a.faults.is_empty() || a.nodes < 2 {
            return Err("give --faults and at least 2 --nodes".into());
        }
        let res = Arc::new(Resource::setup(&a.resource, a.broken_fence).await?);
        let t0 = Instant::now();
        let log: Log = Arc::default();
        let config = SimbaConfig::builder()
            .lease_duration(lease)
            .build()
            .map_err(|e| e.to_string())?;

        // The election's clients.
        let mut clients: Vec<(Simba, LeaderTask)> = Vec::new();
        for node in 0..a.nodes {
            let backend = connect(&a.url, Duration::from_secs(20)).await?;
            let simba = simba_tokio::builder_dyn(Arc::from(backend))
                .config(config.clone())
                .build()
                .map_err(|e| e.to_string())?;
            let (res, log, broken) = (res.clone(), log.clone(), a.broken_client);
            let task = simba
                .run_while_leader("replicated", move |term: Term| {
                    let w = tokio::spawn(work(
                        node,
                        term.clone(),
                        res.clone(),
                        log.clone(),
                        t0,
                        lease,
                        broken,
                    ));
                    async move {
                        term.revoked().await;
                        // A correct client's work ends with its term; the
                        // broken one is left running.
                        if !broken {
                            w.abort();
                        }
                    }
                })
                .await
                .map_err(|e| e.to_string())?;
            clients.push((simba, task));
        }

        // The history check's raw clients, on their own name.
        let mut raw = Vec::new();
        for _ in 0..a.history_clients {
            raw.push(connect(&a.url, Duration::from_secs(20)).await?);
        }
        let hist_lease = lease;
        // About one call per fifth of a lease per client (the load's think
        // time): as long as the nemesis runs.
        let calls = usize::try_from(duration.as_millis() * 5 / hist_lease.as_millis().max(1))
            .unwrap_or(100)
            .max(20);
        let name =
            LeaseName::new(format!("history{}", std::process::id())).map_err(|e| e.to_string())?;
        let load = history::Load {
            calls,
            lease: hist_lease,
            seed: a.seed,
            queueing: a.url.starts_with("zk") || a.url.starts_with("etcd"),
        };
        let recording = async {
            if raw.is_empty() {
                None
            } else {
                Some(history::record(&raw, &name, &load).await)
            }
        };

        let nemesis = nemesis(&a, &clients, t0, lease, down, duration);
        let (hist, faults) = tokio::join!(recording, nemesis);
        let faults = faults?;
        let end = us(t0);
        for (simba, task) in &clients {
            task.stop().await;
            simba.close().await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        let written = res.written().await?;
        res.drop_tables().await;
        let events = log.lock().map(|l| l.clone()).unwrap_or_default();
        let verdict = hist.map(|h| {
            history::check(
                &h,
                &history::Check {
                    late,
                    ..history::Check::default()
                },
            )
        });
        let (text, ok) = report(&a, lease, end, &events, &written, &faults, verdict.as_ref());
        print!("{text}");
        Ok(ok)
    }

    async fn nemesis(
        a: &Args,
        clients: &[(Simba, LeaderTask)],
        t0: Instant,
        lease: Duration,
        down: Duration,
        duration: Duration,
    ) -> Result<Vec<Fault>, String> {
        let mut rng = Rng(a.seed);
        let mut faults = Vec::new();
        tokio::time::sleep(lease * 2).await;
        while t0.elapsed() < duration {
            let kind =
                a.faults[usize::try_from(rng.below(a.faults.len() as u64)).unwrap_or(0)].clone();
            let start = us(t0);
            let mut member = None;
            match kind.as_str() {
                "kill-leader" | "stop-leader" | "restart-leader" | "kill" | "stop" => {
                    let m = if kind.ends_with("-leader") {
                        leader(&a.ctl).await.ok_or("no leader found")?
                    } else {
                        1 + u32::try_from(rng.below(u64::from(a.members))).unwrap_or(0)
                    };
                    member = Some(m);
                    if kind.starts_with("stop") {
                        ctl(&a.ctl, "stop", Some(m)).await?;
                        tokio::time::sleep(down).await;
                        ctl(&a.ctl, "cont", Some(m)).await?;
                    } else {
                        ctl(&a.ctl, "kill", Some(m)).await?;
                        if kind != "restart-leader" {
                            tokio::time::sleep(down).await;
                        }
                        ctl(&a.ctl, "start", Some(m)).await?;
                    }
                }
                "promote" => {
                    ctl(&a.ctl, "promote", None).await?;
                }
                _ => {
                    // step-down: whoever holds the term hands over.
                    for (_, task) in clients {
                        if task.election().is_leader() {
                            let _ = task.step_down(lease).await;
                        }
                    }
                }
            }
            faults.push(Fault {
                kind,
                member,
                start,
                end: us(t0),
            });
            // Recovery, then a while of calm.
            let calm = lease.as_millis() as u64 * (2 + rng.below(3));
            tokio::time::sleep(Duration::from_millis(calm)).await;
        }
        Ok(faults)
    }

    fn v_invariants(v: Option<&history::Verdict>) -> bool {
        v.is_some_and(|v| !v.invariant_violations.is_empty())
    }

    /// Checks and figures.
    fn report(
        a: &Args,
        lease: Duration,
        end: u64,
        events: &[Ev],
        written: &[i64],
        faults: &[Fault],
        verdict: Option<&history::Verdict>,
    ) -> (String, bool) {
        let lease_us = u64::try_from(lease.as_micros()).unwrap_or(u64::MAX).max(1);
        let mut failures: Vec<String> = Vec::new();
        let mut notes: Vec<String> = Vec::new();
        // Terms: first and last tick.
        let mut terms: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
        // The clients that ticked under each token: two mean the token
        // was issued twice (a fail-over lost the acquire that issued it),
        // which no fence can tell apart.
        let mut holders: BTreeMap<u64, std::collections::BTreeSet<usize>> = BTreeMap::new();
        let mut ticks: Vec<u64> = Vec::new();
        let (mut acc, mut refused, mut failed) = (0, 0, 0);
        let mut accepted: Vec<(u64, u64, u64)> = Vec::new();
        for e in events {
            match *e {
                Ev::Tick { token, at, node } => {
                    holders.entry(token).or_default().insert(node);
                    let t = terms.entry(token).or_insert((at, at));
                    t.0 = t.0.min(at);
                    t.1 = t.1.max(at);
                    ticks.push(at);
                }
                Ev::Write {
                    token,
                    start,
                    end,
                    outcome,
                } => match outcome {
                    Outcome::Accepted => {
                        acc += 1;
                        accepted.push((token, start, end));
                    }
                    Outcome::Refused => refused += 1,
                    Outcome::Failed => failed += 1,
                },
            }
        }
        ticks.sort_unstable();
        // Overlap: a term ticking after a later term's first tick.
        let mut overlaps = 0;
        let mut max_overlap = 0u64;
        // (How long both ticked: from the later term's first tick to the
        // end of the earlier of the two.)
        for (&tok, &(_, last)) in &terms {
            let both = terms
                .range(tok + 1..)
                .filter(|(_, l)| l.0 < last)
                .map(|(_, l)| last.min(l.1) - l.0)
                .max();
            if let Some(both) = both {
                overlaps += 1;
                max_overlap = max_overlap.max(both);
            }
        }
        if overlaps > 0 {
            let what = format!(
                "{overlaps} overlapping terms (two valid at once), the longest {:.0} ms",
                max_overlap as f64 / 1e3
            );
            if a.strict {
                failures.push(what);
            } else {
                notes.push(what);
            }
        }
        // Tokens: terms begin in token order.
        let mut by_first: Vec<(u64, u64)> = terms.iter().map(|(k, v)| (v.0, *k)).collect();
        by_first.sort_unstable();
        for w in by_first.windows(2) {
            if w[1].1 < w[0].1 {
                failures.push(format!(
                    "token decrease: term {} began after term {}",
                    w[1].1, w[0].1
                ));
                break;
            }
        }
        if let Some((tok, who)) = holders.iter().find(|(_, h)| h.len() > 1) {
            failures.push(format!(
                "token {tok} was issued to the terms of {} clients ({who:?})",
                who.len()
            ));
        }
        // The resource: non-decreasing tokens, and no write accepted that
        // began after a greater token's write had committed.
        for w in written.windows(2) {
            if w[1] < w[0] {
                failures.push(format!(
                    "fenced write accepted out of token order: {} after {}",
                    w[1], w[0]
                ));
                break;
            }
        }
        let mut by_end: Vec<(u64, u64)> = accepted.iter().map(|x| (x.2, x.0)).collect();
        by_end.sort_unstable();
        if let Some((tok, later)) = accepted.iter().find_map(|&(tok, start, _)| {
            by_end
                .iter()
                .take_while(|(e, _)| *e < start)
                .find(|(_, t)| *t > tok)
                .map(|(_, t)| (tok, *t))
        }) {
            failures.push(format!(
                "a write with token {tok} was accepted after token {later}'s had committed"
            ));
        }
        // The safety invariants of the history (tokens, two valid terms)
        // fail a strict run; linearizability against the one-server model
        // is reported: a new etcd leader refreshes every lease's TTL, so a
        // session can come back after its TTL ran out on the old leader
        // (late, the safe direction, but outside the model).
        if let Some(v) = verdict {
            if !v.invariant_violations.is_empty() || (!a.strict && !v.ok()) {
                let what = format!("history check: {v}");
                if a.strict {
                    failures.push(what);
                } else {
                    notes.push(what);
                }
            }
        }

        // Working share: 100 ms slots with a tick.
        let slot = 100_000u64;
        let first = ticks.first().copied().unwrap_or(0);
        let slots = (end.saturating_sub(first) / slot).max(1);
        let mut busy = vec![false; usize::try_from(slots + 1).unwrap_or(0)];
        for &t in &ticks {
            if let Some(b) = busy.get_mut(usize::try_from((t - first) / slot).unwrap_or(usize::MAX))
            {
                *b = true;
            }
        }
        let share = busy.iter().filter(|b| **b).count() as f64 / busy.len().max(1) as f64;
        // Per fault: the longest gap between ticks from the fault's start
        // to 3 leases after its end (no leader working), in leases.
        let mut per_kind: BTreeMap<&str, Vec<(f64, bool)>> = BTreeMap::new();
        for f in faults {
            let stop = f.end + 3 * lease_us;
            let mut prev = f.start;
            let mut gap = 0u64;
            for &t in ticks.iter().filter(|&&t| t > f.start && t <= stop) {
                gap = gap.max(t - prev);
                prev = t;
            }
            gap = gap.max(stop.min(end).saturating_sub(prev));
            let holder_before = events.iter().rev().find_map(|e| match *e {
                Ev::Tick { token, at, .. } if at <= f.start => Some(token),
                _ => None,
            });
            let new_term = terms
                .iter()
                .any(|(k, v)| v.0 > f.start && v.0 <= stop && Some(*k) != holder_before);
            per_kind
                .entry(f.kind.as_str())
                .or_default()
                .push((gap as f64 / lease_us as f64, new_term));
        }

        let mut s = String::new();
        let _ = writeln!(s, "### {}\n", a.label);
        let _ = writeln!(
            s,
            "{} clients, lease {} ms, {:.0} s, seed {}{}{}; URL `{}`\n",
            a.nodes,
            lease.as_millis(),
            end as f64 / 1e6,
            a.seed,
            if a.broken_client {
                ", BROKEN CLIENT"
            } else {
                ""
            },
            if a.broken_fence { ", BROKEN FENCE" } else { "" },
            a.url
        );
        let _ = writeln!(s, "| fault | count | new term after it | longest time without a working leader (leases): median | max |");
        let _ = writeln!(s, "|---|---:|---:|---:|---:|");
        for (k, v) in &per_kind {
            let mut g: Vec<f64> = v.iter().map(|x| x.0).collect();
            g.sort_by(f64::total_cmp);
            let _ = writeln!(
                s,
                "| {k} | {} | {} | {:.2} | {:.2} |",
                v.len(),
                v.iter().filter(|x| x.1).count(),
                g[g.len() / 2],
                g[g.len() - 1]
            );
        }
        let _ = writeln!(s);
        let _ = writeln!(s, "- terms: {}", terms.len());
        let _ = writeln!(
            s,
            "- a leader was working {:.1}% of the time",
            share * 100.0
        );
        let _ = writeln!(
            s,
            "- overlapping terms: {overlaps} (longest {:.0} ms)",
            max_overlap as f64 / 1e3
        );
        let _ = writeln!(
            s,
            "- fenced writes: {acc} accepted, {refused} refused by the fence, {failed} failed"
        );
        if let Some(v) = verdict {
            let _ = writeln!(
                s,
                "- history check ({} raw clients): {v}",
                a.history_clients
            );
        }
        let timeline: Vec<String> = faults
            .iter()
            .map(|f| {
                format!(
                    "{:.1}-{:.1} s {}{}",
                    f.start as f64 / 1e6,
                    f.end as f64 / 1e6,
                    f.kind,
                    f.member.map_or(String::new(), |m| format!(" {m}"))
                )
            })
            .collect();
        let _ = writeln!(s, "- faults: {}", timeline.join("; "));
        if let Some(why) = verdict.and_then(|v| v.not_linearizable.as_ref()) {
            if a.strict && !v_invariants(verdict) {
                let _ = writeln!(
                    s,
                    "- note: not linearizable against the one-server lease model: {why}"
                );
            }
        }
        for n in &notes {
            let _ = writeln!(s, "- note (not promised here): {n}");
        }
        if failures.is_empty() {
            let _ = writeln!(s, "- **PASS**");
        }
        for f in &failures {
            let _ = writeln!(s, "- **FAIL**: {f}");
        }
        let _ = writeln!(s);
        (s, failures.is_empty())
    }
}
