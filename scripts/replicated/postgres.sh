#!/usr/bin/env bash
# PostgreSQL with a streaming standby on loopback (docs/BACKENDS.md,
# "Replicated deployments"): a second and third cluster of the installed
# server (not the shared one on 5432), the standby made by pg_basebackup,
# with their data in DIR. Run as root (the clusters run as `postgres`).
#
#   postgres.sh DIR up [sync|async]   primary (member 1) and standby (member 2)
#   postgres.sh DIR down|url|leader|kill N|stop N|cont N|start N|promote
#
# `sync` sets synchronous_standby_names='*' on the primary (a commit waits
# for the standby's flush); `async` (the default) does not. `promote` is the
# operator's fail-over: the primary is killed (SIGKILL, so that it cannot
# take writes any more: no split brain), the standby promoted (pg_ctl
# promote), and the old primary rebuilt as a standby of the new one.
# Ports: members 24801-24802 (the single-server tests use 5432, 5433, 6432,
# 55432).
set -euo pipefail
dir=${1:?usage: postgres.sh DIR up|down|url|leader|kill|stop|cont|start|promote [N]}
verb=${2:?usage: postgres.sh DIR VERB [N]}
n=${3:-}
BIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
port() { echo $((24800 + $1)); }
as_pg() { runuser -u postgres -- "$@"; }
pid_of() { head -1 "$dir/p$1/postmaster.pid" 2>/dev/null || true; }
psql_at() { as_pg "$BIN/psql" -h 127.0.0.1 -p "$(port "$1")" -U postgres -d postgres -Atqc "$2"; }

start_member() {
  as_pg "$BIN/pg_ctl" -D "$dir/p$1" -l "$dir/p$1.log" -w -t 60 \
    -o "-p $(port "$1") -k $dir/run -c listen_addresses=127.0.0.1" start >/dev/null
}

# signal_member SIG PID: the postmaster PID first (no new children), then
# its children.
signal_member() {
  kill "-$1" "$2"
  # shellcheck disable=SC2046 # one pid a word
  kill "-$1" $(ps -o pid= --ppid "$2") 2>/dev/null || true
}

# make_standby N FROM: a fresh standby N of member FROM.
make_standby() {
  rm -rf "$dir/p$1"
  as_pg "$BIN/pg_basebackup" -h 127.0.0.1 -p "$(port "$2")" -U postgres -D "$dir/p$1" -X stream -R -c fast
  start_member "$1"
}

case "$verb" in
  up)
    mode=${3:-async}
    mkdir -p "$dir/run"
    chown postgres "$dir" "$dir/run"
    as_pg "$BIN/initdb" -D "$dir/p1" -A trust -U postgres >/dev/null
    {
      echo "wal_level = replica"
      echo "max_wal_senders = 10"
      echo "hot_standby = on"
      echo "fsync = off"
    } >>"$dir/p1/postgresql.conf"
    echo "$mode" >"$dir/mode"
    start_member 1
    as_pg "$BIN/createdb" -h 127.0.0.1 -p "$(port 1)" -U postgres test
    make_standby 2 1
    for _ in $(seq 1 50); do
      if [ "$(psql_at 1 "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'")" = 1 ]; then
        # Synchronous once the standby streams (before, commits would wait).
        if [ "$mode" = sync ]; then
          psql_at 1 "ALTER SYSTEM SET synchronous_standby_names = '*'" >/dev/null
          psql_at 1 "SELECT pg_reload_conf()" >/dev/null
        fi
        exit 0
      fi
      sleep 0.2
    done
    echo "error: the standby in $dir does not stream; logs in $dir/p*.log" >&2
    exit 1
    ;;
  down)
    for i in 1 2; do
      p=$(pid_of "$i")
      [ -n "$p" ] && { signal_member CONT "$p" 2>/dev/null || true; }
      as_pg "$BIN/pg_ctl" -D "$dir/p$i" stop -m immediate >/dev/null 2>&1 || true
    done
    exit 0
    ;;
  url)
    echo "postgres://postgres@127.0.0.1:24801,127.0.0.1:24802/test?target_session_attrs=read-write"
    ;;
  leader)
    for i in 1 2; do
      [ "$(psql_at "$i" "SELECT pg_is_in_recovery()" 2>/dev/null)" = f ] && { echo "$i"; exit 0; }
    done
    exit 1
    ;;
  promote)
    old=$("$0" "$dir" leader)
    new=$((3 - old))
    "$0" "$dir" kill "$old"
    as_pg "$BIN/pg_ctl" -D "$dir/p$new" -w promote >/dev/null
    make_standby "$old" "$new"
    if [ "$(cat "$dir/mode")" = sync ]; then
      psql_at "$new" "ALTER SYSTEM SET synchronous_standby_names = '*'" >/dev/null
      psql_at "$new" "SELECT pg_reload_conf()" >/dev/null
    fi
    ;;
  # Each child of the postmaster (a backend serving a connection, the
  # WAL sender, ...) is in a session of its own: signals go to the
  # postmaster and to each child, so that a frozen member answers on no
  # connection, old or new, and a killed one on none.
  kill) p=$(pid_of "$n"); signal_member KILL "$p"; while kill -0 "$p" 2>/dev/null; do sleep 0.05; done ;;
  stop) signal_member STOP "$(pid_of "$n")" ;;
  cont) signal_member CONT "$(pid_of "$n")" ;;
  start)
    p=$(pid_of "$n")
    if [ -n "$p" ] && kill -0 "$p" 2>/dev/null; then exit 0; fi
    rm -f "$dir/p$n/postmaster.pid"
    start_member "$n"
    ;;
  *) echo "unknown verb $verb" >&2; exit 2 ;;
esac
