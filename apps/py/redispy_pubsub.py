"""redis-py's pub/sub consumer: SUBSCRIBE and PSUBSCRIBE, messages in
order, get_message, listen(), run_in_thread with channel and pattern
handlers, PUBSUB NUMSUB/NUMPAT, unsubscribe.

    redispy_pubsub.py [2|3]     the protocol (RESP2 by default)

A consumer thread takes 200 messages on a channel and 50 on a pattern;
PUBLISH must report the number of receivers, and every message must
arrive exactly once, in order. With RESP3 the messages come as push
frames, and the subscribed connection still answers ordinary commands.
"""

import sys
import threading

import redis

from check import URL, equal, wait_until

PROTOCOL = int(sys.argv[1]) if len(sys.argv) > 1 else 2
r = redis.Redis.from_url(URL, decode_responses=True, protocol=PROTOCOL)
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
ps2.close()

# listen(): the generator loop most consumers are written as, ended by a
# "stop" message; a subscription added from another thread meanwhile.
ps3 = r.pubsub()
ps3.subscribe("feed")
heard = []


def listener():
    for m in ps3.listen():
        heard.append((m["type"], m["channel"], m["data"]))
        if m["type"] == "message" and m["data"] == "stop":
            return


t = threading.Thread(target=listener, daemon=True)
t.start()
wait_until(lambda: r.pubsub_numsub("feed") == [("feed", 1)], 5, "listen() subscribed")
for i in range(100):
    r.publish("feed", f"f{i}")
ps3.subscribe("feed2")
wait_until(lambda: r.pubsub_numsub("feed2") == [("feed2", 1)], 5, "a second channel added while listening")
r.publish("feed2", "other")
r.publish("feed", "stop")
t.join(10)
equal(t.is_alive(), False, "listen() ended at the stop message")
equal(heard, [("subscribe", "feed", 1)] + [("message", "feed", f"f{i}") for i in range(100)]
      + [("subscribe", "feed2", 2), ("message", "feed2", "other"), ("message", "feed", "stop")],
      "listen() saw the confirmations and 102 messages in order")
ps3.close()

# Pattern handlers in run_in_thread, beside a channel handler; a message
# that matches both a channel and a pattern reaches each handler once,
# the channel's first.
by = []
ps4 = r.pubsub(ignore_subscribe_messages=True)
ps4.psubscribe(**{"alerts.*": lambda m: by.append(("p", m["pattern"], m["channel"], m["data"]))})
ps4.psubscribe(**{"alerts.disk?": lambda m: by.append(("q", m["pattern"], m["channel"], m["data"]))})
ps4.subscribe(**{"alerts.disk1": lambda m: by.append(("c", None, m["channel"], m["data"]))})
worker = ps4.run_in_thread(sleep_time=0.01, daemon=True)
wait_until(lambda: r.pubsub_numpat() == 2, 5, "two pattern handlers subscribed")
equal(r.publish("alerts.cpu", "hot"), 1, "alerts.cpu reaches one pattern")
equal(r.publish("alerts.disk1", "full"), 3, "alerts.disk1 reaches the channel and both patterns")
equal(r.publish("alertsXdisk1", "no"), 0, "a near miss matches no pattern")
wait_until(lambda: len(by) == 4, 10, "the handlers saw 4 messages")
equal(by[0], ("p", "alerts.*", "alerts.cpu", "hot"), "the pattern handler's message")
equal(by[1], ("c", None, "alerts.disk1", "full"), "the channel subscriber is served first")
equal(sorted(by[2:]), [("p", "alerts.*", "alerts.disk1", "full"), ("q", "alerts.disk?", "alerts.disk1", "full")],
      "then each matching pattern once")
worker.stop()
worker.join(5)
ps4.close()

if PROTOCOL == 3:
    # A RESP3 subscribed connection keeps serving commands; pushes arrive
    # between replies, never inside one.
    ps5 = r.pubsub()
    ps5.subscribe("mixed")
    equal(ps5.get_message(timeout=5)["type"], "subscribe", "RESP3 subscribe confirmation")
    conn = ps5.connection
    for i in range(20):
        r.publish("mixed", f"m{i}")
        conn.send_command("SET", f"k{i}", f"v{i}")
        conn.send_command("GET", f"k{i}")
    replies, pushes = [], []
    while len(replies) < 40 or len(pushes) < 20:
        reply = conn.read_response(push_request=True)
        (pushes if isinstance(reply, list) and reply and reply[0] == "message" else replies).append(reply)
    equal(replies, [x for i in range(20) for x in ("OK", f"v{i}")], "SET and GET on the subscribed connection")
    equal([p[2] for p in pushes], [f"m{i}" for i in range(20)], "the 20 pushes, in order, between them")
    ps5.close()
print(f"redispy-pubsub (RESP{PROTOCOL}): all checks passed")
