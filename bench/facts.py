"""Machine facts and exact versions, for the report."""

from __future__ import annotations

import os
import platform
import sqlite3
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

__all__ = ["machine", "main_versions"]


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory() -> str:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                return f"{int(line.split()[1]) / 2**20:.1f} GiB"
    except OSError:
        pass
    return "unknown"


def _filesystem(path: str) -> str:
    try:
        out = subprocess.run(["df", "-T", path], capture_output=True, text=True, check=True)
        fields = out.stdout.splitlines()[-1].split()
        return f"{fields[1]} ({fields[0]})"
    except (OSError, subprocess.SubprocessError, IndexError):
        return "unknown"


def _git(root: Path) -> str:
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "src"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + (" (src/ has uncommitted changes)" if dirty else "")


def fsync_ms(workdir: str, n: int = 50) -> float:
    """Median time of a 4 KiB write + fsync in ``workdir`` (what a durable commit costs here)."""
    import statistics
    import time

    path = os.path.join(workdir, "fsync-probe")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    samples = []
    try:
        for _ in range(n):
            os.write(fd, b"x" * 4096)
            start = time.perf_counter()
            os.fsync(fd)
            samples.append(time.perf_counter() - start)
    finally:
        os.close(fd)
        os.remove(path)
    return statistics.median(samples) * 1e3


def machine(workdir: str, root: Path) -> dict[str, Any]:
    return {
        "fsync_ms": fsync_ms(workdir),
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "memory": _memory(),
        "kernel": platform.release(),
        "os": platform.platform(),
        "filesystem": _filesystem(workdir),
        "python": sys.version.split()[0],
        "load_average": os.getloadavg(),
        "commit": _git(root),
    }


def main_versions() -> dict[str, str]:
    out = {"python": sys.version.split()[0], "sqlite (python)": sqlite3.sqlite_version}
    for name in ("agentledger", "msgspec", "orjson", "psycopg"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "not installed"
    return out
