//! For tests (this crate's, the client's, the CLI's): what a test does when a
//! server it needs is not reachable. It **fails**,
//! unless the run opted out of that server with
//! `SIMBA_TEST_SKIP_SERVERS=postgres,mysql,...` (or `all`). An opted-out test
//! passes without checking anything, so every such skip is written straight
//! to the process's standard error (not through `eprintln!`, which the test
//! harness captures), and Simba's `scripts/test.sh` repeats the list in its
//! summary. Feature `testkit`.

use std::io::Write;

/// The environment variable that lists the servers a run may do without.
pub const SKIP_SERVERS_VAR: &str = "SIMBA_TEST_SKIP_SERVERS";

/// The server kinds listed in [`SKIP_SERVERS_VAR`] (lower case, trimmed).
pub fn skipped_servers() -> Vec<String> {
    std::env::var(SKIP_SERVERS_VAR)
        .unwrap_or_default()
        .split(',')
        .map(|s| s.trim().to_ascii_lowercase())
        .filter(|s| !s.is_empty())
        .collect()
}

/// Whether the run opted out of server `kind` (`postgres`, `mysql`, ...).
pub fn server_skipped(kind: &str) -> bool {
    skipped_servers()
        .iter()
        .any(|s| s == "all" || s.eq_ignore_ascii_case(kind))
}

/// Called by a test (`test`) whose server `kind` (described as `what`) is
/// unreachable with `error`. Returns if the run opted out of `kind` — after
/// writing a line that the harness does not capture — and the test must then
/// return without checking anything.
///
/// # Panics
/// If the run did not opt out of `kind`: a missing server is a failure.
#[allow(clippy::panic)] // failing the calling test is its purpose
pub fn missing_server(kind: &str, what: &str, test: &str, error: &dyn std::fmt::Display) {
    if server_skipped(kind) {
        let line = format!(
            "\n!!!!!!!! SKIPPED {test}: {what} unreachable ({error}); \
             {SKIP_SERVERS_VAR} lists `{kind}` !!!!!!!!\n"
        );
        // Straight to the file descriptor: the test harness captures
        // `eprintln!`, not this.
        let _ = std::io::stderr().write_all(line.as_bytes());
        return;
    }
    panic!(
        "{test}: {what} is required but unreachable ({error}). Start it \
         (in Simba's repository scripts/test.sh starts every server) or opt out with \
         {SKIP_SERVERS_VAR}={kind}"
    );
}
