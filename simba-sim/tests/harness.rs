//! The harness's own promises: bad input gives typed errors, escapes and
//! non-determinism are reported (never a silent pass), a seed replays
//! identically, and a broken application is caught with a report.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)]

use simba_sim::{Faults, Fence, Sim, SimError};
use std::time::Duration;

fn short() -> Sim {
    Sim::new(2).duration(Duration::from_secs(5)).threads(1)
}

async fn idle(_node: simba_sim::Node) -> Result<(), String> {
    std::future::pending::<()>().await;
    Ok(())
}

#[test]
fn zero_nodes_is_a_typed_error() {
    let r = Sim::new(0).run(0..1, idle);
    assert!(matches!(r, Err(SimError::NoNodes)), "{r:?}");
}

#[test]
fn an_empty_seed_list_is_a_typed_error() {
    let r = short().run(Vec::<u64>::new(), idle);
    assert!(matches!(r, Err(SimError::NoSeeds)), "{r:?}");
}

#[test]
fn a_panicking_invariant_is_a_typed_error() {
    #[allow(clippy::panic)]
    let sim = short().invariant("boom", |_| panic!("invariant bug"));
    match sim.run(0..1, idle) {
        Err(SimError::InvariantPanicked { name, message, .. }) => {
            assert_eq!(name, "boom");
            assert!(message.contains("invariant bug"));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn os_randomness_in_the_app_is_reported_as_non_deterministic() {
    use std::hash::BuildHasher;
    let r = short().faults(Faults::none()).run(0..1, |node| async move {
        // RandomState draws its keys from the OS: a different trace per run.
        let h = std::collections::hash_map::RandomState::new().hash_one(1u8);
        node.log(format!("drew {h}"));
        std::future::pending::<()>().await;
        Ok::<(), String>(())
    });
    match r {
        Err(e @ SimError::NonDeterministic { .. }) => {
            assert!(e.to_string().starts_with("non-deterministic:"), "{e}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_real_thread_in_the_app_is_reported_as_an_escape() {
    let r = short()
        .faults(Faults::none())
        .run(0..1, |_node| async move {
            let _t = std::thread::spawn(|| std::thread::sleep(Duration::from_secs(2)));
            std::future::pending::<()>().await;
            Ok::<(), String>(())
        });
    match r {
        Err(e @ SimError::Escaped { .. }) => assert!(e.to_string().contains("thread"), "{e}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_seed_replays_identically_across_runs() {
    let app = |node: simba_sim::Node| async move {
        let reg = node.register("r");
        let _t = node
            .simba()
            .run_while_leader("job", move |term| {
                let reg = reg.clone();
                async move {
                    while term.is_valid() {
                        tokio::time::sleep(Duration::from_millis(30)).await;
                        if term.is_valid() {
                            let _ = reg.write(&Fence::from(&term), "x");
                        }
                    }
                }
            })
            .await
            .map_err(|e| e.to_string())?;
        std::future::pending::<()>().await;
        Ok::<(), String>(())
    };
    let s = short().recheck_every(1).run(0..20, app);
    assert!(s.is_ok(), "{s:?}");
    assert_eq!(s.ok().map(|s| s.rechecked), Some(20));
}

#[test]
fn an_unfenced_zombie_is_caught_and_shrunk() {
    let sim = Sim::new(3)
        .duration(Duration::from_secs(30))
        .faults(Faults::none().pauses(true).swarm(false));
    let r = sim.run(0..50, |node| async move {
        let reg = node.register("r");
        let _t = node
            .simba()
            .run_while_leader("job", move |term| {
                let reg = reg.clone();
                async move {
                    while term.is_valid() {
                        tokio::time::sleep(Duration::from_millis(30)).await;
                        reg.write_unfenced(&Fence::from(&term), "x");
                    }
                }
            })
            .await
            .map_err(|e| e.to_string())?;
        std::future::pending::<()>().await;
        Ok::<(), String>(())
    });
    match r {
        Err(SimError::Failed(f)) => {
            let text = f.to_string();
            assert!(text.contains("was accepted after token"), "{text}");
            assert!(text.contains("replay: SIMBA_SIM_SEED="), "{text}");
            assert!(
                f.shrunk.as_ref().is_some_and(|k| k.len() < f.faults.len()) || f.faults.len() == 1,
                "{text}"
            );
        }
        other => panic!("{other:?}"),
    }
}
