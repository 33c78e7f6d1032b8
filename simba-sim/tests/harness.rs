//! The harness's own promises: bad input gives typed errors, escapes and
//! non-determinism are reported (never a silent pass), a seed replays
//! identically, and a broken application is caught with a report.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)]

use simba_sim::{Escape, Faults, Fence, Sim, SimError};
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
        Err(
            e @ SimError::Escaped {
                kind: Escape::Thread,
                ..
            },
        ) => assert!(e.to_string().contains("thread"), "{e}"),
        other => panic!("{other:?}"),
    }
}

/// A node's code that spawns a task with a bare `tokio::spawn` two
/// simulated seconds in (the task goes on through pauses and crashes).
async fn spawns_bare(node: simba_sim::Node) -> Result<(), String> {
    tokio::time::sleep(Duration::from_secs(2)).await;
    if node.id() == 1 {
        drop(tokio::spawn(async {
            loop {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }));
    }
    std::future::pending::<()>().await;
    Ok(())
}

#[test]
fn a_bare_tokio_spawn_is_reported_as_an_escape_naming_the_node() {
    let r = short().faults(Faults::none()).run(0..1, spawns_bare);
    match r {
        Err(e @ SimError::Escaped { .. }) => {
            let text = e.to_string();
            let SimError::Escaped { seed, kind, .. } = e else {
                unreachable!()
            };
            assert_eq!(seed, 0);
            assert_eq!(
                kind,
                Escape::BareSpawn {
                    node: Some(1),
                    at: Duration::from_secs(2)
                },
                "{text}"
            );
            assert!(text.contains("tokio::spawn"), "{text}");
            assert!(text.contains("node 1"), "{text}");
            assert!(text.contains("Node::spawn"), "{text}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_bare_spawn_that_ends_at_once_is_reported_too() {
    let r = short().faults(Faults::none()).run(0..1, |node| async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        if node.id() == 0 {
            let _ = tokio::spawn(async {}).await;
        }
        std::future::pending::<()>().await;
        Ok::<(), String>(())
    });
    assert!(
        matches!(
            r,
            Err(SimError::Escaped {
                kind: Escape::BareSpawn { node: Some(0), .. },
                ..
            })
        ),
        "{r:?}"
    );
}

#[test]
fn a_bare_spawn_in_the_applications_first_poll_is_reported() {
    let r = short().faults(Faults::none()).run(0..1, |node| {
        if node.id() == 0 {
            drop(tokio::spawn(std::future::pending::<()>()));
        }
        idle(node)
    });
    assert!(
        matches!(
            r,
            Err(SimError::Escaped {
                kind: Escape::BareSpawn {
                    node: Some(0),
                    at: Duration::ZERO
                },
                ..
            })
        ),
        "{r:?}"
    );
}

#[test]
fn node_spawn_is_no_escape_and_bare_spawns_can_be_allowed() {
    let owned = short()
        .faults(Faults::default())
        .run(0..3, |node| async move {
            node.spawn(async {
                loop {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            });
            std::future::pending::<()>().await;
            Ok::<(), String>(())
        });
    assert!(owned.is_ok(), "{owned:?}");
    let allowed = short()
        .faults(Faults::none())
        .allow_bare_spawns(true)
        .run(0..1, spawns_bare);
    assert!(allowed.is_ok(), "{allowed:?}");
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

#[test]
fn an_endless_seed_list_is_drawn_lazily_and_stops_at_the_first_failure() {
    // `0..` never ends: collecting it first would never start a run.
    let r = short()
        .faults(Faults::none())
        .shrink(false)
        .run(0.., |node| async move {
            if node.seed() == 3 {
                return Err("seed 3 fails".to_owned());
            }
            std::future::pending::<()>().await;
            Ok(())
        });
    match r {
        Err(SimError::Failed(f)) => assert_eq!(f.seed, 3, "{f}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_panicking_node_task_fails_the_run() {
    let r = short().faults(Faults::none()).run(0..1, |node| async move {
        node.spawn(async {
            tokio::time::sleep(Duration::from_secs(1)).await;
            panic!("task bug");
        });
        std::future::pending::<()>().await;
        Ok::<(), String>(())
    });
    match r {
        Err(SimError::Failed(f)) => {
            assert!(f.violation.what.contains("panicked: task bug"), "{f}");
            assert_eq!(f.violation.at, Duration::from_secs(1), "{f}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_application_panicking_before_its_first_await_fails_the_run() {
    let r = short().faults(Faults::none()).run(0..1, |node| {
        assert!(node.id() != 1, "setup bug");
        idle(node)
    });
    match r {
        Err(SimError::Failed(f)) => {
            assert!(f.violation.what.contains("setup bug"), "{f}");
            assert_eq!(f.violation.node, Some(1), "{f}");
        }
        other => panic!("{other:?}"),
    }
}

/// Run by [`bad_replay_variables_are_typed_errors`] in a child process
/// (the environment is the process's, shared by this binary's tests).
#[test]
#[ignore = "run by bad_replay_variables_are_typed_errors in a child process"]
fn replay_variables_child() {
    let Ok(expect) = std::env::var("SIMBA_SIM_TEST_EXPECT") else {
        return;
    };
    match short().run(0..1, idle) {
        Err(SimError::BadReplay { var, .. }) => assert_eq!(var, expect),
        other => panic!("{other:?}"),
    }
}

#[test]
fn bad_replay_variables_are_typed_errors() {
    let cases = [
        (simba_sim::SEED_VAR, "seventeen"),
        (simba_sim::SEED_VAR, "-1"),
        (simba_sim::FAULTS_VAR, "0,x"),
    ];
    for (var, value) in cases {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--ignored", "--exact", "replay_variables_child"])
            .env_remove(simba_sim::SEED_VAR)
            .env_remove(simba_sim::FAULTS_VAR)
            .env(var, value)
            .env("SIMBA_SIM_TEST_EXPECT", var)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{var}={value}:\n{stdout}");
        assert!(stdout.contains("1 passed"), "{var}={value}:\n{stdout}");
    }
}
