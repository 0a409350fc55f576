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
from check import SCRATCH, URL, check, equal, wait_until, within

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
try:
    # 200 tasks, results fetched.
    results = [add.delay(i, i) for i in range(200)]
    equal([r.get(timeout=60) for r in results], [2 * i for i in range(200)], "200 results fetched")
    adds = Counter(int(r[1]) for r in runs() if r[0] == "add")
    equal(sorted(adds), list(range(200)), "every task ran")
    equal(max(adds.values()), 1, "no task ran twice")

    # A chord: ten adds, then their sum.
    c = chord(add.s(i, 1) for i in range(10))(tsum.s())
    equal(c.get(timeout=30), sum(i + 1 for i in range(10)), "chord result")

    # A task that retries twice, 0.5 s apart, then succeeds.
    f = flaky.delay("f1")
    equal(f.get(timeout=30), "f1 ok after 2 retries", "retried task's result")
    tries = [r for r in runs() if r[0] == "flaky"]
    equal([int(r[2]) for r in tries], [0, 1, 2], "three attempts")
    for a, b in zip(tries, tries[1:]):
        within(float(b[3]) - float(a[3]), 0.5, 2.0, "retry delay (s)")

    # An ETA task (countdown 2 s).
    sent = time.time()
    e = stamp.apply_async(("eta",), countdown=2)
    within(e.get(timeout=30) - sent, 2.0, 3.5, "ETA task ran after (s)")

    # A warm restart of the worker in the middle of 200 tasks.
    slows = [slow.delay(i) for i in range(200)]
    wait_until(lambda: sum(1 for r in runs() if r[0] == "slow") >= 40, 60, "40 of 200 slow tasks ran")
finally:
    code = stop_worker(w)
done_before = sum(1 for r in runs() if r[0] == "slow")
print(f"worker 1 stopped (exit {code}) after {done_before} of 200 slow tasks")
check(done_before < 200, "the restart came in the middle of the run", done_before)
w = start_worker(2)
try:
    equal([r.get(timeout=90) for r in slows], list(range(200)), "all 200 results after the restart")
finally:
    stop_worker(w)
ran = Counter(int(r[1]) for r in runs() if r[0] == "slow")
equal(sorted(ran), list(range(200)), "every task ran across the restart")
equal(max(ran.values()), 1, "no task ran twice across the restart")
check("Traceback" not in worker_log(1) + worker_log(2), "no traceback in the workers' logs")
print("celery: all checks passed")
