"""python-rq: 200 jobs through `rq worker --burst`, results read back, a
failing job in the failed registry, dependencies run in order, and jobs
scheduled with enqueue_in run by a worker's scheduler on time.
"""

import os
import subprocess
import sys
import time
from collections import Counter
from datetime import timedelta

import redis
from rq import Queue
from rq.job import Job, JobStatus
from rq.registry import FailedJobRegistry, FinishedJobRegistry

import rq_jobs
from check import SCRATCH, URL, check, equal, wait_until, within

RQ = os.path.join(os.path.dirname(sys.executable), "rq")
conn = redis.Redis.from_url(URL)
conn.flushdb()
q = Queue("apps", connection=conn)


def runs():
    try:
        with open(os.path.join(SCRATCH, "runs.log")) as f:
            return [line.split() for line in f]
    except FileNotFoundError:
        return []


# 200 jobs, one that fails, and a chain of dependencies.
jobs = [q.enqueue(rq_jobs.square, i) for i in range(200)]
failing = q.enqueue(rq_jobs.boom, 7)
a = q.enqueue(rq_jobs.step, "a")
b = q.enqueue(rq_jobs.step, "b", "-after-a", depends_on=a)
c = q.enqueue(rq_jobs.step, "c", "-after-ab", depends_on=[a, b])
equal(b.get_status(), JobStatus.DEFERRED, "a job whose dependency has not run is deferred")
equal(len(q), 202, "jobs waiting in the queue (deferred ones not counted)")

def no_command_errors(output, who):
    """A worker logs the command errors it meets and goes on (its pub/sub
    thread just exits): any such error fails the scenario, shown."""
    errors = [line for line in output.splitlines() if "unknown command" in line]
    for line in errors[:3]:
        print(f"{who}: {line[:300]}")
    equal(len(errors), 0, f"command errors in the output of {who}")


started = time.monotonic()
burst = subprocess.run([RQ, "worker", "--burst", "--url", URL, "apps"], capture_output=True, text=True, timeout=120)
print(f"rq worker --burst: exit {burst.returncode} in {time.monotonic() - started:.1f}s")
if burst.returncode != 0:
    print(burst.stdout[-3000:], burst.stderr[-3000:])
no_command_errors(burst.stdout + burst.stderr, "rq worker --burst")
equal(burst.returncode, 0, "the burst worker exits 0")

ran = Counter(tuple(r[:2]) for r in runs())
equal(sorted(int(k[1]) for k in ran if k[0] == "square"), list(range(200)), "every square job ran")
equal(max(ran.values()), 1, "no job ran twice")
equal([j.return_value() for j in jobs], [i * i for i in range(200)], "200 results read back")
equal(len(q), 0, "the queue is empty")
equal(len(FinishedJobRegistry(queue=q)), 203, "finished registry holds the 200 jobs and the chain")

failed = FailedJobRegistry(queue=q)
equal(failed.get_job_ids(), [failing.id], "the failing job is in the failed registry")
failing.refresh()
equal(failing.get_status(), JobStatus.FAILED, "its status is failed")
check("ValueError: boom 7" in (failing.latest_result().exc_string or ""), "its exception is kept")

order = [r[1] for r in runs() if r[0] == "step"]
equal(order, ["a", "b", "c"], "dependencies ran in order")
equal(Job.fetch(c.id, connection=conn).return_value(), "c-after-ab", "the last dependent's result")

# Failed job requeued and run again (its second run fails again).
failed.requeue(failing.id)
equal(len(q), 1, "requeue puts the failed job back on the queue")
subprocess.run([RQ, "worker", "--burst", "--url", URL, "apps"], capture_output=True, timeout=60)
equal(sum(1 for r in runs() if r[0] == "boom"), 2, "the requeued job ran once more")

# Scheduled jobs: run by the scheduler of a long-running worker.
enqueued_at = time.time()
s1 = q.enqueue_in(timedelta(seconds=2), rq_jobs.stamp, "in2")
s2 = q.enqueue_in(timedelta(seconds=4), rq_jobs.stamp, "in4")
equal(s1.get_status(), JobStatus.SCHEDULED, "enqueue_in leaves the job scheduled")
log_path = os.path.join(SCRATCH, "scheduler-worker.log")
with open(log_path, "w") as log:
    worker = subprocess.Popen([RQ, "worker", "--with-scheduler", "--url", URL, "apps"],
                              stdout=log, stderr=subprocess.STDOUT)


def worker_output():
    with open(log_path, errors="replace") as f:
        return f.read()


try:
    wait_until(lambda: s2.get_status(refresh=True) == JobStatus.FINISHED or "unknown command" in worker_output(),
               30, "both scheduled jobs finished")
finally:
    worker.terminate()
    worker.wait(timeout=30)
no_command_errors(worker_output(), "rq worker --with-scheduler")
stamps = {r[1]: float(r[2]) for r in runs() if r[0] == "stamp"}
# rq keeps schedule times in whole seconds (the fraction is cut off, so
# a job may run up to 1 s early), and its scheduler looks for due jobs
# once a second.
within(stamps["in2"] - enqueued_at, 1.0, 4.5, "job scheduled in 2 s ran after (s)")
within(stamps["in4"] - enqueued_at, 3.0, 6.5, "job scheduled in 4 s ran after (s)")
equal(sorted(stamps), ["in2", "in4"], "each scheduled job ran once")
print("rq: all checks passed")
