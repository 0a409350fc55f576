#!/usr/bin/env python3
"""2,000 hashes of one long field and 2,000 long strings: writes and reads.

usage: long_fields.py PORT SIZE

Used for docs/benchmarks.md, "Long string values out of their key rows"
(hash field values are still kept in their rows).
"""
import os
import sys
import time

import redis

r = redis.Redis(port=int(sys.argv[1]))
size = int(sys.argv[2])
n = 500


def timed(label, count, run):
    start = time.perf_counter()
    run()
    print(f"{label}: {count / (time.perf_counter() - start):.0f}/s")


p = r.pipeline(transaction=False)
for i in range(2000):
    p.hset(f"h{i}", "f", os.urandom(size))
timed(f"HSET of {size}-byte values", 2000, p.execute)
timed("HGET", n, lambda: [r.hget(f"h{(i * 7919) % 2000}", "f") for i in range(n)])
p = r.pipeline(transaction=False)
for i in range(2000):
    p.set(f"s{i}", os.urandom(size))
timed(f"SET of {size}-byte values", 2000, p.execute)
timed("GET", n, lambda: [r.get(f"s{(i * 7919) % 2000}") for i in range(n)])
