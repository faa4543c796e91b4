"""``Usage``: the token counts a provider reported for one model call.

Every count is an ``int`` from 0 to 2**63 - 1: a ``bool``, a float or ``None`` would be written
as something the decoder refuses (the session could no longer be loaded), a negative count means
nothing, and a larger one does not fit the 64-bit integers every store and decoder handles.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

from agentledger.messages import checks
from agentledger.messages.checked import Checked

__all__ = ["Usage"]

_FIELDS = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
)


#: A count as msgspec decodes it: the bounds are checked in C (``Checked`` says why a decoded
#: ``Usage`` needs no ``_check``).
_Count = Annotated[int, msgspec.Meta(ge=0, le=checks.MAX_COUNT)]


class Usage(
    msgspec.Struct,
    metaclass=Checked,
    frozen=True,
    omit_defaults=True,
    kw_only=True,
    gc=False,
    forbid_unknown_fields=True,
):
    """Token counts reported by the provider for one model call."""

    input_tokens: _Count = 0
    output_tokens: _Count = 0
    cache_read_tokens: _Count = 0
    cache_write_tokens: _Count = 0
    reasoning_tokens: _Count = 0

    def _check(self) -> None:
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
