"""Open a store from a URL: ``memory://``, ``jsonl://``, ``sqlite://``, ``postgresql://``.

Paths follow the SQLAlchemy convention: ``sqlite:///state.db`` is relative to the working
directory, ``sqlite:////var/lib/app/state.db`` (four slashes) is absolute; ``?synchronous=full``
flushes every SQLite commit to disk (see ``SqliteStore``). ``Ledger()`` with no URL opens SQLite
in the user data directory.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qsl

from agentledger.errors import UserError
from agentledger.store.base import Store
from agentledger.store.ids import shown

__all__ = ["default_url", "open_store"]

SCHEMES = ("memory", "jsonl", "sqlite", "postgresql", "postgres")


def default_url() -> str:
    """``sqlite`` in the platform's user data directory (created if missing)."""
    from platformdirs import user_data_dir

    path = Path(user_data_dir("agentledger", appauthor=False)) / "agentledger.db"
    path.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{path}"  # path is absolute, so this makes the four-slash form


def _path(url: str, scheme: str) -> Path:
    rest = url[len(scheme) + 3 :]
    if not rest.startswith("/") or rest == "/":
        raise UserError(
            f"{scheme} URL needs a path, e.g. {scheme}:///relative/path or "
            f"{scheme}:////absolute/path (got {shown(url)})"
        )
    return Path(rest[1:])


def _options(url: str, allowed: tuple[str, ...]) -> tuple[str, dict[str, str]]:
    """``url`` without its query, and the query's options (each named in ``allowed``)."""
    base, sep, query = url.partition("?")
    if not sep:
        return url, {}
    options = dict(parse_qsl(query, keep_blank_values=True))
    unknown = sorted(set(options) - set(allowed))
    if unknown or not options:
        known = ", ".join(allowed)
        found = ", ".join(unknown) or shown(query)
        raise UserError(f"unknown option in store URL {shown(url)}: {found} (known: {known})")
    return base, options


def open_store(url: str | None = None) -> Store:
    """The backend for ``url``. Raises ``UserError`` naming the supported schemes."""
    url = url or default_url()
    scheme = url.split("://", 1)[0] if "://" in url else ""
    if scheme == "memory":
        from agentledger.store.memory import MemoryStore

        return MemoryStore()
    if scheme == "jsonl":
        from agentledger.store.jsonl import JsonlStore

        return JsonlStore(_path(url, scheme))
    if scheme == "sqlite":
        from agentledger.store.sqlite import SqliteStore

        url, options = _options(url, allowed=("synchronous",))
        return SqliteStore(_path(url, scheme), **options)
    if scheme in ("postgresql", "postgres"):
        from agentledger.store.postgres import PostgresStore

        return PostgresStore(url)
    raise UserError(
        f"unknown store URL {shown(url)}; use memory://, jsonl:///dir, sqlite:///file.db "
        "or postgresql://user@host/db"
    )
