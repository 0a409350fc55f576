#!/usr/bin/env python3
"""PTTL right after `SET k v PX 10000`: how often each answer comes back.

usage: pttl_after_set.py PORT [N]

Sends N sequential `SET kI v PX 10000` then `PTTL kI` (each waits for
its reply), then N pipelined pairs (both in one write), and prints the
distribution of PTTL answers for each. Used for docs/benchmarks.md,
"PTTL right after SET PX"; run it against respited and against
redis-server with `--appendonly yes --appendfsync always`.
"""
import collections
import sys

import redis

port = int(sys.argv[1])
n = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
r = redis.Redis(port=port)
sequential = collections.Counter()
for i in range(n):
    r.set(f"pttl:s{i}", "v", px=10000)
    sequential[r.pttl(f"pttl:s{i}")] += 1
pipelined = collections.Counter()
for i in range(n):
    p = r.pipeline(transaction=False)
    p.set(f"pttl:p{i}", "v", px=10000)
    p.pttl(f"pttl:p{i}")
    pipelined[p.execute()[1]] += 1


def show(name, c):
    parts = [f"{v}: {100.0 * k / n:.1f}%" for v, k in sorted(c.items(), reverse=True)]
    print(f"{name:10} " + ", ".join(parts))


show("sequential", sequential)
show("pipelined", pipelined)
