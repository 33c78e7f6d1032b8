//! Metrics through the `metrics` facade. Labels have bounded cardinality:
//! the lease name (chosen by the application), the revoke reason, the
//! backend command and the session state; never a session id or token.
//!
//! | metric | kind | labels |
//! |---|---|---|
//! | `simba_renewals_total` | counter | |
//! | `simba_renewal_failures_total` | counter | |
//! | `simba_backend_failures_total` | counter | `command` |
//! | `simba_terms_started_total` | counter | `name` |
//! | `simba_terms_ended_total` | counter | `name`, `reason` |
//! | `simba_handover_seconds` | histogram | `name` |
//! | `simba_leader_seconds` | histogram | `name` |
//! | `simba_is_leader` | gauge (0/1) | `name` |
//! | `simba_session_live` | gauge (0/1) | |
//! | `simba_task_exits_total` | counter | `name`, `outcome`, `action` |

use simba_core::{RevokeReason, SessionState, TaskExitAction, TaskOutcome};
use std::time::Duration;

pub(crate) fn renewal() {
    metrics::counter!("simba_renewals_total").increment(1);
}

pub(crate) fn backend_failure(command: &'static str) {
    if command == "renew" {
        metrics::counter!("simba_renewal_failures_total").increment(1);
    }
    metrics::counter!("simba_backend_failures_total", "command" => command).increment(1);
}

pub(crate) fn term_started(name: &str) {
    metrics::counter!("simba_terms_started_total", "name" => name.to_owned()).increment(1);
    metrics::gauge!("simba_is_leader", "name" => name.to_owned()).set(1.0);
}

pub(crate) fn term_ended(name: &str, reason: RevokeReason) {
    metrics::counter!("simba_terms_ended_total", "name" => name.to_owned(), "reason" => reason.as_str())
        .increment(1);
    metrics::gauge!("simba_is_leader", "name" => name.to_owned()).set(0.0);
}

pub(crate) fn leader_time(name: &str, d: Duration) {
    metrics::histogram!("simba_leader_seconds", "name" => name.to_owned()).record(d.as_secs_f64());
}

pub(crate) fn handover(name: &str, d: Duration) {
    metrics::histogram!("simba_handover_seconds", "name" => name.to_owned())
        .record(d.as_secs_f64());
}

pub(crate) fn session_state(state: SessionState) {
    let live = if state == SessionState::Live {
        1.0
    } else {
        0.0
    };
    metrics::gauge!("simba_session_live").set(live);
}

/// S6.5: a leader task ended on its own while its term was held.
pub(crate) fn task_exit(name: &str, outcome: TaskOutcome, action: TaskExitAction) {
    metrics::counter!(
        "simba_task_exits_total",
        "name" => name.to_owned(),
        "outcome" => outcome.as_str(),
        "action" => action.as_str()
    )
    .increment(1);
}
