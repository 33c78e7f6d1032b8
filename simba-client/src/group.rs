//! Partitioned groups (S10): the application API. The engine decides which
//! partitions this client owns; this module only starts and ends a
//! membership and carries partition terms to the application.

use crate::client::Simba;
use crate::driver::{Msg, Spec, TaskFactory};
use crate::error::Error;
use crate::listener::ElectionListener;
use crate::term::{TaskOutput, Term};
use futures::channel::oneshot;
use futures::future::BoxFuture;
use simba_core::{
    parse_partition_name, ApiError, EntryId, GroupSnapshot, LeaseName, RevokeReason, TaskExitPolicy,
};
use std::fmt;
use std::future::Future;
use std::sync::Arc;

/// What a group member tells the application (S10.3). Every
/// `on_elected(partition, term)` is followed by exactly one
/// `on_revoked(partition, term, reason)` for the same term (S7.1); the
/// callbacks of one group run one at a time, in order (S7.2).
///
/// ```no_run
/// use simba_client::{GroupListener, RevokeReason, Simba, Term};
///
/// struct Log;
/// impl GroupListener for Log {
///     fn on_elected(&self, partition: u32, term: &Term) {
///         println!("partition {partition} is mine (token {})", term.token());
///     }
///     fn on_revoked(&self, partition: u32, _term: &Term, reason: RevokeReason) {
///         println!("partition {partition} is gone ({reason})");
///     }
/// }
///
/// # async fn demo(simba: Simba) -> Result<(), Box<dyn std::error::Error>> {
/// let group = simba.group("orders", 12).join(Log).await?;
/// // …
/// group.stop().await; // every partition handed over (S10.3)
/// # Ok(()) }
/// ```
pub trait GroupListener: Send + Sync + 'static {
    /// This client now owns `partition`, for `term` (its own fencing token).
    fn on_elected(&self, partition: u32, term: &Term) {
        let _ = (partition, term);
    }
    /// The term of `partition` ended for `reason`: `Rebalanced` when the
    /// partition moves to another member, `Stopped` when this member leaves
    /// or closes, the session's end (`SessionExpired`, `DeadlinePassed`)
    /// when it was cut off (S10.3); it is already invalid.
    fn on_revoked(&self, partition: u32, term: &Term, reason: RevokeReason) {
        let _ = (partition, term, reason);
    }
}

/// The partition index a partition term's lease name carries; `None` (and
/// an error logged) for a name that is no partition's, which the engine
/// never delivers to a group: such a term reaches no group callback or task
/// rather than passing for partition 0.
fn partition_of(term: &Term) -> Option<u32> {
    let partition = parse_partition_name(term.name()).map(|(_, p)| p);
    if partition.is_none() {
        tracing::error!(
            name = term.name(),
            "a group term whose lease name is no partition's"
        );
    }
    partition
}

/// Delivers a group's partition terms through the election callback queue.
struct PartitionCallbacks(Arc<dyn GroupListener>);

impl ElectionListener for PartitionCallbacks {
    fn on_elected(&self, term: &Term) {
        if let Some(p) = partition_of(term) {
            self.0.on_elected(p, term);
        }
    }
    fn on_revoked(&self, term: &Term, reason: RevokeReason) {
        if let Some(p) = partition_of(term) {
            self.0.on_revoked(p, term, reason);
        }
    }
}

/// Joins a partitioned group ([`Simba::group`]).
pub struct GroupBuilder {
    client: Simba,
    name: String,
    partitions: u32,
    listener: Option<Arc<dyn GroupListener>>,
    policy: TaskExitPolicy,
}

impl fmt::Debug for GroupBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GroupBuilder")
            .field("name", &self.name)
            .field("partitions", &self.partitions)
            .finish_non_exhaustive()
    }
}

impl Simba {
    /// The partitioned group `name` of `partitions` partitions (S10): join
    /// it with a [`GroupListener`] or a task per partition. Every member of
    /// a group must give the same number of partitions.
    ///
    /// ```no_run
    /// # async fn demo(simba: simba_client::Simba) -> Result<(), Box<dyn std::error::Error>> {
    /// let orders = simba
    ///     .group("orders", 12)
    ///     .run_per_partition(|partition, term| async move {
    ///         // Consume `partition` until the term ends, writing with
    ///         // `term.token()` so that a stale owner is fenced off (S9).
    ///         println!("partition {partition}, token {}", term.token());
    ///         term.revoked().await;
    ///     })
    ///     .await?;
    /// let owned = orders.snapshot().await?.map(|g| g.owned);
    /// println!("{owned:?}");
    /// orders.stop().await;
    /// # Ok(()) }
    /// ```
    pub fn group(&self, name: impl AsRef<str>, partitions: u32) -> GroupBuilder {
        GroupBuilder {
            client: self.clone(),
            name: name.as_ref().to_owned(),
            partitions,
            listener: None,
            policy: TaskExitPolicy::default(),
        }
    }
}

impl GroupBuilder {
    /// Also tell `listener` of partitions gained and lost (for
    /// [`GroupBuilder::run_per_partition`]; [`GroupBuilder::join`] takes one
    /// directly).
    ///
    /// ```no_run
    /// # use simba_client::{GroupListener, Simba};
    /// # struct Log;
    /// # impl GroupListener for Log {}
    /// # async fn demo(simba: Simba) -> Result<(), Box<dyn std::error::Error>> {
    /// let tasks = simba
    ///     .group("orders", 12)
    ///     .listener(Log)
    ///     .run_per_partition(|_partition, term| async move {
    ///         term.revoked().await;
    ///     })
    ///     .await?;
    /// # tasks.stop().await;
    /// # Ok(()) }
    /// ```
    pub fn listener(mut self, listener: impl GroupListener) -> Self {
        self.listener = Some(Arc::new(listener));
        self
    }

    /// What a partition task that ends on its own does to its partition
    /// (S6.5); the default gives the partition's term up and takes it back
    /// after a retry delay (after a back-off if the task failed).
    ///
    /// ```no_run
    /// # async fn demo(simba: simba_client::Simba) -> Result<(), Box<dyn std::error::Error>> {
    /// use simba_client::TaskExitPolicy;
    /// // A partition whose task finished keeps its term until it moves.
    /// let tasks = simba
    ///     .group("imports", 4)
    ///     .on_task_exit(TaskExitPolicy::KeepTerm)
    ///     .run_per_partition(|partition, _term| async move {
    ///         println!("importing shard {partition} once");
    ///     })
    ///     .await?;
    /// # tasks.stop().await;
    /// # Ok(()) }
    /// ```
    pub fn on_task_exit(mut self, policy: TaskExitPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Joins the group, telling `listener` of every partition this client
    /// gains and loses (S10.3). See [`GroupListener`] for an example.
    ///
    /// # Errors
    /// [`Error::InvalidName`] (S3.1), [`Error::Invalid`],
    /// [`Error::AlreadyStarted`] (S7.4), [`Error::Closed`].
    pub async fn join(mut self, listener: impl GroupListener) -> Result<Group, Error> {
        self.listener = Some(Arc::new(listener));
        self.start(None).await
    }

    /// Joins the group and runs `task(partition, term)` for every partition
    /// this client owns, while it owns it. When a partition moves away the
    /// task is interrupted as a leader task is (S6.1): [`Term::revoked`]
    /// resolves, and the partition is released only once the future has
    /// returned (or the term's deadline has passed), so the next owner's
    /// task never overlaps it (S10.3). See [`Simba::group`] for an example.
    ///
    /// # Errors
    /// As [`GroupBuilder::join`].
    pub async fn run_per_partition<F, Fut>(self, task: F) -> Result<GroupTask, Error>
    where
        F: FnMut(u32, Term) -> Fut + Send + 'static,
        Fut: Future + Send + 'static,
        Fut::Output: TaskOutput,
    {
        let mut task = task;
        let task = crate::driver::shared_factory(move |(partition, term): (u32, Term)| {
            task(partition, term)
        });
        let factory = TaskFactory::Async(Arc::new(
            move |term: Term| -> BoxFuture<'static, Result<(), String>> {
                let Some(partition) = partition_of(&term) else {
                    let name = term.name().to_owned();
                    return Box::pin(async move {
                        Err(format!("lease {name} is no partition's: no task runs"))
                    });
                };
                let fut = task((partition, term));
                Box::pin(async move { fut.await.into_task_result() })
            },
        ));
        let group = self.start(Some(factory)).await?;
        Ok(GroupTask { group })
    }

    async fn start(self, task: Option<TaskFactory>) -> Result<Group, Error> {
        let name = LeaseName::new(&self.name)?;
        let listener: Option<Arc<dyn ElectionListener>> = self
            .listener
            .map(|l| Arc::new(PartitionCallbacks(l)) as Arc<dyn ElectionListener>);
        let entry = self
            .client
            .start(
                name.clone(),
                Spec::Group {
                    partitions: self.partitions,
                    listener,
                    task,
                    policy: self.policy,
                },
            )
            .await
            .map_err(|e| match e {
                ApiError::AlreadyStarted(n) | ApiError::WrongKind { name: n, .. } => {
                    Error::AlreadyStarted(n.to_string())
                }
                ApiError::InvalidGroup { group, reason } => Error::InvalidGroup {
                    name: group.to_string(),
                    reason,
                },
                _ => Error::Closed,
            })?;
        Ok(Group {
            client: self.client,
            name,
            entry,
        })
    }
}

/// This client's membership of a partitioned group (S10). Dropping the
/// handle does not leave the group; dropping every handle of the client
/// closes the client, which ends the membership.
#[derive(Clone)]
pub struct Group {
    client: Simba,
    name: LeaseName,
    entry: EntryId,
}

impl fmt::Debug for Group {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Group")
            .field("name", &self.name.as_str())
            .finish_non_exhaustive()
    }
}

impl Group {
    /// The group's name.
    ///
    /// ```no_run
    /// # use simba_client::{GroupListener, Simba};
    /// # struct Log;
    /// # impl GroupListener for Log {}
    /// # async fn demo(simba: Simba) -> Result<(), Box<dyn std::error::Error>> {
    /// let group = simba.group("orders", 12).join(Log).await?;
    /// assert_eq!(group.name(), "orders");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        self.name.as_str()
    }

    /// The client's events that concern this group, from now on: its
    /// partitions' `Elected` and `Revoked`, their tasks' `TaskExited`, its
    /// `GroupChanged`, and the stream's `Lagged` and `Closed`
    /// ([`Simba::events`], filtered).
    ///
    /// ```no_run
    /// use futures::StreamExt;
    /// use simba_client::{ClientEvent, GroupListener, Simba};
    /// # struct Log;
    /// # impl GroupListener for Log {}
    /// # async fn demo(simba: Simba) -> Result<(), simba_client::Error> {
    /// let group = simba.group("orders", 12).join(Log).await?;
    /// let mut events = group.events();
    /// while let Some(event) = events.next().await {
    ///     if let ClientEvent::GroupChanged { members, target, .. } = event {
    ///         println!("{members} members; mine: {target:?}");
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub fn events(&self) -> futures::stream::BoxStream<'static, crate::ClientEvent> {
        use futures::StreamExt;
        let group = self.name.as_str().to_owned();
        self.client
            .events()
            .filter(move |e| std::future::ready(e.concerns_group(&group)))
            .boxed()
    }

    /// Leaves the group (S10.3): the membership ends at once, every
    /// partition is handed over in the order of S6.1 (its task interrupted
    /// and awaited before the release), and the future resolves after the
    /// last `on_revoked` has run (S7.3). Leaving twice, or after close,
    /// resolves at once. See [`GroupListener`] for an example.
    pub async fn stop(&self) {
        let (done, rx) = oneshot::channel();
        if self.client.send(Msg::Stop {
            name: self.name.clone(),
            entry: self.entry,
            done: Some(done),
        }) {
            let _ = rx.await;
        }
    }

    /// [`Group::stop`], blocking the thread until it completes.
    ///
    /// # Errors
    /// [`Error::WouldWaitOnItself`] from a callback or task (S7.5),
    /// [`Error::WouldBlockRuntime`] on an async runtime thread: the
    /// leave is started but not awaited.
    ///
    /// ```no_run
    /// # fn demo(group: simba_client::Group) {
    /// // From a plain thread (not a callback, a task or a runtime thread):
    /// if let Err(e) = group.stop_blocking() {
    ///     println!("started the leave without waiting: {e}");
    /// }
    /// # }
    /// ```
    pub fn stop_blocking(&self) -> Result<(), Error> {
        if let Some(on_itself) = self.client.blocking_refusal() {
            let _ = self.client.send(Msg::Stop {
                name: self.name.clone(),
                entry: self.entry,
                done: None,
            });
            return Err(if on_itself {
                Error::WouldWaitOnItself
            } else {
                Error::WouldBlockRuntime
            });
        }
        futures::executor::block_on(self.stop());
        Ok(())
    }

    /// The group's members as this client last saw them, its target and
    /// the partitions it owns; `None` once left. See [`Simba::group`] for
    /// an example.
    ///
    /// # Errors
    /// [`Error::Closed`] once the client is closed.
    pub async fn snapshot(&self) -> Result<Option<GroupSnapshot>, Error> {
        let (reply, rx) = oneshot::channel();
        if !self.client.send(Msg::GroupSnapshot {
            name: self.name.clone(),
            reply,
        }) {
            return Err(Error::Closed);
        }
        rx.await.map_err(|_| Error::Closed)
    }
}

/// A group whose partitions each run a task
/// ([`GroupBuilder::run_per_partition`]). Closing it follows S7.5: the
/// blocking close refuses to wait from inside a callback or task.
#[derive(Clone, Debug)]
pub struct GroupTask {
    group: Group,
}

impl GroupTask {
    /// The group's name.
    pub fn name(&self) -> &str {
        self.group.name()
    }

    /// The group behind the tasks.
    ///
    /// ```no_run
    /// # async fn demo(simba: simba_client::Simba) -> Result<(), Box<dyn std::error::Error>> {
    /// let tasks = simba
    ///     .group("orders", 12)
    ///     .run_per_partition(|_p, term| async move {
    ///         term.revoked().await;
    ///     })
    ///     .await?;
    /// assert_eq!(tasks.group().name(), "orders");
    /// # Ok(()) }
    /// ```
    pub fn group(&self) -> &Group {
        &self.group
    }

    /// The client's events that concern the group ([`Group::events`]).
    pub fn events(&self) -> futures::stream::BoxStream<'static, crate::ClientEvent> {
        self.group.events()
    }

    /// Leaves the group: every partition task is interrupted and awaited
    /// before its partition is released (S6.1, S10.3). See [`Simba::group`]
    /// for an example.
    pub async fn stop(&self) {
        self.group.stop().await
    }

    /// [`GroupTask::stop`], blocking the thread.
    ///
    /// # Errors
    /// As [`Group::stop_blocking`] (S7.5).
    ///
    /// ```no_run
    /// # fn demo(tasks: simba_client::GroupTask) {
    /// match tasks.stop_blocking() {
    ///     Ok(()) => println!("left; every partition task has exited"),
    ///     Err(e) => println!("started the leave without waiting: {e}"),
    /// }
    /// # }
    /// ```
    pub fn stop_blocking(&self) -> Result<(), Error> {
        self.group.stop_blocking()
    }

    /// As [`Group::snapshot`].
    ///
    /// # Errors
    /// As [`Group::snapshot`].
    pub async fn snapshot(&self) -> Result<Option<GroupSnapshot>, Error> {
        self.group.snapshot().await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::term::{Clock, SessionDeadline};
    use crate::{AsyncRuntime, HostSuspendClock};
    use simba_core::{Timestamp, Token};
    use std::sync::Mutex;
    use std::time::Instant;

    /// A runtime that only tells the time (the terms below need a clock).
    struct ClockOnly;
    impl AsyncRuntime for ClockOnly {
        fn spawn(&self, _: BoxFuture<'static, ()>) {}
        fn spawn_blocking(&self, _: Box<dyn FnOnce() + Send>) {}
        fn sleep_until(&self, _: Instant) -> BoxFuture<'static, ()> {
            Box::pin(std::future::pending())
        }
        fn now(&self) -> Instant {
            Instant::now()
        }
    }

    fn term(name: &str) -> Term {
        let clock = Clock::new(Arc::new(ClockOnly), Arc::new(HostSuspendClock));
        let deadline = SessionDeadline::new(Timestamp::ZERO);
        Term::create(
            LeaseName::new(name).unwrap(),
            Token::new(3).unwrap(),
            deadline,
            clock,
        )
        .term
    }

    #[derive(Default)]
    struct Seen(Mutex<Vec<String>>);
    impl GroupListener for Seen {
        fn on_elected(&self, partition: u32, _: &Term) {
            self.0.lock().unwrap().push(format!("gained {partition}"));
        }
        fn on_revoked(&self, partition: u32, _: &Term, _: RevokeReason) {
            self.0.lock().unwrap().push(format!("lost {partition}"));
        }
    }

    /// S10: a partition's callbacks carry the index its lease name carries;
    /// a term whose name is no partition's is not passed off as partition 0.
    #[test]
    fn s10_a_name_that_is_no_partitions_is_not_partition_0() {
        let seen = Arc::new(Seen::default());
        let callbacks = PartitionCallbacks(seen.clone());
        let group = LeaseName::new("orders").unwrap();
        let seven = term(simba_core::partition_name(&group, 7).unwrap().as_str());
        callbacks.on_elected(&seven);
        callbacks.on_revoked(&seven, RevokeReason::Rebalanced);
        let plain = term("orders.not-a-partition");
        callbacks.on_elected(&plain);
        callbacks.on_revoked(&plain, RevokeReason::Rebalanced);
        assert_eq!(*seen.0.lock().unwrap(), ["gained 7", "lost 7"]);
        assert_eq!(partition_of(&plain), None);
    }
}
