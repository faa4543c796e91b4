"""Work a cancelled task must see to its end before it ends itself.

``asyncio.shield`` keeps the shielded work running, but lets the cancelled caller go on at once:
the task can end, and its caller act on that, while the work it started still runs. For work
that takes or gives back a session's run lease, or saves a run's last state, that broke the rule
that a run which has ended holds nothing: a caller retrying at once found the session busy (a
``SessionBusyError``, HTTP 409, for a session nobody held), or a run's final save still writing
after its lease went to the next run. ``shield_to_end`` makes the caller wait for the end too.

A cancellation received meanwhile is not lost: it is raised once the work has ended, and the
task's count of cancellation requests (``Task.cancelling``) keeps every one, so
``asyncio.timeout`` and ``TaskGroup`` still see the cancellations they issued.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

__all__ = ["shield_to_end", "wait_done"]

T = TypeVar("T")


async def wait_done(future: asyncio.Future[Any]) -> asyncio.CancelledError | None:
    """Wait until ``future`` is done, however often the caller is cancelled meanwhile (the
    future itself is never cancelled). Returns the first cancellation received, else None."""
    received: asyncio.CancelledError | None = None
    while not future.done():
        try:
            await asyncio.wait([future])  # which, cancelled, leaves the future running
        except asyncio.CancelledError as exc:
            received = received or exc
    return received


async def shield_to_end(awaitable: Awaitable[T]) -> T:
    """``await awaitable`` to its end, even if the caller is cancelled meanwhile; then its
    result or error, or, if it succeeded and the caller was cancelled, that cancellation.

    An error of the work wins over a cancellation, as an error raised in a ``finally`` replaces
    the exception in flight."""
    work = asyncio.ensure_future(awaitable)
    received = await wait_done(work)
    if received is not None and not work.cancelled() and work.exception() is None:
        raise received
    return work.result()
