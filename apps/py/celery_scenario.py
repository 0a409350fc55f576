"""Celery with redis as broker and result backend: 200 tasks through a
worker with their results fetched, a chord, a task that retries twice
then succeeds, an ETA task run on time, and a worker restarted (warm
shutdown, SIGTERM) in the middle of 200 tasks without losing or repeating
one.
"""

import os
import subprocess
import sys
import time
from collections import Counter

from celery import chord

from celery_app import add, app, flaky, slow, stamp, tsum
from check import SCRATCH, URL, CheckFailed, check, equal, wait_until, within

CELERY = os.path.join(os.path.dirname(sys.executable), "celery")
app.backend.client.flushdb()


def runs():
    try:
        with open(os.path.join(SCRATCH, "runs.log")) as f:
            return [line.split() for line in f]
    except FileNotFoundError:
        return []


def start_worker(n):
    log = open(os.path.join(SCRATCH, f"worker{n}.log"), "w")
    return subprocess.Popen(
        [CELERY, "-A", "celery_app", "worker", "-P", "threads", "-c", "4", "-n", f"w{n}@%h",
         "--loglevel=INFO"],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True), log


def show_worker_errors():
    """The workers' own errors, which a failed check alone would hide."""
    for n in (1, 2):
        try:
            lines = worker_log(n).splitlines()
        except FileNotFoundError:
            continue
        errors = [line for line in lines if "Error" in line or "ERROR" in line or "unknown command" in line]
        for line in errors[:8]:
            print(f"worker {n}: {line[:300]}")


def worker_command_error():
    for n in (1, 2):
        try:
            for line in worker_log(n).splitlines():
                if "unknown command" in line:
                    return line
        except FileNotFoundError:
            pass
    return None


def get_all(results, timeout):
    """Every result's value; fails at once if a worker met a command
    error (it logs it and goes on, so waiting would only hide it)."""
    deadline = time.monotonic() + timeout
    pending = list(results)
    while pending:
        error = worker_command_error()
        if error:
            raise CheckFailed(f"check failed: a worker met a command error: {error[:300]}")
        if time.monotonic() > deadline:
            raise CheckFailed(f"check failed: {len(pending)} results not ready within {timeout}s")
        pending = [r for r in pending if not r.ready()]
        time.sleep(0.1)
    return [r.get(timeout=10) for r in results]


def stop_worker(w):
    proc, log = w
    proc.terminate()  # warm shutdown: finish what is running, give back the rest
    try:
        proc.wait(timeout=30)
    finally:
        log.close()
    return proc.returncode


def worker_log(n):
    with open(os.path.join(SCRATCH, f"worker{n}.log"), errors="replace") as f:
        return f.read()


w = start_worker(1)
ok = False
try:
    # 200 tasks, results fetched.
    results = [add.delay(i, i) for i in range(200)]
    equal(get_all(results, 60), [2 * i for i in range(200)], "200 results fetched")
    adds = Counter(int(r[1]) for r in runs() if r[0] == "add")
    equal(sorted(adds), list(range(200)), "every task ran")
    equal(max(adds.values()), 1, "no task ran twice")

    # A chord: ten adds, then their sum.
    c = chord(add.s(i, 1) for i in range(10))(tsum.s())
    equal(get_all([c], 30)[0], sum(i + 1 for i in range(10)), "chord result")

    # A task that retries twice, 0.5 s apart, then succeeds.
    f = flaky.delay("f1")
    equal(get_all([f], 30)[0], "f1 ok after 2 retries", "retried task's result")
    tries = [r for r in runs() if r[0] == "flaky"]
    equal([int(r[2]) for r in tries], [0, 1, 2], "three attempts")
    for a, b in zip(tries, tries[1:]):
        within(float(b[3]) - float(a[3]), 0.5, 2.0, "retry delay (s)")

    # An ETA task (countdown 2 s).
    sent = time.time()
    e = stamp.apply_async(("eta",), countdown=2)
    within(get_all([e], 30)[0] - sent, 2.0, 3.5, "ETA task ran after (s)")

    # A warm restart of the worker in the middle of 200 tasks.
    slows = [slow.delay(i) for i in range(200)]
    wait_until(lambda: sum(1 for r in runs() if r[0] == "slow") >= 40, 60, "40 of 200 slow tasks ran")
    ok = True
finally:
    code = stop_worker(w)
    if not ok:
        show_worker_errors()
done_before = sum(1 for r in runs() if r[0] == "slow")
print(f"worker 1 stopped (exit {code}) after {done_before} of 200 slow tasks")
check(done_before < 200, "the restart came in the middle of the run", done_before)
w = start_worker(2)
ok = False
try:
    equal(get_all(slows, 90), list(range(200)), "all 200 results after the restart")
    ok = True
finally:
    stop_worker(w)
    if not ok:
        show_worker_errors()
ran = Counter(int(r[1]) for r in runs() if r[0] == "slow")
equal(sorted(ran), list(range(200)), "every task ran across the restart")
equal(max(ran.values()), 1, "no task ran twice across the restart")
check("Traceback" not in worker_log(1) + worker_log(2), "no traceback in the workers' logs")
print("celery: all checks passed")
