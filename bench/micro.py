"""Micro-benchmarks of agentledger's hot paths: ``python -m bench.micro <jsonl> <messages> <reps>``.

Per message, on fresh messages (no digest cached): ``agentledger.encode``, ``agentledger.decode``
and ``msg.digest``, next to the standard library's ``json`` and ``orjson`` doing the same job on
equal dicts (sorted keys, compact: the same canonical bytes). Then diff planning over cached
digests (``agentledger.store.planner.diff_list`` on an unchanged list, by digest and against the
message objects a ledger remembers) and a no-op save through
a ``Ledger`` that already holds the session, on each local backend. Each figure is the best of
``reps`` runs. Prints one JSON object.
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from bench.workload import load_msgs


def _best(fn: Callable[[], Any], reps: int, setup: Callable[[], Any] | None = None) -> float:
    times = []
    for _ in range(reps):
        arg = setup() if setup else None
        start = time.perf_counter()
        fn() if setup is None else fn(arg)  # type: ignore[call-arg]
        times.append(time.perf_counter() - start)
    return min(times)


def _canonical_json(d: Any) -> bytes:
    return json.dumps(d, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def main(path: str, messages: int, reps: int) -> dict[str, Any]:
    import agentledger
    from agentledger import Ledger, decode, encode
    from agentledger.store.planner import diff_list

    turns = messages // 4
    fresh = lambda: load_msgs(path, turns)  # noqa: E731 - new Msg objects, digests not cached
    sample = fresh()
    n = len(sample)
    blobs = [encode(m) for m in sample]
    dicts = [json.loads(b) for b in blobs]
    out: dict[str, Any] = {
        "messages": n,
        "reps": reps,
        "mean_message_bytes": statistics.fmean(len(b) for b in blobs),
    }
    per = lambda seconds: seconds / n * 1e6  # noqa: E731 - microseconds per message

    out["encode_us"] = {
        "agentledger.encode": per(_best(lambda ms: [encode(m) for m in ms], reps, fresh)),
        "json.dumps": per(_best(lambda: [_canonical_json(d) for d in dicts], reps)),
    }
    out["decode_us"] = {
        "agentledger.decode": per(_best(lambda: [decode(b) for b in blobs], reps)),
        "agentledger decode_list (batch)": per(
            _best(lambda: agentledger.messages.decode_list(blobs), reps)
        ),
        "json.loads": per(_best(lambda: [json.loads(b) for b in blobs], reps)),
    }
    out["digest_us"] = {
        "msg.digest": per(_best(lambda ms: [m.digest for m in ms], reps, fresh)),
        "blake2b(json.dumps)": per(
            _best(
                lambda: [
                    hashlib.blake2b(_canonical_json(d), digest_size=16).digest() for d in dicts
                ],
                reps,
            )
        ),
    }
    try:
        import orjson
    except ImportError:
        out["orjson"] = None
    else:
        out["orjson"] = orjson.__version__
        sort = orjson.OPT_SORT_KEYS
        out["encode_us"]["orjson.dumps"] = per(
            _best(lambda: [orjson.dumps(d, option=sort) for d in dicts], reps)
        )
        out["decode_us"]["orjson.loads"] = per(
            _best(lambda: [orjson.loads(b) for b in blobs], reps)
        )
        out["digest_us"]["blake2b(orjson.dumps)"] = per(
            _best(
                lambda: [
                    hashlib.blake2b(orjson.dumps(d, option=sort), digest_size=16).digest()
                    for d in dicts
                ],
                reps,
            )
        )

    committed = [m.digest for m in sample]  # the digests a Ledger caches after a save
    out["diff_list_ms"] = _best(lambda: diff_list(committed, sample), max(reps, 20)) * 1e3
    # the same list against the Msg objects the ledger remembers (what a save in a live loop
    # does): identical objects compare in C, no digest is read
    out["diff_list_known_ms"] = (
        _best(lambda: diff_list(committed, sample, list(sample)), max(reps, 20)) * 1e3
    )

    noop: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        urls = {
            "memory": "memory://",
            "jsonl": f"jsonl:///{os.path.join(tmp, 'jsonl')}",
            "sqlite": f"sqlite:///{os.path.join(tmp, 'state.db')}",
        }
        for name, url in urls.items():
            try:
                ledger = Ledger(url)
            except Exception as exc:  # a backend not built yet
                noop[name] = f"unavailable: {type(exc).__name__}"  # type: ignore[assignment]
                continue
            with ledger:
                ledger.save("s", sample)
                noop[name] = _best(lambda: ledger.save("s", sample), max(reps, 10)) * 1e3  # noqa: B023
    out["noop_save_ms"] = noop
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))))
