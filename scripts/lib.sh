# Shared helpers for scripts/test.sh and the files in scripts/servers.d/.
# Sourced, not run.

log() { printf '== %s\n' "$*"; }

have_port() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_port() { # port seconds name
  for _ in $(seq 1 "$2"); do have_port "$1" && return 0; sleep 1; done
  echo "error: $3 is not listening on 127.0.0.1:$1" >&2
  return 1
}

# True once a ZooKeeper client session can be opened on 127.0.0.1:$1: sends a
# ConnectRequest (protocol 0, timeout 4000 ms, new session) and waits for the
# ConnectResponse (36 or 37 bytes). No four-letter word, so no whitelist is
# needed. With a CA file as $2, over TLS (openssl), the server's certificate
# checked against that CA and the name `localhost`.
zk_session_opens() { # port [ca.pem]
  local req='\x00\x00\x00\x2c\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x0f\xa0\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x10\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00'
  local n
  n=$(timeout 5 bash -c '
    if [ -n "$2" ]; then
      # -no_ign_eof: openssl ends the connection when its input ends, 1 s
      # after the request (the reply comes first).
      { printf "$1"; sleep 1; } | openssl s_client -quiet -no_ign_eof \
        -connect "127.0.0.1:$0" -servername localhost -verify_hostname localhost \
        -CAfile "$2" -verify_return_error 2>/dev/null | head -c 40 | od -An -tx1 | tr -d " \n"
    else
      exec 3<>"/dev/tcp/127.0.0.1/$0" || exit 1
      printf "$1" >&3
      head -c 40 <&3 | od -An -tx1 | tr -d " \n"
    fi' "$1" "$req" "${2:-}" 2>/dev/null) || return 1
  # length 36 or 37, protocol version 0, then a timeout, a session id, a password
  [[ ${#n} -eq 80 && $n == 0000002[45]00000000* ]]
}

APT_UPDATED=
# Installs Debian packages that are missing (as root, or through sudo).
apt_install() {
  local missing=()
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  local sudo=
  [ "$(id -u)" -ne 0 ] && sudo=sudo
  if [ -z "$APT_UPDATED" ]; then
    log "apt-get update"
    $sudo apt-get update -qq
    APT_UPDATED=1
  fi
  log "installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# Commands to run when the test script exits (servers it started).
CLEANUP=()
on_exit() { for c in "${CLEANUP[@]}"; do eval "$c" || true; done; }
trap on_exit EXIT

ensure_postgres() { # trust auth, databases test, postgres, root
  have_port 5432 && return 0
  log "starting PostgreSQL"
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start || true
  wait_port 5432 30 PostgreSQL
}

ensure_mariadb() { # root with no password, database test
  have_port 3306 && return 0
  log "starting MariaDB"
  start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd || true
  wait_port 3306 60 MariaDB
}

ensure_redis() {
  have_port 6379 && return 0
  log "starting Redis"
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log || true
  wait_port 6379 30 Redis
}
