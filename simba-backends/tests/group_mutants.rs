//! The group cases of the conformance suite (S10.1) fire on deliberately
//! broken backends: a real SQLite backend wrapped so that it lies about
//! memberships. (The slot cases have in-memory mutants, `Flaw::Slot*`, in
//! `tests/conformance.rs`.)
#![cfg(all(feature = "testkit", feature = "sqlite"))]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::*;
use futures::future::{BoxFuture, FutureExt};
use simba_backends::sqlite::SqliteBackend;
use simba_backends::testkit::{run_selected, Capability, Factory, Outcome};
use simba_backends::{Backend, Inspection};
use simba_core::{
    AcquireOutcome, BackendError, LeaseName, RenewError, Renewal, SessionGrant, SessionId,
    SlotClaim, Token,
};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lie {
    /// `leave_group` does nothing.
    LeaveIgnored,
    /// The renewal lists every session that ever joined a group (a stale
    /// membership cache that never learns of closes and expiry).
    StaleMembers,
}

#[derive(Clone)]
struct Liar {
    inner: SqliteBackend,
    lie: Lie,
    joined: Arc<Mutex<BTreeMap<LeaseName, BTreeSet<SessionId>>>>,
}

impl Backend for Liar {
    fn open_session(&self, d: Duration) -> BoxFuture<'_, Result<SessionGrant, BackendError>> {
        self.inner.open_session(d)
    }
    fn renew(&self, session: SessionId) -> BoxFuture<'_, Result<Renewal, RenewError>> {
        async move {
            let mut r = self.inner.renew(session).await?;
            if self.lie == Lie::StaleMembers {
                let joined = self.joined.lock().unwrap();
                for view in &mut r.groups {
                    if let Some(all) = joined.get(&view.group) {
                        view.members = all.iter().copied().collect();
                    }
                }
            }
            Ok(r)
        }
        .boxed()
    }
    fn acquire<'a>(
        &'a self,
        session: SessionId,
        name: &'a LeaseName,
    ) -> BoxFuture<'a, Result<AcquireOutcome, BackendError>> {
        self.inner.acquire(session, name)
    }
    fn release<'a>(
        &'a self,
        session: SessionId,
        name: &'a LeaseName,
        token: Token,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        self.inner.release(session, name, token)
    }
    fn withdraw<'a>(
        &'a self,
        session: SessionId,
        name: &'a LeaseName,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        self.inner.withdraw(session, name)
    }
    fn close_session(&self, session: SessionId) -> BoxFuture<'_, Result<(), BackendError>> {
        self.inner.close_session(session)
    }
    fn inspect<'a>(
        &'a self,
        prefix: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Inspection, BackendError>> {
        self.inner.inspect(prefix)
    }
    fn subscribe_releases(
        &self,
    ) -> BoxFuture<'_, Result<Option<futures::stream::BoxStream<'static, LeaseName>>, BackendError>>
    {
        self.inner.subscribe_releases()
    }
    fn join_group<'a>(
        &'a self,
        session: SessionId,
        group: &'a LeaseName,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        async move {
            self.inner.join_group(session, group).await?;
            self.joined
                .lock()
                .unwrap()
                .entry(group.clone())
                .or_default()
                .insert(session);
            Ok(())
        }
        .boxed()
    }
    fn leave_group<'a>(
        &'a self,
        session: SessionId,
        group: &'a LeaseName,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        if self.lie == Lie::LeaveIgnored {
            return futures::future::ready(Ok(())).boxed();
        }
        self.inner.leave_group(session, group)
    }
    fn claim_slot<'a>(
        &'a self,
        session: SessionId,
        name: &'a LeaseName,
        token: Token,
        slot: u64,
    ) -> BoxFuture<'a, Result<SlotClaim, BackendError>> {
        self.inner.claim_slot(session, name, token, slot)
    }
    fn name(&self) -> &'static str {
        "lying-sqlite"
    }
}

struct LiarFactory {
    sqlite: SqliteFactory,
    lie: Lie,
    joined: Arc<Mutex<BTreeMap<LeaseName, BTreeSet<SessionId>>>>,
}

impl Factory for LiarFactory {
    type Backend = Liar;
    fn connect<'a>(&'a self, ns: &'a str) -> BoxFuture<'a, Result<Liar, BackendError>> {
        async move {
            Ok(Liar {
                inner: self.sqlite.connect(ns).await?,
                lie: self.lie,
                joined: self.joined.clone(),
            })
        }
        .boxed()
    }
    fn lacks(&self) -> Vec<Capability> {
        self.sqlite.lacks()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lying_backends_fail_the_group_cases() {
    for (lie, case) in [
        (
            Lie::LeaveIgnored,
            "s10_1_join_and_leave_list_members_in_the_renewal",
        ),
        (
            Lie::StaleMembers,
            "s10_1_membership_ends_with_close_and_expiry",
        ),
    ] {
        let (sqlite, path) = SqliteFactory::new();
        let factory = LiarFactory {
            sqlite,
            lie,
            joined: Arc::default(),
        };
        let report = run_selected(&factory, |c| c == case).await;
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
        println!("{report}");
        assert_eq!(report.results.len(), 1, "{case} not found");
        assert!(
            matches!(report.results[0].outcome, Outcome::Failed(_)),
            "{lie:?} passed {case}:\n{report}"
        );
    }
}
