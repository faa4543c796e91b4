"""``python -m reliability``: run the reliability tests, gather their figures, write the report.

python -m reliability                      # full: long fuzzing, 200 SIGKILLs per backend
python -m reliability --quick              # the CI sizes (a few minutes)
python -m reliability --quick --out x.md   # write the report elsewhere
python -m reliability --select tests/store/test_processes.py  # only these nodes

The tests run in one pytest subprocess with this checkout's ``src`` first on the path. The exit
status is 0 only if every selected test passed: a failure means something committed was lost,
content changed silently, or an error was untyped.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import facts

from reliability.plugin import RESULTS_ENV
from reliability.record import OUT_ENV
from reliability.report import Run, merge_outcomes, render
from reliability.suite import AREAS, MODES

ROOT = Path(__file__).resolve().parents[1]


def _parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m reliability",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--quick", action="store_true", help="the CI sizes (a few minutes)")
    p.add_argument("--out", default="docs/reliability.md", help="the markdown report to write")
    p.add_argument(
        "--select",
        nargs="+",
        metavar="NODE",
        help="pytest node ids or files to run instead of the whole suite",
    )
    return p.parse_args(argv)


def _selection(select: list[str] | None) -> list[str]:
    if select:
        return select
    return [node for area in AREAS for node in area.nodes]


def _read_lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def run(args: argparse.Namespace, argv: list[str]) -> Run:
    mode = "quick" if args.quick else "full"
    settings = MODES[mode]
    started = datetime.now(UTC)
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="agentledger-reliability-") as tmp:
        records, results = Path(tmp) / "records.jsonl", Path(tmp) / "results.jsonl"
        paths = [str(ROOT / "src"), str(ROOT), os.environ.get("PYTHONPATH", "")]
        env = {
            **os.environ,
            **settings,
            OUT_ENV: str(records),
            RESULTS_ENV: str(results),
            "PYTHONPATH": os.pathsep.join(p for p in paths if p),
        }
        if mode == "quick":  # the tests' own defaults, whatever this shell has set
            for name in MODES["full"]:
                env.pop(name, None)
        command = [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider"]
        command += ["-p", "reliability.plugin", "--rootdir", str(ROOT)]
        command += ["-c", str(ROOT / "pyproject.toml"), *_selection(args.select)]
        done = subprocess.run(command, cwd=ROOT, env=env, check=False)
        machine = facts.machine(tmp, ROOT)
        return Run(
            command=shlex.join(["python", "-m", "reliability", *argv]),
            mode=mode,
            started=started.strftime("%Y-%m-%d %H:%M UTC"),
            seconds=time.monotonic() - began,
            environment=settings,
            machine=machine,
            versions=facts.main_versions(),
            outcomes=merge_outcomes(_read_lines(results)),
            records=_read_lines(records),
            pytest_exit=done.returncode,
        )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = _parse(argv)
    result = run(args, argv)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(result))
    failed = len(result.failed)
    print(f"\n{out}: {len(result.outcomes)} tests, {failed} failed, {len(result.records)} records")
    return 0 if result.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
