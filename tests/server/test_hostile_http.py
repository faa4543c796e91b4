"""Hostile input over HTTP: generated requests against a real uvicorn server on loopback.

Hypothesis builds requests of every kind the API takes and many it does not: AG-UI run bodies
with wrong types, unknown roles and fields (among them a field of another role on a valid
message), deep nesting and odd unicode; raw bytes and half-JSON; hostile thread ids, message
ids and tool-call ids (path traversal, NUL, 257+ characters, confusables, URL-encoded slashes);
junk query values and tokens; bodies over the limit, declared or streamed. Every answer must
be a 2xx or 4xx that says what was wrong (a 4xx as JSON with a code and a message; a 200 run as
a well-formed event stream that does not end in an internal error), never a 5xx or a dropped
connection; neither the app nor uvicorn logs an error. Afterwards every version committed
before the requests (threads seeded under two tenants) still loads exactly, every thread passes
strict validation (a frontend tool call may still be waiting for the client), and the second
tenant's threads were neither shown nor changed.

CI size: 200 generated requests; ``AGENTLEDGER_HTTP_FUZZ`` sets the number.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import socket
import threading
from collections import Counter
from collections.abc import Iterator
from datetime import UTC
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reliability import record
from reliability.record import knob

from agentledger.store import Ledger
from agentledger.store.aio import AsyncLedger
from agentledger.store.cursor import encode_cursor
from tests.server.conftest import make_app, parse_frames, serving
from tests.server.model_server import ModelServer, default_rules, text_reply
from tests.server.stored import changes, committed, invalid

LIMIT = 16 * 1024
TOKENS = {"token-of-acme-1": "acme", "token-of-zeta-1": "zeta"}
ACME = "Bearer token-of-acme-1"
ZETA_SECRET = "ZETA-SECRET-7f3a"
SEEDED = ["t", "seed", "a/b", "../x", "ünï", "call"]

HOSTILE_IDS = [
    "t", "seed", "a/b", "../x", "ünï",
    "..", ".", "/", "//", "../../../../etc/passwd", "..\\..\\windows", "a/../b", "a/./b",
    "%2e%2e%2f%2e%2e", "..%2F..%2Fx", "%2F", "%00", "a%00b", "a\x00b", "\x00", "t\n", "t\r\nX: y",
    " t", "t ", "\uff54", "t\u200b", "\u202et", "T", "İ", "ß", "ﬁ", "🙂" * 64, "\ud800", "\udfff",
    "x" * 256, "x" * 257, "é" * 200, "x" * 5000, "con", "nul", "aux.txt", "~", "~" + "0" * 64,
    "null", "[]", "{}", "0", "-1", "", "/messages", "x/messages", "?version=1", "#frag",
    "call_../../etc", "call_\x00", "tenant:acme", "zeta/t", "../zeta/t",
]  # fmt: skip
TEXTS = [
    "hi", "call confirm ../../etc/passwd", "call confirm \x00", "call nothing x", "think x",
    "fail", "break", "", " ", "\u0000", "\ud800", "🙂", "a" * 3000,
]  # fmt: skip


# -- strategies ------------------------------------------------------------------------------
printable = st.text(st.characters(categories=["L", "M", "N", "P", "S"]), min_size=1, max_size=40)
ids = st.one_of(st.sampled_from(HOSTILE_IDS), printable, printable, st.text(max_size=40))
leaf = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
    st.integers(min_value=2**63, max_value=2**70), st.text(max_size=30), st.sampled_from(TEXTS),
)  # fmt: skip
json_values = st.recursive(
    leaf,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


threads = st.one_of(st.sampled_from(SEEDED), ids)
versions = st.one_of(
    st.none(), st.integers(0, 12).map(str), st.text(max_size=6), st.sampled_from(["²", "1" * 30])
)


def maybe(value: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly ``value``, sometimes anything JSON can hold."""
    return st.one_of(value, value, value, json_values)


tool_calls = st.lists(
    st.fixed_dictionaries(
        {"id": maybe(ids), "type": maybe(st.just("function"))},
        optional={
            "function": maybe(
                st.fixed_dictionaries(
                    {"name": maybe(st.sampled_from(["confirm", "nothing", "", "../x"])),
                     "arguments": maybe(st.sampled_from(['{"value": 1}', "{", "", "[]"]))}
                )
            )
        },
    ),
    max_size=3,
)  # fmt: skip
content = st.one_of(
    st.sampled_from(TEXTS),
    st.text(),
    st.lists(
        st.fixed_dictionaries(
            {"type": maybe(st.sampled_from(["text", "binary", "image", "x"]))},
            optional={"text": maybe(st.text()), "mimeType": maybe(st.text()), "data": st.text()},
        ),
        max_size=3,
    ),
    json_values,
)
message = st.fixed_dictionaries(
    {"id": maybe(ids), "role": maybe(st.sampled_from(
        ["user", "assistant", "tool", "system", "developer", "activity", "reasoning", "robot"]))},
    optional={
        "content": content, "toolCalls": maybe(tool_calls), "toolCallId": maybe(ids),
        "name": maybe(st.text(max_size=10)), "error": json_values, "encryptedValue": json_values,
        "activityType": maybe(st.text(max_size=8)), "extra": json_values,
    },
)  # fmt: skip
tool = st.fixed_dictionaries(
    {"name": maybe(st.sampled_from(["confirm", "read_offloaded", "", "a b"])),
     "description": maybe(st.text(max_size=20))},
    optional={"parameters": json_values},
)  # fmt: skip
run_body = st.fixed_dictionaries(
    {},
    optional={
        "threadId": maybe(ids), "runId": maybe(ids),
        "messages": maybe(st.lists(message, max_size=4)),
        "state": json_values, "tools": maybe(st.lists(tool, max_size=2)),
        "context": maybe(st.lists(st.fixed_dictionaries(
            {"description": maybe(st.text(max_size=10)), "value": maybe(st.text(max_size=10))}),
            max_size=2)),
        "forwardedProps": json_values, "parentRunId": maybe(ids), "resume": json_values,
        "colour": json_values,
    },
)  # fmt: skip
user_message = st.fixed_dictionaries(
    {
        "id": st.one_of(st.uuids().map(str), ids),
        "role": st.just("user"),
        "content": st.one_of(st.sampled_from(TEXTS), st.text()),
    }
)
assistant_calls = st.fixed_dictionaries(
    {"id": ids, "role": st.just("assistant"), "toolCalls": st.lists(st.fixed_dictionaries(
        {"id": ids, "type": st.just("function"), "function": st.fixed_dictionaries(
            {"name": st.sampled_from(["confirm", "nothing"]), "arguments": st.just("{}")})}),
        min_size=1, max_size=2)},
)  # fmt: skip
call_ids = st.one_of(st.sampled_from(["call_../x", "call_x", "call_\x00"]), ids)
tool_result = st.fixed_dictionaries(
    {"id": ids, "role": st.just("tool"), "toolCallId": call_ids, "content": st.sampled_from(TEXTS)}
)
CONFIRM = [{"name": "confirm", "description": "ask the user", "parameters": {}}]
valid_body = st.fixed_dictionaries(
    {"threadId": threads, "runId": ids,
     "messages": st.lists(st.one_of(*[user_message] * 4, assistant_calls, tool_result),
                          min_size=1, max_size=4)},
    optional={"state": json_values, "tools": st.just(CONFIRM), "forwardedProps": json_values,
              "context": st.just([{"description": "page", "value": "/x"}])},
)  # fmt: skip
mutated_body = st.builds(
    lambda body, key, junk: {**body, key: junk},
    valid_body,
    st.sampled_from(["threadId", "runId", "messages", "state", "tools", "context", "parentRunId",
                     "forwardedProps", "resume", "colour"]),
    json_values,
)  # fmt: skip
#: A field of some role, on a message of any role: there an unknown field, kept as sent.
_ROLE_FIELDS = ["toolCalls", "toolCallId", "error", "name", "content", "activityType"]
damaged_body = st.builds(
    lambda body, k, key, junk: {
        **body,
        "messages": [
            {**m, key: junk} if i == k % len(body["messages"]) else m
            for i, m in enumerate(body["messages"])
        ],
    },
    valid_body,
    st.integers(0, 3),
    st.sampled_from(_ROLE_FIELDS),
    st.one_of(json_values, tool_calls),
)  # fmt: skip
nested = st.builds(
    lambda open_, n, value: (open_ * n + value + (b"]" if open_ == b"[" else b"}") * n),
    st.sampled_from([b"[", b'{"a":']), st.sampled_from([10, 200, 1000, 5000]),
    st.sampled_from([b"1", b'"x"', b""]),
)  # fmt: skip
raw = st.one_of(
    st.binary(max_size=200),
    nested,
    st.builds(lambda v: json.dumps(v).encode(), json_values),
    st.builds(lambda s: s.encode("utf-8", "surrogatepass"), st.text(max_size=100)),
    st.sampled_from([b"", b"null", b"[]", b"{}", b"NaN", b'{"threadId": NaN}', b"\xff\xfe{",
                     b'{"threadId":"t","threadId":"u","runId":"r","messages":[]}']),
)  # fmt: skip
junk_auth = st.one_of(
    st.none(),
    st.text(st.characters(exclude_categories=["Cc", "Cs"]), max_size=30),
    st.sampled_from(["Bearer ", "Bearer token-of-acme-", "bearer token-of-acme-1", "Basic eA==",
                     "Bearer token-of-acme-1 extra", "Bearer " + "x" * 5000]),
)  # fmt: skip
auth = st.tuples(st.integers(0, 9), junk_auth).map(lambda t: ACME if t[0] < 8 else t[1])
#: How a run body says what it is: only JSON is taken (``parse.check_body_type``).
content_types = st.sampled_from(
    [
        "application/json",
        "application/json; charset=utf-8",
        "APPLICATION/JSON",
        "application/vnd.agui+json",
        "text/plain",
        "text/plain;charset=UTF-8",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/xml",
        "json",
        "application/jsonx",
        "",
        "application/",
    ]
)
encodings = st.sampled_from(["identity", "IDENTITY", "gzip", "br", "deflate", "x", ""])


def _path_id(value: str, slashes: bool) -> str:
    return quote(value.encode("utf-8", "surrogatepass"), safe="/" if slashes else "")


#: Cursors for ``GET /threads?after=``: junk, near misses, and real ones of another tenant
#: (``encode_cursor`` is the format ``SessionInfo.cursor`` writes).
cursors = st.one_of(
    st.text(max_size=40),
    st.binary(max_size=40).map(lambda b: base64.urlsafe_b64encode(b).decode().rstrip("=")),
    st.tuples(st.sampled_from(["zeta", "acme"]), st.datetimes(timezones=st.just(UTC)), ids)
    .filter(lambda t: not any(0xD800 <= ord(c) <= 0xDFFF for c in t[2]))
    .map(lambda t: encode_cursor(*t)),
)

requests = st.one_of(
    st.tuples(st.just("run"), st.one_of(valid_body, valid_body, mutated_body, run_body), auth),
    st.tuples(st.just("run"), valid_body, auth),
    st.tuples(st.just("run"), damaged_body, auth),
    st.tuples(st.just("raw"), raw, auth),
    st.tuples(st.just("typed"), st.tuples(valid_body, content_types, encodings), auth),
    st.tuples(st.just("messages"), st.tuples(threads, st.booleans(), versions), auth),
    st.tuples(st.just("threads"), st.tuples(maybe(st.text(max_size=6)), maybe(cursors)), auth),
    st.tuples(st.just("method"), st.tuples(
        st.sampled_from(["PUT", "DELETE", "PATCH", "GET", "OPTIONS"]),
        st.sampled_from(["/", "/threads", "/threads/t", "/threads/t/messages", "/health", "/x"])),
        auth),
    st.tuples(st.just("oversize"),
              st.tuples(st.integers(LIMIT + 1, 4 * LIMIT), st.booleans()), auth),
)  # fmt: skip


# -- sending and judging ----------------------------------------------------------------------
def send(http: httpx.Client, kind: str, payload: Any, authorization: str | None) -> httpx.Response:
    headers = {} if authorization is None else {"Authorization": authorization.encode()}
    if kind in ("run", "raw", "oversize"):
        headers["Content-Type"] = b"application/json"
    if kind == "typed":
        run_body, content_type, encoding = payload
        headers.update({"Content-Type": content_type, "Content-Encoding": encoding})
        return http.post("/", content=json.dumps(run_body).encode(), headers=headers)
    if kind == "run":
        return http.post("/", content=json.dumps(payload).encode(), headers=headers)
    if kind == "raw":
        return http.post("/", content=payload, headers=headers)
    if kind == "messages":
        thread, slashes, version = payload
        query = "" if version is None else f"?version={quote(str(version), safe='')}"
        return http.get(f"/threads/{_path_id(thread, slashes)}/messages{query}", headers=headers)
    if kind == "threads":
        given = {"limit": payload[0], "after": payload[1]}
        query = "&".join(
            f"{k}={_path_id(str(v), False)}" for k, v in given.items() if v is not None
        )
        return http.get(f"/threads?{query}", headers=headers)
    if kind == "method":
        method, path = payload
        return http.request(method, path, headers=headers)
    size, declared = payload
    if declared:
        return http.post("/", content=b" " * size, headers=headers)

    def chunks() -> Iterator[bytes]:  # no content-length: counted as it arrives
        for _ in range(0, size, 4096):
            yield b" " * 4096

    return http.post("/", content=chunks(), headers=headers)


def judge(response: httpx.Response) -> str:
    """How a response ended (for the histogram); fails the test on any answer not allowed."""
    status = response.status_code
    assert status < 500, (status, response.text[:500])
    assert ZETA_SECRET not in response.text, "another tenant's thread was shown"
    if status >= 400:
        body = response.json()
        if "detail" in body:  # the router's own refusal (no such route or method)
            assert status in (404, 405) and isinstance(body["detail"], str), body
            return f"{status} {body['detail']}"
        assert body["error"]["code"] and body["error"]["message"], body
        return f"{status} {body['error']['code']}"
    if response.headers["content-type"].startswith("text/event-stream"):
        end = parse_frames(response.text)[-1]
        if end["type"] == "RUN_ERROR":
            assert end["code"] in ("model_error", "model_stream_error"), end
            return f"{status} RUN_ERROR {end['code']}"
        return f"{status} {end['type']}"
    response.json()
    return f"{status} json"


def _rules(body: dict[str, Any]) -> list[bytes] | int:
    """The scripted model, except that nothing streams slowly (a text may start "slow")."""
    reply = default_rules(body)
    return text_reply("ok") if isinstance(reply, list) and reply[:1] == [b"SLOW"] else reply


def _seed(http: httpx.Client) -> None:
    for thread in SEEDED:
        text = "call confirm ../x" if thread == "call" else f"seeded {thread}"
        message = {"id": f"seed-{thread}", "role": "user", "content": text}
        body = {"threadId": thread, "runId": "seed", "messages": [message], "tools": CONFIRM}
        for token, secret in ((ACME, "acme says"), ("Bearer token-of-zeta-1", ZETA_SECRET)):
            body["messages"][0]["content"] = f"{text} {secret}" if thread != "call" else text
            response = http.post("/", json=body, headers={"Authorization": token})
            assert parse_frames(response.text)[-1]["type"] == "RUN_FINISHED", response.text


@pytest.fixture
def served(tmp_path: Path, model: ModelServer) -> Iterator[tuple[httpx.Client, Ledger]]:
    model.rules = _rules
    store = f"sqlite:///{tmp_path / 'threads.db'}"
    app = make_app(model, AsyncLedger(store), auth=TOKENS, max_body=LIMIT)
    with serving(app) as url, httpx.Client(base_url=url, timeout=30) as http, Ledger(store) as led:
        yield http, led


def test_hostile_http_requests_are_refused_readably_and_lose_nothing(
    served: tuple[httpx.Client, Ledger], caplog: pytest.LogCaptureFixture
) -> None:
    http, ledger = served
    _seed(http)
    before = {tenant: committed(ledger, tenant) for tenant in ("acme", "zeta")}
    outcomes: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    examples = knob("AGENTLEDGER_HTTP_FUZZ", 200)

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(request=requests)
    def one(request: tuple[str, Any, str | None]) -> None:
        kind, payload, authorization = request
        try:
            response = send(http, kind, payload, authorization)
        except httpx.LocalProtocolError:  # h11 will not send it; the raw-socket test does
            outcomes["not sendable by the client"] += 1
            return
        ended = judge(response)
        kinds[kind] += 1
        outcomes[ended] += 1

    caplog.set_level(logging.WARNING, logger="agentledger")
    web = logging.getLogger("uvicorn.error")  # does not propagate: "Exception in ASGI application"
    web.addHandler(caplog.handler)
    try:
        one()
    finally:
        web.removeHandler(caplog.handler)
    logged = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    grown = {tenant: committed(ledger, tenant) for tenant in ("acme", "zeta")}
    problems = [p for tenant, was in before.items() for p in changes(ledger, tenant, was)]
    problems += [p for tenant in ("acme", "zeta") for p in invalid(ledger, tenant)]
    print(f"\nhostile HTTP: {sum(kinds.values())} requests {dict(kinds)}\n{dict(outcomes)}")
    record(
        "hostile input",
        "server: generated hostile HTTP requests",
        requests=sum(kinds.values()),
        by_kind=kinds,
        outcomes=dict(outcomes.most_common()),
        threads_after=sum(len(t) for t in grown.values()),
        server_errors_logged=len(logged),
        committed_changed=len(problems),
    )
    assert not logged, logged[:3]
    assert not problems, problems[:5]
    assert grown["zeta"] == before["zeta"]  # only acme's token was ever valid in the requests


# -- below HTTP: requests no client library would send ------------------------------------------
RAW_REQUESTS = [
    b"GET /threads/a\x00b/messages HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /threads/\xff\xfe/messages HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /threads/../../../etc/passwd/messages HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /threads/%2e%2e%2f%2e%2e/messages HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /threads/t/messages HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \x01\r\n\r\n",
    b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
    b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999\r\n\r\n",
    b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 7\r\n\r\nhello",
    b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    b"POST / HTTP/1.1\r\nHost: x\r\nAuthorization: " + ACME.encode() + b"\r\n"
    b"Content-Length: 2\r\n\r\n{}",
    b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
    b"BREW / HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET / HTTP/9.9\r\n\r\n",
    b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03",  # a TLS hello on the plain port
]


def _exchange(url: str, data: bytes) -> bytes:
    """Send ``data`` raw and return every byte the server answered before closing.

    A server that refuses a request before reading all of it (the 70 kB request line) closes
    with unread bytes, so its kernel resets the connection: the reset may beat our half-close
    or follow the answer. Both are the server's right; the answer already received still counts.
    """
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(data)
        with contextlib.suppress(OSError):  # ENOTCONN: already reset
            sock.shutdown(socket.SHUT_WR)
        reply = b""
        with contextlib.suppress(ConnectionResetError):
            while chunk := sock.recv(65536):
                reply += chunk
    return reply


#: Run bodies a client stops sending: the declared length not reached, a chunked body cut off.
CUT_OFF = [
    b"POST / HTTP/1.1\r\nHost: x\r\nAuthorization: " + ACME.encode() + b"\r\n"
    b'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"',
    b"POST / HTTP/1.1\r\nHost: x\r\nAuthorization: " + ACME.encode() + b"\r\n"
    b'Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{"\r\n',
]


def test_a_client_that_stops_sending_its_body_leaves_no_error_and_no_trace(
    model: ModelServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The body's end never comes: the app stops reading it, runs nothing and answers 400 to
    no one, and neither it nor uvicorn logs an error (an unhandled ``ClientDisconnect`` was an
    "Exception in ASGI application")."""
    ledger = AsyncLedger(f"sqlite:///{tmp_path / 't.db'}")
    web = logging.getLogger("uvicorn.error")  # configured by uvicorn as it starts
    with serving(make_app(model, ledger, auth=TOKENS)) as url:
        web.addHandler(caplog.handler)
        try:
            host, port = url.removeprefix("http://").split(":")
            for data in CUT_OFF:
                with socket.create_connection((host, int(port)), timeout=10) as sock:
                    sock.sendall(data)
                threading.Event().wait(0.5)  # the app finds the connection closed
        finally:
            web.removeHandler(caplog.handler)
    logged = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert not logged, logged
    assert model.requests == []


def test_malformed_http_gets_a_4xx_not_a_dropped_connection(
    model: ModelServer, tmp_path: Path
) -> None:
    app = make_app(
        model, AsyncLedger(f"sqlite:///{tmp_path / 't.db'}"), auth=TOKENS, max_body=LIMIT
    )
    statuses: Counter[str] = Counter()
    with serving(app) as url:
        for data in RAW_REQUESTS:
            reply = _exchange(url, data)
            status = reply.split(b" ", 2)[1].decode() if reply.startswith(b"HTTP/1.1 ") else "none"
            assert status[:1] in ("2", "4"), (data[:80], reply[:200])
            statuses[status] += 1
    record(
        "hostile input",
        "server: malformed HTTP below the client library",
        requests=len(RAW_REQUESTS),
        outcomes=dict(statuses.most_common()),
    )
