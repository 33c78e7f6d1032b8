#!/usr/bin/env bash
# Redis with Sentinel on loopback for the replicated chaos runs
# (docs/BACKENDS.md, "Replicated deployments"): a primary and a replica
# (members 1 and 2, redis-server) and three Sentinels (redis-sentinel)
# watching them as service `simba`, with their files in DIR. No
# persistence (as the single test server).
#
#   redis.sh DIR up|down|url|leader|kill N|stop N|cont N|start N|promote
#
# `leader` is the member Sentinel names primary; `promote` is a manual
# fail-over (SENTINEL FAILOVER: the replica is promoted, the old primary
# made its replica). Ports: members 24379-24380, Sentinels 24391-24393 (the
# single-server tests use 6379, 6380, 6394, 6399).
set -euo pipefail
dir=${1:?usage: redis.sh DIR up|down|url|leader|kill|stop|cont|start|promote [N]}
verb=${2:?usage: redis.sh DIR VERB [N]}
n=${3:-}
port() { echo $((24378 + $1)); }
sport() { echo $((24390 + $1)); }

start_member() {
  local i=$1 extra=()
  # The replica of a fresh deployment follows member 1; a restarted member
  # follows whoever Sentinel names primary (Sentinel would reconfigure it
  # anyway; this spares the window where it is an empty primary).
  if [ "${2:-}" = fresh ]; then
    [ "$i" = 2 ] && extra=(--replicaof 127.0.0.1 "$(port 1)")
  else
    local p
    p=$(redis-cli -p "$(sport 1)" --raw SENTINEL get-master-addr-by-name simba 2>/dev/null | sed -n 2p)
    [ -n "$p" ] && [ "$p" != "$(port "$i")" ] && extra=(--replicaof 127.0.0.1 "$p")
  fi
  setsid redis-server --bind 127.0.0.1 --port "$(port "$i")" --save "" --appendonly no \
    --dir "$dir" --dbfilename "r$i.rdb" --logfile "$dir/r$i.log" \
    --pidfile "$dir/r$i.pid" --daemonize no "${extra[@]}" </dev/null >/dev/null 2>&1 &
  echo $! >"$dir/r$i.pid"
}

start_sentinel() {
  local i=$1
  cat >"$dir/s$i.conf" <<EOC
port $(sport "$i")
bind 127.0.0.1
dir $dir
logfile $dir/s$i.log
sentinel monitor simba 127.0.0.1 $(port 1) 2
sentinel down-after-milliseconds simba 1000
sentinel failover-timeout simba 4000
sentinel parallel-syncs simba 1
EOC
  setsid redis-server "$dir/s$i.conf" --sentinel </dev/null >/dev/null 2>&1 &
  echo $! >"$dir/s$i.pid"
}

pid_of() { cat "$dir/$1.pid" 2>/dev/null || true; }
stop_pid() {
  local p=$1
  [ -n "$p" ] || return 0
  kill -CONT "$p" 2>/dev/null || true
  kill "$p" 2>/dev/null || true
  while kill -0 "$p" 2>/dev/null; do sleep 0.05; done
}

case "$verb" in
  up)
    mkdir -p "$dir"
    start_member 1 fresh
    start_member 2 fresh
    for _ in $(seq 1 50); do
      redis-cli -p "$(port 2)" INFO replication 2>/dev/null | grep -q 'master_link_status:up' && break
      sleep 0.2
    done
    for i in 1 2 3; do start_sentinel "$i"; done
    for _ in $(seq 1 100); do
      # Every Sentinel knows the replica and the other Sentinels.
      ok=1
      for i in 1 2 3; do
        out=$(redis-cli -p "$(sport "$i")" SENTINEL master simba 2>/dev/null | tr '\n' ' ')
        [[ $out == *"num-slaves 1 "* && $out == *"num-other-sentinels 2 "* ]] || ok=0
      done
      [ $ok = 1 ] && exit 0
      sleep 0.2
    done
    echo "error: the Sentinels in $dir did not settle; logs in $dir/*.log" >&2
    exit 1
    ;;
  down)
    for i in 1 2 3; do stop_pid "$(pid_of "s$i")"; done
    for i in 1 2; do stop_pid "$(pid_of "r$i")"; done
    exit 0
    ;;
  url) echo "redis+sentinel://127.0.0.1:24391,127.0.0.1:24392,127.0.0.1:24393/simba/0" ;;
  leader)
    for i in 1 2 3; do
      p=$(redis-cli -p "$(sport "$i")" --raw SENTINEL get-master-addr-by-name simba 2>/dev/null | sed -n 2p) || continue
      [ -n "$p" ] && { echo $((p - 24378)); exit 0; }
    done
    exit 1
    ;;
  promote) redis-cli -p "$(sport 1)" SENTINEL FAILOVER simba >/dev/null ;;
  kill) p=$(pid_of "r$n"); kill -KILL "$p"; while kill -0 "$p" 2>/dev/null; do sleep 0.05; done ;;
  stop) kill -STOP "$(pid_of "r$n")" ;;
  cont) kill -CONT "$(pid_of "r$n")" ;;
  start)
    p=$(pid_of "r$n")
    if [ -n "$p" ] && kill -0 "$p" 2>/dev/null; then exit 0; fi
    start_member "$n"
    ;;
  *) echo "unknown verb $verb" >&2; exit 2 ;;
esac
