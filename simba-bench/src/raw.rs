//! Measurements on the client crates Simba's ZooKeeper and etcd backends use
//! (zookeeper-client, etcd-client), without Simba: the hand-over floors (one
//! delete seen by another session's watch, then that session's create) and
//! the etcd Lock RPC peer (the server's v3lock service).
//!
//! A hand-over floor sample runs like the library hand-over: after the same
//! idle pause ([`crate::measure::pause`]), session A deletes its ephemeral
//! node (ZooKeeper) or its key on a lease (etcd); session B, a separate
//! client, watches the way the backend's release broadcast does (a
//! persistent recursive watch; a prefix watch without puts) and, once it has
//! the delete event, creates the node or key itself (ephemeral; a
//! create-if-absent transaction on its own lease). Each sample gives two
//! times from just before A's delete call: B's delete event, and B's create
//! returning. Every sample uses a fresh node or key (so an event of an
//! earlier sample is never taken for this one), after one untimed round.

use crate::measure::Op;
use crate::report::Figure;
use crate::stats::Stat;
use crate::{Kind, Plan, Target};
use std::time::Duration;

/// The two hand-over floors of one backend, measured in the same samples.
#[derive(Clone, Debug)]
pub struct HandoverFloors {
    /// A's delete call → B's delete event.
    pub delete_seen: Figure,
    /// A's delete call → B's create returning (after it saw the delete).
    pub delete_then_create: Figure,
}

fn figure(samples: &[Duration]) -> Figure {
    match Stat::of_durations(samples) {
        Some(s) => Figure::Time(s),
        None => Figure::Missing("no samples".into()),
    }
}

/// The hand-over floors of `t` (ZooKeeper or etcd), `plan.handovers`
/// samples each.
///
/// # Errors
/// The first failure, as text; or the backend has no such floor here.
pub async fn handover_floors(t: &Target, plan: &Plan) -> Result<HandoverFloors, String> {
    let addr = t.addr.as_deref().ok_or("no server address")?;
    let samples = match t.kind {
        #[cfg(feature = "zookeeper")]
        Kind::Zookeeper => zk::handover_floor(addr, plan).await?,
        #[cfg(feature = "etcd")]
        Kind::Etcd => etcd::handover_floor(addr, plan).await?,
        _ => {
            let _ = (addr, plan);
            return Err("no hand-over floor for this backend".into());
        }
    };
    let (seen, created): (Vec<Duration>, Vec<Duration>) = samples.into_iter().unzip();
    Ok(HandoverFloors {
        delete_seen: figure(&seen),
        delete_then_create: figure(&created),
    })
}

/// The etcd Lock RPC peer's acquire+release (`Lock` on a lease of its own,
/// then `Unlock` of the key it answered) as one timed operation, on a
/// client and lease of its own (kept alive every renewal interval while the
/// operation lives).
///
/// # Errors
/// Connecting or granting the lease failed, or etcd is not built in.
pub async fn etcd_lock_cycle(t: &Target, plan: &Plan) -> Result<Op, String> {
    let addr = t.addr.as_deref().ok_or("no server address")?;
    #[cfg(feature = "etcd")]
    {
        etcd::lock_cycle(addr, plan).await
    }
    #[cfg(not(feature = "etcd"))]
    {
        let _ = (addr, plan);
        Err("etcd is not built in".into())
    }
}

/// The etcd Lock RPC peer's graceful hand-over: A holds the lock through
/// `Lock` on its lease, B waits in `Lock` on the same name with its own
/// lease (its own client); after the library hand-over's idle pause A calls
/// `Unlock`; the sample is A's `Unlock` call → B's `Lock` returning.
/// `plan.handovers` samples, A and B taking turns.
///
/// # Errors
/// The first failure, as text.
pub async fn etcd_lock_handover(t: &Target, plan: &Plan) -> Result<Figure, String> {
    let addr = t.addr.as_deref().ok_or("no server address")?;
    #[cfg(feature = "etcd")]
    {
        etcd::lock_handover(addr, plan).await.map(|s| figure(&s))
    }
    #[cfg(not(feature = "etcd"))]
    {
        let _ = (addr, plan);
        Err("etcd is not built in".into())
    }
}

#[cfg(feature = "zookeeper")]
mod zk {
    use crate::measure::pause;
    use crate::Plan;
    use std::time::{Duration, Instant};
    use zookeeper_client as zkc;

    fn err(what: &str, e: zkc::Error) -> String {
        format!("ZooKeeper {what}: {e}")
    }

    async fn connect(addr: &str, plan: &Plan) -> Result<zkc::Client, String> {
        zkc::Client::connector()
            .with_session_timeout(plan.lease)
            .with_connection_timeout(Duration::from_secs(10))
            .with_fail_eagerly()
            .connect(addr)
            .await
            .map_err(|e| err("connect", e))
    }

    /// `(delete seen, delete then create)` per sample.
    pub(super) async fn handover_floor(
        addr: &str,
        plan: &Plan,
    ) -> Result<Vec<(Duration, Duration)>, String> {
        let a = connect(addr, plan).await?;
        let b = connect(addr, plan).await?;
        let root = format!("/simba-bench-floor-{}", crate::tag());
        let persistent = zkc::CreateMode::Persistent.with_acls(zkc::Acls::anyone_all());
        a.create(&root, &[], &persistent)
            .await
            .map_err(|e| err("create the floor's parent", e))?;
        let out = samples(&a, &b, &root, plan).await;
        // Clean up whatever the samples left (B's last node, or a node of a
        // failed sample), then the parent.
        if let Ok(children) = a.list_children(&root).await {
            for c in children {
                let _ = a.delete(&format!("{root}/{c}"), None).await;
                let _ = b.delete(&format!("{root}/{c}"), None).await;
            }
        }
        let _ = a.delete(&root, None).await;
        out
    }

    async fn samples(
        a: &zkc::Client,
        b: &zkc::Client,
        root: &str,
        plan: &Plan,
    ) -> Result<Vec<(Duration, Duration)>, String> {
        let ephemeral = zkc::CreateMode::Ephemeral.with_acls(zkc::Acls::anyone_all());
        // B's watch as the backend's release broadcast has it: persistent and
        // recursive, on the parent of the nodes.
        let mut watcher = b
            .watch(root, zkc::AddWatchMode::PersistentRecursive)
            .await
            .map_err(|e| err("watch", e))?;
        let limit = plan.lease * 5;
        let mut out = Vec::with_capacity(plan.handovers);
        for i in 0..=plan.handovers {
            let path = format!("{root}/h{i}");
            a.create(&path, &[], &ephemeral)
                .await
                .map_err(|e| err("create A's node", e))?;
            tokio::time::sleep(pause(plan, true)).await;
            let t0 = Instant::now();
            let waiter = async {
                loop {
                    let ev = watcher.changed().await;
                    if ev.event_type == zkc::EventType::NodeDeleted && ev.path == path {
                        break;
                    }
                    if ev.event_type == zkc::EventType::Session && ev.session_state.is_terminated()
                    {
                        return Err(format!("B's session ended: {:?}", ev.session_state));
                    }
                }
                let seen = Instant::now();
                b.create(&path, &[], &ephemeral)
                    .await
                    .map_err(|e| err("create B's node", e))?;
                Ok::<_, String>((seen, Instant::now()))
            };
            let (deleted, got) =
                tokio::join!(a.delete(&path, None), tokio::time::timeout(limit, waiter));
            deleted.map_err(|e| err("delete A's node", e))?;
            let (seen, created) =
                got.map_err(|_| format!("B saw no delete of {path} within {limit:?}"))??;
            if i > 0 {
                out.push((seen - t0, created - t0));
            }
            b.delete(&path, None)
                .await
                .map_err(|e| err("delete B's node", e))?;
        }
        Ok(out)
    }
}

#[cfg(feature = "etcd")]
mod etcd {
    use crate::measure::{pause, Op};
    use crate::Plan;
    use etcd_client::{
        Client, Compare, CompareOp, EventType, LockOptions, PutOptions, Txn, TxnOp,
        WatchFilterType, WatchOptions,
    };
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    fn err(what: &str, e: etcd_client::Error) -> String {
        format!("etcd {what}: {e}")
    }

    async fn connect(addr: &str) -> Result<Client, String> {
        Client::connect([format!("http://{addr}")], None)
            .await
            .map_err(|e| err("connect", e))
    }

    /// A lease kept alive every renewal interval until dropped.
    struct Lease {
        id: i64,
        keeper: tokio::task::JoinHandle<()>,
    }

    impl Drop for Lease {
        fn drop(&mut self) {
            self.keeper.abort();
        }
    }

    async fn lease(c: &mut Client, plan: &Plan) -> Result<Lease, String> {
        let ttl = i64::try_from(plan.lease.as_secs()).unwrap_or(2).max(1);
        let id = c
            .lease_grant(ttl, None)
            .await
            .map_err(|e| err("lease grant", e))?
            .id();
        let (mut keeper, mut stream) = c
            .lease_keep_alive(id)
            .await
            .map_err(|e| err("lease keep-alive", e))?;
        let every = plan.renew_interval();
        let keeper = tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                if keeper.keep_alive().await.is_err() {
                    break;
                }
                if !matches!(stream.message().await, Ok(Some(_))) {
                    break;
                }
            }
        });
        Ok(Lease { id, keeper })
    }

    async fn revoke(c: &mut Client, l: Lease) {
        l.keeper.abort();
        let _ = c.lease_revoke(l.id).await;
    }

    /// `(delete seen, delete then create)` per sample.
    pub(super) async fn handover_floor(
        addr: &str,
        plan: &Plan,
    ) -> Result<Vec<(Duration, Duration)>, String> {
        let mut a = connect(addr).await?;
        let mut b = connect(addr).await?;
        let la = lease(&mut a, plan).await?;
        let lb = lease(&mut b, plan).await?;
        let out = samples(&mut a, &mut b, la.id, lb.id, plan).await;
        // The keys left on the leases go with them.
        revoke(&mut a, la).await;
        revoke(&mut b, lb).await;
        out
    }

    async fn samples(
        a: &mut Client,
        b: &mut Client,
        la: i64,
        lb: i64,
        plan: &Plan,
    ) -> Result<Vec<(Duration, Duration)>, String> {
        let prefix = format!("/simba-bench-floor/{}/", crate::tag());
        // B's watch as the backend's release broadcast has it: the prefix,
        // deletes only; from its "created" reply on, no delete is missed.
        let opts = WatchOptions::new()
            .with_prefix()
            .with_filters([WatchFilterType::NoPut]);
        let mut stream = b
            .watch(prefix.clone(), Some(opts))
            .await
            .map_err(|e| err("watch", e))?;
        loop {
            match stream.message().await.map_err(|e| err("watch", e))? {
                Some(r) if r.created() => break,
                Some(_) => continue,
                None => return Err("etcd watch: the stream ended before it was created".into()),
            }
        }
        let limit = plan.lease * 5;
        let mut out = Vec::with_capacity(plan.handovers);
        for i in 0..=plan.handovers {
            let key = format!("{prefix}h{i}");
            a.put(key.clone(), "a", Some(PutOptions::new().with_lease(la)))
                .await
                .map_err(|e| err("put A's key", e))?;
            tokio::time::sleep(pause(plan, true)).await;
            let mut bc = b.clone();
            let t0 = Instant::now();
            let waiter = async {
                'seen: loop {
                    let r = stream
                        .message()
                        .await
                        .map_err(|e| err("watch", e))?
                        .ok_or("etcd watch: the stream ended")?;
                    for ev in r.events() {
                        if ev.event_type() == EventType::Delete
                            && ev.kv().is_some_and(|kv| kv.key() == key.as_bytes())
                        {
                            break 'seen;
                        }
                    }
                }
                let seen = Instant::now();
                let txn = Txn::new()
                    .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
                    .and_then([TxnOp::put(
                        key.clone(),
                        "b",
                        Some(PutOptions::new().with_lease(lb)),
                    )]);
                let r = bc.txn(txn).await.map_err(|e| err("B's create txn", e))?;
                if !r.succeeded() {
                    return Err(format!("B's create of {key} found the key present"));
                }
                Ok::<_, String>((seen, Instant::now()))
            };
            let (deleted, got) = tokio::join!(
                a.delete(key.clone(), None),
                tokio::time::timeout(limit, waiter)
            );
            deleted.map_err(|e| err("delete A's key", e))?;
            let (seen, created) =
                got.map_err(|_| format!("B saw no delete of {key} within {limit:?}"))??;
            if i > 0 {
                out.push((seen - t0, created - t0));
            }
            b.delete(key, None)
                .await
                .map_err(|e| err("delete B's key", e))?;
        }
        Ok(out)
    }

    pub(super) async fn lock_cycle(addr: &str, plan: &Plan) -> Result<Op, String> {
        let mut c = connect(addr).await?;
        let l = Arc::new(lease(&mut c, plan).await?);
        let name = format!("/simba-bench-lock/{}/cycle", crate::tag());
        Ok(Box::new(move || {
            let (mut c, l, name) = (c.clone(), l.clone(), name.clone());
            Box::pin(async move {
                let r = c
                    .lock(name, Some(LockOptions::new().with_lease(l.id)))
                    .await
                    .map_err(|e| err("Lock", e))?;
                c.unlock(r.key().to_vec())
                    .await
                    .map(|_| ())
                    .map_err(|e| err("Unlock", e))
            })
        }))
    }

    pub(super) async fn lock_handover(addr: &str, plan: &Plan) -> Result<Vec<Duration>, String> {
        let mut cs = [connect(addr).await?, connect(addr).await?];
        let ls = [
            lease(&mut cs[0], plan).await?,
            lease(&mut cs[1], plan).await?,
        ];
        let out = lock_samples(&cs, &ls, plan).await;
        let [l0, l1] = ls;
        revoke(&mut cs[0], l0).await;
        revoke(&mut cs[1], l1).await;
        out
    }

    async fn lock_samples(
        cs: &[Client; 2],
        ls: &[Lease; 2],
        plan: &Plan,
    ) -> Result<Vec<Duration>, String> {
        let name = format!("/simba-bench-lock/{}/handover", crate::tag());
        let limit = plan.lease * 5;
        let mut cur = 0;
        let mut key = cs[cur]
            .clone()
            .lock(
                name.clone(),
                Some(LockOptions::new().with_lease(ls[cur].id)),
            )
            .await
            .map_err(|e| err("Lock", e))?
            .key()
            .to_vec();
        let mut out = Vec::with_capacity(plan.handovers);
        for _ in 0..plan.handovers {
            let next = 1 - cur;
            let (mut waiter, id, n) = (cs[next].clone(), ls[next].id, name.clone());
            let blocked = tokio::spawn(async move {
                let r = waiter
                    .lock(n, Some(LockOptions::new().with_lease(id)))
                    .await;
                (Instant::now(), r)
            });
            tokio::time::sleep(pause(plan, true)).await;
            let t0 = Instant::now();
            cs[cur]
                .clone()
                .unlock(key)
                .await
                .map_err(|e| err("Unlock", e))?;
            let (t1, r) = tokio::time::timeout(limit, blocked)
                .await
                .map_err(|_| format!("the waiter's Lock did not return within {limit:?}"))?
                .map_err(|e| e.to_string())?;
            key = r.map_err(|e| err("the waiter's Lock", e))?.key().to_vec();
            out.push(t1.saturating_duration_since(t0));
            cur = next;
        }
        let _ = cs[cur].clone().unlock(key).await;
        Ok(out)
    }
}
