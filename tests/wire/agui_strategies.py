"""Hypothesis strategies for AG-UI messages a client can send, in their canonical JSON form
(what ``ag_ui.core`` writes back): used by the wire round-trip property and by the server's
fidelity property, so both cover the same messages."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from hypothesis import strategies as st

core = pytest.importorskip("ag_ui.core")
from pydantic import TypeAdapter  # noqa: E402

_adapter = TypeAdapter(core.Message)


def normalized(d: dict[str, Any]) -> dict[str, Any]:
    return _adapter.validate_python(d).model_dump(by_alias=True, mode="json")


json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=6),
)
json_values = st.recursive(
    json_leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(
            st.sampled_from(["k", "_p", "agentledger", "$bytes", "$map"]), inner, max_size=3
        ),
    ),
    max_leaves=6,
)
message_ids = st.one_of(
    st.sampled_from(["a", "b", "t", "t:1", "a:reasoning:0", "a:reasoning:1", "r-1", "c"]),
    st.text(min_size=1, max_size=8),
)


def _optional(**fields: st.SearchStrategy) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({}, optional=fields)


# agentledger refuses control characters in a media URL or file handle (they are never part of
# one, and NUL once marked internal references): such a message is refused (test_agui.py).
_locator = st.text(st.characters(blacklist_categories=("Cc", "Cs")), max_size=6)
_source = st.one_of(
    st.fixed_dictionaries(
        {
            "type": st.just("data"),
            "value": st.binary(max_size=6).map(lambda b: base64.b64encode(b).decode()),
            "mimeType": st.text(max_size=5),
        }
    ),
    st.fixed_dictionaries(
        {"type": st.just("url"), "value": _locator},
        optional={"mimeType": st.text(max_size=5)},
    ),
    st.fixed_dictionaries(
        {"type": st.just("file"), "value": _locator},
        optional={"mimeType": st.text(max_size=5), "provider": st.text(max_size=5)},
    ),
)
_part = st.one_of(
    st.fixed_dictionaries(
        {"type": st.just("text"), "text": st.text(max_size=6)},
        optional={"id": st.text(max_size=3), "metadata": json_values},
    ),
    st.fixed_dictionaries(
        {"type": st.sampled_from(["image", "audio", "video", "document"]), "source": _source},
        optional={"id": st.text(max_size=3), "metadata": json_values},
    ),
)
content = st.one_of(st.text(max_size=8), st.lists(_part, max_size=3))
common_fields = {
    "encryptedValue": st.text(max_size=4),
    "metadata": st.dictionaries(
        st.sampled_from(["k", "_p", "agentledger"]), json_values, max_size=2
    ),
    "subagentRunId": st.text(max_size=3),
    "extraField": json_values,
}
tool_call = st.fixed_dictionaries(
    {
        "id": message_ids,
        "type": st.just("function"),
        "function": st.fixed_dictionaries(
            {
                "name": st.text(max_size=4),
                "arguments": st.sampled_from(['{"x":1}', "{}", "{bad", ""]),
            }
        ),
    },
    optional={"encryptedValue": st.text(max_size=3), "metadata": common_fields["metadata"]},
)


@st.composite
def agui_message(draw: st.DrawFn) -> dict[str, Any]:
    role = draw(st.sampled_from(["developer", "system", "user", "assistant", "tool", "reasoning"]))
    d: dict[str, Any] = {"id": draw(message_ids), "role": role}
    extra = dict(common_fields)
    if role in ("developer", "system", "reasoning"):
        d["content"] = draw(st.text(max_size=8))
    elif role == "user":
        d["content"] = draw(content)
    elif role == "tool":
        d["toolCallId"] = draw(st.text(min_size=1, max_size=3))
        d["content"] = draw(content)
        extra["error"] = st.text(max_size=8)
    else:
        extra["content"] = st.text(max_size=8)
        extra["toolCalls"] = st.lists(tool_call, max_size=2)
    if role in ("developer", "system", "user", "assistant"):
        extra["name"] = st.text(max_size=3)
    if role == "reasoning":
        extra["metadata"] = st.one_of(
            common_fields["metadata"], st.just({"agentledger": {"redacted": True}})
        )
    # a field another role defines is an unknown field here, whatever it holds
    foreign = {f: json_values for f in _ROLE_FIELDS if f not in extra and f not in d}
    d.update(draw(_optional(**extra, **foreign)))
    return normalized(d)


#: Fields some roles define: on a message of another role, unknown fields like any other.
_ROLE_FIELDS = ("toolCalls", "toolCallId", "error", "name", "activityType")
