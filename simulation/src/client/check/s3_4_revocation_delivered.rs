//! `revocation delivered (S3.4, S6.3)`: once a client has reported a term's
//! revocation (`ClientEvent::Revoked`), the term's handle says it is
//! revoked: a task step never sees its term unrevoked after that.

use super::{Checker, Seen};
use std::collections::BTreeSet;

/// The `revocation delivered (S3.4, S6.3)` checker.
#[derive(Default)]
pub(super) struct RevocationDelivered {
    /// Terms whose revocation a client reported: (name, token).
    reported: BTreeSet<(String, u64)>,
}

impl Checker for RevocationDelivered {
    fn observe(&mut self, _node: usize, seen: &Seen<'_>) -> Option<String> {
        match *seen {
            Seen::RevocationReported { name, token } => {
                let _ = self.reported.insert((name.to_owned(), token));
                None
            }
            Seen::Step { term } => {
                let (name, token) = (term.name(), term.token());
                let reported = self.reported.contains(&(name.to_owned(), token));
                (reported && term.revoke_reason().is_none()).then(|| {
                    format!(
                        "revocation delivered (S3.4, S6.3): the task of {name} token {token} \
                         still runs with its term not revoked (valid: {}) after its client \
                         reported the revocation",
                        term.is_valid()
                    )
                })
            }
            _ => None,
        }
    }
}
