"""The scenarios, run the same way for every system; each system module supplies its natural API.

A child process builds one ``System`` for one size and calls ``run_scenarios``, which prints one
JSON line per scenario as soon as it is done (so a run killed by the time budget still reports
what finished):

A  grow: append the workload turn by turn, persisting after each turn as the system's users do.
   If the grow budget runs out, the rest is reported as a timeout and the append cost at full
   size is measured instead on a fresh store seeded in one bulk write (untimed) up to the last
   turns, which are then appended one by one.
B  edit: replace the middle tool result by a 200-character preview, persist it with the system's
   most natural edit API, reload in a fresh object and check the edit (and every id). Repeated
   on the next tool results, up to ``EDITS`` times while the samples stay under
   ``REPEAT_BUDGET``, and reported as the median.
C  no-op: reload into a fresh object and persist the unchanged list (median of up to
   ``REPEATS``).
D  reload: load into a fresh object; check ids and the edits (median of up to ``RELOADS``, each
   into its own fresh object). A system whose load defers decoding (agentledger's) also reports
   the first read of every message after a load: the median over the first ``READS`` reloads,
   each read before the next reload (one sample varied by 40% between runs, with the garbage
   collector's timing). Then, on the same object, the read a framework makes on every turn of
   a live session (the Agents SDK's Runner calls ``get_items`` each run): load again, every
   message read (median of ``AGAIN``). And where the system has one (``beside``), the same
   read through a new object on the store that object has open, as a server makes one for
   each request (median of ``AGAIN``).

Standard library only (peer systems run in their own virtual environment).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import time
from typing import Any

from bench.measure import Io, Op, dir_size, measure, peak_rss, reset_peak_rss
from bench.workload import TURN, edit_position, load_dicts, preview

__all__ = ["NotApplicable", "System", "emit", "run_scenarios"]

EDITS = 5  # tool results edited in B (the middle one first), for a median
REPEATS = 5  # no-op saves in C
RELOADS = 7  # reloads in D, each into a fresh object (a fast one varies most run to run)
READS = 3  # of them read whole once (the first read of a reload, median)
AGAIN = 5  # loads again on the first reload's object, each read whole
REPEAT_BUDGET = 1.0  # seconds: no further samples once a scenario's samples took this long


class NotApplicable(Exception):
    """The system has no API for this scenario; the message says why."""


def emit(record: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


class System:
    """One system under test. Subclasses implement the hooks below with the system's own API.

    ``items`` are the workload messages in the system's own type (built before timing);
    ``ids`` their ids; the hooks get a fresh handle from ``open`` for every scenario that asks
    for a fresh object.
    """

    name = "?"
    #: What each scenario calls, for the report.
    api: dict[str, str] = {}
    #: Durability settings as shipped (fsync behaviour), for the report.
    durability = ""

    def __init__(
        self, *, workdir: str, turns: int, seed: int, workload: str, workload_msgs: str
    ) -> None:
        self.workdir = workdir
        self.turns = turns
        self.seed = seed
        self.workload_path = workload  # OpenAI dicts (JSON)
        self.workload_msgs = workload_msgs  # the same messages, canonical agentledger JSONL
        os.makedirs(workdir, exist_ok=True)
        self.generation = 0  # bumped by fresh_storage (the fallback grow uses a new store)

    # -- hooks ---------------------------------------------------------------------------
    def versions(self) -> dict[str, str]:
        return {}

    def prepare(self) -> tuple[list[Any], list[str]]:
        """(native items, ids) for the whole workload; default: converts the OpenAI dicts."""
        dicts = load_dicts(self.workload_path, self.turns)
        return [self.convert(d) for d in dicts], [d["id"] for d in dicts]

    def convert(self, message: dict[str, Any]) -> Any:
        raise NotImplementedError

    def edited(self, item: Any) -> Any:
        """``item`` (a tool result) with its text replaced by ``preview`` of it."""
        raise NotImplementedError

    def open(self) -> Any:
        """A fresh object on the current storage."""
        raise NotImplementedError

    def close(self, handle: Any) -> None:
        pass

    def fresh_storage(self) -> None:
        """Point ``open`` at new, empty storage."""
        self.generation += 1

    def append_turn(self, handle: Any, live: list[Any], new: list[Any]) -> int | None:
        """Persist after ``new`` (one turn) was appended to ``live``; may return logical bytes."""
        raise NotImplementedError

    def bulk_seed(self, handle: Any, live: list[Any]) -> None:
        """Write ``live`` in one go (untimed; used only when the grow ran out of budget)."""
        raise NotImplementedError

    def edit(self, handle: Any, live: list[Any], position: int) -> int | None:
        """Persist ``live`` whose item at ``position`` was replaced (same id)."""
        raise NotImplementedError

    def persist_unchanged(self, handle: Any, loaded: Any) -> int | None:
        """Persist a reloaded, unchanged list (raise ``NotApplicable`` if there is no such call)."""
        raise NotImplementedError

    def load(self, handle: Any) -> Any:
        raise NotImplementedError

    def beside(self, handle: Any) -> Any | None:
        """Another object on the store ``handle`` has open, as a server makes for each request
        (None, the default: the system has no such object but a fresh one, which D measures)."""
        return None

    def ids_of(self, loaded: Any) -> list[str]:
        raise NotImplementedError

    def tool_text(self, loaded: Any, position: int) -> str:
        raise NotImplementedError

    def read_all(self, loaded: Any) -> bool:
        """Read every field of every loaded message, for a system whose load defers decoding;
        return False (the default) if its load already decoded everything."""
        return False

    def storage_bytes(self) -> int | None:
        """Size of the system's own store, or None if it keeps nothing on disk."""
        path = self.storage_path()
        return dir_size(path) if path else None

    def storage_path(self) -> str | None:
        return None

    def counters(self) -> dict[str, int]:
        """Extra byte counters outside this process (a database server's WAL), read around ops."""
        return {}

    def message_bytes(self, item: Any) -> int:
        """Serialized size of one item as this system stores it (for the edit-bytes target)."""
        return len(json.dumps(item, default=str))

    def cleanup(self) -> None:
        shutil.rmtree(self.workdir, ignore_errors=True)

    # -- concurrent appends (``bench.pg_throughput``), for systems that share a server --------
    def concurrent_handle(self, session: str) -> Any:
        """A handle on ``session`` for one of several processes appending at once."""
        raise NotApplicable(f"{self.name} has no concurrent-append run")

    def concurrent_append(self, handle: Any, session: str, new: list[Any], mode: str) -> None:
        """Persist one turn ``new`` appended to ``session`` the way the system's users would,
        with other processes writing at the same time: ``mode`` is ``own`` (each process on its
        own session), ``shared`` (all on one session) or ``lease`` (all on one session, under
        the session's run lease, for a system that has one)."""
        raise NotApplicable(f"{self.name} has no concurrent-append run")

    def concurrent_count(self, handle: Any, session: str) -> int:
        """How many messages ``session`` holds now."""
        raise NotApplicable(f"{self.name} has no concurrent-append run")


def _measure(system: System, fn: Any) -> tuple[Op, dict[str, int]]:
    """``measure(fn)`` plus the deltas of the system's own counters."""
    before = system.counters()
    op = measure(fn)
    after = system.counters() if before else {}
    return op, {k: after[k] - v for k, v in before.items()}


def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def _last_tenth(values: list[Any]) -> list[Any]:
    return values[-max(1, len(values) // 10) :]


class _Appends:
    """Per-save samples of one run of appends."""

    def __init__(self) -> None:
        self.seconds: list[float] = []
        self.write_bytes: list[int] = []
        self.wchar: list[int] = []
        self.logical: list[int] = []
        self.server: list[int] = []

    def run(
        self,
        system: System,
        handle: Any,
        items: list[Any],
        live: list[Any],
        turns: range,
        deadline: float = float("inf"),
    ) -> bool:
        """Append ``turns`` one by one; False if the deadline passed before the last one."""
        for t in turns:
            new = items[TURN * t : TURN * (t + 1)]
            live.extend(new)
            op, extra = _measure(system, lambda: system.append_turn(handle, live, new))  # noqa: B023
            self.seconds.append(op.seconds)
            self.write_bytes.append(op.io.write_bytes)
            self.wchar.append(op.io.wchar)
            if op.value is not None:
                self.logical.append(op.value)
            if "server_wal_bytes" in extra:
                self.server.append(extra["server_wal_bytes"])
            if time.perf_counter() > deadline and t < turns[-1]:
                return False
        return True

    def totals(self) -> dict[str, Any]:
        return {
            "seconds_total": sum(self.seconds),
            "write_bytes_total": sum(self.write_bytes),
            "wchar_total": sum(self.wchar),
            "logical_bytes_total": sum(self.logical) if self.logical else None,
            "server_wal_bytes_total": sum(self.server) if self.server else None,
        }

    def tail(self, whole: bool) -> dict[str, Any]:
        """Means over the last 10% of the saves (``whole``: over all of them)."""
        pick = (lambda v: v) if whole else _last_tenth
        seconds = pick(self.seconds)
        return {
            "append_seconds_mean": _mean(seconds),
            "append_seconds_median": statistics.median(seconds),
            "append_write_bytes_mean": _mean(pick(self.write_bytes)),
            "append_wchar_mean": _mean(pick(self.wchar)),
            "append_logical_bytes_mean": _mean(pick(self.logical)),
            "append_server_wal_bytes_mean": _mean(pick(self.server)),
            "append_samples": len(seconds),
        }


def _grow(
    system: System, items: list[Any], budget: float, tail_cap: int
) -> tuple[dict[str, Any], list[Any], Any]:
    """Scenario A. Returns its record, the live list and the (still open) writing handle."""
    turns = system.turns
    reset_peak_rss()
    handle = system.open()
    live: list[Any] = []
    grow = _Appends()
    complete = grow.run(system, handle, items, live, range(turns), time.perf_counter() + budget)
    out: dict[str, Any] = {"scenario": "grow", "complete": complete}
    out["turns_done"] = len(grow.seconds)
    if complete:
        out.update(grow.totals())
        out.update(grow.tail(whole=False))
        out["append_from"] = "last 10% of the grow"
    else:
        # Out of budget: measure the append cost at full size on a store seeded in bulk.
        out["seconds_partial"] = sum(grow.seconds)
        system.close(handle)
        system.fresh_storage()
        handle = system.open()
        k = max(1, min(tail_cap, turns // 10))
        live = list(items[: TURN * (turns - k)])
        system.bulk_seed(handle, live)
        tail = _Appends()
        tail.run(system, handle, items, live, range(turns - k, turns))
        out.update(tail.tail(whole=True))
        out["append_from"] = f"bulk seed of {turns - k} turns, then {k} appends"
    out["store_bytes"] = system.storage_bytes()
    out["peak_rss"] = peak_rss()
    return out, live, handle


def _check(system: System, loaded: Any, ids: list[str], edits: dict[int, str]) -> dict[str, Any]:
    got_ids = system.ids_of(loaded)
    return {
        "count_ok": len(got_ids) == len(ids),
        "ids_ok": got_ids == ids,
        "ids_kept": len(set(ids).intersection(got_ids)),  # of the saved ids, how many came back
        "edit_ok": all(system.tool_text(loaded, p) == text for p, text in edits.items()),
    }


def _io_fields(io: Io) -> dict[str, int]:
    return {"write_bytes": io.write_bytes, "wchar": io.wchar}


def _repeat(system: System, fn: Any, times: int) -> list[tuple[Op, dict[str, int]]]:
    """``fn(i)`` measured up to ``times`` times, fewer once the samples pass REPEAT_BUDGET
    (a one-operation figure is noisy on a shared machine; a slow one needs no second run)."""
    samples: list[tuple[Op, dict[str, int]]] = []
    for i in range(times):
        samples.append(_measure(system, lambda: fn(i)))  # noqa: B023
        if sum(op.seconds for op, _ in samples) > REPEAT_BUDGET:
            break
    return samples


def _summary(samples: list[tuple[Op, dict[str, int]]]) -> dict[str, Any]:
    """Medians over the samples of one scenario (the first sample kept for reference)."""
    ops = [op for op, _ in samples]
    out: dict[str, Any] = {
        "seconds": statistics.median(op.seconds for op in ops),
        "seconds_first": ops[0].seconds,
        "samples": len(ops),
        "write_bytes": statistics.median(op.io.write_bytes for op in ops),
        "wchar": statistics.median(op.io.wchar for op in ops),
        "logical_bytes": None
        if ops[0].value is None
        else statistics.median(op.value for op in ops),
    }
    for key in samples[0][1]:
        out[key] = statistics.median(extra[key] for _, extra in samples)
    return out


def run_scenarios(system: System, *, budget: float, tail_cap: int) -> None:
    """Run A-D on ``system`` and print one JSON line per scenario."""
    started = time.perf_counter()
    items, ids = system.prepare()
    emit(
        {
            "scenario": "setup",
            "messages": len(items),
            "prepare_seconds": time.perf_counter() - started,
            "versions": system.versions(),
            "api": system.api,
            "durability": system.durability,
        }
    )
    grow, live, handle = _grow(system, items, budget, tail_cap)
    emit(grow)

    # B: edit the middle tool result with the handle that grew the session (as a live agent
    # would), then reload in a fresh object and check. Repeated on the next tool results (up
    # to EDITS, within REPEAT_BUDGET) for a median; every edited position is checked.
    reset_peak_rss()
    live = list(live)
    first = edit_position(system.turns)
    positions = [first + TURN * k for k in range(EDITS) if first + TURN * k < len(live)]
    edits: dict[int, str] = {}

    def edit(i: int) -> Any:
        p = positions[i]
        return system.edit(handle, live, p)

    size_before = system.storage_bytes()
    samples: list[tuple[Op, dict[str, int]]] = []
    for i, p in enumerate(positions):
        edits[p] = preview(system.tool_text(live, p))
        live[p] = system.edited(live[p])
        samples.append(_measure(system, lambda: edit(i)))  # noqa: B023
        if sum(op.seconds for op, _ in samples) > REPEAT_BUDGET:
            break
    size_after = system.storage_bytes()
    system.close(handle)
    handle = system.open()
    loaded = system.load(handle)
    system.close(handle)
    emit(
        {
            "scenario": "edit",
            **_summary(samples),
            "store_bytes_delta": None
            if size_before is None
            else (size_after - size_before) / len(samples),
            "edited_message_bytes": system.message_bytes(live[first]),
            "peak_rss": peak_rss(),
            **_check(system, loaded, ids, edits),
        }
    )

    # C: reload into a fresh object, persist without changes.
    reset_peak_rss()
    handle = system.open()
    loaded = system.load(handle)
    size_before = system.storage_bytes()
    try:
        samples = _repeat(system, lambda i: system.persist_unchanged(handle, loaded), REPEATS)
    except NotApplicable as why:
        emit({"scenario": "noop", "applicable": False, "why": str(why)})
    else:
        size_after = system.storage_bytes()
        emit(
            {
                "scenario": "noop",
                "applicable": True,
                **_summary(samples),
                "store_bytes_delta": None if size_before is None else size_after - size_before,
                "peak_rss": peak_rss(),
            }
        )
    system.close(handle)

    # D: reload into a fresh object (a new one, opened untimed, for every sample) ... and,
    # where the load defers decoding, the first read of every message of the first
    # ``READS`` reloads, each read before the next reload (nothing has read them yet)
    reset_peak_rss()
    reloads: list[Op] = []
    reads: list[Op] = []
    again: list[Op] = []
    beside: list[Op] = []
    for _ in range(RELOADS):
        handle = system.open()
        reloads.append(measure(lambda: system.load(handle)))  # noqa: B023
        if len(reads) < READS:
            reads.append(measure(lambda: system.read_all(reloads[-1].value)))
        while len(again) < AGAIN:
            again.append(measure(lambda: system.read_all(system.load(handle))))  # noqa: B023
        while len(beside) < AGAIN and (other := system.beside(handle)) is not None:
            beside.append(measure(lambda: system.read_all(system.load(other))))
        system.close(handle)
        if len(reloads) > 1:
            reloads[-1].value = None  # only the first is checked; let the others go
        if sum(op.seconds for op in reloads) > REPEAT_BUDGET:
            break
    emit(
        {
            "scenario": "reload",
            "read_all_seconds": (
                statistics.median(op.seconds for op in reads) if reads[0].value else None
            ),
            "seconds": statistics.median(op.seconds for op in reloads),
            "seconds_first": reloads[0].seconds,
            "again_seconds": statistics.median(op.seconds for op in again),
            "beside_seconds": (statistics.median(op.seconds for op in beside) if beside else None),
            "samples": len(reloads),
            "peak_rss": peak_rss(),
            "store_bytes": system.storage_bytes(),
            **_check(system, reloads[0].value, ids, edits),
        }
    )
