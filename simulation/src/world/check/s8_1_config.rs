//! `config (S8.1)`: every configuration the seed draws is one the builder
//! accepts (the draw keeps within S8.1's constraints).

use super::{Checker, Cx, Observed, Out};

/// The `config (S8.1)` checker.
#[derive(Default)]
pub(super) struct Config;

impl Checker for Config {
    fn observe(&mut self, ev: &Observed<'_>, _cx: &Cx<'_>, out: &mut Out<'_>) {
        if let Observed::ConfigRefused { error } = ev {
            out.violation("config (S8.1)", format!("drawn config refused: {error}"));
        }
    }
}
