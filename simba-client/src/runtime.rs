//! The small runtime trait the client runs on: spawn, spawn blocking work,
//! sleep until an instant, read the monotonic clock, read the wall clock
//! (schedules), draw a seed (retry jitter). Everything the client's logic
//! reads of time, randomness and concurrency comes through it, so a
//! simulated runtime (`simba-sim`) can run the real client deterministically.

use futures::future::BoxFuture;
use std::time::{Instant, SystemTime};

/// What the driver needs from an async runtime. `simba-tokio` and
/// `simba-async-std` implement it; any executor with a timer can.
///
/// The trait is dyn-compatible: a client keeps an `Arc<dyn AsyncRuntime>`, so no
/// public type of this crate is generic over the runtime.
///
/// ```
/// use simba_client::AsyncRuntime;
/// use futures::future::BoxFuture;
/// use std::time::Instant;
///
/// /// A runtime that runs everything on new threads (for illustration only).
/// struct Threads;
/// impl AsyncRuntime for Threads {
///     fn spawn(&self, task: BoxFuture<'static, ()>) {
///         std::thread::spawn(move || futures::executor::block_on(task));
///     }
///     fn spawn_blocking(&self, work: Box<dyn FnOnce() + Send>) {
///         std::thread::spawn(work);
///     }
///     fn sleep_until(&self, at: Instant) -> BoxFuture<'static, ()> {
///         Box::pin(async move {
///             std::thread::sleep(at.saturating_duration_since(Instant::now()))
///         })
///     }
///     fn now(&self) -> Instant {
///         Instant::now()
///     }
/// }
/// # let _ = Threads.now();
/// ```
pub trait AsyncRuntime: Send + Sync + 'static {
    /// Runs `task` to completion in the background.
    fn spawn(&self, task: BoxFuture<'static, ()>);

    /// Runs blocking or CPU-bound `work` on a thread where blocking is allowed.
    fn spawn_blocking(&self, work: Box<dyn FnOnce() + Send>);

    /// A future that resolves at `at` (at once if `at` has passed), on the
    /// same clock as [`AsyncRuntime::now`].
    fn sleep_until(&self, at: Instant) -> BoxFuture<'static, ()>;

    /// The runtime's monotonic clock. Term validity (S3.3) and every engine
    /// timestamp are read from it.
    fn now(&self) -> Instant;

    /// Whether the calling thread runs this runtime's async tasks, where a
    /// blocking wait (`close_blocking`, `stop_blocking`, `release_blocking`)
    /// could block the very thread that must finish it: those calls then
    /// start their action and return a `WouldBlockRuntime` error instead.
    /// The default, `false`, suits runtimes that never run tasks on a
    /// caller's thread.
    fn blocking_would_deadlock(&self) -> bool {
        false
    }

    /// The wall clock schedules (S11) compute their slots from. The default
    /// reads the host's clock ([`SystemTime::now`]); a simulated runtime
    /// returns its simulated (and possibly drifting) time.
    fn wall_clock(&self) -> SystemTime {
        SystemTime::now()
    }

    /// A seed for a client's retry jitter (S4.1) when the configuration sets
    /// none, so candidates in different processes never retry on one
    /// schedule. The default draws it from the OS, falling back to the clock
    /// and process id if the OS has no randomness to give; a simulated
    /// runtime derives it from the run's seed.
    fn seed(&self) -> u64 {
        let mut bytes = [0u8; 8];
        match getrandom::fill(&mut bytes) {
            Ok(()) => u64::from_le_bytes(bytes),
            Err(_) => {
                let nanos = SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.subsec_nanos());
                u64::from(nanos) ^ (u64::from(std::process::id()) << 32)
            }
        }
    }
}
