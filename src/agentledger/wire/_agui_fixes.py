"""What makes an AG-UI message come back exactly as the client sent it.

``Msg`` keeps what a conversation means (text, media, tool calls, results, reasoning and its
signature); an AG-UI message also carries wire-only facts that mean nothing to a model: a content
list holding one text part instead of a string, a part's ``id``, ``encryptedValue`` on a user
message, ``subagentRunId``, a reasoning message id of the client's own, the exact ``error`` text
of a failed tool, metadata that is not an object or has ``_`` keys, fields newer than this
converter. None of them may be lost (the server merges resent threads by comparing messages).

So ``from_agui`` reads the meaning into blocks, writes the message back, and when the result
differs from the client's message it records the difference as a *fix*: a small patch
(``[{"p": path, "v": value}]`` sets, ``[{"p": path}]`` deletes) under the private metadata key
``_agui`` of the element the AG-UI message became (the ``Msg`` for user, system, developer and
assistant messages; the ``ThinkingBlock`` for a reasoning message; the ``ToolResultBlock`` for a
tool message), with the digest of the output it patches. ``to_agui`` applies a fix only while
the element still writes that same output: an element edited since (a preview replacing a long
tool result, say) is written as what it now is, never patched back into what it was.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from agentledger.messages.values import thaw
from agentledger.wire.private import AGUI_FIX_KEY as FIX_KEY

__all__ = ["FIX_KEY", "apply_fix", "make_fix"]


def digest(value: Any) -> str:
    """A short digest of a JSON value (sorted keys), to tell whether a fix still applies."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def make_fix(written: dict[str, Any], sent: dict[str, Any], *, force: bool) -> dict | None:
    """The fix turning ``written`` (our output) into ``sent`` (the client's message), or
    ``None`` when they are the same; ``force`` records an empty fix anyway (it marks an
    assistant message that must be written even though it holds nothing of its own)."""
    ops: list[dict[str, Any]] = []
    _diff(written, sent, [], ops)
    if not ops and not force:
        return None
    return {"base": digest(written), "patch": ops}


def apply_fix(written: dict[str, Any], metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """``written`` with the fix in ``metadata`` applied, if it has one that still applies."""
    fix = metadata.get(FIX_KEY) if metadata else None
    if not isinstance(fix, Mapping) or fix.get("base") != digest(written):
        return written
    for op in thaw(fix.get("patch") or ()):
        *parents, last = op["p"]
        target: Any = written
        for key in parents:
            target = target[key]
        if "v" in op:
            target[last] = op["v"]
        elif isinstance(target, dict):
            target.pop(last, None)
    return written


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON: ``1``, ``1.0`` and ``true`` are three different values."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return bool(a == b)


def _diff(a: Any, b: Any, path: list[Any], ops: list[dict[str, Any]]) -> None:
    if _same(a, b):
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(a):  # sorted: the same difference always gives the same fix
            if key not in b:
                ops.append({"p": [*path, key]})
        for key in sorted(b):
            if key in a:
                _diff(a[key], b[key], [*path, key], ops)
            else:
                ops.append({"p": [*path, key], "v": b[key]})
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for index, (x, y) in enumerate(zip(a, b)):
            _diff(x, y, [*path, index], ops)
    else:
        ops.append({"p": path, "v": b})
