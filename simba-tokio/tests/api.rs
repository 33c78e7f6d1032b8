//! The application API's composition rules, on the in-memory backend.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use simba_tokio::{ElectionListener, MemoryBackend, RevokeReason, Term};
use std::sync::{Arc, Mutex};
use std::time::Duration;

struct Record(&'static str, Arc<Mutex<Vec<String>>>);
impl ElectionListener for Record {
    fn on_elected(&self, term: &Term) {
        self.1
            .lock()
            .unwrap()
            .push(format!("{} elected {}", self.0, term.token()));
    }
    fn on_revoked(&self, term: &Term, _: RevokeReason) {
        self.1
            .lock()
            .unwrap()
            .push(format!("{} revoked {}", self.0, term.token()));
    }
}

/// S7.1, S7.2: a listener set with `.listener()` before `.start(listener)`
/// hears every event too, each just before the one given to `start`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s7_1_a_listener_set_before_start_is_told_too() {
    let simba = simba_tokio::builder(MemoryBackend::new()).build().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let election = simba
        .election("api.both")
        .listener(Record("earlier", seen.clone()))
        .start(Record("given", seen.clone()))
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while seen.lock().unwrap().len() < 2 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    election.stop().await;
    simba.close().await;
    let seen = seen.lock().unwrap().clone();
    let token = seen[0].rsplit(' ').next().unwrap().to_owned();
    assert_eq!(
        seen,
        [
            format!("earlier elected {token}"),
            format!("given elected {token}"),
            format!("earlier revoked {token}"),
            format!("given revoked {token}"),
        ]
    );
}
