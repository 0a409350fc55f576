"""The job functions python-rq's workers import (by module path) in the rq
scenarios. Each run is recorded in a file outside the server, one line
per run appended with O_APPEND, so that "ran exactly once" is checked
against what really ran, not against what the server says."""

import os
import time


def _record(*fields):
    line = " ".join(str(f) for f in fields) + "\n"
    fd = os.open(os.path.join(os.environ["APPS_SCRATCH"], "runs.log"),
                 os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def square(i):
    _record("square", i)
    return i * i


def boom(i):
    _record("boom", i)
    raise ValueError(f"boom {i}")


def stamp(label):
    _record("stamp", label, f"{time.time():.3f}")
    return label


def step(label, *inputs):
    _record("step", label)
    return label + "".join(inputs)


def slow(i):
    """A job of the durability run: takes a moment, so that a crash lands
    among jobs in flight."""
    time.sleep(0.005)
    _record("slow", i)
    return i
