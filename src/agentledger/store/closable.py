"""``Closable``: once ``close()`` has run, every public method raises ``ClosedError``.

A store or a ledger that was closed must say so, and on every backend alike: one reopened its
database on the next call as if nothing had happened, another reported its closed pool as
``StoreUnavailableError``, which callers retry as a server that is down, so they retried a
closed ledger forever. The rule is kept in one place: a ``Closable`` class, and each of its
subclasses, has every public method it defines wrapped, as the class is made, in a check of
``closed``; its ``close`` marks the object closed before it releases anything (a call that
starts meanwhile is refused, and a close that failed half way may be called again to finish).
Private helpers, properties, static and class methods are left as they are: a call reaches
them only through a public method, which has checked.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

from agentledger.errors import ClosedError

__all__ = ["Closable", "closed_error"]

_F = TypeVar("_F", bound=Callable[..., Any])


def closed_error(location: str) -> ClosedError:
    """What a call on the closed store at ``location`` raises."""
    return ClosedError(
        f"the store {location} is closed; open a new one (Ledger(url)) to go on using what it holds"
    )


class Closable:
    """A class whose objects refuse every public call once closed (see the module docstring).

    Subclasses say what was closed in ``_closed_error``.
    """

    #: Set by ``close()``; from then on every public method raises ``_closed_error()``.
    _closed: bool = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name, value in list(vars(cls).items()):
            if name.startswith("_") or not inspect.isfunction(value):
                continue
            if getattr(value, "_closable", False) or getattr(value, "__isabstractmethod__", False):
                continue  # wrapped already, or only a declaration for subclasses to define
            setattr(cls, name, _closing(value) if name == "close" else _open_only(value))

    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called: every other public method then raises
        ``ClosedError``."""
        return self._closed

    def close(self) -> None:
        """Mark this object closed; subclasses release what they hold."""

    def _closed_error(self) -> ClosedError:
        return ClosedError(f"this {type(self).__name__} is closed")


def _open_only(method: _F) -> _F:
    """``method``, refused once its object is closed."""

    @functools.wraps(method)
    def open_only(self: Closable, *args: Any, **kwargs: Any) -> Any:
        if self._closed:
            raise self._closed_error()
        return method(self, *args, **kwargs)

    open_only._closable = True  # type: ignore[attr-defined]
    return open_only  # type: ignore[return-value]


def _closing(close: _F) -> _F:
    """``close``, which first marks its object closed."""

    @functools.wraps(close)
    def closing(self: Closable, *args: Any, **kwargs: Any) -> Any:
        self._closed = True
        return close(self, *args, **kwargs)

    closing._closable = True  # type: ignore[attr-defined]
    return closing  # type: ignore[return-value]
