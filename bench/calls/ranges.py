#!/usr/bin/env python3
"""Ranges of the max unowned time per backend and row over bench .md files."""
import sys, re, glob, collections
files = []
for pat in sys.argv[1:]:
    files += glob.glob(pat)
vals = collections.defaultdict(list)
idle = collections.defaultdict(list)
rt = collections.Counter()
def ms(x, u):
    x = float(x)
    return x * 1000 if u == 's' else x / 1000 if u == 'µs' else x
for f in files:
    for l in open(f):
        m = re.match(r'\| (\w+) \| group of (\d+): (join 3 → 4|graceful leave 4 → 3)', l)
        if not m: continue
        b, n, row = m.group(1), m.group(2), m.group(3).split()[0]
        mx = re.search(r'; max ([0-9.]+) ([mµ]?s);', l)
        if mx: vals[(b, n, row)].append(ms(*mx.groups()))
        i = re.search(r'no call running p50 [0-9.]+ [mµ]?s, max ([0-9.]+) ([mµ]?s)', l)
        if i: idle[(b, n, row)].append(ms(*i.groups()))
        w = re.search(r'within 3 for (\d+) of (\d+)', l)
        if w: rt['all' if w.group(1) == w.group(2) else 'not'] += 1
for k in sorted(vals):
    v = sorted(vals[k]); d = sorted(idle[k])
    print(f'{k[0]:10} {k[1]:>5} {k[2]:9} n={len(v):3} max {v[0]:.1f}–{v[-1]:.1f} ms (median {v[len(v)//2]:.1f}); >300 ms: {sum(x > 300 for x in v)}; idle max {d[-1]:.1f} ms')
print('rows with every moved partition within 3 round trips:', rt['all'], 'not:', rt['not'])
