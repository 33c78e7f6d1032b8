#!/usr/bin/env python3
"""simba-bench peer driver: `etcdctl lock` and `etcdctl elect` (v3 API).

lock-latency:   `etcdctl lock NAME true` (acquire, run `true`, release): one
                etcdctl process per lock, as from a shell.
lock-handover / elect-handover: a holder `etcdctl lock NAME` (or `elect NAME
                PROPOSAL`) and a waiter; SIGINT to the holder (it revokes its
                session) -> the waiter prints its key.
lock-failover:  holder `etcdctl lock --ttl=LEASE NAME` gets SIGKILL -> the
                waiter prints its key once the session lease expires.
elect-failover: not measurable in a bench run: `etcdctl elect` has no --ttl,
                so its session lives 60 s after a crash.
"""
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as c  # noqa: E402

MODES = ["lock-latency", "lock-handover", "elect-handover", "lock-failover", "elect-failover"]


def main():
    a = c.parse(MODES)
    base = [a.etcdctl, "--endpoints", "http://" + a.addr]
    env = dict(os.environ, ETCDCTL_API="3")
    ttl = str(max(1, int(round(a.lease))))

    def start(args):
        return subprocess.Popen(base + args, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, env=env, text=True,
                                start_new_session=True)

    def cmd(kind, who):
        if kind == "lock":
            return ["lock", "--ttl=" + ttl, a.name]
        return ["elect", a.name, who]

    out = []
    if a.mode == "lock-latency":
        warm = max(2, a.n // 10)
        for i in range(a.n + warm):
            t = c.now()
            subprocess.run(base + ["lock", a.name, "true"], check=True, env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if i >= warm:
                out.append(c.now() - t)
    elif a.mode in ("lock-handover", "elect-handover"):
        kind = a.mode.split("-")[0]
        holder = start(cmd(kind, "p0"))
        if not holder.stdout.readline():
            raise RuntimeError("the first etcdctl %s exited" % kind)
        for i in range(a.n):
            waiter = start(cmd(kind, "p%d" % (i + 1)))
            time.sleep(0.3)  # the waiter has connected and queued
            t0 = c.now()
            holder.send_signal(signal.SIGINT)
            line = waiter.stdout.readline()
            t1 = c.now()
            if not line:
                raise RuntimeError("the waiting etcdctl %s exited" % kind)
            out.append(t1 - t0)
            c.reap(holder)
            holder = waiter
        holder.send_signal(signal.SIGINT)
        c.reap(holder)
    elif a.mode == "lock-failover":
        for i in range(a.n):
            holder = start(cmd("lock", "h"))
            if not holder.stdout.readline():
                raise RuntimeError("the holding etcdctl lock exited")
            waiter = start(cmd("lock", "w"))
            c.phase(a.lease)
            t0 = c.now()
            c.kill_group(holder)
            line = waiter.stdout.readline()
            t1 = c.now()
            if not line:
                raise RuntimeError("the waiting etcdctl lock exited")
            out.append(t1 - t0)
            c.reap(holder)
            waiter.send_signal(signal.SIGINT)
            c.reap(waiter)
    else:
        c.error("etcdctl elect has no --ttl: a crashed holder's session lives 60 s (not run)")
        return
    c.result(out)


if __name__ == "__main__":
    c.run(main)
