#!/usr/bin/env bash
# Runs one standalone ZooKeeper in the foreground, for tests:
#   scripts/zookeeper-server.sh PORT DATADIR [zoo.cfg lines...]
# PORT 0 opens no plain-text client port (for a TLS-only server whose
# `secureClientPort` is among the extra lines).
# It writes its own DATADIR/zoo.cfg (loopback only, admin server off, data and
# log in DATADIR) and runs the Debian package's server classes with java; the
# Debian service and /etc/zookeeper are never touched. Extra arguments are
# appended to zoo.cfg (for example `maxSessionTimeout=4000`).
#
# Defaults chosen for tests: tickTime=200 (expiry is checked every 200 ms),
# session timeouts from 1 s to 60 s, four-letter words `srvr` and `ruok`,
# forceSync=no (test data is thrown away).
set -euo pipefail
port=${1:?usage: zookeeper-server.sh PORT DATADIR [cfg lines...]}
dir=${2:?usage: zookeeper-server.sh PORT DATADIR [cfg lines...]}
shift 2
mkdir -p "$dir/data"
{
  echo "tickTime=200"
  echo "dataDir=$dir/data"
  if [ "$port" != 0 ]; then
    echo "clientPort=$port"
    echo "clientPortAddress=127.0.0.1"
  fi
  echo "maxClientCnxns=0"
  echo "minSessionTimeout=1000"
  echo "maxSessionTimeout=60000"
  echo "admin.enableServer=false"
  echo "4lw.commands.whitelist=srvr,ruok"
  echo "autopurge.purgeInterval=0"
  # Test data is thrown away: do not wait for the disk flush on every write.
  echo "forceSync=no"
  for line in "$@"; do echo "$line"; done
} >"$dir/zoo.cfg"
jar=/usr/share/java/zookeeper.jar
if [ ! -r "$jar" ]; then
  echo "error: $jar is missing: install the Debian package zookeeperd" >&2
  exit 1
fi
# zookeeper.jar's manifest lists its dependencies; slf4j-nop silences logging.
# The manifest of Debian's 3.8 lists netty-handler but not netty-codec, which
# holds the base class of netty's SslHandler: without it the Netty connection
# factory (the one that serves `secureClientPort`) fails at the first TLS
# connection. Both come with libnetty-java, a dependency of the package.
cp="$jar"
[ -r /usr/share/java/netty-codec.jar ] && cp="$cp:/usr/share/java/netty-codec.jar"
[ -r /usr/share/java/slf4j-nop.jar ] && cp="$cp:/usr/share/java/slf4j-nop.jar"
exec java -Xmx256m -XX:+UseSerialGC -Dzookeeper.admin.enableServer=false \
  -Dzookeeper.jmx.log4j.disable=true -cp "$cp" \
  org.apache.zookeeper.server.ZooKeeperServerMain "$dir/zoo.cfg"
