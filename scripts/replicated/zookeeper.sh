#!/usr/bin/env bash
# A 3-server ZooKeeper ensemble on loopback for the replicated chaos runs
# (docs/BACKENDS.md, "Replicated deployments"), from the jars of the Debian
# package zookeeperd (its service and /etc/zookeeper are never touched), with
# its data in DIR:
#
#   zookeeper.sh DIR up|down|url|leader|kill N|stop N|cont N|start N
#
# (as scripts/replicated/etcd.sh). Ports: clients 24181-24183, quorum
# 24281-24283, leader election 24381-24383 (the single-server tests use
# 2181-2189, 2282, 2389, 2390).
set -euo pipefail
dir=${1:?usage: zookeeper.sh DIR up|down|url|leader|kill|stop|cont|start [N]}
verb=${2:?usage: zookeeper.sh DIR VERB [N]}
n=${3:-}

start_member() {
  local i=$1
  mkdir -p "$dir/z$i/data"
  echo "$i" >"$dir/z$i/data/myid"
  {
    # As scripts/zookeeper-server.sh: a 200 ms tick, sessions of 1-60 s.
    echo "tickTime=200"
    echo "initLimit=50"
    echo "syncLimit=10"
    echo "dataDir=$dir/z$i/data"
    echo "clientPort=$((24180 + i))"
    echo "clientPortAddress=127.0.0.1"
    echo "maxClientCnxns=0"
    echo "minSessionTimeout=1000"
    echo "maxSessionTimeout=60000"
    echo "admin.enableServer=false"
    echo "4lw.commands.whitelist=srvr,ruok"
    echo "forceSync=no"
    for j in 1 2 3; do
      echo "server.$j=127.0.0.1:$((24280 + j)):$((24380 + j))"
    done
  } >"$dir/z$i/zoo.cfg"
  local cp=/usr/share/java/zookeeper.jar
  [ -r /usr/share/java/netty-codec.jar ] && cp="$cp:/usr/share/java/netty-codec.jar"
  [ -r /usr/share/java/slf4j-nop.jar ] && cp="$cp:/usr/share/java/slf4j-nop.jar"
  setsid java -Xmx192m -XX:+UseSerialGC -Dzookeeper.admin.enableServer=false \
    -Dzookeeper.jmx.log4j.disable=true -cp "$cp" \
    org.apache.zookeeper.server.quorum.QuorumPeerMain "$dir/z$i/zoo.cfg" \
    >>"$dir/z$i.log" 2>&1 </dev/null &
  echo $! >"$dir/z$i.pid"
}

pid_of() { cat "$dir/z$1.pid" 2>/dev/null || true; }

# `srvr` on member $1: its mode (leader, follower) or nothing.
mode() {
  timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$((24180 + $1)); printf srvr >&3; cat <&3" 2>/dev/null \
    | sed -n 's/^Mode: //p'
}

case "$verb" in
  up)
    if [ ! -r /usr/share/java/zookeeper.jar ]; then
      echo "error: /usr/share/java/zookeeper.jar is missing: install zookeeperd" >&2
      exit 1
    fi
    mkdir -p "$dir"
    for i in 1 2 3; do start_member "$i"; done
    for _ in $(seq 1 120); do
      for i in 1 2 3; do [ "$(mode "$i")" = leader ] && exit 0; done
      sleep 0.5
    done
    echo "error: the ZooKeeper ensemble in $dir elected no leader; logs in $dir/z*.log" >&2
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
  url) echo "zk://127.0.0.1:24181,127.0.0.1:24182,127.0.0.1:24183/simba-replicated" ;;
  leader)
    for i in 1 2 3; do [ "$(mode "$i")" = leader ] && { echo "$i"; exit 0; }; done
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
