//! The small runtime trait the driver runs on: spawn, spawn blocking work,
//! sleep until an instant, read the monotonic clock.

use futures::future::BoxFuture;
use std::time::Instant;

/// What the driver needs from an async runtime. `simba-tokio` and
/// `simba-async-std` implement it; any executor with a timer can.
///
/// The trait is dyn-compatible: a client keeps an `Arc<dyn Runtime>`, so no
/// public type of this crate is generic over the runtime.
///
/// ```
/// use simba_client::Runtime;
/// use futures::future::BoxFuture;
/// use std::time::Instant;
///
/// /// A runtime that runs everything on new threads (for illustration only).
/// struct Threads;
/// impl Runtime for Threads {
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
pub trait Runtime: Send + Sync + 'static {
    /// Runs `task` to completion in the background.
    fn spawn(&self, task: BoxFuture<'static, ()>);

    /// Runs blocking or CPU-bound `work` on a thread where blocking is allowed.
    fn spawn_blocking(&self, work: Box<dyn FnOnce() + Send>);

    /// A future that resolves at `at` (at once if `at` has passed), on the
    /// same clock as [`Runtime::now`].
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
}
