//! `term validity (S3.3)`: a term is no longer valid once a later term of
//! its lease has started a task (or a lock holder's work).

use super::{Checker, Latest, Seen};

/// The `term validity (S3.3)` checker.
#[derive(Default)]
pub(super) struct TermValidity {
    latest: Latest,
}

impl Checker for TermValidity {
    fn observe(&mut self, _node: usize, seen: &Seen<'_>) -> Option<String> {
        match *seen {
            Seen::Started { name, token } => {
                self.latest.started(name, token);
                None
            }
            Seen::Step { term } if term.is_valid() => {
                let (name, token) = (term.name(), term.token());
                let later = self.latest.later_than(name, token)?;
                Some(format!(
                    "term validity (S3.3): the term of {name} token {token} is still valid \
                     while token {later} has started"
                ))
            }
            _ => None,
        }
    }
}
