"""The Celery application of the celery scenario: redis as broker and as
result backend, at the URL in REDIS_URL. Every task run is appended to a
file outside the server (O_APPEND), so "ran exactly once" is checked
against what really ran."""

import os
import time

from celery import Celery

URL = os.environ["REDIS_URL"]
app = Celery("apps", broker=URL, backend=URL)
app.conf.update(
    broker_connection_retry_on_startup=True,
    result_expires=600,
    worker_hijack_root_logger=False,
)

# The durability run (durability.py celery) configures Celery as a user
# who wants no task lost does: a task is acknowledged only after it ran
# (acks_late), one task reserved per worker process at a time, and a
# visibility timeout after which kombu puts a delivered but unacknowledged
# task back in the queue (8 s here instead of an hour, checked every
# second, so that the run ends in bounded time).
if os.environ.get("APPS_CELERY_DURABILITY"):
    app.conf.update(
        task_acks_late=True,
        worker_prefetch_multiplier=1,
        task_ignore_result=True,
        broker_transport_options={
            "visibility_timeout": 8,
            "unacked_restore_interval": 1,
            "unacked_restore_throttle": 1,
        },
    )


def _record(*fields):
    fd = os.open(os.path.join(os.environ["APPS_SCRATCH"], "runs.log"),
                 os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (" ".join(str(f) for f in fields) + "\n").encode())
    finally:
        os.close(fd)


@app.task
def add(x, y):
    _record("add", x)
    return x + y


@app.task
def tsum(values):
    _record("tsum", len(values))
    return sum(values)


@app.task(bind=True, max_retries=4, default_retry_delay=0.5)
def flaky(self, name):
    _record("flaky", name, self.request.retries, f"{time.time():.3f}")
    if self.request.retries < 2:
        raise self.retry(exc=RuntimeError(f"{name} attempt {self.request.retries}"))
    return f"{name} ok after {self.request.retries} retries"


@app.task
def stamp(label):
    now = time.time()
    _record("stamp", label, f"{now:.3f}")
    return now


@app.task
def slow(i):
    time.sleep(0.02)
    _record("slow", i)
    return i


@app.task
def durable(i):
    """A task of the durability run: takes a moment, so that a crash lands
    among tasks in flight; recorded under the name durability.py counts."""
    time.sleep(0.005)
    _record("slow", i)
