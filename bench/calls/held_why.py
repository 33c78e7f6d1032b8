#!/usr/bin/env python3
"""For each 1,000-partition leave in a calls log: per member, the acquires
answered Held in the leave window, split by whether the partition was in
another member's latest target then (disagreement) or in none (stale), and
whether the asking member had won it before (churn)."""
import sys, collections
path = sys.argv[1]
rows = []
lines = open(path).read().split('\n')
k = 0
while k < len(lines):
    f = lines[k].split()
    if len(f) >= 5 and f[2] == 'target':
        parts = set()
        if k + 1 < len(lines) and lines[k + 1].startswith('  m'):
            lst = lines[k + 1].split()[1] if len(lines[k + 1].split()) > 1 else ''
            parts = {int(x) for x in lst.split(',') if x}
            k += 1
        rows.append((float(f[0]), f[1], 'target', f[3], parts))
    elif len(f) >= 5:
        rows.append((float(f[0]), f[1], f[2].replace('batch:', ''), f[3], f[4]))
    k += 1
rows.sort(key=lambda r: r[0])
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
