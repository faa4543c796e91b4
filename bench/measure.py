"""What a child process measures around one operation: wall time, bytes written, peak RSS.

Standard library only: this module runs under agentledger's interpreter and under the peers'
virtual environment alike.

Bytes come from ``/proc/self/io`` (the whole process, background threads included):
``write_bytes`` counts pages the process dirtied in the page cache (what will reach the disk,
4 KiB granular); ``wchar`` counts bytes handed to ``write()``-like system calls. Peak RSS is
``VmHWM``, reset before each scenario through ``/proc/self/clear_refs`` so each scenario reports
its own peak.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Io",
    "Op",
    "dir_size",
    "measure",
    "peak_rss",
    "read_io",
    "reset_peak_rss",
    "turn_order",
]


@dataclass(frozen=True, slots=True)
class Io:
    """A reading of the process's I/O counters (zeros where ``/proc`` has none)."""

    write_bytes: int = 0
    wchar: int = 0

    def __sub__(self, other: Io) -> Io:
        return Io(self.write_bytes - other.write_bytes, self.wchar - other.wchar)


def read_io() -> Io:
    try:
        with open("/proc/self/io", "rb") as fh:
            fields = dict(line.split(b":", 1) for line in fh.read().splitlines())
    except OSError:
        return Io()
    return Io(int(fields[b"write_bytes"]), int(fields[b"wchar"]))


def reset_peak_rss() -> None:
    """Start a new peak-RSS window (Linux: writing 5 to clear_refs resets VmHWM)."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        pass


def peak_rss() -> int:
    """Peak resident set size, in bytes, since the last ``reset_peak_rss``."""
    try:
        with open("/proc/self/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


@dataclass(slots=True)
class Op:
    """One measured operation."""

    seconds: float
    io: Io
    value: Any = field(default=None, repr=False)


def measure(fn: Callable[[], Any]) -> Op:
    """Run ``fn`` once; the I/O counters are read outside the timed region."""
    before = read_io()
    start = time.perf_counter()
    value = fn()
    seconds = time.perf_counter() - start
    return Op(seconds, read_io() - before, value)


def dir_size(path: str) -> int:
    """Bytes of every regular file under ``path`` (a file's own size if it is one)."""
    if os.path.isfile(path):
        return os.path.getsize(path)
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(root, name))
            except OSError:
                pass
    return total


def turn_order(count: int, rep: int) -> list[int]:
    """The order in which ``count`` setups compared with each other (two session lengths, two
    store sizes) take their ``rep``-th turn at an operation: reversed every round. Taking turns
    makes a slower or faster stretch of a shared machine (another tenant, a frequency change)
    fall on every setup alike, where measuring one setup after the other put it on whichever
    ran then; reversing cancels what going first or second does to a figure."""
    return list(range(count)) if rep % 2 == 0 else list(reversed(range(count)))
