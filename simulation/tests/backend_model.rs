//! The simulated backend has exactly the semantics of the real ones (see
//! docs/BACKENDS.md): expiry by the backend clock, per-name strictly
//! increasing tokens (S3.2), token-conditional release (S3.5), release and
//! expiry broadcasts (S4.2), granted-lease shortening (S8.4), sessions that
//! never come back (S1.2), restarts with and without state.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use simba_core::{AcquireOutcome, LeaseName, RenewError, Token};
use simulation::backend::{BackendOptions, SimBackend};
use std::time::Duration;

const S: u64 = 1_000_000_000;
const MS: u64 = 1_000_000;

fn name(s: &str) -> LeaseName {
    LeaseName::new(s).unwrap()
}

fn won(o: AcquireOutcome) -> Token {
    match o {
        AcquireOutcome::Won { token, .. } => token,
        other => panic!("expected Won, got {other:?}"),
    }
}

#[test]
fn tokens_strictly_increase_per_name_s3_2() {
    let mut b = SimBackend::new(BackendOptions::default(), 1);
    let a = b.open_session(0, Duration::from_secs(10)).unwrap().session;
    let c = b.open_session(0, Duration::from_secs(10)).unwrap().session;
    let t1 = won(b.acquire(0, a, &name("x")).unwrap());
    assert_eq!(
        won(b.acquire(1, a, &name("x")).unwrap()),
        t1,
        "the owner gets its token again"
    );
    assert!(
        matches!(b.acquire(1, c, &name("x")).unwrap(), AcquireOutcome::Held { holder: Some(h), .. } if h == a)
    );
    assert!(b.release(2, a, &name("x"), t1));
    let t2 = won(b.acquire(3, c, &name("x")).unwrap());
    assert!(t2 > t1);
    assert_eq!(
        won(b.acquire(3, c, &name("y")).unwrap()).get(),
        1,
        "tokens are per name"
    );
}

#[test]
fn release_is_token_conditional_s3_5() {
    let mut b = SimBackend::new(BackendOptions::default(), 1);
    let a = b.open_session(0, Duration::from_secs(10)).unwrap().session;
    let t1 = won(b.acquire(0, a, &name("x")).unwrap());
    assert!(b.release(1, a, &name("x"), t1));
    let t2 = won(b.acquire(2, a, &name("x")).unwrap());
    assert!(
        !b.release(3, a, &name("x"), t1),
        "a late release is a no-op for a later term"
    );
    assert_eq!(b.owner(&name("x")), Some((a, t2)));
}

#[test]
fn sessions_expire_by_the_backend_clock_and_never_come_back_s1_2() {
    let opts = BackendOptions {
        broadcast_expiry: true,
        ..BackendOptions::default()
    };
    let mut b = SimBackend::new(opts, 1);
    let a = b.open_session(0, Duration::from_secs(3)).unwrap().session;
    won(b.acquire(0, a, &name("x")).unwrap());
    let r = b.renew(2 * S, a).unwrap();
    assert_eq!(r.remaining, Duration::from_secs(3));
    assert_eq!(r.owned.len(), 1);
    assert_eq!(b.next_expiry(), Some(5 * S));
    b.expire(5 * S - 1);
    assert_eq!(b.session_count(), 1);
    b.expire(5 * S);
    assert_eq!(b.session_count(), 0);
    assert_eq!(b.take_broadcasts(), vec![name("x")], "expiry is broadcast");
    assert_eq!(b.renew(5 * S, a), Err(RenewError::Expired));
    assert_eq!(
        b.acquire(5 * S, a, &name("x")).unwrap(),
        AcquireOutcome::Expired
    );
}

#[test]
fn millisecond_clock_and_rounded_remaining() {
    let opts = BackendOptions {
        millisecond_clock: true,
        round_remaining_up: true,
        ..BackendOptions::default()
    };
    let mut b = SimBackend::new(opts, 1);
    // Opened at 1.9 ms: the ms clock reads 1 ms, so the session expires at 3.001 s.
    let a = b
        .open_session(1_900_000, Duration::from_secs(3))
        .unwrap()
        .session;
    assert_eq!(b.next_expiry(), Some(3 * S + MS));
    match b.acquire(2 * S + 500_000, a, &name("x")).unwrap() {
        AcquireOutcome::Won { remaining, .. } => {
            assert_eq!(remaining, Duration::from_millis(1_001))
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn grants_are_capped_like_zookeeper_s8_4() {
    let opts = BackendOptions {
        max_grant: Some(Duration::from_secs(4)),
        ..BackendOptions::default()
    };
    let mut b = SimBackend::new(opts, 1);
    let g = b.open_session(0, Duration::from_secs(15)).unwrap();
    assert_eq!(g.remaining, Duration::from_secs(4));
}

#[test]
fn close_releases_everything_and_broadcasts_s1_4() {
    let mut b = SimBackend::new(BackendOptions::default(), 1);
    let a = b.open_session(0, Duration::from_secs(10)).unwrap().session;
    won(b.acquire(0, a, &name("x")).unwrap());
    won(b.acquire(0, a, &name("y")).unwrap());
    b.close_session(1, a);
    assert_eq!(b.owner(&name("x")), None);
    assert_eq!(b.take_broadcasts(), vec![name("x"), name("y")]);
}

#[test]
fn bad_lease_durations_are_rejected() {
    let mut b = SimBackend::new(BackendOptions::default(), 1);
    for d in [Duration::ZERO, Duration::from_secs(400 * 24 * 3600)] {
        let e = b.open_session(0, d).unwrap_err();
        assert_eq!(e.kind, simba_core::BackendErrorKind::Rejected);
    }
}

#[test]
fn inspect_lists_released_names_with_their_last_token() {
    let mut b = SimBackend::new(BackendOptions::default(), 1);
    let a = b.open_session(0, Duration::from_secs(10)).unwrap().session;
    let ta = won(b.acquire(0, a, &name("grp.a")).unwrap());
    let tb = won(b.acquire(0, a, &name("grp.b")).unwrap());
    won(b.acquire(0, a, &name("other")).unwrap());
    assert!(b.release(1, a, &name("grp.b"), tb));
    let (leases, sessions) = b.inspect(2, Some("grp."));
    assert_eq!(leases.len(), 2);
    assert_eq!(leases[0].1, Some(a));
    assert_eq!(leases[0].2, ta);
    assert_eq!(leases[1], (name("grp.b"), None, tb, None));
    assert_eq!(sessions[0].1, Duration::from_secs(10));
}

#[test]
fn restart_keeps_or_loses_state() {
    let mut b = SimBackend::new(BackendOptions::default(), 1);
    let a = b.open_session(0, Duration::from_secs(10)).unwrap().session;
    let t = won(b.acquire(0, a, &name("x")).unwrap());
    b.restart(true);
    assert_eq!(b.owner(&name("x")), Some((a, t)));
    b.restart(false);
    assert_eq!(b.owner(&name("x")), None);
    assert_eq!(b.renew(1, a), Err(RenewError::Expired));
    let c = b.open_session(1, Duration::from_secs(10)).unwrap().session;
    assert_ne!(c, a, "session ids are never reused (S1.3)");
    assert_eq!(
        won(b.acquire(1, c, &name("x")).unwrap()).get(),
        1,
        "lost state: tokens restart"
    );
}
