//! A small fenced ledger service, as an application would write it, and the
//! deliberately wrong variants its simulation tests must catch.
//!
//! Every node runs [`serve`]: a leader job appends numbered entries to a
//! fenced ledger (read the next number, prepare the entry, append it with
//! the term's fencing token), and a schedule credits interest once per
//! second, catching up the slots it missed (Simba runs a slot at most once,
//! S11.1, never exactly once).
//!
//! The storage is abstracted by [`Store`] so the service runs against
//! `simba-sim`'s fenced resources in tests and a real database in
//! production; starting a task of its own, by [`Spawn`] (`tokio::spawn` in
//! production, the simulated node's `spawn` in tests).

use simba_client::{Schedule, Simba, Term};
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

/// The ledger's lease (and the fence of its writes).
pub const LEDGER: &str = "ledger";
/// The interest schedule's lease.
pub const INTEREST: &str = "interest";
/// The interest schedule's period.
pub const PERIOD: Duration = Duration::from_secs(1);

/// Which version of the service to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// The correct service.
    Correct,
    /// Wrong: checks the term before preparing an entry, then appends it
    /// without the fence (a pause in between goes unnoticed).
    UnfencedAfterPause,
    /// Wrong: the appender runs in a task of its own that ignores the end
    /// of its term and keeps writing.
    IgnoresTermEnd,
    /// Wrong: the interest job credits one period per run, assuming every
    /// slot runs exactly once.
    ExactlyOnceSlots,
}

/// The fenced storage the service writes to: `(lease, token)` is the
/// writer's fence.
pub trait Store: Clone + Send + Sync + 'static {
    /// The number of ledger entries.
    fn entries(&self) -> usize;
    /// Appends entry `seq`; refused (false) if a greater token wrote before.
    fn append(&self, lease: &str, token: u64, seq: usize, entry: String) -> bool;
    /// As `append`, without the fence check.
    fn append_unfenced(&self, lease: &str, token: u64, seq: usize, entry: String);
    /// The interest record: `(balance, last credited slot, first slot)`.
    fn interest(&self) -> Option<(u64, u64, u64)>;
    /// Writes the interest record, fenced.
    fn set_interest(&self, lease: &str, token: u64, record: (u64, u64, u64)) -> bool;
}

/// How the service starts a task of its own: `tokio::spawn` in
/// production ([`Tokio`]), the simulated node's `spawn` under `simba-sim`
/// (a task paused with its node and dropped at its crash; the harness
/// reports a bare `tokio::spawn` as an escape).
pub trait Spawn: Clone + Send + Sync + 'static {
    /// Starts `task`, detached.
    fn spawn(&self, task: Pin<Box<dyn Future<Output = ()> + Send>>);
}

/// [`Spawn`] on the current tokio runtime.
#[derive(Clone, Copy, Debug, Default)]
pub struct Tokio;

impl Spawn for Tokio {
    fn spawn(&self, task: Pin<Box<dyn Future<Output = ()> + Send>>) {
        drop(tokio::spawn(task));
    }
}

/// Runs the ledger service on `simba` until the client closes.
///
/// # Errors
/// A message if the leader job or the schedule could not start.
pub async fn serve<S: Store, P: Spawn>(
    simba: Simba,
    store: S,
    spawner: P,
    variant: Variant,
) -> Result<(), String> {
    let appender = store.clone();
    let _ledger = simba
        .run_while_leader(LEDGER, move |term| {
            append_loop(term, appender.clone(), spawner.clone(), variant)
        })
        .await
        .map_err(|e| format!("ledger job: {e}"))?;
    let _interest = simba
        .schedule(INTEREST, Schedule::every(PERIOD))
        .run(move |run| {
            let store = store.clone();
            async move { credit(run.term(), run.slot(), &store, variant) }
        })
        .await
        .map_err(|e| format!("interest schedule: {e}"))?;
    std::future::pending::<()>().await;
    Ok(())
}

/// How long preparing entry `seq` takes (a call to another service).
fn prepare_time(seq: usize) -> Duration {
    Duration::from_millis(20 + (seq as u64 * 37) % 60)
}

async fn append_loop<S: Store, P: Spawn>(term: Term, store: S, spawner: P, variant: Variant) {
    if variant == Variant::IgnoresTermEnd {
        // The bug: a task of its own, which the term's end does not stop
        // (`Term::spawn` would have tied it to the term, S6.1).
        let token = term.token();
        let store = store.clone();
        spawner.spawn(Box::pin(async move {
            loop {
                let seq = store.entries();
                tokio::time::sleep(prepare_time(seq)).await;
                let _ = store.append(LEDGER, token, seq, format!("entry {seq} by {token}"));
            }
        }));
        std::future::pending::<()>().await;
    }
    while term.is_valid() {
        let seq = store.entries();
        tokio::time::sleep(prepare_time(seq)).await;
        let entry = format!("entry {seq} by {}", term.token());
        match variant {
            Variant::UnfencedAfterPause => {
                store.append_unfenced(LEDGER, term.token(), seq, entry);
            }
            _ => {
                // Check the term again after every await (S3.3), then write
                // with its token.
                if !term.is_valid() || !store.append(LEDGER, term.token(), seq, entry) {
                    return;
                }
            }
        }
    }
}

fn credit<S: Store>(term: &Term, slot: u64, store: &S, variant: Variant) {
    if !term.is_valid() {
        return;
    }
    let period = u64::try_from(PERIOD.as_millis()).unwrap_or(1000);
    let record = match store.interest() {
        None => (1, slot, slot),
        Some((balance, last, first)) if slot > last => match variant {
            Variant::ExactlyOnceSlots => (balance + 1, slot, first),
            // Slots may be skipped (at most once, S11.1): credit each
            // period since the last credited slot.
            _ => (balance + (slot - last) / period, slot, first),
        },
        Some(_) => return,
    };
    let _ = store.set_interest(INTEREST, term.token(), record);
}

/// The ledger's own invariants over its storage: every sequence number was
/// appended once (a second append lost an entry), and the interest balance
/// is one period per slot since the first.
///
/// # Errors
/// What is wrong.
pub fn check_interest(record: Option<(u64, u64, u64)>) -> Result<(), String> {
    let period = u64::try_from(PERIOD.as_millis()).unwrap_or(1000);
    if let Some((balance, last, first)) = record {
        let due = (last - first) / period + 1;
        if balance != due {
            return Err(format!(
                "interest balance {balance} but {due} periods passed from slot {first} to {last}"
            ));
        }
    }
    Ok(())
}

/// Parses an interest record as the simulated register stores it.
pub fn parse_interest(s: &str) -> Option<(u64, u64, u64)> {
    let mut it = s.split(',').map(|x| x.parse::<u64>().ok());
    Some((it.next()??, it.next()??, it.next()??))
}
