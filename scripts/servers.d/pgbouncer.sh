# PgBouncer on 127.0.0.1:6432 in transaction pooling mode, in front of the
# PostgreSQL test server (127.0.0.1:5432), for the PostgreSQL backend's tests
# through a transaction-pooling proxy (simba-backends/tests/pgbouncer.rs).
# Sourced by scripts/test.sh after scripts/lib.sh. Installs the Debian
# package `pgbouncer` when missing (its own service is left alone), starts a
# private instance with its configuration in a temporary directory unless
# something already listens on 6432, and stops it when test.sh exits.
# Skipped with SIMBA_TEST_SKIP_SERVERS listing `pgbouncer` (or `postgres`).

ensure_pgbouncer() {
  have_port 6432 && return 0
  apt_install pgbouncer
  local dir
  dir="$(mktemp -d -t simba-pgbouncer.XXXXXX)"
  # Any user, no password (auth_type = any), connected to the server as
  # postgres (trust auth there); transaction pooling, the mode that keeps
  # no session state.
  # extra_float_digits is a startup parameter sqlx sends by default:
  # ignoring it lets clients that do not turn it off connect too.
  cat >"$dir/pgbouncer.ini" <<INI
[databases]
test = host=127.0.0.1 port=5432 dbname=test user=postgres
postgres = host=127.0.0.1 port=5432 dbname=postgres user=postgres
* = host=127.0.0.1 port=5432 user=postgres

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = 6432
unix_socket_dir =
auth_type = any
pool_mode = transaction
max_client_conn = 1000
default_pool_size = 20
ignore_startup_parameters = extra_float_digits
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
INI
  log "starting PgBouncer (transaction pooling; files in $dir)"
  local user=
  # PgBouncer refuses to run as root.
  [ "$(id -u)" -eq 0 ] && { chown -R postgres "$dir"; user="runuser -u postgres --"; }
  $user /usr/sbin/pgbouncer -d "$dir/pgbouncer.ini"
  CLEANUP+=("kill \$(cat '$dir/pgbouncer.pid' 2>/dev/null) 2>/dev/null; sleep 0.5; rm -rf '$dir'")
  wait_port 6432 30 PgBouncer
}
skipping pgbouncer || skipping postgres || ensure_pgbouncer
