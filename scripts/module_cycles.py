#!/usr/bin/env python3
"""Import cycles between the modules of a crate: prints every strongly
connected set of modules that refer to each other through `crate::` paths
(`use crate::a::…`, `crate::a::f()`, `use super::…` from a child).

Usage: scripts/module_cycles.py CRATE_SRC_DIR [GIT_REV]
With GIT_REV, reads the files as they were at that revision."""
import os, re, subprocess, sys

def files(src, rev):
    if rev:
        out = subprocess.run(["git", "ls-tree", "-r", "--name-only", rev, src],
                             capture_output=True, text=True, check=True).stdout
        for path in out.split():
            if path.endswith(".rs"):
                text = subprocess.run(["git", "show", f"{rev}:{path}"],
                                      capture_output=True, text=True, check=True).stdout
                yield os.path.relpath(path, src), text
    else:
        for root, _, names in os.walk(src):
            for n in names:
                if n.endswith(".rs"):
                    p = os.path.join(root, n)
                    yield os.path.relpath(p, src), open(p).read()

def module(rel):
    parts = rel[:-3].split("/")
    if parts[-1] == "mod":
        parts = parts[:-1]
    if parts in (["lib"], ["main"]):
        return "crate"
    return "::".join(parts)

def strip_comments(text):
    return "\n".join(l.split("//")[0] for l in text.splitlines())

def main():
    src = sys.argv[1].rstrip("/")
    rev = sys.argv[2] if len(sys.argv) > 2 else None
    mods = {module(r): strip_comments(t) for r, t in files(src, rev)}
    # Tests are separate compilation units in spirit: drop `mod tests` bodies.
    edges = {m: set() for m in mods}
    for m, text in mods.items():
        text = re.split(r"#\[cfg\(test\)\]\s*mod tests", text)[0]
        for path in re.findall(r"crate::([a-z_][a-z0-9_]*(?:::[a-z_][a-z0-9_]*)*)", text):
            segs = path.split("::")
            for k in range(len(segs), 0, -1):
                cand = "::".join(segs[:k])
                if cand in mods and cand != m:
                    edges[m].add(cand)
                    break
        if "::" in m or m != "crate":
            parent = "::".join(m.split("::")[:-1]) or "crate"
            for path in re.findall(r"super::([a-z_][a-z0-9_]*)", text):
                cand = (parent + "::" + path) if parent != "crate" else path
                if cand in mods and cand != m:
                    edges[m].add(cand)
                elif parent in mods and parent != m and parent != "crate":
                    edges[m].add(parent)
    # Tarjan's strongly connected components.
    index, low, stack, on, sccs, i = {}, {}, [], set(), [], [0]
    def visit(v):
        index[v] = low[v] = i[0]; i[0] += 1; stack.append(v); on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w); low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop(); on.discard(w); comp.append(w)
                if w == v: break
            if len(comp) > 1:
                sccs.append(sorted(comp))
    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    for c in sccs:
        print(f"{src}: cycle: {' <-> '.join(c)}")
    if not sccs:
        print(f"{src}: no cycles")
    return 1 if sccs else 0

sys.exit(main())
