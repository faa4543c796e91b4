"""The report's PostgreSQL section: the systems on the one server side by side, their throughput
with 8 processes, and what agentledger's leases and connection pool cost.

Kept apart from ``bench.report`` (the whole-run tables) because it reads a second set of
results, ``bench.pg_throughput``'s, beside the scenarios'.
"""

from __future__ import annotations

from typing import Any

from bench.report import ON_POSTGRES, Results, _get, _intact, _missing, _ratio, ms, size, times
from bench.systems import SYSTEMS

__all__ = ["section"]

LAYOUT_NOTES = {
    "8 sessions": "each process appends to its own session",
    "1 session": "all 8 append to one session: agentledger reads it and saves with "
    "`expected_version`, again on a `ConflictError`; the Agents SDK's `add_items` locks the "
    "session row and inserts; LangGraph's `invoke` has no lock for a thread",
    "1 session, run lease": "agentledger only: each append takes the session's run lease "
    "(`Ledger.lease(session, wait=...)`), reads, appends and saves, as the agent runtime does",
}


def _side_by_side(results: Results, n: int) -> str:
    lines = [
        "| system | append a turn | x | middle edit | x | edit: server WAL | no-op save "
        "| reload | x | ids + edit after reload |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for spec in SYSTEMS:
        name = spec.name
        if name not in ON_POSTGRES or name not in results:
            continue
        ref = name == "agentledger-postgres"

        def cell(scenario: str, key: str, fmt: Any, name: str = name) -> str:
            value = _get(results, name, n, scenario, key)
            return fmt(value) if value is not None else _missing(results, name, n, scenario)

        def x(scenario: str, key: str, name: str = name, ref: bool = ref) -> str:
            if ref:
                return ""
            mine = _get(results, "agentledger-postgres", n, scenario, key)
            return times(_ratio(_get(results, name, n, scenario, key), mine))

        reload = results[name].get(n, {}).get("scenarios", {}).get("reload")
        lines.append(
            f"| {spec.label} | {cell('grow', 'append_seconds_mean', ms)} "
            f"| {x('grow', 'append_seconds_mean')} | {cell('edit', 'seconds', ms)} "
            f"| {x('edit', 'seconds')} | {cell('edit', 'server_wal_bytes', size)} "
            f"| {cell('noop', 'seconds', ms)} | {cell('reload', 'seconds', ms)} "
            f"| {x('reload', 'seconds')} | {_intact(reload, n)} |"
        )
    return "\n".join(lines) + "\n"


def _throughput(figures: dict[str, Any]) -> str:
    layouts: list[str] = []
    for res in figures.values():
        layouts += [k for k in res if k != "lease" and k not in layouts]
    lines = [
        "| system | " + " | ".join(f"8 processes, {k}" for k in layouts) + " |",
        "|---|" + "---:|" * len(layouts),
    ]
    for spec in SYSTEMS:
        res = figures.get(spec.name)
        if res is None:
            continue
        cells = []
        for layout in layouts:
            rec = res.get(layout)
            if rec is None:
                cells.append("n/a")
            elif "error" in rec:
                cells.append("failed")
            else:
                kept, expected = rec["messages_kept"], rec["messages_expected"]
                cell = f"{rec['appends_per_second']:,.0f} appends/s"
                if kept != expected:
                    cell += f" (**kept {kept:,} of {expected:,} messages**)"
                cells.append(cell)
        lines.append(f"| {spec.label} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _lease(figures: dict[str, Any]) -> str:
    lease = figures.get("agentledger-postgres", {}).get("lease")
    if not lease:
        return "Lease costs were not measured in this run.\n"
    if "error" in lease:
        return f"Lease costs could not be measured: {lease['error']}\n"
    return (
        f"agentledger's Postgres store opens a connection pool of {lease['pool_min']} to "
        f"{lease['pool_max']} connections (`PostgresStore(pool_min=1, pool_max=10)`, the "
        "defaults a URL gets) plus one connection of its own that holds every run lease (a "
        "session-level advisory lock, so a dead holder's lease ends with its connection). "
        f"Uncontended, taking a session's lease costs {ms(lease['take_seconds'])} and giving it "
        f"back {ms(lease['give_back_seconds'])} (medians of {lease['samples']}: one "
        "`pg_try_advisory_lock` / `pg_advisory_unlock` round trip each); the first lease of a "
        f"store also opens the lease connection: {ms(lease['first_lease_seconds'])}. A lease "
        "held by another process is waited for by polling, 10 ms doubling to 250 ms between "
        "tries, which is what bounds the run-lease column above.\n"
    )


def section(results: Results, throughput: dict[str, Any] | None, n: int) -> str:
    if not any(name in results for name in ON_POSTGRES) and not throughput:
        return ""
    parts = [
        f"\n## PostgreSQL side by side (issue 17), at {n:,} messages\n\n",
        "Every system below wrote to the same local server in this run, each into a schema of "
        "its own, with the server's default durability (`synchronous_commit=on`). x = the "
        "system's time ÷ agentledger's on Postgres. *Edit: server WAL* is the server's WAL "
        "growth during the edit.\n\n",
        _side_by_side(results, n),
    ]
    if throughput:
        parts += [
            "\n### Throughput with 8 processes\n\n",
            "Turns appended per second by 8 processes at once (see `bench/pg_throughput.py`), "
            "counted after a go given to all of them once each had connected and appended one "
            "turn; a system whose sessions then hold fewer messages than were appended lost "
            "turns to concurrent writers.\n\n",
            _throughput(throughput),
            "\n"
            + "".join(f"- *{k}*: {v}.\n" for k, v in LAYOUT_NOTES.items())
            + "\n### Connection pool and leases\n\n",
            _lease(throughput),
        ]
    return "".join(parts)
