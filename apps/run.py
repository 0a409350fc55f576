"""Runs every application scenario against redis-server and respited.

Each scenario is a program (Python, Node or Ruby) that drives one real
application against the server named by REDIS_URL and exits 0 only if the
results it checked hold: every job ran once, results equal, schedules kept
within a tolerance. It runs first against a fresh redis-server 7.0, where
it must pass (otherwise the scenario or its install is broken, not
respite), then against a fresh respited.

PENDING names the scenarios that cannot pass on respite yet because a
capability is missing, with that capability, and the error text that
shows it (a regular expression matched against the scenario's output,
case-insensitively). Such a scenario is still run on respite, and:
- fails as expected, with one of those texts in its output:
  "xfail: <capability it stopped at>";
- fails without any of them: FAIL, since something else broke first;
- passes: FAIL ("XPASS"), so that it is taken off PENDING and from then
  on must pass.
Every other scenario must pass on both servers. A tool a scenario needs
that is missing (node, ruby, sidekiq, the virtualenv) fails the run; no
scenario is skipped.

Usage: run.py [NAME ...] [--only respite|redis] [--keep]
The last line printed is "apps: N passed, N failed" (over scenario runs,
one per server; expected failures are counted on the line above it).
"""

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import servers

HERE = os.path.dirname(os.path.abspath(__file__))
PY = sys.executable
NODE_DIR = os.path.join(HERE, "bullmq")

LUA = ("Lua scripting (EVAL/EVALSHA/SCRIPT)", r"unknown command '(evalsha|eval|script|fcall)'")
STREAMS = ("streams (XADD/XRANGE/XREADGROUP...)", r"unknown command 'x[a-z]+'")

# name -> (program, timeout in seconds)
SCENARIOS = {
    "redispy-transactions": ([PY, "py/redispy_transactions.py"], 60),
    "redispy-lock": ([PY, "py/redispy_lock.py"], 60),
    "redispy-lock-resp3": ([PY, "py/redispy_lock.py", "3"], 60),
    "redispy-pubsub": ([PY, "py/redispy_pubsub.py"], 60),
    "redispy-pubsub-resp3": ([PY, "py/redispy_pubsub.py", "3"], 60),
    "write-then-publish": ([PY, "py/write_then_publish.py"], 120),
    "write-then-publish-resp3": ([PY, "py/write_then_publish.py", "3"], 120),
    "node-redis-pubsub": (["node", "bullmq/node_redis_pubsub.mjs", "2"], 60),
    "node-redis-pubsub-resp3": (["node", "bullmq/node_redis_pubsub.mjs", "3"], 60),
    "ioredis-pubsub": (["node", "bullmq/ioredis_pubsub.mjs"], 60),
    "node-redis-client-cache": (["node", "bullmq/node_redis_client_cache.mjs"], 60),
    "limits-fixed-window": ([PY, "py/limits_scenario.py", "fixed"], 60),
    "limits-moving-window": ([PY, "py/limits_scenario.py", "moving"], 60),
    "limits-sliding-window-counter": ([PY, "py/limits_scenario.py", "sliding"], 60),
    "rq": ([PY, "py/rq_scenario.py"], 180),
    "celery": ([PY, "py/celery_scenario.py"], 180),
    "sidekiq": (["ruby", "sidekiq/scenario.rb", "jobs"], 120),
    "sidekiq-scheduled": (["ruby", "sidekiq/scenario.rb", "scheduled"], 120),
    "bullmq": (["node", "bullmq/scenario.mjs"], 180),
    # Starts, kills and restarts its own server (OWN_SERVER).
    "durability-sidekiq": ([PY, "py/durability.py", "sidekiq", "1000"], 240),
    "durability-rq": ([PY, "py/durability.py", "rq", "1000"], 240),
    "durability-celery": ([PY, "py/durability.py", "celery", "1000"], 240),
    "durability-bullmq": ([PY, "py/durability.py", "bullmq", "1000"], 240),
    "reconnect": ([PY, "py/reconnect.py", "2"], 90),
    "reconnect-resp3": ([PY, "py/reconnect.py", "3"], 90),
    "reconnect-node-redis": ([PY, "py/reconnect.py", "node-redis", "2"], 90),
    "reconnect-node-redis-resp3": ([PY, "py/reconnect.py", "node-redis", "3"], 90),
    "reconnect-ioredis": ([PY, "py/reconnect.py", "ioredis"], 90),
}

# Scenarios that start their own server (of the kind in APPS_SERVER).
OWN_SERVER = {"durability-sidekiq", "durability-rq", "durability-celery", "durability-bullmq",
              "reconnect", "reconnect-resp3", "reconnect-node-redis", "reconnect-node-redis-resp3",
              "reconnect-ioredis"}

# Scenarios expected to fail on respite until capabilities land: name ->
# the capabilities it needs that respite lacks, each with the error text
# that shows a failure is that capability's. A scenario stops at the first
# it meets; the others are those its code is known to use further on.
PENDING = {}

# What each kind of program needs, checked before anything runs.
TOOLS = {
    "node": lambda: shutil.which("node") and all(
        os.path.isdir(os.path.join(NODE_DIR, "node_modules", m)) for m in ("bullmq", "ioredis", "redis")),
    "ruby": lambda: shutil.which("ruby") and shutil.which("sidekiq"),
}


def run_scenario(name, kind, keep):
    """Runs one scenario against a fresh server of `kind`: (ok, seconds, output)."""
    program, timeout = SCENARIOS[name]
    server = servers.Server(kind)
    scratch = tempfile.mkdtemp(prefix=f"apps-{name}-{kind}-")
    started = time.monotonic()
    try:
        env = dict(os.environ, APPS_SERVER=kind, APPS_SCRATCH=scratch,
                   PYTHONPATH=os.path.join(HERE, "py") + os.pathsep + HERE, PYTHONUNBUFFERED="1")
        if name not in OWN_SERVER:
            server.start()
            env.update(REDIS_URL=server.url, REDIS_PORT=str(server.port))
        proc = subprocess.Popen(program, cwd=HERE, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=timeout)
            ok = proc.returncode == 0
            out = out.decode(errors="replace")
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
            out = out.decode(errors="replace") + f"\n[timed out after {timeout}s]\n"
            ok = False
        # Whatever the scenario started (workers) goes with it.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if server.proc and server.proc.poll() is not None:
            ok = False
            out += f"\n[{kind} server died: exit {server.proc.returncode}]\n{server.tail()}"
    except Exception as e:  # the server did not start: the harness's failure
        ok, out = False, f"[harness] {e}\n"
    finally:
        server.stop()
        if not keep:
            server.cleanup()
            shutil.rmtree(scratch, ignore_errors=True)
        else:
            out += f"\n[kept: server dir {server.dir}, scratch {scratch}]\n"
    return ok, time.monotonic() - started, out


def show(out, lines=40):
    tail = out.rstrip().splitlines()[-lines:]
    print("    | " + "\n    | ".join(tail))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help="scenarios to run (default: all)")
    ap.add_argument("--only", choices=["respite", "redis"], help="run against one server only")
    ap.add_argument("--keep", action="store_true", help="keep server directories and scratch files")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every scenario's output")
    args = ap.parse_args()
    names = args.names or list(SCENARIOS)
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        sys.exit(f"unknown scenario(s): {', '.join(unknown)}; known: {', '.join(SCENARIOS)}")
    kinds = [args.only] if args.only else ["redis", "respite"]

    passed = failed = 0
    xfails, failures = [], []
    total_start = time.monotonic()
    for name in names:
        tool = SCENARIOS[name][0][0]
        if tool in TOOLS and not TOOLS[tool]():
            print(f"FAIL  {name}: {tool} (or its packages) missing; run `just apps`, which installs them")
            failed += 1
            failures.append(f"{name}: tool missing")
            continue
        for kind in kinds:
            ok, secs, out = run_scenario(name, kind, args.keep)
            pending = PENDING.get(name) if kind == "respite" else None
            needs = " and ".join(c[0] for c in pending or [])
            stop = None
            if pending:
                found = [(m.start(), c, m) for c in pending for m in [re.search(c[1], out, re.I)] if m]
                stop = min(found, key=lambda f: f[0]) if found else None
            if pending is None:
                verdict = "ok" if ok else "FAIL"
            elif ok:
                verdict = "FAIL"
                out += f"\n[XPASS: {name} passed on respite although PENDING says it needs " \
                       f"{needs}: take it off PENDING in apps/run.py]\n"
            elif stop:
                verdict = "xfail"
            else:
                verdict = "FAIL"
                out += f"\n[expected to fail on respite for want of {needs}, but it failed " \
                       f"without reaching any of them]\n"
            detail = ""
            if verdict == "xfail":
                _, cap, m = stop
                line = out[out.rfind("\n", 0, m.start()) + 1: out.find("\n", m.end())].strip()
                detail = f" (xfail: {cap[0]}; stops at: {line[:160]})"
            print(f"{verdict:5} {name} on {kind} in {secs:.1f}s{detail}", flush=True)
            if verdict == "FAIL" or args.verbose:
                show(out, 400 if args.verbose else 40)
            if verdict == "FAIL":
                failed += 1
                failures.append(f"{name} on {kind}")
            elif verdict == "xfail":
                xfails.append(f"{name}: stops at {stop[1][0]} (needs {needs})")
            else:
                passed += 1
    print(f"\napps: {time.monotonic() - total_start:.0f}s")
    for x in xfails:
        print(f"xfail on respite: {x}")
    print(f"apps: {len(xfails)} expected to fail on respite (PENDING)")
    for f in failures:
        print(f"FAILED: {f}")
    print(f"apps: {passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
