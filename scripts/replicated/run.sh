#!/usr/bin/env bash
# The replicated group (docs/BACKENDS.md, "Replicated deployments"): starts
# each replicated deployment on loopback (scripts/replicated/*.sh, data in a
# temporary directory), runs the `replicated` chaos binary of simba-bench on
# it (Simba clients in an election, fenced writes to the single PostgreSQL on
# 127.0.0.1:5432, members killed, frozen, restarted and promoted), then the
# controls that must FAIL (a client that works past its term; with a fence
# that ignores tokens too), and stops the deployment.
#
#   scripts/replicated/run.sh [DURATION [BACKENDS]]
#     (default 60s etcd,zookeeper,redis,postgres; `postgres` runs the
#     synchronous and the asynchronous standby, `postgres-sync` or
#     `postgres-async` one of them)
#
# Reports go to stdout; with SIMBA_REPLICATED_OUT=FILE they are also
# appended to FILE (bench/results/replicated.md is made that way).
# Exit status 1 if a check failed or a control did not.
set -euo pipefail
cd "$(dirname "$0")/../.."
DURATION=${1:-60s}
BACKENDS=${2:-etcd,zookeeper,redis,postgres}
export PATH="$HOME/.cargo/bin:$PATH"
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

PROFILE=${PROFILE:-release}
if [ "$PROFILE" = release ]; then
  cargo build --release -p simba-bench --all-features --bin replicated
else
  cargo build -p simba-bench --all-features --bin replicated
fi
BIN=${CARGO_TARGET_DIR:-target}/$PROFILE/replicated
ensure_postgres
OUT=${SIMBA_REPLICATED_OUT:-/dev/null}

status=0
# run LABEL EXPECT(pass|fail) ARGS...: runs the binary, tees its report.
run() {
  local label=$1 expect=$2 rc=0
  shift 2
  log "$label"
  "$BIN" --label "$label" "$@" | tee -a "$OUT" || rc=$?
  if [ "$expect" = pass ] && [ $rc -ne 0 ]; then
    echo "!! $label: FAILED (exit $rc)"; status=1
  elif [ "$expect" = fail ] && [ $rc -ne 1 ]; then
    echo "!! $label: the control did not fire (exit $rc)"; status=1
  elif [ "$expect" = fail ]; then
    echo "(the control fired, as it must)" | tee -a "$OUT"
  fi
}

# deployment NAME SCRIPT: starts it in a new directory, sets DIR, CTL, URL.
deployment() {
  DIR=$(mktemp -d "/tmp/simba-replicated-$1.XXXXXX")
  CTL="$2 $DIR"
  CLEANUP+=("$CTL down; rm -rf '$DIR'")
  log "starting $1 (data in $DIR)"
  $CTL up
  URL=$($CTL url)
}

for b in ${BACKENDS//,/ }; do
  case "$b" in
    etcd)
      apt_install etcd-server etcd-client
      deployment etcd scripts/replicated/etcd.sh
      common=(--url "$URL" --ctl "$CTL" --lease 2s --down 4s --late 3s)
      run "etcd, 3 members" pass "${common[@]}" --strict --duration "$DURATION" \
        --faults kill-leader,stop-leader,restart-leader,kill,stop,step-down
      run "etcd, control: a client working past its term" fail "${common[@]}" --strict \
        --duration 20s --history-clients 0 --broken-client --faults step-down
      run "etcd, control: that client and a fence ignoring tokens" fail "${common[@]}" --strict \
        --duration 20s --history-clients 0 --broken-client --broken-fence --faults step-down
      ;;
    zookeeper)
      apt_install zookeeperd default-jre-headless
      deployment zookeeper scripts/replicated/zookeeper.sh
      common=(--url "$URL" --ctl "$CTL" --lease 2s --down 4s --late 3s)
      run "ZooKeeper, 3 servers" pass "${common[@]}" --strict --duration "$DURATION" \
        --faults kill-leader,stop-leader,restart-leader,kill,stop,step-down
      run "ZooKeeper, control: a client working past its term" fail "${common[@]}" --strict \
        --duration 20s --history-clients 0 --broken-client --faults step-down
      run "ZooKeeper, control: that client and a fence ignoring tokens" fail "${common[@]}" --strict \
        --duration 20s --history-clients 0 --broken-client --broken-fence --faults step-down
      ;;
    redis)
      deployment redis scripts/replicated/redis.sh
      common=(--url "$URL" --ctl "$CTL" --members 2 --lease 2s --down 4s --late 3s)
      # Asynchronous replication: overlapping terms are counted, not failed;
      # tokens out of order at the fenced resource fail the run.
      run "Redis, primary + replica + 3 Sentinels" pass "${common[@]}" --duration "$DURATION" \
        --faults kill-leader,stop-leader,promote,step-down
      run "Redis, control: a client working past its term and a fence ignoring tokens" fail \
        "${common[@]}" --duration 20s --history-clients 0 --broken-client --broken-fence \
        --faults step-down
      ;;
    postgres | postgres-sync | postgres-async)
      # A primary and a streaming standby (two more clusters of the
      # installed server, ports 24801-24802), reached through the
      # multi-host URL with target_session_attrs=read-write. The fenced
      # resource stays on the single server on 5432: it must outlive the
      # faults done to the coordination backend, so that the checks judge
      # Simba's tokens and not the resource's own fail-over.
      modes=sync,async
      [ "$b" = postgres-sync ] && modes=sync
      [ "$b" = postgres-async ] && modes=async
      for mode in ${modes//,/ }; do
        DIR=$(mktemp -d "/tmp/simba-replicated-postgres-$mode.XXXXXX")
        CTL="scripts/replicated/postgres.sh $DIR"
        CLEANUP+=("$CTL down; rm -rf '$DIR'")
        log "starting PostgreSQL, $mode standby (data in $DIR)"
        $CTL up "$mode"
        URL=$($CTL url)
        common=(--url "$URL" --ctl "$CTL" --members 2 --lease 2s --down 4s --late 3s)
        faults=kill-leader,stop-leader,restart-leader,kill,stop,promote,step-down
        if [ "$mode" = sync ]; then
          # Synchronous replication: a promoted standby has every
          # acknowledged commit, so one valid term at a time is promised.
          run "PostgreSQL, primary + synchronous standby" pass "${common[@]}" --strict \
            --duration "$DURATION" --faults "$faults"
          run "PostgreSQL sync, control: a client working past its term" fail "${common[@]}" \
            --strict --duration 20s --history-clients 0 --broken-client --faults step-down
          run "PostgreSQL sync, control: that client and a fence ignoring tokens" fail \
            "${common[@]}" --strict --duration 20s --history-clients 0 --broken-client \
            --broken-fence --faults step-down
        else
          # Asynchronous: a promotion can lose the last commits, so
          # overlapping terms are counted, not failed; tokens out of order
          # at the fenced resource fail the run.
          run "PostgreSQL, primary + asynchronous standby" pass "${common[@]}" \
            --duration "$DURATION" --faults "$faults"
          run "PostgreSQL async, control: a client working past its term and a fence ignoring tokens" \
            fail "${common[@]}" --duration 20s --history-clients 0 --broken-client --broken-fence \
            --faults step-down
        fi
        $CTL down
      done
      ;;
    *) echo "unknown backend $b" >&2; exit 2 ;;
  esac
done
exit $status
