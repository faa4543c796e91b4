"""Query values that look like numbers to ``str.isdigit`` but not to ``int``, or that no
backend's integer holds, are refused with a 422 naming the parameter; a version the thread
never had is a 404.

Regressions (found by ``test_hostile_http``): ``?limit=²`` (a superscript two is a digit to
``isdigit``) and a 5,000-digit ``?version=`` passed the check and made ``int`` raise, and
``?version=`` past the thread's last version raised ``VersionNotFoundError``, which the app
mapped to nothing more specific than ``AgentLedgerError``: HTTP 500 each time.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.server.conftest import run, user

ODD = ["²", "٣", "\uff11", "9" * 5000, "1" * 19, "-1", "1.0", " 1", ""]


@pytest.mark.parametrize("value", ODD, ids=[f"{v[:3]}..{len(v)}" for v in ODD])
async def test_an_odd_number_in_the_query_is_a_readable_422(client: Any, value: str) -> None:
    await run(client, "t", [user("u0", "hi")])
    for path, name in (("/threads", "limit"), ("/threads/t/messages", "version")):
        response = await client.get(path, params={name: value})
        assert response.status_code == 422, (path, response.text)
        assert name in response.json()["error"]["message"]


async def test_a_page_of_no_threads_is_refused_not_an_empty_last_page(client: Any) -> None:
    """``limit=0`` gave an empty page with no ``next``: a client paging through the threads
    read it as the end of a list that has threads."""
    await run(client, "t", [user("u0", "hi")])
    response = await client.get("/threads", params={"limit": "0"})
    assert response.status_code == 422, response.text
    assert "limit" in response.json()["error"]["message"]
    page = (await client.get("/threads", params={"limit": "1"})).json()
    assert [t["threadId"] for t in page["threads"]] == ["t"]


@pytest.mark.parametrize("version", ["0", "3", "1" * 18])
async def test_a_version_the_thread_never_had_is_a_404(client: Any, version: str) -> None:
    await run(client, "t", [user("u0", "hi")])
    response = await client.get("/threads/t/messages", params={"version": version})
    assert response.status_code == 404, response.text
    assert response.json()["error"]["code"] == "version_not_found"


async def test_a_declared_length_no_integer_holds_is_refused_with_413(client: Any) -> None:
    headers = {"content-length": "9" * 5000, "content-type": "application/json"}
    response = await client.post("/", content=b"{}", headers=headers)
    assert response.status_code == 413, response.text
