"""``python -m bench``: run every system on the same workload, print the ratios, write the report.

python -m bench                  # full: 400, 4,000 and 12,000 messages (< 30 min)
python -m bench --quick          # 400 and 4,000 messages, short budgets (< 2 min)
python -m bench --install-peers  # build bench/.venv-peers from the pinned requirements first
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from bench import choices, facts, pg_throughput, report, report_pg, runner, workload
from bench.systems import SYSTEMS

QUICK = {
    "sizes": [400, 4000],
    "timeout": 15.0,
    "budget": 2.0,
    "tail_cap": 5,
    "reps": 3,
    "process_per_size": False,
    "throughput_turns": 10,
}
FULL = {
    "sizes": [400, 4000, 12000],
    "timeout": 240.0,
    "budget": 30.0,
    "tail_cap": 30,
    "reps": 7,
    "process_per_size": True,
    "throughput_turns": 50,
}


def _parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--quick", action="store_true", help="small sizes and budgets (< 2 minutes)")
    p.add_argument("--sizes", help="comma-separated session lengths in messages (multiples of 4)")
    p.add_argument(
        "--systems",
        help="comma-separated system names (default: all): " + ", ".join(s.name for s in SYSTEMS),
    )
    p.add_argument("--out", default="docs/benchmarks.md", help="the markdown report to write")
    p.add_argument("--timeout", type=float, help="seconds per system and size before a kill")
    p.add_argument("--budget", type=float, help="seconds a grow may take before it falls back")
    p.add_argument("--seed", type=int, default=0, help="workload seed (default 0)")
    p.add_argument("--no-micro", action="store_true", help="skip the micro-benchmarks")
    p.add_argument(
        "--no-throughput",
        action="store_true",
        help="skip the 8-process appends/s of the Postgres systems",
    )
    p.add_argument(
        "--report-only",
        action="store_true",
        help="rewrite the report from bench/out/results.json (the last run) without running",
    )
    p.add_argument(
        "--install-peers",
        action="store_true",
        help="create bench/.venv-peers from requirements-peers*.txt, then run",
    )
    return p.parse_args(argv)


def install_peers() -> None:
    venv = runner.PEERS_PYTHON.parent.parent
    if not runner.PEERS_PYTHON.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(runner.PEERS_PYTHON), "-m", "pip", "install", "--quiet"]
    subprocess.run([*pip, "-r", str(runner.BENCH / "requirements-peers.txt")], check=True)
    # hermes-agent pins dependencies that conflict with openai-agents; its SessionDB needs none.
    nodeps = runner.BENCH / "requirements-peers-nodeps.txt"
    subprocess.run([*pip, "--no-deps", "-r", str(nodeps)], check=True)


def _micro(jsonl: str, n: int, reps: int) -> dict | None:
    proc = subprocess.run(
        [sys.executable, "-m", "bench.micro", jsonl, str(n), str(reps)],
        cwd=runner.ROOT,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        sys.stderr.write(f"micro-benchmarks failed:\n{proc.stderr[-2000:]}\n")
        return None
    return json.loads(proc.stdout)


def _write(
    out: Path,
    meta: dict,
    results: dict,
    micro: dict | None,
    python: str | None,
    throughput: dict | None,
) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    png = out.with_name(out.stem + "-save-time.png")
    meta["plot_note"] = report.plot(results, png, python)
    meta["plot"] = png.name if not meta["plot_note"] else None
    pg = report_pg.section(results, throughput, max(meta["sizes"]))
    out.write_text(report.render(meta, results, micro, pg) + _kept_sections(out))


def _throughput(
    plan: runner.Plan, results: dict, workload_files: tuple[str, str], turns: int
) -> dict | None:
    """8-process appends/s of the Postgres systems that ran (``bench.pg_throughput``)."""
    names = [
        n
        for n in pg_throughput.POSTGRES_SYSTEMS
        if any(r["status"] == "ok" for r in results.get(n, {}).values())
    ]
    if not names:
        return None
    each = min(turns, max(plan.sizes) // 4 // pg_throughput.PROCESSES)
    pythons = {n: runner.interpreter(n) for n in names}
    return pg_throughput.run(names, workload_files, pythons, each=each, root=str(runner.ROOT))


#: Sections of the report written by other scripts (the server load test, the context edits)
#: start at this heading level after the generated part; a rewrite keeps them as they are.
_KEPT_HEADINGS = ("## AG-UI server", "## Context management", "## Many sessions")


def _kept_sections(out: Path) -> str:
    """The hand-measured sections of the current report, to append after a rewrite."""
    if not out.exists():
        return ""
    text = out.read_text()
    starts = [text.find("\n" + h) for h in _KEPT_HEADINGS if "\n" + h in text]
    return "\n" + text[min(starts) + 1 :] if starts else ""


def _report_only(out: Path) -> int:
    saved = json.loads((runner.BENCH / "out" / "results.json").read_text())
    results = {k: {int(n): r for n, r in v.items()} for k, v in saved["results"].items()}
    meta = saved["meta"]
    if "peers" not in meta:
        meta["peers"], meta["peers_problem"] = runner.peer_distributions()
    python = str(runner.PEERS_PYTHON) if "matplotlib" in meta["peers"] else None
    _write(out, meta, results, saved["micro"], python, saved.get("throughput"))
    print(report.ratio_table(results, max(meta["sizes"])))
    return 0


def main(argv: list[str]) -> int:
    args = _parse(argv)
    if args.report_only:
        return _report_only(Path(args.out))
    started = time.perf_counter()
    mode = QUICK if args.quick else FULL
    sizes = choices.sizes(args.sizes, mode["sizes"])
    systems = choices.systems(args.systems, [s.name for s in SYSTEMS])
    if args.install_peers:
        install_peers()

    out_dir = runner.BENCH / "out"
    sys.stderr.write(f"workload: {max(sizes):,} messages, seed {args.seed} ... ")
    sys.stderr.flush()
    jsonl, dicts = workload.ensure(str(out_dir), max(sizes) // 4, args.seed)
    sys.stderr.write("ready\n")
    peers, problem = runner.peer_distributions()
    workdir = tempfile.mkdtemp(prefix="agentledger-bench-", dir=str(out_dir))
    plan = runner.Plan(
        sizes=sorted(sizes),
        systems=systems,
        seed=args.seed,
        timeout=args.timeout or mode["timeout"],
        budget=args.budget or mode["budget"],
        tail_cap=mode["tail_cap"],
        process_per_size=mode["process_per_size"],
        quick=args.quick,
        workdir=workdir,
    )
    machine = facts.machine(workdir, runner.ROOT)
    try:
        results = runner.run(plan, (jsonl, dicts), peers, problem)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    throughput = None
    if not args.no_throughput:
        throughput = _throughput(plan, results, (jsonl, dicts), mode["throughput_turns"])
    micro = None
    if not args.no_micro:
        sys.stderr.write("micro-benchmarks ... ")
        sys.stderr.flush()
        micro = _micro(jsonl, max(sizes), mode["reps"])
        sys.stderr.write("done\n")

    out = Path(args.out)
    python = str(runner.PEERS_PYTHON) if "matplotlib" in peers else None
    meta = {
        "command": "python -m bench " + shlex.join(argv) if argv else "python -m bench",
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "mode": "quick" if args.quick else "full",
        "seed": args.seed,
        "sizes": plan.sizes,
        "timeout": plan.timeout,
        "budget": plan.budget,
        "machine": machine,
        "main_versions": facts.main_versions(),
        "plot_alt": "log-log plot of the time to persist one appended turn against session length",
        "peers": peers,
        "peers_problem": problem,
        "load_end": list(os.getloadavg()),
    }
    meta["wall_seconds"] = time.perf_counter() - started
    _write(out, meta, results, micro, python, throughput)
    (out_dir / "results.json").write_text(
        json.dumps(
            {"meta": meta, "results": results, "micro": micro, "throughput": throughput},
            indent=1,
            default=str,
        )
    )
    print(report.ratio_table(results, max(plan.sizes)))
    print(report.targets_table(report.targets(results, max(plan.sizes))))
    sys.stderr.write(
        f"wrote {out} ({meta['plot'] or meta['plot_note']}) in {meta['wall_seconds']:.0f} s\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
