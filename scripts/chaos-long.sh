#!/usr/bin/env bash
# The chaos runner's long form (issue 9, docs/FAULTS.md): on SQLite, and on
# a PRIVATE PostgreSQL (127.0.0.1:55432) and MariaDB (127.0.0.1:53306),
# started here with their data in a temporary directory, so that the nemesis
# can restart them (the restart-db fault). The shared servers on 5432/3306
# are never touched.
#
# Usage: scripts/chaos-long.sh [DURATION [SEED [NODES]]]   (default 60s 1 4)
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${1:-60s}
SEED=${2:-1}
NODES=${3:-4}
export PATH="$HOME/.cargo/bin:$PATH"

# PROFILE=debug reuses a test build instead of a release one.
PROFILE=${PROFILE:-release}
if [ "$PROFILE" = release ]; then
  cargo build --release -p simba-cli --bins
else
  cargo build -p simba-cli --bins
fi
BIN=${CARGO_TARGET_DIR:-target}/$PROFILE

WORK=$(mktemp -d /tmp/simba-chaos-long.XXXXXX)
chmod 755 "$WORK"
PGBIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
cleanup() {
  runuser -u postgres -- "$PGBIN/pg_ctl" -D "$WORK/pg" stop -m immediate >/dev/null 2>&1 || true
  [ -f "$WORK/my.pid" ] && kill "$(cat "$WORK/my.pid")" 2>/dev/null || true
  sleep 1
  rm -rf "$WORK"
}
trap cleanup EXIT

# PostgreSQL on 55432.
mkdir "$WORK/pg" "$WORK/pgrun" && chown postgres "$WORK/pg" "$WORK/pgrun"
runuser -u postgres -- "$PGBIN/initdb" -D "$WORK/pg" -A trust -U postgres >/dev/null
runuser -u postgres -- "$PGBIN/pg_ctl" -D "$WORK/pg" -l "$WORK/pgrun/pg.log" -w \
  -o "-p 55432 -k $WORK/pgrun -c listen_addresses=127.0.0.1" start >/dev/null
runuser -u postgres -- "$PGBIN/createdb" -h 127.0.0.1 -p 55432 -U postgres test
cat >"$WORK/restart-pg.sh" <<EOS
runuser -u postgres -- "$PGBIN/pg_ctl" -D "$WORK/pg" -l "$WORK/pgrun/pg.log" -w -m fast restart >/dev/null
EOS

# MariaDB on 53306.
mariadb-install-db --no-defaults --datadir="$WORK/my" --user=root >/dev/null
cat >"$WORK/start-my.sh" <<EOS
mariadbd --no-defaults --datadir="$WORK/my" --port=53306 --bind-address=127.0.0.1 \
  --socket="$WORK/my.sock" --pid-file="$WORK/my.pid" --user=root --skip-grant-tables \
  >>"$WORK/my.log" 2>&1 &
for i in \$(seq 1 100); do
  mariadb-admin --no-defaults -h 127.0.0.1 -P 53306 ping >/dev/null 2>&1 && exit 0
  sleep 0.1
done
exit 1
EOS
cat >"$WORK/restart-my.sh" <<EOS
pid=\$(cat "$WORK/my.pid")
kill \$pid
while kill -0 \$pid 2>/dev/null; do sleep 0.05; done
sh "$WORK/start-my.sh"
EOS
sh "$WORK/start-my.sh"
mariadb --no-defaults -h 127.0.0.1 -P 53306 -e "CREATE DATABASE IF NOT EXISTS test"

status=0
"$BIN/simba-chaos" run --simba "$BIN/simba" --backend sqlite \
  --duration "$DURATION" --seed "$SEED" --nodes "$NODES" || status=1
"$BIN/simba-chaos" run --simba "$BIN/simba" --backend postgres \
  --url postgres://postgres@127.0.0.1:55432/test --restart-db "sh $WORK/restart-pg.sh" \
  --duration "$DURATION" --seed "$SEED" --nodes "$NODES" || status=1
"$BIN/simba-chaos" run --simba "$BIN/simba" --backend mysql \
  --url mysql://root@127.0.0.1:53306/test --restart-db "sh $WORK/restart-my.sh" \
  --duration "$DURATION" --seed "$SEED" --nodes "$NODES" || status=1
"$BIN/simba-chaos" run --simba "$BIN/simba" --backend sqlite --unfenced \
  --faults pause-node --leader-only --duration 20s --seed "$SEED" --nodes 3 \
  && { echo "the unfenced control did not fire"; status=1; } \
  || echo "(the unfenced control fired, as it must)"
exit $status
