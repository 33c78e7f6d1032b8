//! The conformance suite against every backend: memory, an SQLite file,
//! PostgreSQL and MariaDB/MySQL (servers on 127.0.0.1; required unless `SIMBA_TEST_SKIP_SERVERS` lists them).
#![cfg(feature = "testkit")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::*;
use simba_backends::testkit::{run_all, Factory};

/// The whole suite on `factory`: the report is shown, `cleanup` runs, then
/// every case must have passed.
async fn suite_passes<F: Factory>(factory: &F, cleanup: impl std::future::Future<Output = ()>) {
    assert_suite_passed(run_all(factory).await, cleanup).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_backend_passes_the_conformance_suite() {
    suite_passes(&MemoryFactory::default(), async {}).await;
}

#[cfg(feature = "sqlite")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_file_passes_the_conformance_suite() {
    let (factory, path) = SqliteFactory::new();
    suite_passes(&factory, async { remove_db(&path) }).await;
}

#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_passes_the_conformance_suite() {
    if !pg_available().await {
        return;
    }
    let factory = PgFactory { tag: tag() };
    suite_passes(&factory, drop_pg_tables(&factory.tag)).await;
}

#[cfg(feature = "mysql")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_passes_the_conformance_suite() {
    if !mysql_available().await {
        return;
    }
    let factory = MysqlFactory { tag: tag() };
    suite_passes(&factory, drop_mysql_tables(&factory.tag)).await;
}

/// The same backends work on async-std (sqlx's `runtime-async-std`).
#[cfg(all(feature = "sqlite", feature = "runtime-async-std"))]
#[test]
fn sqlite_passes_core_cases_on_async_std() {
    async_std::task::block_on(async {
        let (factory, path) = SqliteFactory::new();
        assert_suite_passed(
            simba_backends::testkit::run_selected(&factory, |c| {
                !c.contains("sixteen") && !c.contains("expir")
            })
            .await,
            async { remove_db(&path) },
        )
        .await;
    });
}

/// PostgreSQL, LISTEN/NOTIFY included, on async-std.
#[cfg(all(feature = "postgres", feature = "runtime-async-std"))]
#[test]
fn postgres_passes_core_cases_on_async_std() {
    async_std::task::block_on(async {
        if !pg_available().await {
            return;
        }
        let factory = PgFactory { tag: tag() };
        assert_suite_passed(
            simba_backends::testkit::run_selected(&factory, |c| {
                c.contains("notification") || c.contains("sixteen") || c.contains("killed")
            })
            .await,
            drop_pg_tables(&factory.tag),
        )
        .await;
    });
}

/// Each lying-backend case fails on a deliberately broken in-memory backend
/// (and the flaw is caught by the case written for it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broken_memory_backends_fail_the_lying_backend_cases() {
    use simba_backends::testkit::{run_selected, Outcome};
    use simba_backends::Flaw;
    for (flaw, case) in [
        (
            Flaw::ExpireEarly,
            "s2_1_live_until_the_reported_remaining_time_then_gone",
        ),
        (
            Flaw::ExpireEarly,
            "sixteen_clients_with_short_sessions_left_to_expire",
        ),
        (
            Flaw::ExpireEarly,
            "s4_4_held_reports_the_holders_remaining_time",
        ),
        (
            Flaw::RenewKeepsExpiry,
            "s1_1_a_renewal_extends_a_full_lease_from_the_renewal",
        ),
        (
            Flaw::SplitAcquire,
            "s3_two_concurrent_acquires_by_one_session_win_one_term",
        ),
        (
            Flaw::SlotIgnoresHolder,
            "s11_1_claim_slot_by_the_holder_only_forward",
        ),
        (
            Flaw::SlotIgnoresHolder,
            "s11_1_slot_record_outlives_the_holder_and_refuses_stale_tokens",
        ),
        (
            Flaw::SlotIgnoresHolder,
            "s11_1_an_expired_holder_claims_nothing",
        ),
        (
            Flaw::SlotRewinds,
            "s11_1_claim_slot_by_the_holder_only_forward",
        ),
        (
            Flaw::SlotRewinds,
            "s11_1_slot_record_outlives_the_holder_and_refuses_stale_tokens",
        ),
    ] {
        let report = run_selected(&MemoryFactory::flawed(flaw), |c| c == case).await;
        show(&report);
        assert_eq!(report.results.len(), 1, "{case} not found");
        assert!(
            matches!(report.results[0].outcome, Outcome::Failed(_)),
            "{flaw:?} passed {case}:\n{report}"
        );
    }
}

/// A skip that no declared lack explains fails the suite.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_undeclared_skip_fails_the_suite() {
    use simba_backends::testkit::{run_selected, Capability};
    struct NoKill(MemoryFactory);
    impl simba_backends::testkit::Factory for NoKill {
        type Backend = simba_backends::MemoryBackend;
        fn connect<'a>(
            &'a self,
            ns: &'a str,
        ) -> futures::future::BoxFuture<'a, Result<Self::Backend, simba_core::BackendError>>
        {
            self.0.connect(ns)
        }
        // No `acquire_while_killed`, and no declared lack.
    }
    let killed = |c: &str| c.contains("killed");
    let report = run_selected(&NoKill(MemoryFactory::default()), killed).await;
    assert_eq!(report.skipped().len(), 1);
    assert_eq!(report.unexplained_skips().len(), 1);
    assert!(std::panic::catch_unwind(|| report.assert_passed()).is_err());
    // Declared, the same skip is accepted and listed.
    let mut declared = report.clone();
    declared.lacks = vec![Capability::KillConnectionMidCall];
    declared.assert_passed();
    assert!(declared
        .to_string()
        .contains("declared lacking: killing a connection"));
}
