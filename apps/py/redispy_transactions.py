"""redis-py transactions: pipelines with transaction=True, and WATCH retry
loops under contention.

Eight threads each add 1 to a shared counter 50 times with the classic
optimistic loop (WATCH, GET, MULTI, SET, EXEC, retry on WatchError), and
eight more move amounts between two accounts with `Redis.transaction`;
the counter must end at exactly 400, the accounts' sum must be unchanged,
and a WATCHed key changed by another client must abort EXEC.
"""

import threading

import redis

from check import URL, check, equal

r = redis.Redis.from_url(URL, decode_responses=True)
r.flushdb()

# A pipeline with transaction=True: MULTI ... EXEC, replies in order.
with r.pipeline(transaction=True) as p:
    p.set("a", 1).incrby("a", 41).rpush("l", "x", "y").hset("h", mapping={"f": "v"}).lrange("l", 0, -1)
    equal(p.execute(), [True, 42, 2, 1, ["x", "y"]], "MULTI/EXEC pipeline replies")
equal(r.get("a"), "42", "the pipeline's writes are applied")

# A transaction whose WATCHed key another client changes is aborted.
other = redis.Redis.from_url(URL, decode_responses=True)
with r.pipeline() as p:
    p.watch("w")
    p.get("w")
    other.set("w", "changed")
    p.multi()
    p.set("w", "mine")
    try:
        p.execute()
        aborted = False
    except redis.WatchError:
        aborted = True
check(aborted, "EXEC after another client changed a WATCHed key raises WatchError")
equal(r.get("w"), "changed", "the aborted transaction wrote nothing")

# Unchanged WATCHed key: EXEC succeeds.
with r.pipeline() as p:
    p.watch("w")
    p.multi()
    p.set("w", "mine")
    equal(p.execute(), [True], "EXEC with an unchanged WATCHed key")

# The optimistic-locking loop under contention.
THREADS, ROUNDS = 8, 50
retries = [0] * THREADS


def incr_loop(i):
    c = redis.Redis.from_url(URL)
    for _ in range(ROUNDS):
        with c.pipeline() as p:
            while True:
                try:
                    p.watch("counter")
                    v = int(p.get("counter") or 0)
                    p.multi()
                    p.set("counter", v + 1)
                    p.execute()
                    break
                except redis.WatchError:
                    retries[i] += 1


threads = [threading.Thread(target=incr_loop, args=(i,)) for i in range(THREADS)]
for t in threads:
    t.start()
for t in threads:
    t.join()
equal(int(r.get("counter")), THREADS * ROUNDS, "counter after 8x50 WATCH/MULTI/EXEC increments")
print(f"WatchError retries: {sum(retries)}")

# Redis.transaction: moves between two accounts keep the sum.
r.mset({"acct:a": 1000, "acct:b": 1000})


def transfer(i):
    c = redis.Redis.from_url(URL)
    src, dst = ("acct:a", "acct:b") if i % 2 else ("acct:b", "acct:a")
    for n in range(25):
        def move(pipe):
            have = int(pipe.get(src))
            amount = min(have, 1 + (n + i) % 7)
            pipe.multi()
            pipe.decrby(src, amount)
            pipe.incrby(dst, amount)
        c.transaction(move, src, dst)


threads = [threading.Thread(target=transfer, args=(i,)) for i in range(THREADS)]
for t in threads:
    t.start()
for t in threads:
    t.join()
a, b = int(r.get("acct:a")), int(r.get("acct:b"))
equal(a + b, 2000, "sum of the two accounts after 200 concurrent transfers")
check(a >= 0 and b >= 0, "no account went negative", a, b)
print("redispy-transactions: all checks passed")
