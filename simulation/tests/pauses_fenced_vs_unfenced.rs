//! Jepsen's lock-set lesson: under process pauses (GC, SIGSTOP) a holder
//! checks its term, pauses, and writes after a newer holder. The unfenced
//! register accepts such stale writes; the fenced register (S3.2 tokens)
//! accepts none of them (it refuses them), and every checker passes.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use simulation::{runner::run_many, Mode};

#[test]
fn pauses_show_stale_writes_only_without_fencing() {
    let s = run_many(Mode::Pauses, 0, 60, 2);
    println!("{s}");
    assert_eq!(s.seeds, 60, "every seed ran");
    assert_eq!(s.violations(), 0, "{s}");
    assert!(
        s.unfenced_anomalies > 0,
        "the unfenced register never saw a stale write: the pauses prove nothing"
    );
    // The fenced register accepted not one stale write (the same writes,
    // in the same order, as the unfenced one).
    assert_eq!(s.fenced_stale_accepted, 0, "{s}");
    assert!(s.fenced_rejections > 0, "{s}");
}
