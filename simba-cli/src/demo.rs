//! `simba demo`: three nodes in one process on a temporary SQLite file: who
//! leads, a crash of the leader, the fail-over, then a graceful handover,
//! with tokens and measured timings.
//!
//! Each node is a separate client with its own connection pool, session and
//! tokio runtime. A crash is simulated by shutting the leader's runtime down
//! at once: its driver stops mid-flight, never renews and never closes, as if
//! the process had been killed, so the others must wait for the backend to
//! expire its session (S1.2, S8.2). The graceful handover is `stop()`: the
//! term is revoked and the lease released at once (S6.1, S6.2).

use crate::error::CliError;
use crate::status::render_table;
use crate::style;
use crate::style::human;
use simba_backends::Backend;
use simba_core::{RevokeReason, SimbaConfig};
use simba_tokio::{Election, ElectionListener, Simba, Term};
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

const LEASE_NAME: &str = "demo.leader";
const NODES: usize = 3;

/// What a node's listener saw.
#[derive(Debug)]
enum Seen {
    Elected {
        node: usize,
        token: u64,
        at: Instant,
    },
    Revoked {
        node: usize,
        token: u64,
        reason: RevokeReason,
    },
}

struct Listener {
    node: usize,
    tx: mpsc::UnboundedSender<Seen>,
}

impl ElectionListener for Listener {
    fn on_elected(&self, term: &Term) {
        let _ = self.tx.send(Seen::Elected {
            node: self.node,
            token: term.token(),
            at: Instant::now(),
        });
    }
    fn on_revoked(&self, term: &Term, reason: RevokeReason) {
        let _ = self.tx.send(Seen::Revoked {
            node: self.node,
            token: term.token(),
            reason,
        });
    }
}

/// One node: a client on its own runtime (so that it can crash alone).
struct Node {
    runtime: Option<tokio::runtime::Runtime>,
    simba: Simba,
    election: Election,
}

/// The demo's temporary directory, removed when dropped.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

struct Out {
    start: Instant,
}

impl Out {
    fn line(&self, text: &str) {
        let t = self.start.elapsed().as_secs_f64();
        let mut out = anstream::stdout();
        let _ = writeln!(out, "{} {text}", style::dim(&format!("[{t:6.2}s]")));
        let _ = out.flush();
    }

    fn raw(&self, text: &str) {
        let mut out = anstream::stdout();
        let _ = write!(out, "{text}");
        let _ = out.flush();
    }
}

fn node_name(node: usize) -> String {
    format!("node-{}", node + 1)
}

async fn start_node(
    node: usize,
    url: String,
    config: SimbaConfig,
    tx: mpsc::UnboundedSender<Seen>,
) -> Result<Node, CliError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name(format!("simba-demo-{}", node_name(node)))
        .enable_all()
        .build()?;
    let started = runtime.spawn(async move {
        let backend = simba_backends::connect(&url)
            .await
            .map_err(|e| CliError::from_backend(&e))?;
        let simba = simba_tokio::builder_dyn(Arc::from(backend))
            .config(config)
            .build()
            .map_err(|e| CliError::Internal(e.to_string()))?;
        let election = simba
            .election(LEASE_NAME)
            .start(Listener { node, tx })
            .await
            .map_err(|e| CliError::Internal(e.to_string()))?;
        Ok::<_, CliError>((simba, election))
    });
    let (simba, election) = started
        .await
        .map_err(|e| CliError::Internal(e.to_string()))??;
    Ok(Node {
        runtime: Some(runtime),
        simba,
        election,
    })
}

/// Waits for the next `Elected`, printing revocations on the way.
async fn next_leader(
    rx: &mut mpsc::UnboundedReceiver<Seen>,
    out: &Out,
    timeout: Duration,
) -> Result<(usize, u64, Instant), CliError> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(Seen::Elected { node, token, at })) => return Ok((node, token, at)),
            Ok(Some(Seen::Revoked {
                node,
                token,
                reason,
            })) => out.line(&format!(
                "{} term {} revoked: {reason:?}",
                node_name(node),
                style::value(&token.to_string())
            )),
            Ok(None) => return Err(CliError::Internal("every node is gone".into())),
            Err(_) => {
                return Err(CliError::Internal(format!(
                    "no leader within {}",
                    human(timeout)
                )))
            }
        }
    }
}

async fn show_status(backend: &dyn Backend, out: &Out) {
    if let Ok(i) = backend.inspect(Some(LEASE_NAME)).await {
        let table: String = render_table(&i)
            .lines()
            .map(|l| {
                if l.is_empty() {
                    "\n".to_owned()
                } else {
                    format!("           {l}\n")
                }
            })
            .collect();
        out.raw(&table);
    }
}

/// Runs the demo with leases of `lease`; returns the exit code.
///
/// # Errors
/// [`CliError::InvalidTiming`] for a lease that breaks S8.1; others if the
/// temporary database cannot be used or no leader is elected in time.
pub async fn demo(lease: Duration) -> Result<u8, CliError> {
    let config = SimbaConfig::builder()
        .lease_duration(lease)
        .seed(crate::settings::process_seed())
        .build()?;
    let out = Out {
        start: Instant::now(),
    };
    let dir = TempDir(std::env::temp_dir().join(format!(
        "simba-demo-{}-{}",
        std::process::id(),
        crate::settings::process_seed() & 0xffff_ffff
    )));
    std::fs::create_dir_all(&dir.0)?;
    let db = dir.0.join("simba.db");
    let url = format!("sqlite://{}", db.display());

    out.raw(&format!(
        "{}\n  {NODES} nodes compete for the lease `{LEASE_NAME}` on {} (no server).\n  \
         lease {}, renewal every {}: a node that stops renewing loses the lease {} after its last renewal.\n\n",
        style::bold("Simba demo: leader election with sessions and fencing tokens"),
        db.display(),
        style::value(&human(config.lease_duration())),
        human(config.renew_interval()),
        human(config.lease_duration()),
    ));

    let observer = simba_backends::connect(&url)
        .await
        .map_err(|e| CliError::from_backend(&e))?;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut nodes = Vec::new();
    for n in 0..NODES {
        nodes.push(start_node(n, url.clone(), config.clone(), tx.clone()).await?);
        out.line(&format!(
            "{} started: a new session, competing",
            node_name(n)
        ));
    }
    drop(tx);
    let wait = config.lease_duration() * 5;

    // 1. Who leads.
    let (first, token1, _) = next_leader(&mut rx, &out, wait).await?;
    out.line(&format!(
        "{} {} leads with fencing token {}",
        style::good("elected:"),
        style::bold(&node_name(first)),
        style::value(&token1.to_string())
    ));
    show_status(&*observer, &out).await;
    tokio::time::sleep(config.lease_duration() / 2).await;
    out.line(&format!(
        "{} keeps renewing; the others stay candidates and retry every ~{}",
        node_name(first),
        human(config.renew_interval() / 2)
    ));

    // 2. Crash the leader: its runtime stops at once, nothing is released.
    let crashed_at = Instant::now();
    if let Some(rt) = nodes[first].runtime.take() {
        rt.shutdown_background();
    }
    out.line(&format!(
        "{} {} crashes: no more renewals, no release, no goodbye",
        style::bad("crash:"),
        style::bold(&node_name(first))
    ));
    let (second, token2, at2) = next_leader(&mut rx, &out, wait).await?;
    let failover = at2.saturating_duration_since(crashed_at);
    out.line(&format!(
        "{} {} leads with fencing token {} after {} (the backend expired {}'s session)",
        style::good("fail-over:"),
        style::bold(&node_name(second)),
        style::value(&token2.to_string()),
        style::value(&human(failover)),
        node_name(first),
    ));
    show_status(&*observer, &out).await;

    // 3. Graceful handover: stop() revokes the term, then releases the lease.
    tokio::time::sleep(config.lease_duration() / 4).await;
    out.line(&format!(
        "{} stops gracefully: its term is revoked, then the lease released (S6.1)",
        style::bold(&node_name(second))
    ));
    let stopping_at = Instant::now();
    nodes[second].election.stop().await;
    let stop_took = stopping_at.elapsed();
    let (third, token3, at3) = next_leader(&mut rx, &out, wait).await?;
    let handover = at3.saturating_duration_since(stopping_at);
    out.line(&format!(
        "{} {} leads with fencing token {} after {} (stop() returned after {})",
        style::good("handover:"),
        style::bold(&node_name(third)),
        style::value(&token3.to_string()),
        style::value(&human(handover)),
        human(stop_took),
    ));

    // 4. Summary, then a clean shutdown of the rest.
    let increasing = token1 < token2 && token2 < token3;
    out.raw(&format!(
        "\n{}\n  tokens          {token1} -> {token2} -> {token3} ({})\n  \
         fail-over       {} after a crash (lease {})\n  \
         handover        {} after a graceful stop (SQLite's release hint wakes the next candidate at once, S4.2)\n",
        style::bold("Summary"),
        if increasing {
            style::good("strictly increasing: a stale leader's writes can be refused")
        } else {
            style::bad("NOT increasing")
        },
        style::value(&human(failover)),
        human(config.lease_duration()),
        style::value(&human(handover)),
    ));
    for node in &mut nodes {
        if node.runtime.is_some() {
            let _ = tokio::time::timeout(Duration::from_secs(5), node.simba.close()).await;
        }
        if let Some(rt) = node.runtime.take() {
            rt.shutdown_background();
        }
    }
    out.raw(&format!(
        "  total           {}\n",
        style::value(&human(out.start.elapsed()))
    ));
    Ok(if increasing {
        crate::error::EXIT_OK
    } else {
        crate::error::EXIT_SOFTWARE
    })
}
