"""Reads a calls log (`SIMBA_BENCH_CALLS`, see simba-bench/src/calls.rs).

`read(path)` returns its lines as (ms, member, word, name, outcome) sorted
by time: `word` without its `batch:` prefix; for a `target` line, `outcome`
is the set of partitions on the line that follows it."""


def read(path):
    rows = []
    lines = open(path).read().split('\n')
    k = 0
    while k < len(lines):
        f = lines[k].split()
        if len(f) >= 5 and f[2] == 'target':
            parts = set()
            if k + 1 < len(lines) and lines[k + 1].startswith('  m'):
                more = lines[k + 1].split()
                parts = {int(x) for x in (more[1] if len(more) > 1 else '').split(',') if x}
                k += 1
            rows.append((float(f[0]), f[1], 'target', f[3], parts))
        elif len(f) >= 5:
            rows.append((float(f[0]), f[1], f[2].replace('batch:', ''), f[3], f[4]))
        k += 1
    rows.sort(key=lambda r: r[0])
    return rows
