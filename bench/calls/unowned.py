#!/usr/bin/env python3
"""Per 1,000-partition leave in a calls log: the partitions unowned longest,
split into the leaver's side (revoke to release) and the taker's (release to
elected). Usage: unowned.py CALLS_LOG..."""
import sys
from calllog import read
for path in sys.argv[1:]:
    rows = read(path)
    groups = sorted({n.split(':')[0] for _, m, c, n, _ in rows if c == 'leave' and m == 'm3' and '.1000.' in n})
    for g in groups:
        leave = [at for at, m, c, n, o in rows if m == 'm3' and c == 'leave' and n == g]
        rev = [(at, n) for at, m, c, n, o in rows if m == 'm3' and c == 'revoked' and n.startswith(g + ':')]
        if not rev or not leave: continue
        t0 = min(a for a, _ in rev)
        rev = [(a, n) for a, n in rev if a >= t0 and a < t0 + 5000]
        worst = []
        for a, n in rev:
            rel = [x for x, m, c, nn, o in rows if m == 'm3' and c == 'release' and nn == n and x >= a]
            el = [x for x, m, c, nn, o in rows if m != 'm3' and c == 'elected' and nn == n and x >= a]
            worst.append(((el[0] if el else 1e9) - a, n, a - t0, (rel[0] - a) if rel else None, (el[0] - rel[0]) if el and rel else None))
        worst.sort(reverse=True)
        print(f'{path} {g[-8:]} first revoke {t0:.1f}, leave reply +{leave[-1]-t0:.1f} ms; worst unowned: ' + '; '.join(f'{n.split(":")[1]} {u:.0f} ms (revoked +{r:.0f}, released after {rl if rl is None else round(rl)}, elected {e if e is None else round(e)} after release)' for u, n, r, rl, e in worst[:3]))
