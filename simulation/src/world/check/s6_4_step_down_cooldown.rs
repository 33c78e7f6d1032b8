//! `step_down cooldown (S6.4)`: after `step_down(cooldown)` completes, the
//! node is not elected for the name before the cooldown ends (on its clock).

use super::{Api, Checker, Cx, Observed, Out};

/// The `step_down cooldown (S6.4)` checker.
#[derive(Default)]
pub(super) struct StepDownCooldown;

impl Checker for StepDownCooldown {
    fn observe(&mut self, ev: &Observed<'_>, _cx: &Cx<'_>, out: &mut Out<'_>) {
        let Observed::Elected {
            node,
            term,
            api: Some(Api::Election {
                cooldown_until: Some(until),
            }),
            local,
        } = ev
        else {
            return;
        };
        if local < until {
            out.violation(
                "step_down cooldown (S6.4)",
                format!("node {node} elected for {} during its cooldown", term.name),
            );
        }
    }
}
