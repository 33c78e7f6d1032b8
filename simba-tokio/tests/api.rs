//! The application API's composition rules, on the in-memory backend.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

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

/// The next event of `stream`, waiting at most 10 s (far above what the
/// in-memory backend needs on a loaded machine: a few driver steps).
async fn next_event(
    stream: &mut futures::stream::BoxStream<'static, simba_tokio::ClientEvent>,
) -> simba_tokio::ClientEvent {
    use futures::StreamExt;
    tokio::time::timeout(Duration::from_secs(10), stream.next())
        .await
        .expect("an event within 10 s")
        .expect("the stream is open")
}

/// Every running handle's `events()` (the `Running` verb) carries only
/// what concerns it: an election's stream never shows another election's
/// terms, a group's only its own partitions (S7.1's events, per handle).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_handles_events_concern_only_that_handle() {
    use simba_tokio::{ClientEvent, GroupListener, NoListener, Running};
    struct Quiet;
    impl GroupListener for Quiet {}

    let simba = simba_tokio::builder(MemoryBackend::new()).build().unwrap();
    let a = simba.election("api.ev.a").start(NoListener).await.unwrap();
    let b = simba.election("api.ev.b").start(NoListener).await.unwrap();
    let group = simba.group("api.ev.g", 2).join(Quiet).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let owned = |g: &simba_tokio::Group| {
        let g = g.clone();
        async move {
            g.snapshot()
                .await
                .ok()
                .flatten()
                .is_some_and(|s| s.owned.len() == 2)
        }
    };
    while !(a.is_leader() && b.is_leader() && owned(&group).await)
        && tokio::time::Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(a.is_leader() && b.is_leader(), "both elections won");

    // Through the trait, as generic code would.
    fn events_of<H: Running>(h: &H) -> futures::stream::BoxStream<'static, ClientEvent> {
        h.events()
    }
    let mut of_a = events_of(&a);
    let mut of_group = events_of(&group);
    // In this order: an unfiltered stream would show b's end first, then
    // a's, then the group's partitions.
    b.stop().await;
    a.stop().await;
    group.stop().await;

    match next_event(&mut of_a).await {
        ClientEvent::Revoked { name, reason, .. } => {
            assert_eq!(name, "api.ev.a");
            assert_eq!(reason, RevokeReason::Stopped);
        }
        other => panic!("a's stream showed {other:?} before a's end"),
    }
    let mut ended = Vec::new();
    while ended.len() < 2 {
        match next_event(&mut of_group).await {
            ClientEvent::Revoked { name, .. } => {
                let (g, p) = simba_tokio::parse_partition_name(&name).expect("a partition");
                assert_eq!(g, "api.ev.g", "the group's stream showed {name}");
                ended.push(p);
            }
            ClientEvent::GroupChanged { group, .. } => assert_eq!(group, "api.ev.g"),
            other => panic!("the group's stream showed {other:?}"),
        }
    }
    ended.sort_unstable();
    assert_eq!(ended, [0, 1]);
    simba.close().await;
}
