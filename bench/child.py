"""One system, in its own process: ``python -m bench.child '<json spec>'``.

Runs the spec's sizes in order (the full benchmark passes one size per process; ``--quick``
passes all of a system's sizes to one process, to pay the peers' import time once). Prints a
``{"scenario": "size", "messages": n}`` line before each size, then one JSON line per scenario
(see ``bench.systems.base``). A system that cannot run here prints
``{"scenario": "unavailable", "why": ...}`` and stops. Standard library only, apart from the
system module it loads.
"""

from __future__ import annotations

import importlib
import json
import sys
import traceback

from bench.systems import get
from bench.systems.base import emit, run_scenarios


def main(argv: list[str]) -> int:
    spec = json.loads(argv[0])
    for turns in spec["sizes"]:
        emit({"scenario": "size", "messages": turns * 4})
        code = _one(spec, turns)
        if code is not None:
            return code
    return 0


def _one(spec: dict, turns: int) -> int | None:
    system_spec = get(spec["system"])
    try:
        module = importlib.import_module(f"bench.systems.{system_spec.module}")
        cls = getattr(module, system_spec.cls)
        system = cls(
            workdir=f"{spec['workdir']}/{turns}",
            turns=turns,
            seed=spec["seed"],
            workload=spec["workload"],
            workload_msgs=spec["workload_msgs"],
            **system_spec.kwargs,
        )
    except Exception as exc:
        # Not installed, not built yet, or no server: reported, never silently dropped.
        why = f"{type(exc).__name__}: {exc}"
        emit({"scenario": "unavailable", "why": why.strip().splitlines()[0][:300]})
        return 0
    try:
        run_scenarios(system, budget=spec["budget"], tail_cap=spec["tail_cap"])
    except Exception as exc:
        emit({"scenario": "error", "why": f"{type(exc).__name__}: {exc}"[:500]})
        traceback.print_exc()
        return 1
    finally:
        system.cleanup()
    return None


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
