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
use simba_backends::{Backend, Call, Layer, Layered, Reply};
use simba_core::{BackendError, LeaseName, SessionId};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

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

impl Layer for Liar {
    fn inner(&self) -> &dyn Backend {
        &self.inner
    }
    fn call<'a>(&'a self, call: Call<'a>) -> BoxFuture<'a, Reply> {
        match call {
            Call::LeaveGroup { .. } if self.lie == Lie::LeaveIgnored => {
                futures::future::ready(Reply::Done(Ok(()))).boxed()
            }
            Call::Renew { .. } if self.lie == Lie::StaleMembers => async move {
                let mut reply = call.run(&self.inner).await;
                if let Reply::Renewed(Ok(r)) = &mut reply {
                    let joined = self.joined.lock().unwrap();
                    for view in &mut r.groups {
                        if let Some(all) = joined.get(&view.group) {
                            view.members = all.iter().copied().collect();
                        }
                    }
                }
                reply
            }
            .boxed(),
            Call::JoinGroup { session, group } => async move {
                let reply = call.run(&self.inner).await;
                if let Reply::Done(Ok(())) = reply {
                    self.joined
                        .lock()
                        .unwrap()
                        .entry(group.clone())
                        .or_default()
                        .insert(session);
                }
                reply
            }
            .boxed(),
            other => other.run(&self.inner),
        }
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
    type Backend = Layered<Liar>;
    fn connect<'a>(&'a self, ns: &'a str) -> BoxFuture<'a, Result<Layered<Liar>, BackendError>> {
        async move {
            Ok(Layered(Liar {
                inner: self.sqlite.connect(ns).await?,
                lie: self.lie,
                joined: self.joined.clone(),
            }))
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
