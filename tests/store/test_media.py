"""Stored media references live out of band: no user string is ever read as one.

Large inline media is stored apart and referenced from the storage body by an object in the
``data`` field, a shape no message can have. User URLs, text, metadata and tool names shaped like
references (either the current form or the NUL-``blob:`` URL of earlier builds) load back as
themselves on every backend. Bodies of earlier builds still load; one that cannot be read
exactly is a ``CorruptStoreError``, never another message's media.
"""

from __future__ import annotations

import base64
import sqlite3
from pathlib import Path
from typing import Any

import msgspec
import pytest

from agentledger import CodecError, Ledger, UserError
from agentledger.errors import CorruptStoreError
from agentledger.messages import (
    ImageBlock,
    Msg,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    decode,
    digest_of,
    encode,
)
from agentledger.messages.canonical import encode_struct
from agentledger.store import media
from tests.messages.strategies import assert_same
from tests.store.backends import LedgerOn, backend, ledger_on  # noqa: F401  (fixtures)

PNG = bytes(range(256)) * 20  # 5 KB: above the threshold
OTHER = bytes(reversed(range(256))) * 20
HEX = digest_of(PNG).hex()
LOOKALIKES = [
    "\x00blob:" + HEX,
    '{"$blob":"' + HEX + '"}',
    '"data":{"$blob":"' + HEX + '"}',
    "\\u0000blob:" + HEX,
]


def _lookalike_message() -> Msg:
    """A message with real stored media and every shape of fake reference around it."""
    return Msg.user(
        [
            TextBlock(text=" ".join(LOOKALIKES)),
            ImageBlock(media_type="image/png", data=PNG, metadata={"data": {"$blob": HEX}}),
            ImageBlock(media_type="image/png", url="https://example.com/$blob:" + HEX),
            ToolUseBlock(id="c", name='"$blob":"' + HEX + '"', input={"$blob": HEX}),
            ToolResultBlock(
                id="c",
                output=[TextBlock(text=LOOKALIKES[0]), ImageBlock(media_type="x", data=OTHER)],
            ),
        ],
        id="m",
        metadata={"$blob": HEX, "url": LOOKALIKES[0], "data": {"$blob": HEX}},
    )


def test_a_media_url_shaped_like_an_old_reference_is_refused_where_it_is_built() -> None:
    with pytest.raises(UserError, match="control character"):
        ImageBlock(media_type="image/png", url="\x00blob:" + HEX)
    openai = [{"role": "user", "content": [{"type": "image_url", "image_url": "\x00blob:" + HEX}]}]
    with Ledger("memory://") as ledger:
        with pytest.raises(UserError, match="control character"):
            ledger.sync("s", openai)
        assert not ledger.exists("s")


def test_lookalikes_load_back_as_themselves(backend: str, ledger_on: LedgerOn) -> None:  # noqa: F811
    msg = _lookalike_message()
    with ledger_on(backend) as ledger:
        ledger.save("s", [msg])
        with Ledger(ledger.store) as fresh:
            (loaded,) = fresh.messages("s")
            assert_same(loaded, msg)
            assert encode(loaded) == encode(msg)
            assert fresh.search("blob")  # text of a message with stored media is searchable


def test_the_storage_body_references_media_only_where_data_sits() -> None:
    msg = _lookalike_message()
    body, blobs = media.externalize(msg, encode(msg))
    assert set(blobs) == {digest_of(PNG), digest_of(OTHER)}
    assert encode(msg) not in body and len(body) < len(encode(msg)) - 10_000
    tree, refs = media.references(body)
    assert sorted(d for _, d in refs) == sorted(blobs)
    assert media.restore(body, tree, refs, blobs) == encode(msg)
    assert set(media.blob_refs(body)) >= set(blobs)  # a superset: lookalikes may add some
    with pytest.raises(CodecError):
        decode(body)  # a plain decode never reads a reference
    assert media.decode_without_media(body).text == msg.text


def _legacy_body(msg: Msg) -> bytes:
    """``msg``'s storage body as earlier builds wrote it: a NUL-``blob:`` URL for big media."""
    tree = msgspec.json.decode(encode(msg))
    for node in tree["content"]:
        if node.get("type") == "image" and len(node.get("data", "")) > 4096:
            node["url"] = "\x00blob:" + digest_of(base64.b64decode(node.pop("data"))).hex()
    return encode_struct(tree)


def _rewrite(db: Path, msg_id: str, body: bytes, digest: bytes | None = None) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE messages SET body = ? WHERE msg_id = ?", (body, msg_id))
        if digest is not None:
            conn.execute("UPDATE messages SET digest = ? WHERE msg_id = ?", (digest, msg_id))


def test_a_body_from_an_earlier_build_still_loads(tmp_path: Path) -> None:
    msg = Msg.user([TextBlock(text="look"), ImageBlock(media_type="image/png", data=PNG)], id="m")
    with Ledger(f"sqlite:///{tmp_path}/s.db") as ledger:
        ledger.save("s", [msg])
    _rewrite(tmp_path / "s.db", "m", _legacy_body(msg))
    with Ledger(f"sqlite:///{tmp_path}/s.db") as ledger:
        (loaded,) = ledger.messages("s")
        assert_same(loaded, msg)


def test_an_old_user_url_that_looked_like_a_reference_never_becomes_media(tmp_path: Path) -> None:
    """Earlier builds stored such a URL as is, and read it back as another message's image."""
    owner = Msg.user([ImageBlock(media_type="image/png", data=PNG)], id="owner")
    victim = Msg.user([TextBlock(text="mine")], id="v")
    with Ledger(f"sqlite:///{tmp_path}/s.db") as ledger:
        ledger.save("s", [owner, victim])
    tree = msgspec.json.decode(encode(victim))
    tree["content"] = [{"media_type": "image/png", "type": "image", "url": "\x00blob:" + HEX}]
    old = encode_struct(tree)  # what an earlier build wrote for that user URL, and its digest
    _rewrite(tmp_path / "s.db", "v", old, digest_of(old))
    with Ledger(f"sqlite:///{tmp_path}/s.db") as ledger, pytest.raises(CorruptStoreError):
        # refused at load (the row's digest no longer matches the list sums the commit
        # recorded) or, at the latest, on first read: never read as the owner's image
        _, victim_back = ledger.messages("s")
        victim_back.content  # noqa: B018


@pytest.mark.parametrize(
    "reference",
    [{"$blob": "00" * 16}, {"$blob": "nothex"}, {"$blob": HEX, "x": 1}, {"$blob": 5}],
    ids=["missing", "not-hex", "extra-key", "not-a-string"],
)
def test_a_bad_reference_is_a_corrupt_store(tmp_path: Path, reference: dict[str, Any]) -> None:
    msg = Msg.user([ImageBlock(media_type="image/png", data=PNG)], id="m")
    with Ledger(f"sqlite:///{tmp_path}/s.db") as ledger:
        ledger.save("s", [msg])
    tree = msgspec.json.decode(encode(msg))
    tree["content"][0]["data"] = reference
    body = encode_struct(tree)
    _rewrite(tmp_path / "s.db", "m", body)
    with Ledger(f"sqlite:///{tmp_path}/s.db") as ledger, pytest.raises(CorruptStoreError):
        ledger.messages("s")[0].content  # noqa: B018


def test_shared_media_outlives_the_session_that_stored_it_first(
    backend: str,  # noqa: F811
    ledger_on: LedgerOn,  # noqa: F811
) -> None:
    """Blob collection finds references in the current form (a JSONL scan included)."""
    first = Msg.user([ImageBlock(media_type="image/png", data=PNG)], id="a")
    second = Msg.user([TextBlock(text="again"), ImageBlock(media_type="image/png", data=PNG)])
    with ledger_on(backend) as ledger:
        ledger.save("one", [first])
        ledger.save("two", [second])
        ledger.delete("one")
        with Ledger(ledger.store) as fresh:
            assert fresh.messages("two")[0].content == second.content
