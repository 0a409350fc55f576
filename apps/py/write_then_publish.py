"""Write, then publish; the subscriber reads the key on receipt.

Celery's redis result backend stores a task's result and announces it in
one pipeline, `SETEX celery-task-meta-<id> ...` then `PUBLISH
celery-task-meta-<id> <result>`, and the client waiting for the result
may read the key as soon as the message arrives. That works only if the
write is visible to every connection before any subscriber gets the
message. This scenario does it 1,000 times under load:

- 4 publisher threads, 250 rounds each, each round one pipeline
  (transaction=False, as Celery's) of SETEX of a fresh key to a fresh value
  and PUBLISH of the key's name, on the channel `celery-task-meta-<id>`;
- 2 writer threads meanwhile SETting other keys as fast as they can, so
  that the publishers' writes share group commits with others;
- one subscriber, PSUBSCRIBEd to `celery-task-meta-*` (one pattern for all
  rounds, as a results consumer waiting on many tasks is, in effect), that
  GETs each key on its own second connection as each message arrives.

Every one of the 1,000 messages must arrive once, and every GET must
return the value written: zero misses.
"""

import sys
import threading
import uuid

import redis

from check import URL, equal, wait_until

PROTOCOL = int(sys.argv[1]) if len(sys.argv) > 1 else 2
PUBLISHERS, ROUNDS = 4, 250
r = redis.Redis.from_url(URL, decode_responses=True, protocol=PROTOCOL)
r.flushdb()

reader = redis.Redis.from_url(URL, decode_responses=True, protocol=PROTOCOL)
ps = r.pubsub(ignore_subscribe_messages=True)
ps.psubscribe("celery-task-meta-*")
wait_until(lambda: r.pubsub_numpat() == 1, 5, "the subscriber is subscribed")

expected = {}
received, misses = [], []
stop = threading.Event()


def subscriber():
    while len(received) < PUBLISHERS * ROUNDS:
        m = ps.get_message(timeout=10)
        if m is None:
            if stop.is_set():
                return
            continue
        key = m["data"]
        got = reader.get(key)
        received.append(key)
        if got is None or got != f"result of {key}":
            misses.append((key, got))


def publisher(p):
    client = redis.Redis.from_url(URL, decode_responses=True, protocol=PROTOCOL)
    for i in range(ROUNDS):
        key = f"celery-task-meta-{uuid.uuid4()}"
        expected[key] = p
        pipe = client.pipeline(transaction=False)
        pipe.setex(key, 600, f"result of {key}")
        pipe.publish(key, key)
        ok, receivers = pipe.execute()
        if ok is not True or receivers != 1:
            misses.append((key, f"pipeline replies {ok!r} {receivers!r}"))


def writer(w):
    client = redis.Redis.from_url(URL, decode_responses=True, protocol=PROTOCOL)
    i = 0
    while not stop.is_set():
        client.set(f"noise:{w}:{i % 500}", "x" * 100)
        i += 1


sub = threading.Thread(target=subscriber, daemon=True)
sub.start()
writers = [threading.Thread(target=writer, args=(w,), daemon=True) for w in range(2)]
publishers = [threading.Thread(target=publisher, args=(p,), daemon=True) for p in range(PUBLISHERS)]
for t in writers + publishers:
    t.start()
for t in publishers:
    t.join(120)
sub.join(30)
stop.set()
for t in writers:
    t.join(10)
equal(len(expected), PUBLISHERS * ROUNDS, "1,000 rounds published")
equal(sorted(received), sorted(expected), "every message received once")
equal(misses, [], "every key read on receipt held its value (misses)")
ps.close()
print(f"write-then-publish (RESP{PROTOCOL}): all checks passed")
