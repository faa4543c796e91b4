"""The ``--sizes`` and ``--systems`` a benchmark script is run with, checked alike everywhere:
a bad value ends the script with a message naming the option (``SystemExit``)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from bench.workload import TURN

__all__ = ["add_options", "sizes", "systems"]


def sizes(text: str | None, default: Sequence[int], minimum: int = TURN) -> list[int]:
    """Session lengths in messages, ascending: ``text`` (comma-separated), else ``default``;
    each a multiple of a turn (4 messages) and at least ``minimum``."""
    if not text:
        return sorted(default)
    try:
        chosen = sorted(int(s) for s in text.split(","))
    except ValueError:
        sys.exit(f"--sizes: comma-separated whole numbers, got {text!r}")
    if any(n % TURN or n < minimum for n in chosen):
        sys.exit(f"--sizes: each a multiple of {TURN} (a turn), at least {minimum}")
    return chosen


def systems(text: str | None, known: Sequence[str]) -> list[str]:
    """System names: ``text`` (comma-separated), else every one of ``known``."""
    chosen = text.split(",") if text else list(known)
    unknown = sorted(set(chosen) - set(known))
    if unknown:
        sys.exit(f"--systems: unknown {', '.join(unknown)}; choose from {', '.join(known)}")
    return chosen


def add_options(p: argparse.ArgumentParser, *, quick: str, systems: Sequence[str]) -> None:
    """The options every section script takes: ``--quick`` (what it does: ``quick``),
    ``--sizes``, ``--systems`` (of ``systems``), ``--out`` and ``--seed``."""
    p.add_argument("--quick", action="store_true", help=quick)
    p.add_argument("--sizes", help="comma-separated session lengths in messages (multiples of 4)")
    p.add_argument("--systems", help="comma-separated names (default: " + ",".join(systems) + ")")
    p.add_argument("--out", default="docs/benchmarks.md", help="the report to put the section in")
    p.add_argument("--seed", type=int, default=0, help="workload seed (default 0)")
