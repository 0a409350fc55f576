#!/usr/bin/env python3
"""What a group commit costs on PostgreSQL against SQLite (docs/scaling.md).

respite's writer takes whatever writes have queued, applies them in one
transaction and commits once: one durable commit (one fsync) for the group.
A PostgreSQL backend would keep that design with the writer on one
connection. This experiment measures the primitive both would rest on, on
this machine, with the same client and the same statements:

    one connection; BEGIN; G upserts of random keys (64-byte random values,
    keys uniform over KEYS); COMMIT; repeated for SECONDS,

for group sizes G (1, 16, 64, 256), durably on both sides (SQLite: WAL,
synchronous=FULL, 512-byte pages as respite uses; PostgreSQL: fsync=on,
synchronous_commit=on, the statements sent in pipeline mode so a group is
one round trip). It reports upserts per second, commit latency, CPU
microseconds per upsert of the client process (Python making the rows and
the calls; for SQLite also the engine, which runs in it) and of the
server's processes (PostgreSQL's postmaster and children), and bytes
written per upsert (/proc/PID/io write_bytes of the process(es) doing the
writes).

The PostgreSQL server is a throwaway cluster made with initdb in a
temporary directory on the same disk (Debian's postgresql package provides
the binaries; run as root, the cluster runs as the `postgres` user), never
the machine's own cluster.

    python3 scripts/bench_pg_group_commit.py [--seconds 10] [--groups 1,16,64,256]

Needs psycopg 3 (`pip install "psycopg[binary]"`), and for SQLite apsw
(`pip install apsw==3.54.1.0`: the SQLite respite links) or else Python's
own sqlite3 module (the system's SQLite, an older one).
"""

import argparse
import glob
import os
import random
import shutil
import sqlite3
import subprocess
import tempfile
import time

import psycopg

try:
    import apsw
except ImportError:
    apsw = None

TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pids):
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime + stime
        except (FileNotFoundError, ProcessLookupError):
            pass
    return total / TICK


def write_bytes(pids):
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/io") as f:
                for line in f:
                    if line.startswith("write_bytes:"):
                        total += int(line.split()[1])
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            pass
    return total


def percentile(sorted_values, p):
    if not sorted_values:
        return 0.0
    return sorted_values[min(len(sorted_values) - 1, int(len(sorted_values) * p))]


def run(label, group, seconds, keys, begin, upsert_group, commit, pids, own_io=False):
    rng = random.Random(group)
    lat = []
    n = 0
    io_pids = (lambda: [os.getpid()]) if own_io else pids
    cpu0, io0, own0 = cpu_seconds(pids()), write_bytes(io_pids()), time.process_time()
    t0 = time.perf_counter()
    end = t0 + seconds
    while True:
        start = time.perf_counter()
        if start >= end:
            break
        rows = [(f"key:{rng.randrange(keys)}", rng.randbytes(64)) for _ in range(group)]
        begin()
        upsert_group(rows)
        commit()
        lat.append(time.perf_counter() - start)
        n += group
    wall = time.perf_counter() - t0
    cpu, io = cpu_seconds(pids()) - cpu0, write_bytes(io_pids()) - io0
    own = time.process_time() - own0
    lat.sort()
    print(
        f"| {label} | {group} | {n / wall:,.0f} | {len(lat) / wall:,.0f} | "
        f"{percentile(lat, 0.5) * 1e3:.2f} | {percentile(lat, 0.99) * 1e3:.2f} | "
        f"{own / n * 1e6:.1f} | {cpu / n * 1e6:.1f} | {io / n:,.0f} |",
        flush=True,
    )


def prefill_rows(keys):
    rng = random.Random(0)
    return [(f"key:{i}", rng.randbytes(64)) for i in range(keys)]


def bench_sqlite(args, work):
    path = os.path.join(work, "bench.db")
    if apsw is not None:
        # apsw bundles the SQLite respite links (3.54.1).
        con = apsw.Connection(path).cursor()
        version = apsw.sqlite_lib_version()
    else:
        con = sqlite3.connect(path, isolation_level=None)
        version = sqlite3.sqlite_version
    con.execute("PRAGMA page_size = 512")
    con.execute("PRAGMA journal_mode = WAL")
    con.execute("PRAGMA synchronous = FULL")
    con.execute("CREATE TABLE kv (key TEXT PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID")
    con.execute("BEGIN")
    con.executemany("INSERT INTO kv VALUES (?, ?)", prefill_rows(args.keys))
    con.execute("COMMIT")
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    sql = "INSERT INTO kv VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value"
    for g in args.groups:
        run(
            f"SQLite {version}",
            g,
            args.seconds,
            args.keys,
            lambda: con.execute("BEGIN"),
            lambda rows: con.executemany(sql, rows),
            lambda: con.execute("COMMIT"),
            lambda: [],
            own_io=True,
        )
    if apsw is None:
        con.close()
    else:
        con.connection.close()


def pg_bin(name):
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if not found:
        raise SystemExit("PostgreSQL binaries not found (apt-get install postgresql)")
    return found[-1]


def as_postgres(cmd):
    if os.getuid() == 0:
        cmd = ["runuser", "-u", "postgres", "--"] + cmd
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def bench_postgres(args, work):
    data = os.path.join(work, "pgdata")
    sock = os.path.join(work, "sock")
    os.makedirs(sock)
    if os.getuid() == 0:
        shutil.chown(work, "postgres")
        shutil.chown(sock, "postgres")
    as_postgres([pg_bin("initdb"), "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8"])
    port = "54329"
    as_postgres(
        [
            pg_bin("pg_ctl"), "-D", data, "-w", "-l", os.path.join(work, "pg.log"),
            "-o", f"-p {port} -k {sock} -c listen_addresses='' -c fsync=on "
            "-c synchronous_commit=on -c shared_buffers=256MB -c max_wal_size=4GB",
            "start",
        ]
    )
    try:
        con = psycopg.connect(host=sock, port=port, user="postgres", dbname="postgres", autocommit=True)
        version = con.execute("SHOW server_version").fetchone()[0].split()[0]
        con.execute("CREATE TABLE kv (key TEXT PRIMARY KEY, value BYTEA NOT NULL)")
        with con.cursor() as cur:
            with cur.copy("COPY kv (key, value) FROM STDIN") as copy:
                for row in prefill_rows(args.keys):
                    copy.write_row(row)
        con.execute("CHECKPOINT")
        postmaster = int(open(os.path.join(data, "postmaster.pid")).readline())

        def pids():
            # The backend serving us and the server's own processes
            # (WAL writer, checkpointer, background writer).
            out = subprocess.run(["pgrep", "-P", str(postmaster)], capture_output=True, text=True).stdout
            return [postmaster] + [int(p) for p in out.split()]

        sql = "INSERT INTO kv VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value"

        def upsert_group(rows):
            with con.pipeline():
                with con.cursor() as cur:
                    cur.executemany(sql, rows)

        for g in args.groups:
            run(
                f"PostgreSQL {version}",
                g,
                args.seconds,
                args.keys,
                lambda: con.execute("BEGIN"),
                upsert_group,
                lambda: con.execute("COMMIT"),
                pids,
            )
        con.close()
    finally:
        as_postgres([pg_bin("pg_ctl"), "-D", data, "-m", "fast", "stop"])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--keys", type=int, default=100_000)
    p.add_argument("--groups", default="1,16,64,256")
    p.add_argument("--dir", default=None, help="where the files go (default: a temporary directory in /var/tmp)")
    args = p.parse_args()
    args.groups = [int(g) for g in args.groups.split(",")]
    work = tempfile.mkdtemp(prefix="pg-group-commit-", dir=args.dir or "/var/tmp")
    os.chmod(work, 0o755)
    try:
        print(
            "| engine | upserts per commit | upserts/s | commits/s | commit p50 ms | commit p99 ms "
            "| client CPU µs/upsert | server CPU µs/upsert | bytes written/upsert |"
        )
        print("|---|---|---|---|---|---|---|---|---|")
        bench_sqlite(args, work)
        bench_postgres(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
