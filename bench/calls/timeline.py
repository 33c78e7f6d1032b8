#!/usr/bin/env python3
"""A member's calls, broadcasts, gains and targets around the 1,000-partition
leave of group GROUP (a prefix of its tag), in 20 ms buckets from the
leaver's first revoke. Usage: timeline.py CALLS_LOG GROUP MEMBER (m0..m2).
acq-*-L: a partition of the leaver (r: asked after its release); -O: another."""
import sys, collections
from calllog import read
path, g, who = sys.argv[1], sys.argv[2], sys.argv[3]
rows = read(path)
g=[n for a,m,c,n,o in rows if n.startswith('bench.group.1000.'+g)][0].split(':')[0]
rev=min(a for a,m,c,n,o in rows if m=='m3' and c=='revoked' and n.startswith(g+':') and a > min(x for x,mm,cc,nn,oo in rows if mm=='m3' and cc=='leave' and nn==g) - 50)
m3parts={n for a,m,c,n,o in rows if m=='m3' and c=='revoked' and n.startswith(g+':') and rev<=a<rev+100}
rel3={n:a for a,m,c,n,o in rows if m=='m3' and c=='release' and n in m3parts and a>=rev}
print('leaver revoked', len(m3parts), 'released', len(rel3))
b=collections.defaultdict(collections.Counter)
for a,m,c,n,o in rows:
    if m==who and rev-50<=a<=rev+700 and (n.startswith(g) or c=='renew'):
        if c=='acquire':
            key='acq-'+o+('-L' if n in m3parts else '-O')
            if n in rel3 and a>=rel3[n]: key+='r'
        elif c=='broadcast':
            key='bc'+('-L' if n in m3parts else ('-G' if n==g else '-O'))
        else: key=c
        b[int((a-rev)//20)*20][key]+=1
for k in sorted(b): print(k, dict(sorted(b[k].items())))
