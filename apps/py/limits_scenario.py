"""limits (the library behind Flask-Limiter) on its redis storage: the
exact allow/deny sequence of each strategy, with hits placed in time.

Times are measured from the first hit; every hit is placed at least 250 ms
away from a boundary where its answer would change, so the sequence is
exact on a loaded machine too. Usage: limits_scenario.py fixed|moving|sliding
"""

import sys
import time

from limits import parse, storage, strategies

from check import URL, equal

which = sys.argv[1]
store = storage.storage_from_string(URL.replace("redis://", "redis://", 1))
store.reset()

if which == "fixed":
    limiter = strategies.FixedWindowRateLimiter(store)
    item = parse("3/2second")
    # The window starts at the first hit and lasts 2 s.
    plan = [(0.0, True), (0.0, True), (0.0, True), (0.0, False), (1.0, False),
            (2.25, True), (2.25, True), (2.25, True), (2.25, False)]
elif which == "moving":
    limiter = strategies.MovingWindowRateLimiter(store)
    item = parse("3/2second")
    # Each hit counts for 2 s after it was made.
    plan = [(0.0, True), (0.5, True), (1.0, True), (1.25, False),
            (2.25, True), (2.35, False), (2.75, True), (2.85, False)]
elif which == "sliding":
    limiter = strategies.SlidingWindowCounterRateLimiter(store)
    item = parse("4/2second")
    # Windows of 2 s from the first hit; the previous window's count is
    # weighted by the share of it still inside the last 2 s: at 2.75 s,
    # floor(4 * 1.25 / 2) = 2 of the previous 4 count, so 2 hits are
    # allowed; at 3.75 s, floor(4 * 0.25 / 2) = 0 count and the current
    # window holds 2, so 2 more are allowed.
    plan = [(0.0, True)] * 4 + [(0.0, False), (1.0, False),
            (2.75, True), (2.75, True), (2.75, False),
            (3.75, True), (3.75, True), (3.75, False)]
else:
    sys.exit(f"unknown strategy {which}")

got, want, at = [], [], []
t0 = None
for offset, allowed in plan:
    if t0 is not None:
        delay = t0 + offset - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    else:
        t0 = time.monotonic()
    at.append(round(time.monotonic() - t0, 3))
    got.append(limiter.hit(item, "client-1"))
    want.append(allowed)
print("hit times:", at)
equal(got, want, f"{which} window allow/deny sequence")

# Other identifiers are limited separately; test() consumes nothing.
equal([limiter.hit(item, "client-2") for _ in range(2)], [True, True], "another identifier has its own limit")
before = limiter.get_window_stats(item, "client-2").remaining
limiter.test(item, "client-2")
equal(limiter.get_window_stats(item, "client-2").remaining, before, "test() consumes nothing")
limiter.clear(item, "client-2")
equal(limiter.get_window_stats(item, "client-2").remaining, item.amount, "clear() restores the full amount")
print(f"limits-{which}: all checks passed")
