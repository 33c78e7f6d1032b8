//! One vocabulary for every running handle.

use crate::error::Error;
use crate::group::{Group, GroupTask};
use crate::listener::ClientEvent;
use crate::schedule::ScheduledJob;
use crate::{Election, LeaderTask};
use futures::stream::BoxStream;
use simba_core::{EntrySnapshot, GroupSnapshot};
use std::future::Future;

/// What every running handle of a client does alike: [`Election`],
/// [`LeaderTask`], [`ScheduledJob`], [`Group`] and [`GroupTask`].
///
/// Each has the same verbs: [`name`](Running::name), an awaited
/// [`stop`](Running::stop) that hands every term over in the order of S6.1
/// and resolves after the last callback has run (S7.3), a
/// [`stop_blocking`](Running::stop_blocking) that follows S7.5, a
/// [`snapshot`](Running::snapshot) of its state and the stream of its
/// [`events`](Running::events). The inherent methods of the
/// same names do the same; the trait lets code take any handle:
///
/// ```no_run
/// use simba_client::{Running, Simba};
///
/// async fn shut_down<H: Running>(handle: &H) {
///     println!("stopping {}", handle.name());
///     handle.stop().await;
/// }
///
/// # async fn demo(simba: Simba) -> Result<(), simba_client::Error> {
/// let job = simba
///     .election("billing")
///     .run_while_leader(|term| async move { term.revoked().await; })
///     .await?;
/// let group = simba
///     .group("orders", 12)
///     .run_per_partition(|_p, term| async move { term.revoked().await; })
///     .await?;
/// shut_down(&job).await;
/// shut_down(&group).await;
/// # Ok(()) }
/// ```
pub trait Running {
    /// What [`Running::snapshot`] tells: an [`EntrySnapshot`] for an
    /// election's handles, a [`GroupSnapshot`] for a group's.
    type Snapshot;

    /// The name the handle was started with.
    fn name(&self) -> &str;

    /// Ends it: revokes every term it holds, interrupts and awaits their
    /// tasks, releases the leases (S6.1, S10.3), and resolves after the
    /// last `on_revoked` has run (S7.3). Twice, or after the
    /// client's close, resolves at once.
    fn stop(&self) -> impl Future<Output = ()> + Send + '_;

    /// [`Running::stop`], blocking the thread until it completes.
    ///
    /// # Errors
    /// [`Error::WouldWaitOnItself`] from a callback or task (S7.5),
    /// [`Error::WouldBlockRuntime`] on an async runtime thread: the stop is
    /// started but not awaited.
    fn stop_blocking(&self) -> Result<(), Error>;

    /// The client's events that concern this handle, from now on: its
    /// terms' `Elected`/`Revoked`, its tasks' `TaskExited`, a group's
    /// `GroupChanged`, and the stream's `Lagged` and `Closed`.
    fn events(&self) -> BoxStream<'static, ClientEvent>;

    /// Its state now, or `None` once stopped.
    ///
    /// # Errors
    /// [`Error::Closed`] once the client is closed.
    fn snapshot(&self) -> impl Future<Output = Result<Option<Self::Snapshot>, Error>> + Send + '_;
}

macro_rules! handle {
    ($ty:ty, $snapshot:ty) => {
        impl Running for $ty {
            type Snapshot = $snapshot;

            fn name(&self) -> &str {
                <$ty>::name(self)
            }

            fn stop(&self) -> impl Future<Output = ()> + Send + '_ {
                <$ty>::stop(self)
            }

            fn stop_blocking(&self) -> Result<(), Error> {
                <$ty>::stop_blocking(self)
            }

            fn events(&self) -> BoxStream<'static, ClientEvent> {
                <$ty>::events(self)
            }

            fn snapshot(
                &self,
            ) -> impl Future<Output = Result<Option<Self::Snapshot>, Error>> + Send + '_ {
                <$ty>::snapshot(self)
            }
        }
    };
}

handle!(Election, EntrySnapshot);
handle!(LeaderTask, EntrySnapshot);
handle!(ScheduledJob, EntrySnapshot);
handle!(Group, GroupSnapshot);
handle!(GroupTask, GroupSnapshot);
