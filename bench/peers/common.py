"""Shared bits of simba-bench's peer drivers: arguments, timing, the JSON
result line simba-bench reads (`{"samples": [seconds...]}` or
`{"error": "..."}`), and helper processes killed with SIGKILL."""
import argparse
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time


def parse(modes):
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=modes)
    p.add_argument("--addr", required=True, help="host:port of the server")
    p.add_argument("--n", type=int, default=10, help="samples")
    p.add_argument("--lease", type=float, default=2.0, help="lease/session TTL, seconds")
    p.add_argument("--name", default=None)
    p.add_argument("--etcdctl", default="etcdctl")
    a = p.parse_args()
    if a.name is None:
        a.name = "simba-bench-peer-%08x" % random.getrandbits(32)
    return a


def now():
    return time.perf_counter()


def result(samples):
    print(json.dumps({"samples": samples}), flush=True)


def error(e):
    print(json.dumps({"error": str(e)}), flush=True)


def run(main):
    try:
        main()
    except Exception as e:  # the bench prints why the figure is missing
        error("%s: %s" % (type(e).__name__, e))
        sys.exit(0)


class Waiter:
    """Runs `fn` in a thread and records when it returned."""

    def __init__(self, fn):
        self.at = None
        self.err = None

        def body():
            try:
                fn()
                self.at = now()
            except Exception as e:
                self.err = e

        self.t = threading.Thread(target=body, daemon=True)
        self.t.start()

    def wait(self, timeout):
        self.t.join(timeout)
        if self.err is not None:
            raise self.err
        if self.at is None:
            raise TimeoutError("no result within %.1f s" % timeout)
        return self.at


def spawn_holder(args):
    """Starts `args` in its own process group; waits for its first line."""
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
                         start_new_session=True, text=True)
    line = p.stdout.readline()
    if not line:
        raise RuntimeError("the holder exited before holding: %r" % (args,))
    return p


def kill_group(p):
    os.killpg(p.pid, signal.SIGKILL)


def reap(p):
    try:
        p.wait(10)
    except subprocess.TimeoutExpired:
        pass


def phase(lease):
    """A random point of a renewal period (lease / 3), after 100 ms."""
    time.sleep(0.1 + random.random() * lease / 3)
