# ZooKeeper on 127.0.0.1:2181 for the zookeeper backend's tests (sourced by
# scripts/test.sh). Installs the Debian package `zookeeperd` when missing (its
# own service is left alone), starts a standalone server with its data in a
# temporary directory unless something already listens on 2181, waits until a
# client can open a session, and stops what it started when test.sh exits.
# Tests that stop or restart ZooKeeper start private servers on 2182-2189
# through scripts/zookeeper-server.sh.

# zk_session_opens (a client session opens on a port) is in scripts/lib.sh.

ensure_zookeeper() {
  if have_port 2181; then
    zk_session_opens 2181 && return 0
    echo "error: 127.0.0.1:2181 is taken by something that is not ZooKeeper" >&2
    return 1
  fi
  apt_install zookeeperd default-jre-headless
  local dir
  dir=$(mktemp -d /tmp/simba-zk.XXXXXX)
  log "starting ZooKeeper on 127.0.0.1:2181 (data in $dir)"
  scripts/zookeeper-server.sh 2181 "$dir" >"$dir/server.log" 2>&1 &
  local pid=$!
  CLEANUP+=("kill $pid; wait $pid 2>/dev/null; rm -rf '$dir'")
  for _ in $(seq 1 120); do
    zk_session_opens 2181 && return 0
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "error: ZooKeeper exited; its log:" >&2
      cat "$dir/server.log" >&2
      return 1
    fi
    sleep 0.5
  done
  echo "error: ZooKeeper did not accept a session on 127.0.0.1:2181 within 60 s" >&2
  return 1
}

skipping zookeeper || ensure_zookeeper
