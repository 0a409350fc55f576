"""redis-py's pub/sub consumer: SUBSCRIBE and PSUBSCRIBE, messages in
order, run_in_thread handlers, PUBSUB NUMSUB/NUMPAT, unsubscribe.

A consumer thread takes 200 messages on a channel and 50 on a pattern;
PUBLISH must report the number of receivers, and every message must
arrive exactly once, in order.
"""

import threading
import time

import redis

from check import URL, check, equal, wait_until

r = redis.Redis.from_url(URL, decode_responses=True)
r.flushdb()

# A blocking consumer loop, as applications write it.
ps = r.pubsub()
ps.subscribe("jobs")
ps.psubscribe("events.*")
first = [ps.get_message(timeout=5) for _ in range(2)]
equal(sorted(m["type"] for m in first), ["psubscribe", "subscribe"], "subscription confirmations")
equal(r.pubsub_numsub("jobs"), [("jobs", 1)], "PUBSUB NUMSUB jobs")
equal(r.pubsub_numpat(), 1, "PUBSUB NUMPAT")

got = []


def consume():
    while len(got) < 250:
        m = ps.get_message(timeout=10)
        if m is None:
            return
        got.append((m["type"], m.get("pattern"), m["channel"], m["data"]))


t = threading.Thread(target=consume)
t.start()
receivers = [r.publish("jobs", f"job-{i}") for i in range(200)]
receivers += [r.publish(f"events.{i % 5}", f"ev-{i}") for i in range(50)]
receivers.append(r.publish("nobody", "lost"))
t.join(30)
equal(receivers, [1] * 250 + [0], "PUBLISH reports one receiver each (0 for an unheard channel)")
equal(got[:200], [("message", None, "jobs", f"job-{i}") for i in range(200)],
      "200 channel messages once each, in order")
equal(got[200:], [("pmessage", "events.*", f"events.{i % 5}", f"ev-{i}") for i in range(50)],
      "50 pattern messages once each, in order")

ps.unsubscribe("jobs")
ps.punsubscribe("events.*")
wait_until(lambda: r.pubsub_numsub("jobs") == [("jobs", 0)], 5, "NUMSUB back to 0 after UNSUBSCRIBE")
equal(r.publish("jobs", "late"), 0, "PUBLISH after UNSUBSCRIBE reaches nobody")
ps.close()

# run_in_thread with a handler per channel, and normal commands on the
# same client meanwhile.
seen = []
ps2 = r.pubsub(ignore_subscribe_messages=True)
ps2.subscribe(**{"orders": lambda m: seen.append(m["data"])})
worker = ps2.run_in_thread(sleep_time=0.01, daemon=True)
wait_until(lambda: r.pubsub_numsub("orders") == [("orders", 1)], 5, "handler subscribed")
for i in range(20):
    r.publish("orders", f"o{i}")
    r.incr("published")
wait_until(lambda: len(seen) == 20, 10, "the handler saw 20 messages")
equal(seen, [f"o{i}" for i in range(20)], "handler messages in order")
worker.stop()
worker.join(5)
equal(r.get("published"), "20", "commands on the publishing client meanwhile")
print("redispy-pubsub: all checks passed")
