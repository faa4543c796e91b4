"""``Checked``: run a value type's checks when a caller builds it, not when msgspec decodes it.

Blocks and ``Usage`` are msgspec structs. A caller who builds one (``TextBlock(text=...)``,
``copy``, ``pickle``, ``replace``) goes through the class call, and this metaclass runs the
type's ``_check`` there: exact types, text UTF-8 can encode, frozen maps, bytes copied (see
``checks``). msgspec's decoder builds structs in C without that call, so a decoded struct skips
``_check`` and costs no Python call per block (a fifth of the decoding time of a reload).

Skipping it is safe only because decoding establishes the same facts another way, and
``record.decode_record`` finishes the job for every decoded record: msgspec's typed decoding
gives exact ``str``, ``bool``, ``int`` and ``bytes`` values (never a bool for an int, never a
subclass), refuses lone surrogates in JSON text, keeps counts within the ``Meta`` bounds of
``Usage``, and builds every map through ``values.json_dec_hook`` (which freezes it); what the
types cannot say (a URL without control characters, exactly one of ``data`` and ``url``, tool
input read from its argument text) is checked by ``blocks.check_decoded``, which calls the
same ``_check`` on just those blocks.

msgspec's own builders also bypass the class call: a struct made by ``msgspec.structs.replace``
or ``msgspec.convert`` is not checked. agentledger never builds blocks that way; use the
block's ``replace`` method, which is checked.
"""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = ["Checked"]


class Checked(msgspec.StructMeta):
    """Metaclass: ``Cls(...)`` builds the struct, then runs its ``_check``."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        obj = super().__call__(*args, **kwargs)
        obj._check()
        return obj
