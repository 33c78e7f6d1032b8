//! What the engine tags its outputs with, so that a driver keeps only the
//! application's callbacks and wakers (S7.1): every term says which entry
//! it belongs to, what kind of entry that is, and when it was elected;
//! `Engine::kind_of` answers for an entry id while the engine has it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod harness;

use harness::*;
use simba_core::{Kind, LockWait};

#[test]
fn s7_1_an_elections_term_carries_its_entry_kind_and_election_instant() {
    let mut h = H::live(fast_config());
    let entry = h.engine.start_election(h.now, name("a"), false).unwrap();
    h.drain();
    h.now = h.now + ms(250);
    let term = elected(&h.won("a", 3)).expect("no Elected");
    assert_eq!(term.entry, entry);
    assert_eq!(term.kind, Kind::Election);
    assert_eq!(
        term.elected_at, h.now,
        "elected at the instant of the winning reply"
    );
    assert_eq!(h.engine.kind_of(entry), Some(Kind::Election));
}

#[test]
fn s7_1_a_locks_term_says_it_is_a_lock_and_the_entry_is_forgotten_with_it() {
    let mut h = H::live(fast_config());
    let entry = h
        .engine
        .acquire_lock(h.now, name("l"), LockWait::Forever, false)
        .unwrap();
    h.drain();
    assert_eq!(h.engine.kind_of(entry), Some(Kind::Lock));
    let term = elected(&h.won("l", 9)).expect("no Elected");
    assert_eq!((term.entry, term.kind), (entry, Kind::Lock));
    h.engine.stop(h.now, &name("l")).unwrap();
    h.drain();
    let release = h.take(|c| matches!(c, simba_core::Command::Release { .. }));
    h.input(simba_core::Input::ReleaseReplied {
        op: release.op(),
        result: Ok(()),
    });
    assert_eq!(h.engine.kind_of(entry), None, "an ended lock is forgotten");
}

#[test]
fn s7_1_a_groups_id_is_a_partition_entry() {
    let mut h = H::live(fast_config());
    let entry = h
        .engine
        .join_group(
            h.now,
            name("g"),
            4,
            false,
            simba_core::TaskExitPolicy::default(),
        )
        .unwrap();
    h.drain();
    assert_eq!(h.engine.kind_of(entry), Some(Kind::Partition));
}
