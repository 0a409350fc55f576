#!/usr/bin/env python3
"""TTL of a small key and of a big one, before and after the big one's SET.

usage: neighbour_ttl.py PORT SIZE

Used for docs/benchmarks.md, "Long string values out of their key rows":
with a value in its key row, SQLite read the whole value at every search
that compared a key with that row, so a big value slowed its neighbours.
"""
import sys
import time

import redis

r = redis.Redis(port=int(sys.argv[1]))
size = int(sys.argv[2])
r.set("small", b"x", ex=1000)


def bench(label):
    for key in ("small", "big"):
        start = time.perf_counter()
        n = 100
        for _ in range(n):
            r.ttl(key)
        print(f"{label} {key} ttl: {(time.perf_counter() - start) / n * 1e6:.0f} us/op")


bench("before-big")
r.set("big", b"x" * size, ex=1000)
bench("after-big")
time.sleep(3)
bench("after-3s")
