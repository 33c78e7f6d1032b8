#!/usr/bin/env bash
# A 3-member etcd cluster on loopback for the replicated chaos runs
# (docs/BACKENDS.md, "Replicated deployments"), from the Debian package
# etcd-server, with its data in DIR:
#
#   etcd.sh DIR up                 start members 1-3, wait until healthy
#   etcd.sh DIR down               stop every member, remove nothing
#   etcd.sh DIR url                the Simba URL (every member's endpoint)
#   etcd.sh DIR leader             the number of the current leader (1-3)
#   etcd.sh DIR kill|stop|cont|start N
#                                  SIGKILL / SIGSTOP / SIGCONT / (re)start member N
#
# Ports: clients 24791-24793, peers 24801-24803 (the single-server tests
# use 2379/2380 and 23791-23793).
set -euo pipefail
dir=${1:?usage: etcd.sh DIR up|down|url|leader|kill|stop|cont|start [N]}
verb=${2:?usage: etcd.sh DIR VERB [N]}
n=${3:-}
client() { echo $((24790 + $1)); }
peer() { echo $((24800 + $1)); }
cluster="m1=http://127.0.0.1:24801,m2=http://127.0.0.1:24802,m3=http://127.0.0.1:24803"
endpoints="http://127.0.0.1:24791,http://127.0.0.1:24792,http://127.0.0.1:24793"

start_member() {
  local i=$1 state=new
  [ -d "$dir/m$i/member" ] && state=existing
  mkdir -p "$dir/m$i"
  # Short heartbeat and election timeout: a leader's loss is noticed in
  # about a second, as in a LAN deployment tuned for fast fail-over.
  setsid etcd --name "m$i" --data-dir "$dir/m$i" \
    --listen-client-urls "http://127.0.0.1:$(client "$i")" \
    --advertise-client-urls "http://127.0.0.1:$(client "$i")" \
    --listen-peer-urls "http://127.0.0.1:$(peer "$i")" \
    --initial-advertise-peer-urls "http://127.0.0.1:$(peer "$i")" \
    --initial-cluster "$cluster" --initial-cluster-state "$state" \
    --initial-cluster-token simba-replicated \
    --heartbeat-interval 100 --election-timeout 1000 \
    >>"$dir/m$i.log" 2>&1 </dev/null &
  echo $! >"$dir/m$i.pid"
}

pid_of() { cat "$dir/m$1.pid" 2>/dev/null || true; }

case "$verb" in
  up)
    mkdir -p "$dir"
    for i in 1 2 3; do start_member "$i"; done
    for _ in $(seq 1 60); do
      if ETCDCTL_API=3 etcdctl --endpoints="$endpoints" endpoint health >/dev/null 2>&1; then
        exit 0
      fi
      sleep 0.5
    done
    echo "error: the etcd cluster in $dir is not healthy; logs in $dir/m*.log" >&2
    exit 1
    ;;
  down)
    for i in 1 2 3; do
      p=$(pid_of "$i")
      [ -n "$p" ] && { kill -CONT "$p" 2>/dev/null; kill "$p" 2>/dev/null; } || true
    done
    for i in 1 2 3; do
      p=$(pid_of "$i")
      [ -n "$p" ] && while kill -0 "$p" 2>/dev/null; do sleep 0.1; done
    done
    exit 0
    ;;
  url) echo "etcd://127.0.0.1:24791,127.0.0.1:24792,127.0.0.1:24793/simba-replicated" ;;
  leader)
    # The member whose status says it is the leader (frozen members time out).
    for i in 1 2 3; do
      out=$(ETCDCTL_API=3 etcdctl --endpoints="http://127.0.0.1:$(client "$i")" \
        --command-timeout=1s endpoint status -w json 2>/dev/null) || continue
      id=$(grep -o '"member_id":[0-9]*' <<<"$out" | head -1 | cut -d: -f2)
      lead=$(grep -o '"leader":[0-9]*' <<<"$out" | head -1 | cut -d: -f2)
      if [ -n "$id" ] && [ "$id" = "$lead" ]; then echo "$i"; exit 0; fi
    done
    exit 1
    ;;
  kill) p=$(pid_of "$n"); kill -KILL "$p"; while kill -0 "$p" 2>/dev/null; do sleep 0.05; done ;;
  stop) kill -STOP "$(pid_of "$n")" ;;
  cont) kill -CONT "$(pid_of "$n")" ;;
  start)
    p=$(pid_of "$n")
    if [ -n "$p" ] && kill -0 "$p" 2>/dev/null; then exit 0; fi
    start_member "$n"
    ;;
  *) echo "unknown verb $verb" >&2; exit 2 ;;
esac
