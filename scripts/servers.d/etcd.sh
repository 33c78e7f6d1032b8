# etcd on 127.0.0.1:2379 (peer 2380) for the etcd backend's tests (feature
# `etcd`). Sourced by scripts/test.sh after scripts/lib.sh.
#
# Also installs protobuf-compiler: the etcd-client crate runs `protoc` at
# build time (only when the `etcd` feature is on, as `--all-features` does),
# with the well-known .proto files of libprotobuf-dev.
apt_install etcd-server etcd-client protobuf-compiler libprotobuf-dev

ensure_etcd() {
  have_port 2379 && return 0
  local dir
  dir="$(mktemp -d -t simba-etcd.XXXXXX)"
  log "starting etcd (data in $dir)"
  etcd --name simba-test --data-dir "$dir/data" \
    --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
    --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster simba-test=http://127.0.0.1:2380 --initial-cluster-state new \
    >"$dir/etcd.log" 2>&1 &
  local pid=$!
  CLEANUP+=("kill $pid; wait $pid 2>/dev/null; rm -rf '$dir'")
  wait_port 2379 30 etcd
  # Listening is not yet serving: wait until a key can be read.
  for _ in $(seq 1 30); do
    ETCDCTL_API=3 etcdctl --endpoints=http://127.0.0.1:2379 endpoint health >/dev/null 2>&1 && return 0
    sleep 1
  done
  echo "error: etcd on 127.0.0.1:2379 is not healthy; its log:" >&2
  tail -n 20 "$dir/etcd.log" >&2
  return 1
}
skipping etcd || ensure_etcd
