#!/usr/bin/env python3
"""simba-bench peer driver: kazoo's `Lock` and `Election` (ZooKeeper).

Every client's session timeout is the lease.
latency:            Lock acquire + release, one client.
lock-handover:      two clients; one holds, the other waits; release -> acquired.
election-handover:  two clients in Election.run; the leader's function
                    returns -> the other's function is called.
lock-failover / election-failover: a holder process gets SIGKILL; the
                    waiter gets the lock when ZooKeeper expires its session.
"""
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as c  # noqa: E402
from kazoo.client import KazooClient  # noqa: E402

MODES = ["latency", "lock-handover", "election-handover", "lock-failover",
         "election-failover", "hold-lock", "hold-election"]


def main():
    a = c.parse(MODES)
    path = "/simba-bench-peer/" + a.name

    def zk():
        k = KazooClient(hosts=a.addr, timeout=a.lease)
        k.start(timeout=15)
        return k

    out = []
    if a.mode == "latency":
        lk = zk().Lock(path, "bench")
        warm = max(5, a.n // 10)
        for i in range(a.n + warm):
            t = c.now()
            if not lk.acquire(blocking=False):
                raise RuntimeError("an uncontended acquire failed")
            lk.release()
            if i >= warm:
                out.append(c.now() - t)
    elif a.mode == "lock-handover":
        locks = [zk().Lock(path, "a"), zk().Lock(path, "b")]
        locks[0].acquire()
        cur = 0
        for _ in range(a.n):
            nxt = 1 - cur
            w = c.Waiter(lambda n=nxt: locks[n].acquire())
            time.sleep(0.05)
            t0 = c.now()
            locks[cur].release()
            out.append(w.wait(30) - t0)
            cur = nxt
        locks[cur].release()
    elif a.mode == "election-handover":
        elections = [zk().Election(path, "a"), zk().Election(path, "b")]

        def lead(e, elected, stop):
            def fn():
                elected.append(c.now())
                stop.wait()
            threading.Thread(target=lambda: e.run(fn), daemon=True).start()

        stop = threading.Event()
        elected = []
        lead(elections[0], elected, stop)
        while not elected:
            time.sleep(0.01)
        cur = 0
        for _ in range(a.n):
            nxt = 1 - cur
            stop2, elected2 = threading.Event(), []
            lead(elections[nxt], elected2, stop2)
            time.sleep(0.1)
            t0 = c.now()
            stop.set()
            end = time.time() + 30
            while not elected2 and time.time() < end:
                time.sleep(0.0005)
            if not elected2:
                raise TimeoutError("no new leader within 30 s")
            out.append(elected2[0] - t0)
            stop, elected, cur = stop2, elected2, nxt
        stop.set()
    elif a.mode in ("lock-failover", "election-failover"):
        hold = "hold-lock" if a.mode == "lock-failover" else "hold-election"
        k = zk()
        for _ in range(a.n):
            holder = c.spawn_holder([sys.executable, os.path.abspath(__file__), hold,
                                     "--addr", a.addr, "--lease", str(a.lease), "--name", a.name])
            if hold == "hold-lock":
                lk = k.Lock(path, "waiter")
                w = c.Waiter(lambda lk=lk: lk.acquire())
            else:
                lk = k.Election(path, "waiter")
                got = threading.Event()
                w = c.Waiter(lambda lk=lk, got=got: lk.run(got.set))
            c.phase(a.lease)
            t0 = c.now()
            c.kill_group(holder)
            out.append(w.wait(a.lease * 5 + 5) - t0)
            c.reap(holder)
            if hold == "hold-lock":
                lk.release()
    else:  # hold-lock, hold-election
        k = zk()
        if a.mode == "hold-lock":
            k.Lock(path, "holder").acquire()
            print("held", flush=True)
            while True:
                time.sleep(3600)
        else:
            def fn():
                print("held", flush=True)
                while True:
                    time.sleep(3600)
            k.Election(path, "holder").run(fn)
    c.result(out)


if __name__ == "__main__":
    c.run(main)
