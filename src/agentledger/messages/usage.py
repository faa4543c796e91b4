"""``Usage``: the token counts a provider reported for one model call.

Every count is an ``int`` from 0 to 2**63 - 1: a ``bool``, a float or ``None`` would be written
as something the decoder refuses (the session could no longer be loaded), a negative count means
nothing, and a larger one does not fit the 64-bit integers every store and decoder handles.
"""

from __future__ import annotations

import msgspec

from agentledger.messages import checks

__all__ = ["Usage"]

_FIELDS = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
)


class Usage(
    msgspec.Struct,
    frozen=True,
    omit_defaults=True,
    kw_only=True,
    gc=False,
    forbid_unknown_fields=True,
):
    """Token counts reported by the provider for one model call."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0

    def __post_init__(self) -> None:
        counts = msgspec.structs.astuple(self)
        if set(map(type, counts)) == {int} and min(counts) >= 0 and max(counts) <= _MAX:
            return  # the common case, tested in C
        for name, value in zip(_FIELDS, counts, strict=True):
            msgspec.structs.force_setattr(self, name, checks.count("Usage", name, value))

    def __add__(self, other: Usage) -> Usage:
        if type(other) is not Usage:
            return NotImplemented
        return Usage(
            **{f: a + b for f, a, b in zip(_FIELDS, self._counts(), other._counts(), strict=True)}
        )

    def _counts(self) -> tuple[int, ...]:
        return msgspec.structs.astuple(self)


_MAX = checks.MAX_COUNT
