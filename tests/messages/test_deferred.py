"""Deferred messages: what a load returns, decoded on first read and equal to what was saved."""

from __future__ import annotations

import asyncio
import pickle
import sys
import threading
from typing import Any

import pytest

from agentledger import AsyncLedger, Ledger, Msg, TextBlock
from agentledger.errors import CorruptStoreError
from agentledger.messages import decode, digest_of, encode
from agentledger.messages.codec import decode_deferred
from agentledger.messages.deferred import BATCH
from agentledger.messages.msg import deferred_messages
from agentledger.messages.record import LARGE_BODY
from agentledger.testing.samples import every_block_message


def _deferred(msgs: list[Msg]) -> list[Msg]:
    return deferred_messages(
        [m.id for m in msgs], [m.digest for m in msgs], [encode(m) for m in msgs]
    )


def test_fields_decode_on_first_read_and_equal_the_original() -> None:
    originals = every_block_message()
    loaded = _deferred(originals)
    assert all(m._stored is not None for m in loaded)
    for m, original in zip(loaded, originals, strict=True):
        assert m.content == original.content
        assert (m.role, m.name, m.metadata, m.usage, m.created_at) == (
            original.role,
            original.name,
            original.metadata,
            original.usage,
            original.created_at,
        )
        assert m._stored is None  # decoded once, the bytes dropped


def test_identity_digest_equality_and_encoding_need_no_decoding() -> None:
    originals = every_block_message()
    loaded = _deferred(originals)
    assert loaded == originals and [hash(m) for m in loaded] == [hash(m) for m in originals]
    assert [encode(m) for m in loaded] == [encode(m) for m in originals]
    assert [m.id for m in loaded] == [m.id for m in originals]
    assert all(m._stored is not None for m in loaded)


def test_a_deferred_message_behaves_like_any_other() -> None:
    (original,) = _deferred([Msg.user("hello", id="a", metadata={"k": b"\x00\x01"})])
    (loaded,) = _deferred([original])
    assert pickle.loads(pickle.dumps(loaded)) == original
    (loaded,) = _deferred([original])
    assert repr(loaded) == repr(original)
    (loaded,) = _deferred([original])
    edited = loaded.replace(content="bye")
    assert edited.id == "a" and edited.text == "bye" and edited.metadata["k"] == b"\x00\x01"
    (loaded,) = _deferred([original])
    with pytest.raises(AttributeError, match="immutable"):
        loaded.role = "system"  # type: ignore[misc]
    assert not hasattr(loaded, "no_such_field") and loaded._stored is not None


def test_undecodable_bytes_fail_on_first_read_every_time() -> None:
    good = Msg.user("fine", id="good")
    body = b'{"id":"bad","role":"nobody"}'
    (bad,) = deferred_messages(["bad"], [digest_of(body)], [body])
    for _ in range(2):
        with pytest.raises(CorruptStoreError, match="'bad' cannot be decoded"):
            bad.content  # noqa: B018
    (other,) = deferred_messages(["bad"], [good.digest], [encode(good)])
    with pytest.raises(CorruptStoreError, match="hold message 'good'"):
        other.role  # noqa: B018


def test_stored_bytes_that_do_not_match_their_digest_are_not_passed_on() -> None:
    good = Msg.user("fine", id="m")
    altered = encode(Msg.user("fake", id="m", created_at=good.created_at))
    (loaded,) = deferred_messages(["m"], [good.digest], [altered])
    for leave in (encode, pickle.dumps):
        with pytest.raises(CorruptStoreError, match="'m' does not match the digest"):
            leave(loaded)
    (intact,) = _deferred([good])
    assert encode(intact) == encode(good) and intact._stored is not None


def _read_all(loaded: list[Msg], out: list[object], errors: list[BaseException]) -> None:
    try:
        out.extend((m.content, m.created_at, m.role) for m in loaded)
    except BaseException as exc:
        errors.append(exc)


def test_threads_reading_one_message_all_see_it_whole() -> None:
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible: races show up
    try:
        for _ in range(40):
            originals = every_block_message() * 20
            loaded = _deferred(originals)
            seen: list[list[object]] = [[] for _ in range(6)]
            errors: list[BaseException] = []
            threads = [
                threading.Thread(target=_read_all, args=(loaded, out, errors)) for out in seen
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert not errors
            expected = [(m.content, m.created_at, m.role) for m in originals]
            assert all(out == expected for out in seen)
    finally:
        sys.setswitchinterval(interval)


@pytest.mark.parametrize("url", ["memory://", "sqlite"])
def test_a_loaded_session_is_deferred_and_saves_back_as_a_no_op(url: str, tmp_path: object) -> None:
    if url == "sqlite":
        url = f"sqlite:///{tmp_path}/s.db"
    with Ledger(url) as ledger:
        msgs = [Msg.user(f"message {i}", id=f"m{i}") for i in range(50)]
        ledger.save("s", msgs)
        with Ledger(ledger.store) as fresh:
            loaded = fresh.messages("s")
            assert all(m._stored is not None for m in loaded)
            assert fresh.save("s", loaded).noop
            assert all(m._stored is not None for m in loaded)  # saving decoded nothing
            assert [m.text for m in loaded] == [m.text for m in msgs]
            assert loaded == [decode(encode(m)) for m in msgs]


def test_decode_deferred_decodes_in_one_go_and_names_a_bad_message() -> None:
    originals = every_block_message()
    loaded = _deferred(originals)
    decode_deferred(loaded)
    assert all(m._stored is None for m in loaded)
    assert [m.content for m in loaded] == [m.content for m in originals]
    decode_deferred(loaded)  # nothing left to do

    good = Msg.user("fine", id="good")
    mixed = deferred_messages(
        ["good", "bad"], [good.digest, digest_of(b'{"id":"bad"}')], [encode(good), b'{"id":"bad"}']
    )
    with pytest.raises(CorruptStoreError, match="'bad' cannot be decoded"):
        decode_deferred(mixed)
    assert mixed[0].text == "fine"


def test_async_loads_arrive_decoded(tmp_path: object) -> None:
    async def main() -> None:
        async with AsyncLedger(f"sqlite:///{tmp_path}/s.db") as ledger:
            msgs = [Msg.user(f"message {i}", id=f"m{i}") for i in range(20)]
            await ledger.save("s", msgs)
            async with AsyncLedger(ledger.store) as fresh:
                loaded = await fresh.messages("s")
                state = await fresh.load("s")
            assert all(m._stored is None for m in [*loaded, *state.context])
            assert loaded == msgs and state.context == msgs

    asyncio.run(main())


@pytest.mark.parametrize(
    "reformat",
    [
        lambda b: b" " + b,
        lambda b: b.replace(b'"role":"user"', b'"name":null,"role":"user"'),
        lambda b: b.replace(b'"id":"m"', b'"id":"\\u006d"'),
        lambda b: b.replace(b'"metadata":{"a":1}', b'"metadata":{"$map":{"a":1}}'),
    ],
)
def test_a_body_must_be_canonical_even_beside_its_own_digest(reformat: Any) -> None:
    """Bytes agentledger did not write (a foreign writer, with a digest of its own) are
    refused even when they mean the same message: its digest would not be the message's."""
    msg = Msg.user("x", id="m", metadata={"a": 1})
    body = reformat(encode(msg))
    assert body != encode(msg) and decode(body) == msg
    (loaded,) = deferred_messages(["m"], [digest_of(body)], [body])
    with pytest.raises(CorruptStoreError, match="canonical"):
        loaded.content  # noqa: B018
    with pytest.raises(CorruptStoreError, match="canonical"):
        decode_deferred(deferred_messages(["m"], [digest_of(body)], [body]))


def test_the_digest_is_checked_before_the_body_is_decoded() -> None:
    msg = Msg.user("x", id="m")
    body = encode(msg).replace(b'"x"', b'"y"')  # still a valid message: only the digest tells
    (loaded,) = deferred_messages(["m"], [msg.digest], [body])
    with pytest.raises(CorruptStoreError, match="digest"):
        loaded.text  # noqa: B018
    with pytest.raises(CorruptStoreError, match="digest"):
        decode_deferred(deferred_messages(["m"], [msg.digest], [body]))


def test_a_pickled_message_comes_back_deferred_and_checked() -> None:
    msg = Msg.user("x", id="m")
    back = pickle.loads(pickle.dumps(msg))
    assert back._stored is not None and back == msg and back.text == "x"
    tampered = pickle.loads(pickle.dumps(msg).replace(b'"text":"x"', b'"text":"y"'))
    with pytest.raises(CorruptStoreError, match="digest"):
        tampered.text  # noqa: B018


def _large(msg: Msg) -> Msg:
    """``msg`` with a text block long enough that its body takes the large-body decoder."""
    pad = TextBlock(text="x" * LARGE_BODY, metadata={"n": 1})
    return msg.replace(content=(*msg.content, pad))


def test_large_bodies_decode_to_the_same_messages() -> None:
    originals = [*every_block_message(), *map(_large, every_block_message())]
    assert {len(encode(m)) >= LARGE_BODY for m in originals} == {True, False}
    loaded = _deferred(originals)
    assert [m.content for m in loaded] == [m.content for m in originals]
    assert [(m.usage, m.metadata, m.created_at) for m in loaded] == [
        (m.usage, m.metadata, m.created_at) for m in originals
    ]
    assert [type(b) for m in loaded for b in m.content] == [
        type(b) for m in originals for b in m.content
    ]


_PAD = b'{"text":"' + b"y" * LARGE_BODY + b'","type":"text"}'


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b'{"content":[' + _PAD + b'],"id":"m","role":"nobody"}', "role"),
        (b'{"cOntent":[' + _PAD + b'],"id":"m","role":"user"}', "cOntent"),
        (b'{"content":[' + _PAD + b'],"id":"m","role":"user","usage":{"input_tokens":-1}}', ">= 0"),
        (
            b'{"content":['
            + _PAD
            + b',{"data":"AAE=","media_type":"m","type":"image","url":"u"}]'
            + b',"id":"m","role":"user"}',
            "exactly one",
        ),
        (b'{"content":[' + _PAD + b'],"id":"m","role":"user","role":"user"}', "canonical"),
        (b'{"content":[' + _PAD + b'], "id":"m","role":"user"}', "canonical"),
        (b'{"content":[' + _PAD + b'],"id":"other","role":"user"}', "hold message 'other'"),
    ],
)
def test_large_bodies_are_checked_like_small_ones(body: bytes, why: str) -> None:
    assert len(body) >= LARGE_BODY
    (loaded,) = deferred_messages(["m"], [digest_of(body)], [body])
    with pytest.raises(CorruptStoreError, match=why):
        loaded.content  # noqa: B018


def test_a_first_read_decodes_the_rest_of_its_batch_and_only_that() -> None:
    originals = [Msg.user(f"m{i}", id=f"m{i}") for i in range(BATCH + 3)]
    loaded = _deferred(originals)
    assert loaded[5].text == "m5"
    assert all(m._stored is None and m._batch is None for m in loaded[5:BATCH])
    assert all(m._stored is not None for m in [*loaded[:5], *loaded[BATCH:]])
    assert [m.text for m in loaded] == [m.text for m in originals]


def test_a_damaged_message_fails_alone_and_every_time_in_its_batch() -> None:
    originals = [Msg.user(f"m{i}", id=f"m{i}") for i in range(4)]
    bodies = [encode(m) for m in originals]
    bodies[2] = bodies[2].replace(b"m2", b"x2")  # the digest no longer matches
    loaded = deferred_messages([m.id for m in originals], [m.digest for m in originals], bodies)
    assert loaded[0].text == "m0"
    assert loaded[3].text == "m3" and loaded[1].text == "m1"
    for _ in range(2):
        with pytest.raises(CorruptStoreError, match=r"'m2'.*digest"):
            loaded[2].content  # noqa: B018
    loaded = deferred_messages([m.id for m in originals], [m.digest for m in originals], bodies)
    with pytest.raises(CorruptStoreError, match=r"'m2'.*digest"):
        loaded[2].content  # noqa: B018
    assert loaded[3]._stored is None and loaded[0]._stored is not None  # decoded by that read
    assert [loaded[i].text for i in (0, 1, 3)] == ["m0", "m1", "m3"]
    assert loaded[2]._stored is not None
