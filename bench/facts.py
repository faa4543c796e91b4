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


def machine(workdir: str, root: Path) -> dict[str, Any]:
    return {
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
