"""The AG-UI forms of a server's messages, kept from run to run by content.

Every run compares the client's resent thread with ``to_agui`` of the stored one (``merge``) and
ends with a ``MESSAGES_SNAPSHOT`` of the thread: converting every stored message on every run
cost about 6 us a message, more than half of a run at 12,000 messages. What ``to_agui`` makes of
a message depends on nothing but the message, and its digest covers every field, the id
included; so ``AguiForms`` keeps each message's form under its digest, for the ``MAX_MESSAGES``
messages asked for last, and a run converts only what it has not seen. The dicts it hands out
are shared by every run that asks for the same message: the server only compares them and
writes them to JSON, never changes them.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

from agentledger.messages import Msg
from agentledger.wire.agui import to_agui

__all__ = ["MAX_MESSAGES", "AguiForms"]

#: Messages whose forms are kept (the least recently used go first): a few long threads. A form
#: takes about 0.5 KiB beside the message's text, which it shares with the message but keeps
#: alive: at most about 30 MiB for the benchmark's messages (1.3 KiB of JSON on average).
MAX_MESSAGES = 20_000


class AguiForms:
    """``to_agui``, remembered by message digest (see the module docstring)."""

    def __init__(self, max_messages: int = MAX_MESSAGES) -> None:
        self.max_messages = max_messages
        self._forms: OrderedDict[bytes, list[dict[str, Any]]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._forms)

    def of(self, msg: Msg) -> list[dict[str, Any]]:
        """``to_agui([msg])``: the AG-UI messages ``msg`` is written as (shared, not to change)."""
        key = msg.digest
        forms = self._forms.get(key)
        if forms is not None:
            self._forms.move_to_end(key)
            return forms
        forms = self._forms[key] = to_agui([msg])
        if len(self._forms) > self.max_messages:
            self._forms.popitem(last=False)
        return forms

    def thread(self, msgs: Iterable[Msg]) -> list[dict[str, Any]]:
        """``to_agui(msgs)``."""
        return [d for msg in msgs for d in self.of(msg)]
