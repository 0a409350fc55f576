#!/usr/bin/env python3
"""A client that never reads its replies, against a running server: SET
big to a 1 MB value, then N pipelined `GET big` from a connection with a
4 KB receive buffer that never reads. Prints the server's RSS before,
while the replies are stuck (after 3 s), and 2 s after the client closed,
plus its CLIENT LIST line (omem).

    scripts/unread_replies.py N PORT PID
    scripts/unread_replies.py 300 6379 $(pidof respited)

docs/benchmarks.md, "A client that never reads", has the figures.
"""
import socket
import sys
import time


def rss(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) * 1024
    return 0


def cmd(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


def main():
    n, port, pid = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    c = socket.create_connection(("127.0.0.1", port))
    c.sendall(cmd("SET", "big", b"v" * (1 << 20)))
    c.recv(100)
    before = rss(pid)
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", port))
    s.sendall(cmd("GET", "big") * n)
    time.sleep(3)
    stuck = rss(pid)
    c.sendall(cmd("CLIENT", "LIST"))
    time.sleep(0.2)
    listing = c.recv(1 << 20).decode(errors="replace")
    s.close()
    time.sleep(2)
    after = rss(pid)
    mb = 1 << 20
    print(f"{n} GETs of 1 MB unread: RSS {before / mb:.0f} MB before, "
          f"{stuck / mb:.0f} MB stuck, {after / mb:.0f} MB after close")
    for line in listing.splitlines():
        if "cmd=get" in line:
            print(line)


if __name__ == "__main__":
    main()
