#!/usr/bin/env bash
# Installs what simba-bench's peers need (their code is never committed):
#   - a Python venv with redis-py and kazoo from PyPI, under
#     ${XDG_CACHE_HOME:-$HOME/.cache}/simba-bench/venv (simba-bench finds it
#     there; SIMBA_BENCH_PYTHON overrides);
#   - Debian's etcd-client for `etcdctl`, and fonts-dejavu-core for the plot.
# Servers: PostgreSQL and MariaDB running as in the README; redis-server,
# etcd and ZooKeeper (Debian zookeeperd) installed: the bench starts private
# instances of those three on private ports.
set -euo pipefail
cache="${XDG_CACHE_HOME:-$HOME/.cache}/simba-bench"
venv="$cache/venv"
if command -v apt-get >/dev/null 2>&1; then
  missing=()
  command -v etcdctl >/dev/null 2>&1 || missing+=(etcd-client)
  [ -r /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || missing+=(fonts-dejavu-core)
  python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || missing+=(python3-venv)
  if [ ${#missing[@]} -gt 0 ]; then
    sudo_=""
    [ "$(id -u)" -eq 0 ] || sudo_="sudo"
    $sudo_ apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_ apt-get install -y -qq "${missing[@]}"
  fi
fi
mkdir -p "$cache"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet 'redis>=5,<7' 'kazoo>=2.9,<3'
"$venv/bin/python" -c 'import redis, kazoo; print("peers: redis-py", redis.__version__, "kazoo", kazoo.version.__version__ if hasattr(kazoo, "version") else "")'
echo "peers' Python: $venv/bin/python"
command -v etcdctl >/dev/null && echo "etcdctl: $(command -v etcdctl)"
