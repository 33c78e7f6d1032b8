//! The leader's child: every 50 ms an unfenced tick, then a fenced write.
//!
//! Log lines (appended, one `write` each, to `--log`):
//! * `T node token mono_ns`: a tick (unfenced activity);
//! * `W node token start_ns end_ns accepted|refused|error`: a write.

use crate::db::{Db, Write};
use crate::mono_ns;
use simba_core::Token;
use std::io::Write as _;
use std::path::PathBuf;
use std::time::Duration;

/// `simba-chaos work`.
#[derive(Debug, clap::Args)]
pub struct WorkArgs {
    /// The database URL of the fenced resource.
    #[arg(long)]
    pub db: String,
    /// The table prefix of the run.
    #[arg(long)]
    pub prefix: String,
    /// This node's number.
    #[arg(long)]
    pub node: u32,
    /// The log file (appended).
    #[arg(long)]
    pub log: PathBuf,
    /// Write without the fence (the control).
    #[arg(long)]
    pub unfenced: bool,
}

/// Runs until killed.
///
/// # Errors
/// A bad `SIMBA_FENCING_TOKEN` or an unwritable log.
pub async fn work(args: WorkArgs) -> Result<(), String> {
    let token = std::env::var("SIMBA_FENCING_TOKEN")
        .ok()
        .and_then(|t| t.parse::<u64>().ok())
        .and_then(Token::new)
        .ok_or("SIMBA_FENCING_TOKEN is missing or invalid")?;
    let mut log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&args.log)
        .map_err(|e| format!("{}: {e}", args.log.display()))?;
    let mut line = |text: String| {
        let _ = log.write_all(text.as_bytes());
    };
    let (node, t) = (args.node, token.get());
    let mut db: Option<Db> = None;
    loop {
        line(format!("T {node} {t} {}\n", mono_ns()));
        let start = mono_ns();
        let outcome = tokio::time::timeout(Duration::from_secs(1), async {
            if db.is_none() {
                db = Some(Db::connect(&args.db).await?);
            }
            match db.as_mut() {
                Some(d) => {
                    d.write(&args.prefix, token, node, start, !args.unfenced)
                        .await
                }
                None => Err(sqlx::Error::PoolClosed),
            }
        })
        .await;
        let end = mono_ns();
        let word = match outcome {
            Ok(Ok(Write::Accepted)) => "accepted",
            Ok(Ok(Write::Refused)) => "refused",
            _ => {
                db = None; // reconnect (e.g. after a server restart)
                "error"
            }
        };
        line(format!("W {node} {t} {start} {end} {word}\n"));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
