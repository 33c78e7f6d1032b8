#!/usr/bin/env bash
# Runs every test of the workspace, after installing and starting every server
# the tests need. This is the README's test command, and `.ci/run` calls it.
#
# Servers: PostgreSQL (127.0.0.1:5432), MariaDB (127.0.0.1:3306) and Redis
# (127.0.0.1:6379) are started if they are not running. Each file in
# scripts/servers.d/ adds one more server (installed from Debian packages when
# missing, started on loopback with its data in a temporary directory, and
# stopped again when this script exits if this script started it).
#
# A test whose server is unreachable FAILS. To run without some servers, list
# them in SIMBA_TEST_SKIP_SERVERS (e.g. `postgres,mysql`, or `all`): those
# servers are not started, each skipped test writes a line past the test
# harness's capture, and the list is printed before and after the run.
#
# SIMBA_TEST_REPLICATED=1 adds the replicated group after the tests (long
# form, about 12 minutes): scripts/replicated/run.sh starts a 3-member etcd
# cluster, a 3-server ZooKeeper ensemble, Redis with Sentinel and a
# PostgreSQL primary with a synchronous, then an asynchronous, streaming
# standby on loopback and runs Simba's chaos checks on each
# (docs/BACKENDS.md, "Replicated deployments").
#
# Extra arguments are passed to `cargo nextest run` (or `cargo test`).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"

# shellcheck source=scripts/lib.sh
source scripts/lib.sh

SKIP_SERVERS="${SIMBA_TEST_SKIP_SERVERS:-}"
skipping() { [[ ",$SKIP_SERVERS," == *",$1,"* || ",$SKIP_SERVERS," == *",all,"* ]]; }
skip_banner() {
  [ -n "$SKIP_SERVERS" ] || return 0
  printf '\n!!!!!!!! SIMBA_TEST_SKIP_SERVERS=%s: the tests that need these servers\n' "$SKIP_SERVERS"
  printf '!!!!!!!! were SKIPPED (they passed without checking anything). !!!!!!!!\n\n'
}
skip_banner
CLEANUP+=("skip_banner")

skipping postgres || ensure_postgres
skipping mysql || ensure_mariadb
skipping redis || ensure_redis
for f in scripts/servers.d/*.sh; do
  [ -e "$f" ] || continue
  # shellcheck disable=SC1090
  source "$f"
done

# The library crates (published; the CLI, the benchmark and the simulator
# are not): `cargo package` builds each from its own package, as crates.io
# users would get it.
PUBLISHED="-p simba-core -p simba-backends -p simba-client -p simba-tokio -p simba-async-std"
# cargo extracts the packaged crates once per name and version into its
# local-registry cache, and fingerprints a registry crate by its version
# only: a later run of the same version would verify stale sources or stale
# builds. So that cache of Simba's own crates goes first, and the packages
# are built in a target directory of their own whose Simba artifacts are
# removed (the dependencies' builds are kept).
PACKAGE_TARGET=target/package-verify
clean_package_cache() {
  rm -rf "${CARGO_HOME:-$HOME/.cargo}"/registry/src/-*/simba-* target/package
  rm -rf "$PACKAGE_TARGET"/debug/.fingerprint/simba-* "$PACKAGE_TARGET"/debug/deps/*simba_* \
    "$PACKAGE_TARGET"/debug/build/simba-*
}

# cargo-nextest runs the test binaries side by side (settings and why in
# .config/nextest.toml); it does not run doc examples, so `cargo test --doc`
# follows. Without nextest, plain `cargo test` runs everything, one test
# binary at a time (slower, same tests).
if cargo nextest --version >/dev/null 2>&1; then
  log "running every test: cargo nextest run --workspace --all-features $*"
  status=0
  cargo nextest run --workspace --all-features --no-fail-fast "$@" || status=$?
  log "running every doc example: cargo test --workspace --all-features --doc"
  cargo test --workspace --all-features --doc || status=$?
  log "checking that each library crate packages and builds from its package alone"
  clean_package_cache
  CARGO_TARGET_DIR="$PACKAGE_TARGET" cargo package $PUBLISHED --allow-dirty --quiet || status=$?
  if [ "${SIMBA_TEST_REPLICATED:-}" = 1 ]; then
    log "the replicated group: scripts/replicated/run.sh"
    PROFILE=debug scripts/replicated/run.sh || status=$?
  fi
  exit "$status"
else
  log "cargo-nextest not found: running every test with cargo test $*"
  cargo test --workspace --all-features "$@"
  log "checking that each library crate packages and builds from its package alone"
  clean_package_cache
  CARGO_TARGET_DIR="$PACKAGE_TARGET" cargo package $PUBLISHED --allow-dirty --quiet
  if [ "${SIMBA_TEST_REPLICATED:-}" = 1 ]; then
    log "the replicated group: scripts/replicated/run.sh"
    PROFILE=debug scripts/replicated/run.sh
  fi
fi
