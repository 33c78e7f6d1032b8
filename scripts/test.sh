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
# Extra arguments are passed to `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"

# shellcheck source=scripts/lib.sh
source scripts/lib.sh

ensure_postgres
ensure_mariadb
ensure_redis
for f in scripts/servers.d/*.sh; do
  [ -e "$f" ] || continue
  # shellcheck disable=SC1090
  source "$f"
done

log "running every test: cargo test --workspace --all-features $*"
cargo test --workspace --all-features "$@"
