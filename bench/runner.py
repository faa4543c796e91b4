"""Spawn one process per system and size (or per system), collect the JSON lines printed.

agentledger's systems and the JSON baseline run under the interpreter running ``python -m
bench``; the peers run under ``bench/.venv-peers/bin/python``. A process that outlives its
budget is killed (its whole process group) and the scenarios it had not reported are recorded
as timeouts. A larger size of a system that already timed out is not attempted.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.systems import SYSTEMS, SystemSpec, get

__all__ = ["BENCH", "PEERS_PYTHON", "Plan", "interpreter", "peer_distributions", "run", "run_child"]

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
PEERS_PYTHON = BENCH / ".venv-peers" / "bin" / "python"
SCENARIOS = ("grow", "edit", "noop", "reload")


@dataclass
class Plan:
    sizes: list[int]  # messages
    systems: list[str]
    seed: int = 0
    timeout: float = 300.0  # per system and size
    budget: float = 30.0  # grow budget before falling back to the seeded tail
    tail_cap: int = 30
    process_per_size: bool = True  # False: one process runs all of a system's sizes
    quick: bool = False  # honour SystemSpec.quick_max
    workdir: str = field(default_factory=lambda: tempfile.gettempdir())


def peer_distributions() -> tuple[dict[str, str], str | None]:
    """Installed distributions of the peers' venv (name -> version), or why there are none."""
    if not PEERS_PYTHON.exists():
        return (
            {},
            f"{PEERS_PYTHON.relative_to(ROOT)} missing: run `python -m bench --install-peers`",
        )
    code = (
        "import json, importlib.metadata as m; "
        "print(json.dumps({d.metadata['Name'].lower(): d.version for d in m.distributions()}))"
    )
    try:
        out = subprocess.run(
            [str(PEERS_PYTHON), "-c", code], capture_output=True, text=True, timeout=60, check=True
        ).stdout
    except (subprocess.SubprocessError, OSError) as exc:
        return {}, f"the peers' interpreter does not run: {exc}"
    return json.loads(out), None


def _interpreter(spec: SystemSpec) -> str:
    return str(PEERS_PYTHON) if spec.interpreter == "peers" else sys.executable


def interpreter(name: str) -> str:
    """The Python that runs system ``name``."""
    return _interpreter(get(name))


def run_child(
    spec: SystemSpec, args: list[str], timeout: float
) -> tuple[str, str, int | None, bool]:
    """Run ``python -m *args`` for system ``spec`` from the checkout, in a session of its own
    that is killed whole after ``timeout`` seconds. The main interpreter gets this checkout's
    ``src`` first on its path, so the agentledger measured is this one, whatever is installed.
    Returns stdout, stderr, the exit status and whether it timed out."""
    path = [str(ROOT), str(ROOT / "src")] if spec.interpreter == "main" else [str(ROOT)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path), "PYTHONHASHSEED": "0"}
    proc = subprocess.Popen(
        [_interpreter(spec), "-m", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
        return stdout, stderr, proc.returncode, False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        return stdout, stderr, proc.returncode, True


def _run_process(
    spec: SystemSpec, sizes: list[int], plan: Plan, workload: tuple[str, str], log: Any
) -> dict[int, dict[str, Any]]:
    """Run ``spec`` at ``sizes`` (messages) in one child process; results by size."""
    workdir = tempfile.mkdtemp(prefix=f"{spec.name}-", dir=plan.workdir)
    child_spec = {
        "system": spec.name,
        "workdir": workdir,
        "sizes": [n // 4 for n in sizes],
        "seed": plan.seed,
        "workload_msgs": workload[0],
        "workload": workload[1],
        "budget": plan.budget,
        "tail_cap": plan.tail_cap,
    }
    started = time.perf_counter()
    load_before = os.getloadavg()[0]
    stdout, stderr, returncode, timed_out = run_child(
        spec, ["bench.child", json.dumps(child_spec)], plan.timeout * len(sizes)
    )
    shutil.rmtree(workdir, ignore_errors=True)
    out: dict[int, dict[str, Any]] = {}
    current: dict[str, Any] | None = None
    for line in stdout.splitlines():
        if not line.startswith("{"):
            continue
        rec = json.loads(line)
        kind = rec.pop("scenario")
        if kind == "size":
            current = out[rec["messages"]] = {"status": "ok", "scenarios": {}}
        elif current is None:
            continue
        elif kind in ("unavailable", "error"):
            current["status"], current["why"] = kind, rec["why"]
        else:
            current["scenarios"][kind] = rec
    wall = time.perf_counter() - started
    for n in sizes:
        res = out.get(n)
        if res is None:
            why = "the process timed out before this size" if timed_out else "not reached"
            out[n] = {"status": "skipped", "why": why, "scenarios": {}}
            continue
        res.update(wall_seconds=wall, load_before=load_before, load_after=os.getloadavg()[0])
        done = all(k in res["scenarios"] for k in SCENARIOS)
        if timed_out and res["status"] == "ok" and not done:
            res["status"] = "timeout"
            res["why"] = f"killed after {plan.timeout * len(sizes):.0f} s"
    if returncode not in (0, None) and not timed_out and stderr:
        log.write(f"\n--- {spec.name}: stderr ---\n{stderr[-4000:]}\n")
    return out


def run(
    plan: Plan,
    workload: tuple[str, str],
    peers: dict[str, str],
    peers_problem: str | None,
    log: Any = sys.stderr,
) -> dict[str, dict[int, dict[str, Any]]]:
    """Results by system name, then by size (messages)."""
    results: dict[str, dict[int, dict[str, Any]]] = {}
    for spec in (s for s in SYSTEMS if s.name in plan.systems):
        by_size: dict[int, dict[str, Any]] = results.setdefault(spec.name, {})
        if spec.interpreter == "peers":
            missing = peers_problem or (
                None if spec.distribution in peers else f"{spec.distribution} is not installed"
            )
            if missing:
                for size in plan.sizes:
                    by_size[size] = {"status": "not installed", "why": missing, "scenarios": {}}
                log.write(f"{spec.name}: not installed ({missing})\n")
                continue
        sizes = plan.sizes
        if plan.quick and spec.quick_max is not None:
            sizes = [n for n in plan.sizes if n <= spec.quick_max]
            for n in plan.sizes:
                if n > spec.quick_max:
                    by_size[n] = {"status": "skipped", "why": spec.quick_why, "scenarios": {}}
        if not sizes:
            log.write(f"{spec.name}: skipped ({spec.quick_why})\n")
            continue
        if not plan.process_per_size:
            log.write(f"{spec.name} @ {', '.join(f'{n:,}' for n in sizes)} messages ... ")
            log.flush()
            by_size.update(_run_process(spec, sizes, plan, workload, log))
            log.write(", ".join(f"{n:,}: {by_size[n]['status']}" for n in sizes) + "\n")
            continue
        blocked: dict[str, Any] | None = None
        for size in sizes:
            if blocked:
                by_size[size] = dict(blocked, scenarios={})
                continue
            log.write(f"{spec.name} @ {size:,} messages ... ")
            log.flush()
            res = _run_process(spec, [size], plan, workload, log)[size]
            by_size[size] = res
            done = ", ".join(k for k in SCENARIOS if k in res["scenarios"]) or "nothing"
            log.write(f"{res['status']} in {res.get('wall_seconds', 0):.1f} s ({done})\n")
            if res["status"] == "unavailable":
                blocked = {"status": "unavailable", "why": res["why"]}
            elif res["status"] == "timeout":
                blocked = {"status": "skipped", "why": f"timed out at {size:,} messages"}
    return results
