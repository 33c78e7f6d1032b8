//! SQLite is the embedded default, so it must be as safe for several
//! *processes* on one host as a server is for several machines: four child
//! processes contend for the same names in one database file; their terms of
//! one name never overlap in time, and no token is won twice.
#![cfg(feature = "sqlite")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::*;
use simba_backends::Backend;
use simba_core::{AcquireOutcome, LeaseName};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const FILE_ENV: &str = "SIMBA_MP_FILE";
const OUT_ENV: &str = "SIMBA_MP_OUT";
const TAG_ENV: &str = "SIMBA_MP_TAG";

fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

/// The child's work; a no-op unless started by the parent test.
#[tokio::test]
async fn child_worker() {
    let (Ok(url), Ok(out), Ok(tag)) = (
        std::env::var(FILE_ENV),
        std::env::var(OUT_ENV),
        std::env::var(TAG_ENV),
    ) else {
        return;
    };
    let b = simba_backends::sqlite::SqliteBackend::connect(&config(&url, &tag, "mp"))
        .await
        .unwrap();
    let names = [
        LeaseName::new("mp.0").unwrap(),
        LeaseName::new("mp.1").unwrap(),
    ];
    let mut log = String::new();
    let mut sessions = Vec::new();
    for _ in 0..2 {
        sessions.push(
            b.open_session(Duration::from_secs(60))
                .await
                .unwrap()
                .session,
        );
    }
    for round in 0..30 {
        let s = sessions[round % 2];
        let n = &names[round % 2];
        if let AcquireOutcome::Won { token, .. } = b.acquire(s, n).await.unwrap() {
            let start = now_ns();
            tokio::time::sleep(Duration::from_millis(3)).await;
            let end = now_ns();
            b.release(s, n, token).await.unwrap();
            log.push_str(&format!("{n} {token} {s} {start} {end}\n"));
        } else {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    std::fs::write(out, log).unwrap();
}

#[test]
fn sqlite_file_is_safe_for_several_processes_on_one_host() {
    let (factory, path) = SqliteFactory::new();
    // Create the schema once, so the children only contend on leases.
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        sqlite_backend(&factory, "mp").await;
    });
    let exe = std::env::current_exe().unwrap();
    let outs: Vec<_> = (0..4)
        .map(|i| std::env::temp_dir().join(format!("simba-{}-child{i}.log", factory.tag)))
        .collect();
    let children: Vec<_> = outs
        .iter()
        .map(|out| {
            std::process::Command::new(&exe)
                .args(["--exact", "child_worker", "--test-threads", "1"])
                .env(FILE_ENV, &factory.url)
                .env(OUT_ENV, out)
                .env(TAG_ENV, &factory.tag)
                .spawn()
                .unwrap()
        })
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success(), "a child process failed");
    }
    let mut terms: Vec<(String, u64, String, u128, u128)> = Vec::new();
    for out in &outs {
        for line in std::fs::read_to_string(out).unwrap().lines() {
            let f: Vec<&str> = line.split(' ').collect();
            terms.push((
                f[0].to_owned(),
                f[1].parse().unwrap(),
                f[2].to_owned(),
                f[3].parse().unwrap(),
                f[4].parse().unwrap(),
            ));
        }
        let _ = std::fs::remove_file(out);
    }
    assert!(terms.len() >= 4, "only {} terms won", terms.len());
    for name in ["mp.0", "mp.1"] {
        let mut of: Vec<_> = terms.iter().filter(|t| t.0 == name).collect();
        of.sort_by_key(|t| t.1);
        for w in of.windows(2) {
            assert!(w[0].1 < w[1].1, "token {} won twice", w[0].1);
            // Token order is time order, and terms do not overlap.
            assert!(
                w[0].4 <= w[1].3,
                "{name}: term {} ({}) overlaps term {} ({})",
                w[0].1,
                w[0].2,
                w[1].1,
                w[1].2
            );
        }
    }
    remove_db(&path);
}
