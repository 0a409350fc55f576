"""The two servers every application scenario runs against.

A scenario is only worth something on respite if the same scenario passes
on redis-server: then a failure on respite is respite's, not the
harness's. This module starts either server on a port of its own, in a
directory of its own, and stops it again; `Server.kill` and
`Server.restart` let the durability scenario crash respited and bring it
back on the same files.

redis-server runs with `appendonly yes` and `appendfsync always`, the
configuration whose guarantees respite's default is compared with.
"""

import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESPITED = os.environ.get("RESPITED", os.path.join(ROOT, "target", "debug", "respited"))


def free_port():
    """A TCP port that was free a moment ago on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ping(port, timeout=0.5):
    """True if something on `port` answers PING with +PONG."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(b"PING\r\n")
            return s.recv(64).startswith(b"+PONG")
    except OSError:
        return False


class Server:
    """One server process: `kind` is "respite" or "redis"."""

    def __init__(self, kind, workdir=None):
        self.kind = kind
        self.dir = workdir or tempfile.mkdtemp(prefix=f"apps-{kind}-")
        self.log_path = os.path.join(self.dir, "server.log")
        self.proc = None
        self.port = None

    @property
    def url(self):
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout=30):
        if self.kind == "respite":
            self._start_respite(timeout)
        else:
            self._start_redis(timeout)
        return self

    def _start_respite(self, timeout):
        if not os.access(RESPITED, os.X_OK):
            raise RuntimeError(f"{RESPITED} not built (cargo build -p respite-daemon)")
        # The port of the first start is kept across restarts, so clients
        # reconnect to the same address after a crash.
        port = self.port or 0
        log = open(self.log_path, "a")
        start_at = log.tell()
        self.proc = subprocess.Popen(
            [RESPITED, "--port", str(port), "--db", os.path.join(self.dir, "respite.db")],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
        )
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"respited exited with {self.proc.returncode}: {self.tail()}")
            with open(self.log_path) as f:
                f.seek(start_at)
                m = re.search(r"listening on tcp \S*:(\d+)", f.read())
            if m and ping(int(m.group(1))):
                self.port = int(m.group(1))
                return
            time.sleep(0.05)
        raise RuntimeError(f"respited did not start in {timeout}s: {self.tail()}")

    def _start_redis(self, timeout):
        if shutil.which("redis-server") is None:
            raise RuntimeError("redis-server not found")
        port = self.port or free_port()
        log = open(self.log_path, "a")
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", self.dir,
             "--save", "", "--appendonly", "yes", "--appendfsync", "always"],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
        )
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.proc.returncode}: {self.tail()}")
            if ping(port):
                self.port = port
                return
            time.sleep(0.05)
        raise RuntimeError(f"redis-server did not start in {timeout}s: {self.tail()}")

    def kill(self):
        """SIGKILL: a crash, with whatever was in flight."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def restart(self, timeout=60):
        """Starts again on the same files and port after `kill`."""
        self.kill()
        return self.start(timeout)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()

    def cleanup(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def tail(self, lines=15):
        try:
            with open(self.log_path, errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return ""
