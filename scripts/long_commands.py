#!/usr/bin/env python3
"""Long commands against a running server: MSET of N keys, WATCH of N keys,
EXISTS of N keys, DEL of N keys, each sent on its own connection while a
probe client runs SET in a loop on another. Prints each command's time to
its reply, the probe's slowest SET meanwhile and, given the pid of a
respited, the CPU time of its writer thread and of the whole process
during the command (from /proc).

    scripts/long_commands.py N PORT [OPS] [PID]
    scripts/long_commands.py 1000000 6379 MSET,DEL $(pidof respited)

OPS is a comma-separated subset of MSET,WATCH,EXISTS,DEL, run in that
order (default MSET,DEL:
redis-server 7.0's WATCH of a million keys is quadratic and does not
finish in minutes). docs/benchmarks.md, "Long commands", has the figures.
"""
import os
import socket
import sys
import threading
import time

N = int(sys.argv[1])
PORT = int(sys.argv[2])
OPS = (sys.argv[3] if len(sys.argv) > 3 else "MSET,DEL").split(",")
PID = sys.argv[4] if len(sys.argv) > 4 else None


def enc(*args):
    out = [b"*%d\r\n" % len(args)]
    for x in args:
        x = x if isinstance(x, bytes) else str(x).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(x), x))
    return b"".join(out)


def recvline(s):
    b = b""
    while not b.endswith(b"\r\n"):
        b += s.recv(1)
    return b


def writer_cpu():
    """CPU seconds of respited's writer thread so far (0 without a pid)."""
    if not PID:
        return 0.0
    for t in os.listdir(f"/proc/{PID}/task"):
        with open(f"/proc/{PID}/task/{t}/comm") as f:
            if f.read().strip() != "respite-writer":
                continue
        with open(f"/proc/{PID}/task/{t}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return 0.0


def process_cpu():
    """CPU seconds of the whole process so far (0 without a pid)."""
    if not PID:
        return 0.0
    with open(f"/proc/{PID}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def probe(stop, lat):
    o = socket.create_connection(("127.0.0.1", PORT))
    i = 0
    while not stop.is_set():
        t = time.time()
        o.sendall(enc("SET", "probe", i))
        recvline(o)
        lat.append(time.time() - t)
        i += 1


for name, args in [
    ("MSET", ["MSET"] + [x for i in range(N) for x in (f"k{i}", "v")]),
    ("WATCH", ["WATCH"] + [f"w{i}" for i in range(N)]),
    ("EXISTS", ["EXISTS"] + [f"k{i}" for i in range(N)]),
    ("DEL", ["DEL"] + [f"k{i}" for i in range(N)]),
]:
    if name not in OPS:
        continue
    req = enc(*args)
    big = socket.create_connection(("127.0.0.1", PORT))
    stop = threading.Event()
    lat = []
    th = threading.Thread(target=probe, args=(stop, lat))
    th.start()
    time.sleep(0.3)
    c0, p0 = writer_cpu(), process_cpu()
    t = time.time()
    big.sendall(req)
    r = recvline(big)
    el = time.time() - t
    c1, p1 = writer_cpu(), process_cpu()
    time.sleep(0.3)
    stop.set()
    th.join()
    cpu = f"; writer CPU {c1 - c0:.2f}s, process CPU {p1 - p0:.2f}s" if PID else ""
    print(f"{name} {N}: {el:.2f}s reply {r!r}; probe SET max latency "
          f"{max(lat) * 1000:.0f} ms, n={len(lat)}{cpu}")
