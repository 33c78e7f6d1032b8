//! A small driver for rule tests: plays a scripted backend, steps virtual
//! time to the engine's next deadline, and fails if a handled deadline does
//! not move forward (a stuck deadline makes a real driver spin).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use simba_core::*;
use std::time::Duration;

pub const SID: SessionId = SessionId::from_u128(0x51);

pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

pub fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

pub fn name(s: &str) -> LeaseName {
    LeaseName::new(s).unwrap()
}

pub fn tok(n: u64) -> Token {
    Token::new(n).unwrap()
}

/// 3 s lease, 1 s renewals, 10 ms margin, 1 % drift, 500 ms jitter.
pub fn fast_config() -> SimbaConfig {
    SimbaConfig::builder()
        .lease_duration(secs(3))
        .margin(ms(10))
        .seed(7)
        .build()
        .unwrap()
}

/// `config` on the deliberately broken engine `mutant`.
#[cfg(feature = "mutants")]
pub fn with_mutant(config: SimbaConfig, mutant: Mutant) -> SimbaConfig {
    config.to_builder().mutant(Some(mutant)).build().unwrap()
}

/// A check that never fired proves nothing: `check` run on the engine
/// broken by `mutant` (from [`fast_config`]) fails, saying `says`.
/// `cargo test -p simba-core --features mutants`
#[cfg(feature = "mutants")]
pub fn assert_mutant_caught(
    check: impl FnOnce(SimbaConfig) -> Result<(), String>,
    mutant: Mutant,
    says: &str,
) {
    let err = check(with_mutant(fast_config(), mutant)).unwrap_err();
    assert!(err.contains(says), "{err}");
}

pub struct H {
    pub engine: Engine,
    pub now: Timestamp,
    /// Every output, in order.
    pub log: Vec<Output>,
    /// Commands not answered yet.
    pub pending: Vec<Command>,
    pub next_session: u128,
}

impl H {
    pub fn new(config: SimbaConfig) -> H {
        Self::with_profile(config, BackendProfile::default())
    }

    pub fn with_profile(config: SimbaConfig, profile: BackendProfile) -> H {
        let now = Timestamp::from_nanos(1_000_000_000);
        let mut h = H {
            engine: Engine::new(config, profile, now),
            now,
            log: Vec::new(),
            pending: Vec::new(),
            next_session: 0x51,
        };
        h.drain();
        h
    }

    /// A harness with a live session (id [`SID`]) granted the full lease.
    pub fn live(config: SimbaConfig) -> H {
        let lease = config.lease_duration();
        let mut h = H::new(config);
        h.grant_open(lease);
        h
    }

    pub fn drain(&mut self) -> Vec<Output> {
        let mut new = Vec::new();
        while let Some(o) = self.engine.poll_output() {
            if let Output::Command(c) = &o {
                self.pending.push(c.clone());
            }
            new.push(o.clone());
            self.log.push(o);
        }
        if let Some(t) = self.engine.poll_timeout() {
            assert!(
                t > self.now,
                "poll_timeout {t} is not after now {}",
                self.now
            );
        }
        new
    }

    /// Moves time forward by `d`, handling every deadline on the way.
    pub fn advance(&mut self, d: Duration) -> Vec<Output> {
        let target = self.now + d;
        let mut out = Vec::new();
        while let Some(t) = self.engine.poll_timeout() {
            if t > target {
                break;
            }
            self.now = t;
            self.engine.handle_timeout(t);
            out.extend(self.drain());
            if let Some(next) = self.engine.poll_timeout() {
                assert!(
                    next > t,
                    "deadline {t} did not move forward after it was handled"
                );
            }
        }
        self.now = target;
        self.engine.handle_timeout(target);
        out.extend(self.drain());
        out
    }

    /// Steps to the engine's next deadline and handles it.
    pub fn step(&mut self) -> Vec<Output> {
        let t = self.engine.poll_timeout().expect("no deadline");
        self.now = t;
        self.engine.handle_timeout(t);
        let out = self.drain();
        if let Some(next) = self.engine.poll_timeout() {
            assert!(
                next > t,
                "deadline {t} did not move forward after it was handled"
            );
        }
        out
    }

    pub fn input(&mut self, input: Input) -> Vec<Output> {
        self.engine.handle(self.now, input);
        self.drain()
    }

    /// Removes and returns the first pending command matching `f`.
    pub fn take(&mut self, f: impl Fn(&Command) -> bool) -> Command {
        let i = self
            .pending
            .iter()
            .position(f)
            .unwrap_or_else(|| panic!("no such pending command in {:?}", self.pending));
        self.pending.remove(i)
    }

    pub fn has_pending(&self, f: impl Fn(&Command) -> bool) -> bool {
        self.pending.iter().any(f)
    }

    pub fn take_open(&mut self) -> OpId {
        self.take(|c| matches!(c, Command::OpenSession { .. })).op()
    }

    pub fn take_renew(&mut self) -> OpId {
        self.take(|c| matches!(c, Command::Renew { .. })).op()
    }

    pub fn take_acquire(&mut self, n: &str) -> OpId {
        self.take(|c| matches!(c, Command::Acquire { name, .. } if name.as_str() == n))
            .op()
    }

    pub fn grant_open(&mut self, remaining: Duration) -> Vec<Output> {
        let op = self.take_open();
        let session = SessionId::from_u128(self.next_session);
        self.next_session += 1;
        self.input(Input::SessionOpened {
            op,
            result: Ok(SessionGrant { session, remaining }),
        })
    }

    pub fn renew_ok(&mut self, remaining: Duration, owned: Vec<(LeaseName, Token)>) -> Vec<Output> {
        let op = self.take_renew();
        self.input(Input::RenewReplied {
            op,
            result: Ok(Renewal {
                remaining,
                owned,
                groups: Vec::new(),
            }),
        })
    }

    /// Answers the pending renew listing exactly the leases held now.
    pub fn renew_truthfully(&mut self) -> Vec<Output> {
        let owned = self.held();
        let lease = self.engine.config().lease_duration();
        self.renew_ok(lease, owned)
    }

    pub fn acquire_reply(&mut self, n: &str, outcome: AcquireOutcome) -> Vec<Output> {
        let op = self.take_acquire(n);
        self.input(Input::AcquireReplied {
            op,
            result: Ok(outcome),
        })
    }

    pub fn won(&mut self, n: &str, token: u64) -> Vec<Output> {
        let remaining = self.engine.config().lease_duration();
        let op = self.take_acquire(n);
        self.input(won_reply(op, token, remaining))
    }

    /// Starts an election on `n` and wins it with `token`; returns the term.
    pub fn elect(&mut self, n: &str, token: u64, runs_task: bool) -> Term {
        self.engine
            .start_election(self.now, name(n), runs_task)
            .unwrap();
        self.drain();
        let out = self.won(n, token);
        elected(&out).expect("no Elected")
    }

    /// The leases the engine holds, from its snapshot.
    pub fn held(&self) -> Vec<(LeaseName, Token)> {
        self.engine
            .snapshot(self.now)
            .entries
            .into_iter()
            .filter_map(|e| e.term.map(|(_, t)| (e.name, t)))
            .collect()
    }

    pub fn deadline(&self) -> Timestamp {
        self.engine.session_deadline().unwrap().1
    }

    pub fn status(&self, n: &str) -> Option<Status> {
        self.engine
            .snapshot(self.now)
            .entries
            .into_iter()
            .find(|e| e.name.as_str() == n)
            .map(|e| e.status)
    }

    pub fn events(&self) -> Vec<Event> {
        events(&self.log)
    }
}

/// The backend's reply to the acquire `op`: won with `token`, `remaining`
/// left on the lease.
pub fn won_reply(op: OpId, token: u64, remaining: Duration) -> Input {
    Input::AcquireReplied {
        op,
        result: Ok(AcquireOutcome::Won {
            token: tok(token),
            remaining,
        }),
    }
}

pub fn events(out: &[Output]) -> Vec<Event> {
    out.iter()
        .filter_map(|o| match o {
            Output::Event(e) => Some(e.clone()),
            _ => None,
        })
        .collect()
}

pub fn elected(out: &[Output]) -> Option<Term> {
    out.iter().find_map(|o| match o {
        Output::Event(Event::Elected { term }) => Some(term.clone()),
        _ => None,
    })
}

pub fn revoked(out: &[Output]) -> Vec<(Term, RevokeReason)> {
    out.iter()
        .filter_map(|o| match o {
            Output::Event(Event::Revoked { term, reason }) => Some((term.clone(), *reason)),
            _ => None,
        })
        .collect()
}

pub fn releases(out: &[Output]) -> Vec<(LeaseName, Token)> {
    out.iter()
        .filter_map(|o| match o {
            Output::Command(Command::Release { name, token, .. }) => Some((name.clone(), *token)),
            _ => None,
        })
        .collect()
}

/// Every `Withdraw` in `out`, as (session, name) (S4.5).
pub fn withdrawals(out: &[Output]) -> Vec<(SessionId, LeaseName)> {
    out.iter()
        .filter_map(|o| match o {
            Output::Command(Command::Withdraw { session, name, .. }) => {
                Some((*session, name.clone()))
            }
            _ => None,
        })
        .collect()
}

/// The place of the first output that `f` picks; panics when there is none.
pub fn first(out: &[Output], f: impl Fn(&Output) -> bool) -> usize {
    out.iter().position(f).expect("no such output")
}

pub fn count(out: &[Output], f: impl Fn(&Output) -> bool) -> usize {
    out.iter().filter(|o| f(o)).count()
}

pub fn is_renew(o: &Output) -> bool {
    matches!(o, Output::Command(Command::Renew { .. }))
}

pub fn is_acquire(o: &Output) -> bool {
    matches!(o, Output::Command(Command::Acquire { .. }))
}

pub fn is_open(o: &Output) -> bool {
    matches!(o, Output::Command(Command::OpenSession { .. }))
}
