# Private PostgreSQL (127.0.0.1:5433), MariaDB (127.0.0.1:3307), Redis
# (127.0.0.1:6380, with an ACL user `simba`, password `s3cret`), ZooKeeper
# (127.0.0.1:2282, `secureClientPort` only) and etcd (127.0.0.1:2389, https
# only; peers on 127.0.0.1:2390) instances that accept TLS connections only,
# with a server certificate for `localhost` and 127.0.0.1 signed by a test
# CA, for the TLS tests of every backend (simba-backends/tests/tls.rs). The
# shared servers on 5432, 3306, 6379, 2181 and 2379 are left as they are.
#
# The CA and the server certificate live in /var/tmp/simba-test-tls
# (`ca.pem` is what the tests trust; `other-ca.pem` is a CA that signed
# nothing, for the tests that must refuse the server). Made once with
# `openssl`; the instances' data directories are temporary and removed
# when test.sh exits. Sourced by scripts/test.sh after scripts/lib.sh.
# Skipped with SIMBA_TEST_SKIP_SERVERS listing `tls` (or `postgres` /
# `mysql` / `redis` / `zookeeper` / `etcd` for one of them).

SIMBA_TLS_DIR=/var/tmp/simba-test-tls

make_test_ca() {
  local d=$SIMBA_TLS_DIR
  [ -s "$d/ca.pem" ] && [ -s "$d/server.pem" ] && [ -s "$d/other-ca.pem" ] && return 0
  command -v openssl >/dev/null || apt_install openssl
  log "making a test CA and a server certificate for localhost in $d"
  mkdir -p "$d"
  for ca in ca other-ca; do
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -sha256 \
      -subj "/CN=Simba test $ca" -keyout "$d/$ca.key" -out "$d/$ca.pem" \
      -addext "basicConstraints=critical,CA:TRUE" \
      -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
  done
  openssl req -newkey rsa:2048 -nodes -sha256 -subj "/CN=localhost" \
    -keyout "$d/server.key" -out "$d/server.csr" 2>/dev/null
  printf '%s\n' "subjectAltName=DNS:localhost,IP:127.0.0.1" "basicConstraints=CA:FALSE" \
    "keyUsage=critical,digitalSignature,keyEncipherment" "extendedKeyUsage=serverAuth" \
    >"$d/server.ext"
  openssl x509 -req -in "$d/server.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" \
    -CAcreateserial -days 3650 -sha256 -extfile "$d/server.ext" -out "$d/server.pem" 2>/dev/null
  chmod 0644 "$d"/*.pem
}

ensure_tls_postgres() {
  have_port 5433 && return 0
  local bin
  bin="/usr/lib/postgresql/$(ls /usr/lib/postgresql | sort -V | tail -n1)/bin"
  local dir
  dir="$(mktemp -d -t simba-pg-tls.XXXXXX)"
  log "starting a TLS-only PostgreSQL on 127.0.0.1:5433 (files in $dir)"
  cp "$SIMBA_TLS_DIR/server.pem" "$SIMBA_TLS_DIR/server.key" "$dir/"
  chmod 0600 "$dir/server.key"
  chown -R postgres "$dir"
  runuser -u postgres -- "$bin/initdb" -D "$dir/data" -A trust -U postgres >"$dir/initdb.log" 2>&1
  # TLS connections only: a plain-text one is refused by pg_hba.
  cat >"$dir/data/pg_hba.conf" <<HBA
local all all trust
hostssl all all 127.0.0.1/32 trust
hostnossl all all 127.0.0.1/32 reject
HBA
  runuser -u postgres -- "$bin/pg_ctl" -D "$dir/data" -l "$dir/pg.log" -w -o \
    "-p 5433 -k $dir -c listen_addresses=127.0.0.1 -c ssl=on -c ssl_cert_file=$dir/server.pem -c ssl_key_file=$dir/server.key -c fsync=off -c max_connections=40" \
    start >/dev/null
  CLEANUP+=("runuser -u postgres -- '$bin/pg_ctl' -D '$dir/data' -m fast stop >/dev/null 2>&1; rm -rf '$dir'")
  wait_port 5433 30 "PostgreSQL (TLS)"
}

ensure_tls_mariadb() {
  have_port 3307 && return 0
  local dir
  dir="$(mktemp -d -t simba-mariadb-tls.XXXXXX)"
  log "starting a TLS-only MariaDB on 127.0.0.1:3307 (files in $dir)"
  cp "$SIMBA_TLS_DIR/server.pem" "$SIMBA_TLS_DIR/server.key" "$SIMBA_TLS_DIR/ca.pem" "$dir/"
  chown -R mysql "$dir"
  mariadb-install-db --no-defaults --user=mysql --datadir="$dir/data" \
    --auth-root-authentication-method=normal --skip-test-db >"$dir/install.log" 2>&1
  # require_secure_transport: a plain-text connection is refused.
  start-stop-daemon --start --background --make-pidfile --pidfile "$dir/pid" \
    --exec /usr/sbin/mariadbd -- --no-defaults --user=mysql --datadir="$dir/data" \
    --port=3307 --bind-address=127.0.0.1 --socket="$dir/sock" --skip-name-resolve \
    --ssl-ca="$dir/ca.pem" --ssl-cert="$dir/server.pem" --ssl-key="$dir/server.key" \
    --require-secure-transport=ON --innodb-flush-log-at-trx-commit=0 \
    --log-error="$dir/error.log"
  CLEANUP+=("start-stop-daemon --stop --quiet --retry 10 --pidfile '$dir/pid' >/dev/null 2>&1; rm -rf '$dir'")
  wait_port 3307 60 "MariaDB (TLS)"
  # The test database, for root over TLS (the server refuses plain text,
  # so the local socket is used).
  mariadb --no-defaults -uroot --socket="$dir/sock" -e "CREATE DATABASE IF NOT EXISTS test"
}

ensure_tls_redis() {
  have_port 6380 && return 0
  local dir
  dir="$(mktemp -d -t simba-redis-tls.XXXXXX)"
  log "starting a TLS-only Redis on 127.0.0.1:6380 (files in $dir)"
  cp "$SIMBA_TLS_DIR/server.pem" "$SIMBA_TLS_DIR/server.key" "$SIMBA_TLS_DIR/ca.pem" "$dir/"
  redis-server --port 0 --tls-port 6380 --bind 127.0.0.1 \
    --tls-cert-file "$dir/server.pem" --tls-key-file "$dir/server.key" \
    --tls-ca-cert-file "$dir/ca.pem" --tls-auth-clients no \
    --save "" --appendonly no --dir "$dir" --daemonize yes \
    --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" \
    --user simba on '>s3cret' '~*' '&*' '+@all' --user default off
  CLEANUP+=("kill \$(cat '$dir/redis.pid' 2>/dev/null) 2>/dev/null; sleep 0.3; rm -rf '$dir'")
  wait_port 6380 30 "Redis (TLS)"
}

ensure_tls_zookeeper() {
  have_port 2282 && return 0
  apt_install zookeeperd default-jre-headless
  command -v openssl >/dev/null || apt_install openssl
  local dir
  dir="$(mktemp -d -t simba-zk-tls.XXXXXX)"
  log "starting a TLS-only ZooKeeper on 127.0.0.1:2282 (files in $dir)"
  # ZooKeeper's PEM key store (3.7 and later): the key and the certificate
  # in one file.
  cat "$SIMBA_TLS_DIR/server.key" "$SIMBA_TLS_DIR/server.pem" >"$dir/keystore.pem"
  cp "$SIMBA_TLS_DIR/ca.pem" "$dir/"
  chmod 0600 "$dir/keystore.pem"
  # Port 0: no plain-text client port. Only the Netty connection factory
  # serves TLS. Client certificates are not asked for.
  scripts/zookeeper-server.sh 0 "$dir" secureClientPort=2282 secureClientPortAddress=127.0.0.1 \
    serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory \
    ssl.keyStore.location="$dir/keystore.pem" ssl.keyStore.type=PEM \
    ssl.trustStore.location="$dir/ca.pem" ssl.trustStore.type=PEM \
    ssl.clientAuth=none >"$dir/server.log" 2>&1 &
  local pid=$!
  CLEANUP+=("kill $pid; wait $pid 2>/dev/null; rm -rf '$dir'")
  # Ready once a client session opens over TLS with the test CA.
  for _ in $(seq 1 120); do
    zk_session_opens 2282 "$dir/ca.pem" && return 0
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "error: the TLS ZooKeeper exited; its log:" >&2
      cat "$dir/server.log" >&2
      return 1
    fi
    sleep 0.5
  done
  echo "error: ZooKeeper did not accept a TLS session on 127.0.0.1:2282 within 60 s" >&2
  return 1
}

ensure_tls_etcd() {
  have_port 2389 && return 0
  command -v etcd >/dev/null || apt_install etcd-server etcd-client
  local dir
  dir="$(mktemp -d -t simba-etcd-tls.XXXXXX)"
  log "starting a TLS-only etcd on 127.0.0.1:2389 (files in $dir)"
  cp "$SIMBA_TLS_DIR/server.pem" "$SIMBA_TLS_DIR/server.key" "$SIMBA_TLS_DIR/ca.pem" "$dir/"
  chmod 0600 "$dir/server.key"
  # Clients over https only (no client certificates); the peer port, which
  # a one-member cluster needs, on loopback.
  etcd --name simba-tls --data-dir "$dir/data" \
    --listen-client-urls https://127.0.0.1:2389 --advertise-client-urls https://127.0.0.1:2389 \
    --cert-file "$dir/server.pem" --key-file "$dir/server.key" \
    --listen-peer-urls http://127.0.0.1:2390 --initial-advertise-peer-urls http://127.0.0.1:2390 \
    --initial-cluster simba-tls=http://127.0.0.1:2390 --initial-cluster-state new \
    >"$dir/etcd.log" 2>&1 &
  local pid=$!
  CLEANUP+=("kill $pid; wait $pid 2>/dev/null; rm -rf '$dir'")
  wait_port 2389 30 "etcd (TLS)"
  # Ready once it answers over TLS, its certificate checked with the test CA.
  for _ in $(seq 1 30); do
    ETCDCTL_API=3 etcdctl --endpoints=https://localhost:2389 --cacert "$dir/ca.pem" \
      endpoint health >/dev/null 2>&1 && return 0
    sleep 1
  done
  echo "error: the TLS etcd on 127.0.0.1:2389 is not healthy; its log:" >&2
  tail -n 20 "$dir/etcd.log" >&2
  return 1
}

if ! skipping tls; then
  make_test_ca
  skipping postgres || ensure_tls_postgres
  skipping mysql || ensure_tls_mariadb
  skipping redis || ensure_tls_redis
  skipping zookeeper || ensure_tls_zookeeper
  skipping etcd || ensure_tls_etcd
fi
