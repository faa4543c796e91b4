"""``python -m bench.context_edits``: the bytes each kind of context edit writes when saved.

python -m bench.context_edits                  # 1,000 and 12,000 messages
python -m bench.context_edits --sizes 400,4000

Each size starts from the benchmark workload (``agentledger.testing.sample_conversation``:
turns of user, tool call, ~4,000-character tool result, answer) saved to a fresh SQLite store,
then saves one edit of each kind made by ``agentledger.context`` and reports what that save wrote
(``SaveReport.bytes_written``: message bodies, values and media), with the rows it touched:

- ``evict``: one 40,000-character tool result in the middle offloaded (``ToolResultEviction``,
  2,000-character preview): one row, about the preview;
- ``prune, first pass``: every result but the last three previewed (``ToolResultPruning``,
  400 characters) on a session never pruned before: one row per result;
- ``prune, one step``: a turn is appended to a pruned session and the result that left the window
  is previewed: one row;
- ``compact, keep 8``: the whole session but the last 8 messages replaced by one summary
  (``SummaryCompaction``);
- ``compact, keep half``: the older half replaced by one summary. A save aligns the lists by
  content, so the kept messages stay where they are stored and only the summary is written.

Timing is printed for orientation only (one save, no repetition).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from agentledger import Ledger, Msg, SaveReport, TextBlock
from agentledger.context import SummaryCompaction, ToolResultEviction, ToolResultPruning
from agentledger.testing import ScriptedModel, sample_conversation

__all__ = ["Row", "main", "measure", "table"]

TURN = 4
SUMMARY = "The user asked a long series of questions; " + "facts carried forward. " * 40


@dataclass(frozen=True, slots=True)
class Row:
    size: int
    kind: str
    rows: int
    bytes_written: int
    ms: float


def _timed(ledger: Ledger, session: str, msgs: list[Msg]) -> tuple[SaveReport, float]:
    started = time.perf_counter()
    report = ledger.save(session, msgs)
    return report, (time.perf_counter() - started) * 1000


def _row(size: int, kind: str, report: SaveReport, ms: float) -> Row:
    rows = report.appended + report.replaced
    return Row(size, kind, rows, report.bytes_written, ms)


def _compacted(msgs: list[Msg], keep: int) -> list[Msg]:
    model = ScriptedModel([Msg.assistant(SUMMARY)])
    compaction = SummaryCompaction(model, max_messages=1, keep_recent=keep)
    return asyncio.run(compaction.compact(msgs))


def measure(size: int, workdir: Path) -> list[Row]:
    """Every edit kind on a fresh session of ``size`` messages (a multiple of 4)."""
    base = sample_conversation(size // TURN)
    middle = TURN * (size // TURN // 2) + 2
    big = base[middle].tool_results[0].replace(output=(TextBlock(text="z" * 40_000),))
    base[middle] = base[middle].replace(content=[big])
    out: list[Row] = []
    with Ledger(f"sqlite:///{workdir / f'edits-{size}.db'}") as ledger:
        ledger.save("evict", base)
        evictor = ToolResultEviction(workdir / "offload", limit=20_000, preview=2_000)
        out.append(_row(size, "evict", *_timed(ledger, "evict", evictor.evict(base, session="e"))))

        ledger.save("prune", base)
        pruner = ToolResultPruning(keep_recent=3, preview=400)
        pruned = pruner.prune(base)
        out.append(_row(size, "prune, first pass", *_timed(ledger, "prune", pruned)))
        grown = pruned + sample_conversation(size // TURN + 1)[-TURN:]
        ledger.save("prune", grown)
        step = pruner.prune(grown)
        out.append(_row(size, "prune, one step", *_timed(ledger, "prune", step)))

        for keep, kind in ((8, "compact, keep 8"), (size // 2, "compact, keep half")):
            session = f"compact-{keep}"
            ledger.save(session, base)
            out.append(_row(size, kind, *_timed(ledger, session, _compacted(base, keep))))
    return out


def table(rows: list[Row]) -> str:
    lines = [
        "| messages | edit | rows written | bytes written | save ms |",
        "|---:|---|---:|---:|---:|",
    ]
    lines += [
        f"| {r.size:,} | {r.kind} | {r.rows:,} | {r.bytes_written:,} | {r.ms:.1f} |" for r in rows
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.context_edits", description=__doc__)
    parser.add_argument("--sizes", default="1000,12000", help="session lengths (multiples of 4)")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    if any(s < 16 or s % TURN for s in sizes):
        parser.error("sizes must be multiples of 4, at least 16")
    with tempfile.TemporaryDirectory(prefix="agentledger-edits-") as tmp:
        rows = [row for size in sizes for row in measure(size, Path(tmp))]
    print(table(rows))


if __name__ == "__main__":
    main()
