//! Helpers shared by the benches.
#![allow(dead_code)]

use simba_backends::Backend;
use simba_core::SessionId;
use std::time::Duration;

/// The iteration count: `SIMBA_BENCH_ITERS`, default 1000.
pub fn iters<T: std::str::FromStr + From<u16>>() -> T {
    std::env::var("SIMBA_BENCH_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| T::from(1000))
}

/// Opens a session with leases of `lease` on `b`.
pub async fn session<B: Backend + ?Sized>(b: &B, lease: Duration) -> SessionId {
    b.open_session(lease).await.unwrap().session
}

/// The median of `v` (zero when empty).
pub fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

/// `d` in microseconds.
pub fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}
