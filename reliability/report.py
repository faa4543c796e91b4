"""Render ``docs/reliability.md`` from the test outcomes and the figures the tests recorded.

Pure functions of their inputs (no clock, no machine probing), so a test can render a report
from made-up records and check it. Figures are grouped by the title a test recorded them under,
one table per title, one row per record; a nested figure (outcomes by kind) is one cell.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from reliability.suite import AREAS, Area, area_of

FAILED = ("failed", "error")


@dataclass
class Outcome:
    """How one test node ended: passed, failed (in any phase) or skipped (with the reason)."""

    node: str
    outcome: str = "passed"
    seconds: float = 0.0
    message: str | None = None


@dataclass
class Run:
    """Everything the report states about one run."""

    command: str
    mode: str
    started: str
    seconds: float
    environment: dict[str, str]
    machine: dict[str, Any]
    versions: dict[str, str]
    outcomes: list[Outcome] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)
    pytest_exit: int = 0

    @property
    def failed(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.outcome in FAILED]

    @property
    def ok(self) -> bool:
        """True when tests ran and none failed: nothing lost, no untyped error."""
        return bool(self.outcomes) and not self.failed and self.pytest_exit in (0,)


def merge_outcomes(lines: Iterable[dict[str, Any]]) -> list[Outcome]:
    """One ``Outcome`` per node from the plugin's lines (setup, call, teardown phases):
    a failure in any phase fails the node; a skip in setup skips it."""
    merged: dict[str, Outcome] = {}
    for line in lines:
        got = merged.setdefault(line["node"], Outcome(line["node"]))
        got.seconds += line["seconds"]
        if got.outcome in FAILED:
            continue
        if line["outcome"] == "failed":
            got.outcome = "error" if line["when"] != "call" else "failed"
            got.message = line["message"]
        elif line["outcome"] == "skipped":
            got.outcome, got.message = "skipped", line["message"]
    return list(merged.values())


def _cell(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k}: {_cell(v)}" for k, v in value.items()) or "-"
    if isinstance(value, (list, tuple)):
        return ", ".join(_cell(v) for v in value) or "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.3g}"
    return str(value).replace("|", "\\|")


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _figures(records: list[dict[str, Any]], outcomes: dict[str, Outcome]) -> list[str]:
    """One table per recorded title: the figures as columns, the test's result last."""
    out: list[str] = []
    titles: dict[str, list[dict[str, Any]]] = {}
    for rec in records:
        titles.setdefault(rec["test"], []).append(rec)
    for title, recs in titles.items():
        columns: list[str] = []
        for rec in recs:
            columns += [k for k in rec["figures"] if k not in columns]
        rows = []
        for rec in recs:
            found = outcomes.get(rec.get("node") or "")
            result = found.outcome if found else "?"
            rows.append([_cell(rec["figures"].get(c, "")) for c in columns] + [result])
        out += [f"**{title}**", "", *_table([*columns, "result"], rows), ""]
    return out


def _area(area: Area, run: Run, outcomes: dict[str, Outcome]) -> list[str]:
    mine = [o for o in run.outcomes if area_of(o.node) == area.name]
    records = [r for r in run.records if area_of(r.get("node") or "") == area.name]
    counts = {k: sum(o.outcome == k for o in mine) for k in ("passed", "failed", "skipped")}
    counts["failed"] += sum(o.outcome == "error" for o in mine)
    out = [f"## {area.title}", "", area.claim, ""]
    out += [", ".join(f"{n} {k}" for k, n in counts.items()) + f" ({len(mine)} tests).", ""]
    kills = _kills_by_backend(records)
    if kills:
        out += ["SIGKILLs by backend: " + ", ".join(f"{b} {n:,}" for b, n in kills.items()), ""]
    out += _figures(records, outcomes)
    recorded = {r.get("node") for r in records}
    plain = [o for o in mine if o.node not in recorded]
    if plain:
        out += ["Tests without figures (the check is the test):", ""]
        out += _table(["test", "cases", "result", "seconds"], _grouped(plain))
        out.append("")
    return out


def _grouped(outcomes: list[Outcome]) -> list[list[str]]:
    """One row per test function: its parametrized cases counted, failures and skips named."""
    groups: dict[str, list[Outcome]] = {}
    for o in outcomes:
        groups.setdefault(o.node.split("[", 1)[0], []).append(o)
    rows = []
    for name, cases in groups.items():
        bad = [o for o in cases if o.outcome != "passed"]
        passed = len(cases) - len(bad)
        result = "; ".join([*([f"{passed} passed"] if passed else []), *map(_result, bad)])
        seconds = sum(o.seconds for o in cases)
        rows.append([f"`{name}`", str(len(cases)), result, f"{seconds:.1f}"])
    return rows


def _kills_by_backend(records: list[dict[str, Any]]) -> dict[str, int]:
    totals: dict[str, int] = {}
    for rec in records:
        figures = rec["figures"]
        if isinstance(figures.get("kills"), int):
            backend = str(figures.get("backend", "?"))
            totals[backend] = totals.get(backend, 0) + figures["kills"]
    return totals


def _summary(run: Run) -> list[str]:
    """One row per area: how many tests, how they ended, how long they took."""
    rows = []
    for area in AREAS:
        mine = [o for o in run.outcomes if area_of(o.node) == area.name]
        if mine:
            ended = [sum(o.outcome in kinds for o in mine) for kinds in _KINDS]
            seconds = sum(o.seconds for o in mine)
            rows.append([area.title, str(len(mine)), *map(str, ended), f"{seconds / 60:.1f}"])
    return [*_table(["area", "tests", "passed", "failed", "skipped", "minutes"], rows), ""]


_KINDS = (("passed",), FAILED, ("skipped",))


def _result(o: Outcome) -> str:
    return o.outcome + (f": {_cell(o.message)}" if o.message else "")


def render(run: Run) -> str:
    """The whole report as markdown."""
    outcomes = {o.node: o for o in run.outcomes}
    verdict = "PASSED: nothing lost, no untyped error" if run.ok else "FAILED"
    skipped = [o for o in run.outcomes if o.outcome == "skipped"]
    out = [
        "# Reliability report",
        "",
        f"**{verdict}** — {len(run.outcomes)} tests, {len(run.failed)} failed, "
        f"{len(skipped)} skipped, {len(run.records)} figure records.",
        "",
        f"Generated by `{run.command}` ({run.mode} mode) on {run.started}, "
        f"in {run.seconds / 60:.1f} minutes. Rerun it to check these figures on your machine; "
        "each figure comes from a test in `tests/`, named in the lists below or by its title.",
        "",
        *_summary(run),
    ]
    if run.failed:
        out += ["## Failures", ""]
        out += _table(
            ["test", "what happened"], [[f"`{o.node}`", _cell(o.message)] for o in run.failed]
        )
        out.append("")
    for area in AREAS:
        out += _area(area, run, outcomes)
    others = [o for o in run.outcomes if area_of(o.node) == "other"]
    if others:
        other = Area("other", "Other tests", "Selected with --select, outside the areas.", ())
        out += _area(other, run, outcomes)
    out += ["## Settings", ""]
    env = run.environment or {"(none)": "every test at its CI size"}
    out += _table(["variable", "value"], [[f"`{k}`", f"`{v}`"] for k, v in env.items()])
    out += ["", "## Machine", ""]
    facts = {**run.machine, **{f"version: {k}": v for k, v in run.versions.items()}}
    out += _table(["", ""], [[k, _cell(v)] for k, v in facts.items()])
    return "\n".join(out) + "\n"
