"""redis-py's Lock: blocking acquire, mutual exclusion, extend, release,
and a lock whose holder died expiring on its timeout.

Four threads each take the lock 25 times to do a read-modify-write that
would lose updates without it: the counter must end at exactly 100.

    redispy_lock.py [2|3]     the protocol (RESP2 by default)
"""

import os
import subprocess
import sys
import threading
import time
import traceback

import redis
from redis.exceptions import LockNotOwnedError

from check import URL, check, equal, within

PROTOCOL = int(sys.argv[1]) if len(sys.argv) > 1 else 2
r = redis.Redis.from_url(URL, decode_responses=True, protocol=PROTOCOL)
r.flushdb()

# Mutual exclusion with blocking acquire.
THREADS, ROUNDS = 4, 25


def worker():
    try:
        locked_rounds()
    except Exception:
        # One thread's error ends the scenario at once, rather than leaving
        # the others blocked on a lock nobody will release.
        traceback.print_exc()
        sys.stdout.flush()
        os._exit(1)


def locked_rounds():
    c = redis.Redis.from_url(URL, protocol=PROTOCOL)
    for _ in range(ROUNDS):
        with c.lock("lock:counter", timeout=10, blocking_timeout=30, sleep=0.005):
            v = int(c.get("unsafe") or 0)
            time.sleep(0.001)
            c.set("unsafe", v + 1)


threads = [threading.Thread(target=worker) for _ in range(THREADS)]
for t in threads:
    t.start()
for t in threads:
    t.join()
equal(int(r.get("unsafe")), THREADS * ROUNDS, "read-modify-write under the lock by 4 threads")
equal(r.exists("lock:counter"), 0, "the lock is released after the last holder")

# Non-blocking acquire fails while held; extend; release; not-owned errors.
a = r.lock("lock:x", timeout=2)
b = r.lock("lock:x", timeout=2)
check(a.acquire(blocking=False), "first acquire")
check(not b.acquire(blocking=False), "second acquire fails while held")
check(a.owned() and not b.owned(), "owned() tells the holder")
check(a.extend(3), "extend adds 3 s")
within(r.pttl("lock:x") / 1000, 4.0, 5.0, "TTL after extend (s)")
check(a.reacquire(), "reacquire resets the timeout")
within(r.pttl("lock:x") / 1000, 1.0, 2.0, "TTL after reacquire (s)")
try:
    b.release()
    released_other = True
except Exception:
    released_other = False
check(not released_other, "a non-holder cannot release")
a.release()
equal(r.exists("lock:x"), 0, "release removes the key")
try:
    a.release()
    double = True
except Exception:
    double = False
check(not double, "releasing twice raises")

# A holder killed while holding: the lock frees itself at its timeout, and
# a blocked acquirer gets it then, not before.
holder = subprocess.Popen([sys.executable, "-c", f"""
import redis, time, sys
r = redis.Redis.from_url({URL!r}, protocol={PROTOCOL})
l = r.lock("lock:dead", timeout=1.5)
assert l.acquire(blocking=False)
print("held", flush=True)
time.sleep(60)
"""], stdout=subprocess.PIPE)
equal(holder.stdout.readline().strip(), b"held", "the doomed holder took the lock")
taken = time.monotonic()
holder.kill()
holder.wait()
waiter = r.lock("lock:dead", timeout=5)
got = waiter.acquire(blocking=True, blocking_timeout=10)
waited = time.monotonic() - taken
check(got, "a blocked acquirer gets the lock of a dead holder")
within(waited, 1.0, 3.0, "seconds until the dead holder's lock expired")
try:
    waiter.extend(1)
    extended = True
except LockNotOwnedError:
    extended = False
check(extended, "the new holder can extend")
waiter.release()
print(f"redispy-lock (RESP{PROTOCOL}): all checks passed")
