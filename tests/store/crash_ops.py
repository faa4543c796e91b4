"""The child process of ``test_crash_ops.py`` (``python -m tests.store.crash_ops URL SEED``).

It runs random operations on session "ops" of the store at URL until it is killed: appends,
middle replaces, inserts and deletes that shift every later position, summaries replacing a
run of messages after the first (a prefix, but for the image), history purges, forks and
imports (an export of "ops" imported as a new session). Around each operation it prints a
JSON line (flushed) before and after, so the parent knows, whatever moment the SIGKILL hit,
what was acknowledged and what was in flight:

``{"intent": "ops", "op": KIND, "version": V, "digest": D}`` before a save of "ops" to version
V, ``{"ack": "ops", "version": V}`` after it; likewise ``{"intent": NAME, "op": KIND, "digest":
D}`` and ``{"ack": NAME}`` around a fork or import creating session NAME; ``{"purged": N}``
after a purge. ``D`` is ``content_digest`` of the list saved.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
import sys

from agentledger.messages import ImageBlock, Msg, TextBlock, encode
from agentledger.store import Ledger

SESSION = "ops"


def content_digest(msgs: list[Msg]) -> str:
    """A digest of the list's exact encoded content (decoding every message on the way, so a
    damaged stored message fails here, typed)."""
    h = hashlib.blake2b(digest_size=16)
    for m in msgs:
        h.update(encode(m))
        h.update(b"\n")
    return h.hexdigest()


def _say(**fields: object) -> None:
    print(json.dumps(fields), flush=True)


def _message(tag: str) -> Msg:
    return Msg.user(f"{tag} " + "w" * 200, id=tag, created_at=None)


def _first() -> Msg:
    """Position 0 carries an image big enough to be stored as a blob (forks share it)."""
    blocks = [TextBlock(text="picture"), ImageBlock(media_type="image/png", data=b"\x89" * 6000)]
    return Msg.user(blocks, id="first", created_at=None)


def _edit(msgs: list[Msg], rng: random.Random, tag: str) -> tuple[str, list[Msg]]:
    """One list edit: an append, a middle replace, or a shifting insert, delete or summary."""
    out = list(msgs) or [_first()]
    kind = rng.choice(["append", "append", "replace", "insert", "delete", "summary"])
    middle = rng.randrange(1, len(out) + 1)
    if kind == "append" or len(out) < 3:
        out.append(_message(tag))
    elif kind == "replace":
        middle = min(middle, len(out) - 1)
        out[middle] = out[middle].replace(content=f"replaced by {tag}")
    elif kind == "insert":
        out.insert(middle, _message(tag))
    elif kind == "summary":
        out[1 : max(middle, 3)] = [_message(f"{tag}-summary")]
    else:
        del out[min(middle, len(out) - 1)]
    return kind, out


def run(url: str, seed: int) -> None:
    rng = random.Random(seed)
    pid = os.getpid()
    with Ledger(url) as ledger:
        msgs = ledger.messages(SESSION)
        version = ledger.version(SESSION)
        for n in range(10**9):
            tag = f"{pid}-{n}"
            roll = rng.random()
            if roll < 0.1 and version > 2:
                _say(purged=ledger.purge_history(SESSION, keep_last=rng.randint(1, 3)))
            elif roll < 0.2 and version:
                name = f"fork-{tag}"
                _say(intent=name, op="fork", digest=content_digest(msgs))
                ledger.fork(SESSION, name)
                _say(ack=name)
            elif roll < 0.3 and version:
                name = f"import-{tag}"
                data = io.BytesIO()
                ledger.export(SESSION, data)
                _say(intent=name, op="import", digest=content_digest(msgs))
                ledger.import_(data.getvalue(), session=name)
                _say(ack=name)
            else:
                kind, edited = _edit(msgs, rng, tag)
                _say(intent=SESSION, op=kind, version=version + 1, digest=content_digest(edited))
                version = ledger.save(SESSION, edited, expected_version=version).version
                msgs = edited
                _say(ack=SESSION, version=version)


if __name__ == "__main__":
    run(sys.argv[1], int(sys.argv[2]))
