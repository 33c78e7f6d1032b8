//! `fenced register`: every task writes to two registers per name, one
//! unfenced and one fenced (it refuses tokens below the highest it has
//! seen, S3.2, S9). The fenced register must never accept a write of an
//! older term after a newer term's; the unfenced one may, and its stale
//! writes are counted (they show what fencing is for).

use super::{Checker, Cx, Observed, Out};
use simba_core::{LeaseName, Token};
use std::collections::BTreeMap;

#[derive(Clone, Debug, Default)]
struct Registers {
    fenced_max: Option<Token>,
    fenced_last_order: Option<u64>,
    unfenced_last_order: Option<u64>,
}

/// The `fenced register` checker (and the registers).
#[derive(Default)]
pub(super) struct FencedRegister {
    registers: BTreeMap<LeaseName, Registers>,
}

impl Checker for FencedRegister {
    fn observe(&mut self, ev: &Observed<'_>, _cx: &Cx<'_>, out: &mut Out<'_>) {
        let Observed::WriteArrives { name, order, token } = *ev else {
            return;
        };
        out.report.writes += 1;
        let r = self.registers.entry(name.clone()).or_default();
        // The unfenced register takes every write.
        match r.unfenced_last_order {
            Some(last) if order < last => out.report.unfenced_anomalies += 1,
            _ => r.unfenced_last_order = Some(order),
        }
        // The fenced register refuses tokens below the highest it has seen.
        if r.fenced_max.is_some_and(|m| token < m) {
            out.report.fenced_rejections += 1;
            return;
        }
        r.fenced_max = Some(token);
        let stale = r.fenced_last_order.is_some_and(|last| order < last);
        r.fenced_last_order = Some(r.fenced_last_order.map_or(order, |l| l.max(order)));
        if stale {
            out.report.fenced_stale_accepted += 1;
            out.violation(
                "fenced register",
                format!("{name}: accepted a write of an older term (token {token}) after a newer term's"),
            );
        }
    }
}
