"""The durability run: a job framework working 1,000 jobs while its server
is SIGKILLed and restarted on the same files and port.

    durability.py sidekiq [N]

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
import time
from collections import Counter

import redis

import servers
from check import SCRATCH, check, equal, wait_until

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# What each framework promises when the server dies under it: how many
# acknowledged jobs it may lose, and how many it may run twice.
GUARANTEES = {
    # Basic fetch is BRPOP: a job is off the queue once popped. A pop
    # committed just before the crash whose reply never reached the
    # worker is gone (at most one per fetching thread, the concurrency);
    # nothing is ever handed out twice.
    "sidekiq": {"concurrency": 5, "may_lose": 5, "may_repeat": 0},
}


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
            worker = subprocess.Popen(
                ["sidekiq", "-r", os.path.join(HERE, "sidekiq", "jobs.rb"), "-c", str(g["concurrency"]), "-t", "5"],
                env=env, stdout=open(os.path.join(SCRATCH, "worker.log"), "w"), stderr=subprocess.STDOUT)
            procs.append(worker)
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
        wait_until(lambda: pusher.poll() is not None, 120, "the enqueuer finished")
        equal(pusher.returncode, 0, "the enqueuer exited 0")
        conn = redis.Redis.from_url(server.url)
        # Done: the queue is empty, and no run has been added for a while.
        last = [-1, time.monotonic()]

        def settled():
            count = len(ran())
            if count != last[0]:
                last[:] = [count, time.monotonic()]
            return conn.llen("queue:default") == 0 and time.monotonic() - last[1] > 3

        wait_until(settled, 120, "the worker emptied the queue")
    finally:
        for p in reversed(procs):
            if p.poll() is None:
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
    lost = sorted(acked - set(runs))
    twice = sorted(i for i, c in runs.items() if c > 1)
    ran_failed = sorted(failed & set(runs))
    stray = sorted(set(runs) - acked - failed)
    print(f"| {framework} | {kind} | {n} | {len(acked)} | {len(failed)} ({len(ran_failed)} ran) | "
          f"{acked_at_kill - at_kill} | {len(set(runs))} | {len(lost)} | {len(twice)} |")
    if lost:
        print(f"acknowledged but never ran: {lost[:20]}")
    if twice:
        print(f"ran more than once: {twice[:20]}")
    equal(stray, [], "no job ran that was never enqueued")
    check(len(lost) <= g["may_lose"], f"acknowledged jobs lost: {len(lost)} (the framework may lose {g['may_lose']})")
    check(len(twice) <= g["may_repeat"], f"jobs run twice: {len(twice)} (the framework may repeat {g['may_repeat']})")
    print(f"durability {framework}: all checks passed")


if __name__ == "__main__":
    main()
