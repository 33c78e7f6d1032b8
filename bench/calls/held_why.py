#!/usr/bin/env python3
"""For each 1,000-partition leave in a calls log: per member, the acquires
answered Held in the leave window, split by whether the partition was in
another member's latest target then (the parts disagree) or in none (a stale
guess or release), and by the member that held it then (None: the leaver,
or no one). Usage: held_why.py CALLS_LOG"""
import sys, collections
from calllog import read
rows = read(sys.argv[1])
leaves = [(a, n) for a, m, c, n, o in rows if m == 'm3' and c == 'leave' and '.1000.' in n]
for la, g in leaves:
    tgt = {}
    held_by = {}
    stats = collections.defaultdict(collections.Counter)
    for a, m, c, n, o in rows:
        if c == 'target' and n == g:
            tgt[m] = o
        if not n.startswith(g + ':'):
            continue
        p = int(n.split(':p')[1])
        if c == 'elected': held_by[p] = m
        if c == 'revoked' and held_by.get(p) == m: held_by[p] = None
        if c == 'acquire' and la - 5 <= a <= la + 600 and o == 'held' and m != 'm3':
            others = [x for x in tgt if x not in (m, 'm3') and p in tgt[x]]
            h = held_by.get(p)
            stats[m]['in ' + ('other target' if others else 'no other target') + (', holder in target' if h and h in others else '')] += 1
            stats[m]['holder ' + str(h)] += 1
    if any(sum(v.values()) for v in stats.values()):
        print(g[-8:], {m: dict(v) for m, v in stats.items()})
