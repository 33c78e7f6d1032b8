//! A minimal driver for the benches: one engine whose session is open and
//! which holds `n` leases, each won by its own election.

use simba_core::{
    AcquireOutcome, BackendProfile, Command, Engine, Input, LeaseName, Output, Renewal,
    SessionGrant, SessionId, SimbaConfig, Timestamp, Token,
};
use std::time::Duration;

/// An engine holding `owned.len()` leases, and the time it was last told.
pub struct Held {
    pub engine: Engine,
    pub now: Timestamp,
    pub owned: Vec<(LeaseName, Token)>,
}

pub fn name(i: usize) -> LeaseName {
    LeaseName::new(format!("lease-{i:06}")).expect("a valid name")
}

fn drain(engine: &mut Engine) -> Vec<Command> {
    std::iter::from_fn(|| engine.poll_output())
        .filter_map(|o| match o {
            Output::Command(c) => Some(c),
            _ => None,
        })
        .collect()
}

/// Opens the session and wins `n` elections (tokens 1..=n).
pub fn holding(n: usize) -> Held {
    let now = Timestamp::from_nanos(1);
    let mut engine = Engine::new(SimbaConfig::default(), BackendProfile::default(), now);
    let open = drain(&mut engine);
    let Some(Command::OpenSession { op, .. }) = open.first() else {
        panic!("no OpenSession: {open:?}");
    };
    let grant = SessionGrant {
        session: SessionId::from_u128(7),
        remaining: Duration::from_secs(15),
    };
    engine.handle(
        now,
        Input::SessionOpened {
            op: *op,
            result: Ok(grant),
        },
    );
    drain(&mut engine);
    let mut owned = Vec::with_capacity(n);
    // As a driver does: drain after every call, answer each acquire.
    for i in 0..n {
        engine
            .start_election(now, name(i), false)
            .expect("a fresh name");
        for cmd in drain(&mut engine) {
            let Command::Acquire { op, name, .. } = cmd else {
                continue;
            };
            let token = Token::new(i as u64 + 1).expect("non-zero");
            let remaining = Duration::from_secs(15);
            let result = Ok(AcquireOutcome::Won { token, remaining });
            engine.handle(now, Input::AcquireReplied { op, result });
            drain(&mut engine);
            owned.push((name, token));
        }
    }
    assert_eq!(owned.len(), n, "every election won");
    owned.sort();
    Held { engine, now, owned }
}

impl Held {
    /// Moves time to the next deadline and answers every command the engine
    /// issues truthfully (renewals list the held leases) until `stop` picks
    /// one; returns the picked command, unanswered.
    pub fn run_until(&mut self, mut stop: impl FnMut(&Command) -> bool) -> Command {
        loop {
            let at = self.engine.poll_timeout().expect("a deadline");
            self.now = at;
            self.engine.handle_timeout(at);
            let mut picked = None;
            for cmd in drain(&mut self.engine) {
                if picked.is_none() && stop(&cmd) {
                    picked = Some(cmd);
                    continue;
                }
                if let Some(reply) = self.reply(&cmd, None) {
                    self.engine.handle(self.now, reply);
                    drain(&mut self.engine);
                }
            }
            if let Some(cmd) = picked {
                return cmd;
            }
        }
    }

    /// The reply a healthy backend gives (`Held` for acquires, unless `won`).
    pub fn reply(&self, cmd: &Command, won: Option<Token>) -> Option<Input> {
        Some(match cmd {
            Command::Renew { op, .. } => Input::RenewReplied {
                op: *op,
                result: Ok(Renewal {
                    groups: Vec::new(),
                    remaining: Duration::from_secs(15),
                    owned: self.owned.clone(),
                }),
            },
            Command::Acquire { op, .. } => Input::AcquireReplied {
                op: *op,
                result: Ok(match won {
                    Some(token) => AcquireOutcome::Won {
                        token,
                        remaining: Duration::from_secs(15),
                    },
                    None => AcquireOutcome::Held {
                        holder: None,
                        token: None,
                        holder_remaining: None,
                    },
                }),
            },
            Command::Release { op, .. } => Input::ReleaseReplied {
                op: *op,
                result: Ok(()),
            },
            Command::Withdraw { op, .. } => Input::WithdrawReplied {
                op: *op,
                result: Ok(()),
            },
            _ => return None,
        })
    }

    /// Drains and counts the outputs (what a driver does after every call).
    pub fn drain_count(&mut self) -> usize {
        std::iter::from_fn(|| self.engine.poll_output()).count()
    }
}
