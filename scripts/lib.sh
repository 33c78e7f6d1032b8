# Shared helpers for scripts/test.sh and the files in scripts/servers.d/.
# Sourced, not run.

log() { printf '== %s\n' "$*"; }

have_port() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_port() { # port seconds name
  for _ in $(seq 1 "$2"); do have_port "$1" && return 0; sleep 1; done
  echo "error: $3 is not listening on 127.0.0.1:$1" >&2
  return 1
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
