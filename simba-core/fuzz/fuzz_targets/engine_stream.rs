//! Fuzzes the engine with the input stream of `tests/props.rs`: the bytes
//! decode (via `arbitrary`) into a setup and up to 300 actions, run by the
//! shared harness, which checks every invariant after every step.
//!
//! ```text
//! cd simba-core/fuzz && cargo +nightly fuzz run engine_stream
//! ```
#![no_main]

#[path = "../harness.rs"]
mod harness;

use arbitrary::{Result, Unstructured};
use harness::{Action, Answer, Remaining, Setup, TermPick, TimeMove, TokenPick, Wait};
use libfuzzer_sys::fuzz_target;

fn token_pick(u: &mut Unstructured<'_>) -> Result<TokenPick> {
    Ok(match u.int_in_range(0u8..=7)? {
        0..=2 => TokenPick::Fresh,
        3 | 4 => TokenPick::Current,
        5 | 6 => TokenPick::Stale(u.int_in_range(1u8..=3)?),
        _ => TokenPick::Raw(u.arbitrary()?),
    })
}

fn remaining(u: &mut Unstructured<'_>) -> Result<Remaining> {
    Ok(match u.int_in_range(0u8..=7)? {
        0..=3 => Remaining::Lease,
        4 => Remaining::Zero,
        5 | 6 => Remaining::Millis(u.int_in_range(0u32..=30_000)?),
        _ => Remaining::Huge,
    })
}

fn answer(u: &mut Unstructured<'_>) -> Result<Answer> {
    Ok(match u.int_in_range(0u8..=21)? {
        0..=15 => Answer::Truthful,
        16 | 17 => Answer::Fail,
        18 => Answer::Expired,
        19 => Answer::Held,
        _ => Answer::Won(token_pick(u)?, remaining(u)?),
    })
}

fn term_pick(u: &mut Unstructured<'_>) -> Result<TermPick> {
    Ok(if u.ratio(4u8, 5)? {
        TermPick::Seen(u.arbitrary()?)
    } else {
        TermPick::Raw(u.int_in_range(0u64..=19)?)
    })
}

fn time_move(u: &mut Unstructured<'_>) -> Result<TimeMove> {
    Ok(match u.int_in_range(0u8..=11)? {
        0..=3 => TimeMove::Forward(u.int_in_range(0u32..=3_000)?),
        4 => TimeMove::Forward(u.int_in_range(0u32..=60_000)?),
        5 => TimeMove::Still,
        6 => TimeMove::Back(u.int_in_range(0u32..=5_000)?),
        7 | 8 => TimeMove::Silent(u.int_in_range(0u32..=20_000)?),
        _ => TimeMove::ToTimeout,
    })
}

fn wait(u: &mut Unstructured<'_>) -> Result<Option<Wait>> {
    Ok(match u.int_in_range(0u8..=5)? {
        0..=2 => None,
        3 => Some(Wait::Try),
        4 => Some(Wait::UntilMs(u.int_in_range(0u32..=20_000)?)),
        _ => Some(Wait::Forever),
    })
}

fn action(u: &mut Unstructured<'_>) -> Result<Action> {
    Ok(match u.int_in_range(0u8..=69)? {
        0..=5 => Action::Start {
            name: u.arbitrary()?,
            lock: wait(u)?,
            runs_task: u.arbitrary()?,
        },
        6 => Action::Stop(u.arbitrary()?),
        7 => Action::StepDown(u.arbitrary()?, u.int_in_range(0u32..=10_000)?),
        8 => Action::Close,
        9..=38 => Action::Reply {
            pick: u.arbitrary()?,
            answer: answer(u)?,
            keep: u.ratio(1u8, 10)?,
        },
        39 | 40 => Action::Drop(u.arbitrary()?),
        41 | 42 => Action::Replay(u.arbitrary()?),
        43 => Action::Unknown {
            kind: u.arbitrary()?,
            op: u.int_in_range(0u64..=63)?,
            answer: answer(u)?,
        },
        44 | 45 => Action::Rival {
            name: u.arbitrary()?,
            leave: u.arbitrary()?,
        },
        46 => Action::Broadcast(u.arbitrary()?),
        47..=49 => Action::TaskExited(term_pick(u)?, u.arbitrary()?),
        50 => Action::ElectedRejected(term_pick(u)?),
        51 => Action::RejectNextElected,
        _ => Action::Time(time_move(u)?),
    })
}

fn stream(data: &[u8]) -> Result<(Setup, Vec<Action>)> {
    let mut u = Unstructured::new(data);
    let setup = Setup {
        config: u.int_in_range(0u8..=2)?,
        zookeeper: u.arbitrary()?,
        seed: u.arbitrary()?,
        mutant: 0,
        call_slots: if u.arbitrary()? {
            Some(u.int_in_range(1usize..=2)?)
        } else {
            None
        },
    };
    let mut actions = Vec::new();
    while !u.is_empty() && actions.len() < 300 {
        actions.push(action(&mut u)?);
    }
    Ok((setup, actions))
}

fuzz_target!(|data: &[u8]| {
    let Ok((setup, actions)) = stream(data) else {
        return;
    };
    if harness::run(&setup, &actions).is_err() {
        let e = harness::run_traced(&setup, &actions).unwrap_err();
        panic!("invariant violated: {e}\nsetup {setup:?}\nactions {actions:#?}");
    }
});
