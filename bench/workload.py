"""The one workload every system runs: OpenAI-chat-shaped turns of four messages.

``agentledger.testing.sample_conversation(turns, seed=...)`` is the source: a user message
(~200 characters), an assistant message with one tool call (~100-character JSON arguments), a
tool result (~4,000 characters) and an assistant answer (~500 characters), deterministic from the
seed. The parent process renders it once per size as OpenAI chat dicts (with each message's id
under ``"id"``) into a JSON file; peer processes, which cannot import agentledger, read that file
and convert it to their own message types before any timing starts. agentledger processes build
the same messages as ``Msg`` from the same seed.

The top half of this module is standard library only (it runs in the peers' environment); the
functions that need agentledger import it lazily.
"""

from __future__ import annotations

import json
import os
from typing import Any

__all__ = [
    "EDIT_TURN_FRACTION",
    "PREVIEW_CHARS",
    "TURN",
    "edit_position",
    "load_dicts",
    "openai_messages",
    "preview",
    "write_dicts",
]

TURN = 4  # messages per turn
PREVIEW_CHARS = 200
EDIT_TURN_FRACTION = 0.5  # the edited tool result sits in the middle turn


def edit_position(turns: int) -> int:
    """Index of the tool result that scenario B replaces: the middle turn's third message."""
    return TURN * int(turns * EDIT_TURN_FRACTION) + 2


def preview(text: str) -> str:
    """The 200-character preview that replaces a tool result's text in scenario B."""
    marker = f" ... [{len(text)} chars, preview]"
    return text[: PREVIEW_CHARS - len(marker)] + marker


def load_dicts(path: str, turns: int) -> list[dict[str, Any]]:
    """The first ``turns`` turns of the workload file written by ``ensure``."""
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)[: TURN * turns]


def write_dicts(path: str, messages: list[dict[str, Any]]) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(messages, fh)
    os.replace(tmp, path)


# -- agentledger side (imported lazily: the peers' environment has no agentledger) -----------------


def msgs(turns: int, seed: int) -> list[Any]:
    """The workload as agentledger ``Msg`` objects: ``sample_conversation(turns, seed=seed)``."""
    from agentledger.testing.samples import sample_conversation

    return sample_conversation(turns, seed=seed)


def load_msgs(path: str, turns: int) -> list[Any]:
    """The first ``turns`` turns of the canonical JSONL written by ``ensure``, as fresh ``Msg``
    objects (no digest cached yet, like messages an agent has just made)."""
    from agentledger.messages import decode_list

    with open(path, "rb") as fh:
        lines = fh.read().split(b"\n")[: TURN * turns]
    return decode_list(lines)


def _source_key(seed: int) -> str:
    """Names the cache by everything that shapes the bytes: the generator and codec sources."""
    import hashlib
    from pathlib import Path

    import agentledger.messages
    import agentledger.testing.samples

    h = hashlib.sha256(f"seed {seed}".encode())
    files = [Path(agentledger.testing.samples.__file__)]
    files += sorted(Path(agentledger.messages.__file__).parent.glob("*.py"))
    for f in files:
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def ensure(out_dir: str, turns: int, seed: int) -> tuple[str, str]:
    """Write (once, cached by content) the workload for at least ``turns`` turns; smaller sizes
    are its prefixes, since ``sample_conversation`` draws every turn from one seeded generator.

    Returns ``(canonical JSONL of Msg, OpenAI dicts JSON)`` paths.
    """
    import glob

    from agentledger.messages import encode_many

    key = _source_key(seed)
    for found in sorted(glob.glob(os.path.join(out_dir, f"workload-{key}-*.json"))):
        cached = int(found.rsplit("-", 1)[1].split(".")[0])
        if cached >= turns and os.path.exists(found + "l"):
            return found + "l", found
    jsonl = os.path.join(out_dir, f"workload-{key}-{turns}.jsonl")
    dicts = os.path.join(out_dir, f"workload-{key}-{turns}.json")
    if not (os.path.exists(jsonl) and os.path.exists(dicts)):
        os.makedirs(out_dir, exist_ok=True)
        for stale in glob.glob(os.path.join(out_dir, "workload-*.json*")):
            if not os.path.basename(stale).startswith(f"workload-{key}-"):
                os.remove(stale)  # written from another source or seed: 31 MB each at 12,000
        messages = msgs(turns, seed)
        write_dicts(dicts, openai_messages(messages))
        with open(jsonl + ".tmp", "wb") as fh:
            fh.write(encode_many(messages))
        os.replace(jsonl + ".tmp", jsonl)
    return jsonl, dicts


def edited_msg(msg: Any) -> Any:
    """``msg`` (a tool message) with its result text replaced by ``preview``, same id."""
    from agentledger import TextBlock

    (result,) = msg.tool_results
    block = result.replace(output=(TextBlock(text=preview(msg.tool_results[0].output[0].text)),))
    return msg.replace(content=(block,))


def openai_messages(messages: list[Any]) -> list[dict[str, Any]]:
    """The workload's ``Msg`` objects as OpenAI chat-completions dicts (ids under ``"id"``)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "tool":
            (result,) = m.tool_results
            out.append(
                {
                    "id": m.id,
                    "role": "tool",
                    "tool_call_id": result.id,
                    "name": result.name,
                    "content": result.output[0].text,
                }
            )
        elif m.tool_calls:
            out.append(
                {
                    "id": m.id,
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": c.id,
                            "type": "function",
                            "function": {
                                "name": c.name,
                                "arguments": json.dumps(dict(c.input), separators=(",", ":")),
                            },
                        }
                        for c in m.tool_calls
                    ],
                }
            )
        else:
            out.append({"id": m.id, "role": m.role, "content": m.text})
    return out
