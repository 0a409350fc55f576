"""What every Python scenario shares: the server's URL and checks that say
what they checked.

A check that fails raises, so the scenario exits non-zero with the
message and the values compared; a check that holds prints one line, so a
run's output reads as the list of what was verified.
"""

import os
import sys
import time

URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
SCRATCH = os.environ.get("APPS_SCRATCH", "/tmp")


class CheckFailed(AssertionError):
    pass


def check(cond, what, *values):
    if not cond:
        raise CheckFailed(f"check failed: {what} {values if values else ''}")
    print(f"ok: {what}", flush=True)


def equal(got, want, what):
    if got != want:
        raise CheckFailed(f"check failed: {what}: got {got!r}, want {want!r}")
    print(f"ok: {what} ({_short(got)})", flush=True)


def within(value, low, high, what):
    if not (low <= value <= high):
        raise CheckFailed(f"check failed: {what}: {value:.3f} not in [{low}, {high}]")
    print(f"ok: {what} ({value:.3f} in [{low}, {high}])", flush=True)


def wait_until(cond, timeout, what, interval=0.05):
    """Polls `cond` until it is true; fails with `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(interval)
    raise CheckFailed(f"check failed: {what} (not within {timeout}s)")


def _short(v):
    s = repr(v)
    return s if len(s) < 80 else s[:77] + "..."


def note(msg):
    print(msg, file=sys.stdout, flush=True)
