#!/usr/bin/env python3
"""simba-bench peer driver: redis-py's `Lock`.

latency:  acquire (non-blocking) + release, one client.
handover: two clients; one holds, the other waits in a blocking acquire
          (redis-py polls every 0.1 s by default); release -> acquired.
failover: a holder process (extends its lock every lease/3, timeout = lease)
          gets SIGKILL; the waiter acquires once the key expires.
"""
import os
import sys
import random
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as c  # noqa: E402
import redis  # noqa: E402


def main():
    a = c.parse(["latency", "handover", "failover", "hold"])
    host, port = a.addr.rsplit(":", 1)

    def client():
        return redis.Redis(host=host, port=int(port))

    def lock(r, timeout):
        return r.lock(a.name, timeout=timeout, thread_local=False)

    out = []
    if a.mode == "latency":
        lk = lock(client(), a.lease)
        warm = max(5, a.n // 10)
        for i in range(a.n + warm):
            t = c.now()
            if not lk.acquire(blocking=False):
                raise RuntimeError("an uncontended acquire failed")
            lk.release()
            if i >= warm:
                out.append(c.now() - t)
    elif a.mode == "handover":
        locks = [lock(client(), a.lease * 10), lock(client(), a.lease * 10)]
        locks[0].acquire()
        cur = 0
        for _ in range(a.n):
            nxt = 1 - cur
            w = c.Waiter(lambda n=nxt: locks[n].acquire(blocking=True))
            time.sleep(0.05 + 0.1 * random.random())
            t0 = c.now()
            locks[cur].release()
            out.append(w.wait(30) - t0)
            cur = nxt
        locks[cur].release()
    elif a.mode == "failover":
        for _ in range(a.n):
            holder = c.spawn_holder([sys.executable, os.path.abspath(__file__), "hold",
                                     "--addr", a.addr, "--lease", str(a.lease), "--name", a.name])
            lk = lock(client(), a.lease)
            w = c.Waiter(lambda: lk.acquire(blocking=True))
            c.phase(a.lease)
            t0 = c.now()
            c.kill_group(holder)
            out.append(w.wait(a.lease * 5 + 5) - t0)
            c.reap(holder)
            lk.release()
    else:  # hold
        lk = lock(client(), a.lease)
        lk.acquire(blocking=True)
        print("held", flush=True)
        while True:
            time.sleep(a.lease / 3)
            lk.reacquire()
    c.result(out)


if __name__ == "__main__":
    c.run(main)
