"""The durability run: a job framework working 1,000 jobs while its server
is SIGKILLed and restarted on the same files and port.

    durability.py sidekiq|rq|celery|bullmq [N]

Starts its own server (APPS_SERVER: respite or redis-server with
appendfsync always) and an enqueuer, and a worker once 40% of the jobs
are queued; once a third of the jobs have run (with a backlog still
queued and the enqueuer still going), kills the server with SIGKILL, restarts it a moment
later, and lets the worker reconnect and the enqueuer finish. Then every
job whose enqueue was acknowledged must have run, except jobs the
framework itself may lose (see GUARANTEES), and none may have run twice
beyond what the framework allows. Prints one row of the table in
docs/durability.md.
"""

import os
import subprocess
import sys
import threading
import time
from collections import Counter

import redis

import servers
from check import SCRATCH, CheckFailed, check, equal, wait_until

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# What each framework promises when the server dies under it: how many
# acknowledged jobs it may lose, and how many it may run twice.
GUARANTEES = {
    # Basic fetch is BRPOP: a job is off the queue once popped. A pop
    # committed just before the crash whose reply never reached the
    # worker is gone (at most one per fetching thread, the concurrency);
    # nothing is ever handed out twice.
    "sidekiq": {"concurrency": 5, "may_lose": 5, "may_park": 0, "may_repeat": 0},
    # Two `rq worker` processes (restarted when they exit: an rq worker
    # quits on a connection error met outside its dequeue loop). A job is
    # moved (LMOVE) to an intermediate queue as it is dequeued, then into
    # the started registry. One whose move committed but whose worker
    # never ran it (the reply was lost, or the worker quit) stays in one
    # of those two, from which rq's maintenance moves it to the
    # FailedJobRegistry (after a minute, or after the job's timeout): it
    # is parked, not run again and not silently lost; at most one per
    # worker. Nothing is handed out twice.
    "rq": {"concurrency": 2, "may_lose": 0, "may_park": 2, "may_repeat": 0},
    # One prefork worker of 4 processes, configured for no loss
    # (celery_app.py): acks_late, prefetch 1, a visibility timeout of 8 s.
    # kombu takes a task with BRPOP and then, in a second round trip,
    # records it in its `unacked` hash; a pop committed just before the
    # crash whose reply never reached the worker is gone (one BRPOP in
    # flight per worker). A task recorded there but not acknowledged (it
    # was running, or done with its acknowledgement lost at the crash) is
    # put back in the queue once the visibility timeout passes and runs
    # again: at least once, so some tasks run twice, at most the ones the
    # worker held at the kill (prefetch 1 per process, counting the one
    # running: 4). A worker that quits on the lost connection (Celery
    # 5.7's sometimes does, on either server) is restarted; the tasks it
    # held come back the same way.
    "celery": {"concurrency": 4, "may_lose": 1, "may_park": 0, "may_repeat": 4},
    # One worker, concurrency 4 (bullmq/durability.mjs). Jobs are added and
    # taken by Lua scripts (each one command, atomic); a job taken holds a
    # lock (5 s) and sits in the active list until its completion is
    # recorded. If the server dies in between, the job stays active; once
    # its lock lapses the stalled-job check puts it back in the wait list
    # and it runs again (at least once; at most the 4 active at the kill
    # run twice), or, stalled a second time, it lands in the failed set
    # (parked). Nothing acknowledged is lost.
    "bullmq": {"concurrency": 4, "may_lose": 0, "may_park": 4, "may_repeat": 4},
}


def rq_enqueue(url, n):
    """The enqueuing side of the rq run, in a thread: like the Sidekiq
    enqueuer, 40% at once and the rest one every 5 ms, each outcome in
    pushes.log ("acked I ID" or "failed I ERROR"), failed enqueues not
    retried."""
    from rq import Queue

    import rq_jobs

    q = Queue("apps", connection=redis.Redis.from_url(url))
    with open(os.path.join(SCRATCH, "pushes.log"), "a", buffering=1) as log:
        for i in range(n):
            try:
                job = q.enqueue(rq_jobs.slow, i)
                log.write(f"acked {i} {job.id}\n")
            except redis.exceptions.RedisError as e:
                log.write(f"failed {i} {type(e).__name__}\n")
                time.sleep(0.05)
            if i >= n * 0.4:
                time.sleep(0.01)
        log.write("done\n")


def celery_enqueue(n):
    """The enqueuing side of the Celery run, in a thread: like the others,
    40% at once and the rest one every 5 ms, each outcome in pushes.log.
    apply_async(retry=False): a publish that fails is reported, not
    retried (kombu would otherwise retry it, and could push it twice)."""
    from celery_app import durable

    with open(os.path.join(SCRATCH, "pushes.log"), "a", buffering=1) as log:
        for i in range(n):
            try:
                result = durable.apply_async((i,), retry=False)
                log.write(f"acked {i} {result.id}\n")
            except Exception as e:  # kombu's OperationalError, redis-py's errors
                log.write(f"failed {i} {type(e).__name__}\n")
                time.sleep(0.05)
            if i >= n * 0.4:
                time.sleep(0.005)
        log.write("done\n")


class Supervised:
    """A worker process restarted whenever it exits, as systemd's
    Restart=always or supervisord would: an rq worker quits on a
    connection error outside its dequeue loop, by design."""

    all = []

    def __init__(self, argv, env, name):
        self.argv, self.env, self.name, self.restarts, self.exited = argv, env, name, 0, None
        self.log = open(os.path.join(SCRATCH, f"{name}.log"), "a")
        self.proc = subprocess.Popen(argv, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        Supervised.all.append(self)

    def supervise(self):
        # Restarted half a second after it exited, at the earliest.
        if self.proc.poll() is not None and self.exited is None:
            self.exited = time.monotonic()
            self.log.flush()
            with open(self.log.name, errors="replace") as f:
                tail = [line.rstrip()[:200] for line in f.readlines()[-6:]]
            print(f"{self.name} exited with {self.proc.returncode}; restarting it. Its log ended:\n  "
                  + "\n  ".join(tail), flush=True)
        if self.exited is not None and time.monotonic() - self.exited > 0.5:
            self.exited = None
            self.restarts += 1
            self.proc = subprocess.Popen(self.argv, env=self.env, stdout=self.log, stderr=subprocess.STDOUT)

    def poll(self):
        return self.proc.poll()

    def terminate(self):
        self.proc.terminate()

    def wait(self, timeout):
        return self.proc.wait(timeout)

    def kill(self):
        self.proc.kill()


# Command errors a framework's worker logs that are not this run's
# business: Sidekiq's scheduled-set poller needs Lua (the
# sidekiq-scheduled scenario waits for it), which plain jobs never touch.
IGNORED = {"sidekiq": "unknown command 'script'"}


def worker_errors():
    """The command errors the workers logged (they log them and go on)."""
    ignored = IGNORED.get(sys.argv[1], "\0")
    errors = set()
    for s in Supervised.all:
        with open(s.log.name, errors="replace") as f:
            errors |= {line.strip()[:200] for line in f if "unknown command" in line and ignored not in line}
    return sorted(errors)


def supervised(cond):
    """`cond`, with every supervised worker restarted if it exited; a
    command error in a worker's log ends the wait at once."""
    def check_and_supervise():
        for s in Supervised.all:
            s.supervise()
        errors = worker_errors()
        if errors:
            raise CheckFailed(f"a worker met a command error: {errors[0]}")
        return cond()
    return check_and_supervise


def lines(name):
    try:
        with open(os.path.join(SCRATCH, name)) as f:
            return [line.split() for line in f]
    except FileNotFoundError:
        return []


def main():
    framework = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    g = GUARANTEES[framework]
    kind = os.environ["APPS_SERVER"]
    server = servers.Server(kind).start()
    env = dict(os.environ, REDIS_URL=server.url)
    procs = []
    try:
        acked_count = lambda: sum(1 for p in lines("pushes.log") if p[0] == "acked")
        if framework == "sidekiq":
            pusher = subprocess.Popen(["ruby", os.path.join(HERE, "sidekiq", "durability_push.rb"), str(n)], env=env)
            procs.append(pusher)
            wait_until(lambda: acked_count() >= 0.4 * n, 60, "the first 40% enqueued")
            procs.append(Supervised(
                ["sidekiq", "-r", os.path.join(HERE, "sidekiq", "jobs.rb"), "-c", str(g["concurrency"]), "-t", "5"],
                env, "worker"))
        elif framework in ("rq", "celery"):
            if framework == "rq":
                pusher = threading.Thread(target=rq_enqueue, args=(server.url, n), daemon=True)
            else:
                os.environ.update(REDIS_URL=server.url, APPS_CELERY_DURABILITY="1")
                env.update(APPS_CELERY_DURABILITY="1")
                pusher = threading.Thread(target=celery_enqueue, args=(n,), daemon=True)
            pusher.start()
            pusher.poll = lambda: None if pusher.is_alive() else 0
            pusher.returncode = 0
            wait_until(lambda: acked_count() >= 0.4 * n, 60, "the first 40% enqueued")
            if framework == "rq":
                rq = os.path.join(os.path.dirname(sys.executable), "rq")
                for w in range(g["concurrency"]):
                    procs.append(Supervised(
                        [rq, "worker", "--url", server.url, "--maintenance-interval", "5", "apps"],
                        env, f"worker{w}"))
            else:
                celery = os.path.join(os.path.dirname(sys.executable), "celery")
                procs.append(Supervised(
                    [celery, "-A", "celery_app", "worker", "-c", str(g["concurrency"]), "-n", "dur@%h",
                     "--loglevel=INFO"], env, "worker"))
        elif framework == "bullmq":
            script = os.path.join(HERE, "bullmq", "durability.mjs")
            pusher = subprocess.Popen(["node", script, "push", str(n)], env=env)
            procs.append(pusher)
            wait_until(lambda: acked_count() >= 0.4 * n, 60, "the first 40% enqueued")
            procs.append(Supervised(["node", script, "work"], env, "worker"))
        ran = lambda: [r for r in lines("runs.log") if r[0] == "slow"]
        wait_until(lambda: len(ran()) >= n // 3, 60, f"{n // 3} jobs ran before the crash")
        server.kill()
        killed_at = time.monotonic()
        at_kill = len(ran())
        acked_at_kill = acked_count()
        time.sleep(1.0)
        server.restart()
        recovered = time.monotonic() - killed_at
        print(f"killed {kind} after {at_kill} runs and {acked_at_kill} acknowledged enqueues; "
              f"back after {recovered:.1f}s")
        # The crash must find acknowledged jobs still waiting in the queue,
        # or it tests nothing about what the server kept.
        check(acked_at_kill - at_kill >= 50, f"a backlog at the kill ({acked_at_kill - at_kill} jobs)")
        wait_until(supervised(lambda: pusher.poll() is not None), 120, "the enqueuer finished")
        equal(pusher.returncode, 0, "the enqueuer exited 0")
        conn = redis.Redis.from_url(server.url)
        # Done: the queue is empty, and no run has been added for a while.
        last = [-1, time.monotonic()]

        def settled():
            count = len(ran())
            if count != last[0]:
                last[:] = [count, time.monotonic()]
            # What must be empty for the run to be over: the queue, and
            # where a framework keeps jobs it will hand out again (Celery's
            # unacknowledged tasks, BullMQ's active jobs).
            empty = {
                "sidekiq": [conn.llen("queue:default")],
                "rq": [conn.llen("rq:queue:apps")],
                "celery": [conn.llen("celery"), conn.hlen("unacked")],
                "bullmq": [conn.llen("bull:dur:wait"), conn.llen("bull:dur:active")],
            }[framework]
            return not any(empty) and time.monotonic() - last[1] > 3

        wait_until(supervised(settled), 120, "the worker emptied the queue")
        # Where rq keeps the jobs it will move to the failed registry, and
        # the jobs it recorded as finished.
        parking, finished = set(), None
        if framework == "rq":
            finished = {m.decode().split(":")[0] for m in conn.zrange("rq:finished:apps", 0, -1)}
            for key in ("rq:queue:apps:intermediate",):
                parking |= {m.decode() for m in conn.lrange(key, 0, -1)}
            for key in ("rq:wip:apps", "rq:failed:apps"):
                parking |= {m.decode().split(":")[0] for m in conn.zrange(key, 0, -1)}
        elif framework == "bullmq":
            # Jobs stalled twice: failed, where an operator retries them.
            parking = {m.decode() for m in conn.zrange("bull:dur:failed", 0, -1)}
    finally:
        # Command errors the workers met (they log and go on) are shown:
        # a run whose bookkeeping failed is no pass.
        for e in worker_errors()[:5]:
            print(f"worker error: {e}")
        for p in reversed(procs):
            if isinstance(p, (subprocess.Popen, Supervised)) and p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    p.kill()
        server.cleanup()

    pushes = lines("pushes.log")
    check(pushes and pushes[-1] == ["done"], "the enqueuer went through all the jobs")
    acked = {int(p[1]) for p in pushes if p[0] == "acked"}
    failed = {int(p[1]) for p in pushes if p[0] == "failed"}
    runs = Counter(int(r[1]) for r in ran())
    acked_ids = {int(p[1]): p[2] for p in pushes if p[0] == "acked"}
    lost = sorted(acked - set(runs))
    # rq: an acknowledged job that never ran but sits where rq's
    # maintenance moves it to the failed registry is accounted for (an
    # operator sees it there and can requeue it).
    parked = [i for i in lost if acked_ids[i] in parking]
    gone = [i for i in lost if i not in parked]
    twice = sorted(i for i, c in runs.items() if c > 1)
    ran_failed = sorted(failed & set(runs))
    stray = sorted(set(runs) - acked - failed)
    restarts = sum(s.restarts for s in Supervised.all)
    print(f"| {framework} | {kind} | {n} | {len(acked)} | {len(failed)} ({len(ran_failed)} ran) | "
          f"{acked_at_kill - at_kill} | {len(set(runs))} | {len(gone)} | {len(parked)} | "
          f"{len(twice)} | {restarts} |")
    if lost:
        print(f"acknowledged but never ran: {lost[:20]} (parked for the failed registry: {parked})")
    if twice:
        print(f"ran more than once: {twice[:20]}")
    equal(stray, [], "no job ran that was never enqueued")
    if finished is not None:
        ids = {int(p[1]): p[2] for p in pushes if p[0] == "acked"}
        unrecorded = sorted(i for i in runs if i in ids and ids[i] not in finished)
        # A job running when the server died has run, but its worker could
        # not record it finished: at most one per worker.
        check(len(unrecorded) <= g["concurrency"],
              f"every job that ran is in the finished registry but those in flight at the kill "
              f"({len(unrecorded)} not: {unrecorded[:10]})")
    check(len(gone) <= g["may_lose"], f"acknowledged jobs lost: {len(gone)} (the framework may lose {g['may_lose']})")
    check(len(parked) <= g["may_park"],
          f"acknowledged jobs parked for the failed registry: {len(parked)} (the framework may park {g['may_park']})")
    check(len(twice) <= g["may_repeat"], f"jobs run twice: {len(twice)} (the framework may repeat {g['may_repeat']})")
    print(f"durability {framework}: all checks passed")


if __name__ == "__main__":
    main()
