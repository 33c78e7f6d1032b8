//! The simulated backend passes simba-backends' conformance suite, so its
//! semantics cannot drift from the real backends'. The suite runs in real
//! time (it sleeps through 1–2 s leases), so this adapter reads a real
//! monotonic clock as the backend clock.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![allow(clippy::disallowed_methods)] // the suite runs in real time

use futures::future::{BoxFuture, FutureExt};
use futures::stream::{BoxStream, StreamExt};
use simba_backends::testkit::{run_all, Capability, Factory};
use simba_backends::{check_prefix, Backend, Inspection, LeaseInfo, SessionInfo, SessionMetadata};
use simba_core::{
    AcquireOutcome, BackendError, LeaseName, RenewError, Renewal, SessionGrant, SessionId,
    SlotClaim, Token,
};
use simulation::backend::{BackendOptions, SimBackend};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

struct Shared {
    backend: SimBackend,
    origin: Instant,
    subscribers: Vec<futures::channel::mpsc::UnboundedSender<LeaseName>>,
    /// Session metadata is opaque to the model: this adapter keeps it.
    metadata: BTreeMap<SessionId, SessionMetadata>,
}

/// One client of a namespace's simulated backend.
#[derive(Clone)]
struct SimClient(Arc<Mutex<Shared>>);

impl SimClient {
    fn with<T>(&self, f: impl FnOnce(&mut SimBackend, u64) -> T) -> T {
        let mut s = self.0.lock().unwrap();
        let now = u64::try_from(s.origin.elapsed().as_nanos()).unwrap();
        let out = f(&mut s.backend, now);
        let freed = s.backend.take_broadcasts();
        s.subscribers
            .retain(|tx| freed.iter().all(|n| tx.unbounded_send(n.clone()).is_ok()));
        out
    }
}

impl Backend for SimClient {
    fn open_session_with<'a>(
        &'a self,
        d: Duration,
        metadata: &'a SessionMetadata,
    ) -> BoxFuture<'a, Result<SessionGrant, BackendError>> {
        let r = self.with(|b, now| b.open_session(now, d));
        if let Ok(g) = &r {
            self.0
                .lock()
                .unwrap()
                .metadata
                .insert(g.session, metadata.clone());
        }
        async move { r }.boxed()
    }
    fn renew(&self, session: SessionId) -> BoxFuture<'_, Result<Renewal, RenewError>> {
        let r = self.with(|b, now| b.renew(now, session));
        async move { r }.boxed()
    }
    fn acquire<'a>(
        &'a self,
        session: SessionId,
        name: &'a LeaseName,
    ) -> BoxFuture<'a, Result<AcquireOutcome, BackendError>> {
        let r = self.with(|b, now| b.acquire(now, session, name));
        async move { r }.boxed()
    }
    fn release<'a>(
        &'a self,
        session: SessionId,
        name: &'a LeaseName,
        token: Token,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        self.with(|b, now| b.release(now, session, name, token));
        async move { Ok(()) }.boxed()
    }
    fn close_session(&self, session: SessionId) -> BoxFuture<'_, Result<(), BackendError>> {
        self.with(|b, now| b.close_session(now, session));
        async move { Ok(()) }.boxed()
    }
    fn inspect<'a>(
        &'a self,
        prefix: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Inspection, BackendError>> {
        let r = match prefix.map(check_prefix).transpose() {
            Err(e) => Err(e),
            Ok(_) => {
                let (leases, sessions) = self.with(|b, now| b.inspect(now, prefix));
                let metadata = self.0.lock().unwrap().metadata.clone();
                Ok(Inspection {
                    leases: leases
                        .into_iter()
                        .map(|(name, holder, token, remaining)| LeaseInfo {
                            name,
                            holder,
                            token: Some(token),
                            remaining,
                        })
                        .collect(),
                    sessions: sessions
                        .into_iter()
                        .map(|(session, lease_duration, remaining)| SessionInfo {
                            session,
                            remaining,
                            lease_duration,
                            metadata: metadata.get(&session).cloned().unwrap_or_default(),
                        })
                        .collect(),
                })
            }
        };
        async move { r }.boxed()
    }
    fn subscribe_releases(
        &self,
    ) -> BoxFuture<'_, Result<Option<BoxStream<'static, LeaseName>>, BackendError>> {
        let (tx, rx) = futures::channel::mpsc::unbounded();
        self.0.lock().unwrap().subscribers.push(tx);
        async move { Ok(Some(rx.boxed())) }.boxed()
    }
    fn broadcasts_releases(&self) -> bool {
        true
    }
    fn join_group<'a>(
        &'a self,
        session: SessionId,
        group: &'a LeaseName,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        let r = self.with(|b, now| b.join_group(now, session, group));
        async move { r }.boxed()
    }
    fn leave_group<'a>(
        &'a self,
        session: SessionId,
        group: &'a LeaseName,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        self.with(|b, now| b.leave_group(now, session, group));
        async move { Ok(()) }.boxed()
    }
    fn claim_slot<'a>(
        &'a self,
        session: SessionId,
        name: &'a LeaseName,
        token: Token,
        slot: u64,
    ) -> BoxFuture<'a, Result<SlotClaim, BackendError>> {
        let r = self.with(|b, now| b.claim_slot(now, session, name, token, slot));
        async move { Ok(r) }.boxed()
    }
    fn name(&self) -> &'static str {
        "simulated"
    }
}

#[derive(Default)]
struct Namespaces(Mutex<BTreeMap<String, SimClient>>);

impl Factory for Namespaces {
    type Backend = SimClient;
    fn connect<'a>(&'a self, ns: &'a str) -> BoxFuture<'a, Result<SimClient, BackendError>> {
        let client = self
            .0
            .lock()
            .unwrap()
            .entry(ns.to_owned())
            .or_insert_with(|| {
                SimClient(Arc::new(Mutex::new(Shared {
                    backend: SimBackend::new(BackendOptions::default(), 7),
                    origin: Instant::now(),
                    subscribers: Vec::new(),
                    metadata: BTreeMap::new(),
                })))
            })
            .clone();
        async move { Ok(client) }.boxed()
    }
    fn lacks(&self) -> Vec<Capability> {
        vec![Capability::KillConnectionMidCall, Capability::LockHold]
    }
}

#[test]
fn the_simulated_backend_passes_the_conformance_suite() {
    let report = futures::executor::block_on(run_all(&Namespaces::default()));
    println!("{report}");
    report.assert_passed();
}
