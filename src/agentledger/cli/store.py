"""Opening the store a command works on, the way a command line user expects.

- The URL comes from ``--store``, else ``AGENTLEDGER_STORE``, else the config file, else SQLite in
  the user data directory (``config``); the chosen URL is remembered for error hints.
- A command that only reads never creates a store: a SQLite file or JSONL directory that does
  not exist is "not found" (exit 3), not an empty store made on the spot.
- A command that writes refuses ``memory://`` (``lasting``): that store lives in the command's
  process, so what the command wrote would be gone as it exits, after saying it was done.
  ``demo``, ``chat`` and ``serve`` take it: they use the store for as long as they run.
- PostgreSQL is probed once with a short connect timeout, so an unreachable server fails in
  seconds with one line, not after the pool's 30 s of retries and a screen of pool warnings.
"""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

from agentledger.cli.config import setting
from agentledger.cli.errors import EXIT_NOT_FOUND, EXIT_USAGE, CliError, state
from agentledger.errors import CorruptStoreError, StoreUnavailableError
from agentledger.store import Ledger
from agentledger.store.sqlite_schema import applied_migrations

__all__ = [
    "PG_CONNECT_TIMEOUT",
    "chosen_tenant",
    "default_path",
    "lasting",
    "open_ledger",
    "resolve_store",
]

#: Seconds the command line waits for a PostgreSQL server before giving up.
PG_CONNECT_TIMEOUT = 3


def default_path() -> Path:
    """Where ``Ledger()`` keeps its SQLite file (found without creating the directory)."""
    from platformdirs import user_data_dir

    return Path(user_data_dir("agentledger", appauthor=False)) / "agentledger.db"


def resolve_store(store: str | None) -> str:
    """The store URL to use: flag or environment, else the config file, else the default."""
    url = setting("store", store)
    if url is None:
        return f"sqlite:///{default_path()}"
    if not url.strip():
        raise CliError("the store URL is empty (see --store or AGENTLEDGER_STORE)", EXIT_USAGE)
    return url


def lasting(url: str, option: str = "--store") -> str:
    """``url``, for a command that writes to it, unless it is ``memory://``: a usage error
    then, as that store ends with the command's process and what it wrote with it."""
    if url.split("://", 1)[0] == "memory":
        raise CliError(
            f"{option} memory:// holds what this command writes only until it exits, so nothing "
            "would be kept; give a store that lasts: sqlite:///file.db, jsonl:///dir or "
            "postgresql://...",
            EXIT_USAGE,
        )
    return url


def _local_path(url: str) -> Path | None:
    """The file or directory a ``sqlite://`` or ``jsonl://`` URL names (None for others)."""
    scheme = url.split("://", 1)[0]
    rest = url[len(scheme) + 3 :].split("?", 1)[0]  # options such as ?synchronous=full
    if scheme in ("sqlite", "jsonl") and rest.startswith("/"):
        return Path(rest[1:])
    return None


def _probe_postgres(url: str) -> None:
    """Connect once with a short timeout; an unreachable server is one clear error."""
    from agentledger._optional import require
    from agentledger.store.postgres import _split_url

    psycopg = require("psycopg", "postgres")
    logging.getLogger("psycopg.pool").setLevel(logging.CRITICAL)  # its retries say nothing new
    conninfo, _ = _split_url(url)
    try:
        psycopg.connect(conninfo, connect_timeout=PG_CONNECT_TIMEOUT).close()
    except psycopg.Error as exc:
        raise StoreUnavailableError(f"cannot connect to PostgreSQL: {exc}") from None


def open_ledger(
    store: str | None, tenant: str | None, *, create: bool = False, writes: bool = False
) -> Ledger:
    """A ``Ledger`` on the chosen store. Without ``create``, a missing local store is "not
    found" instead of being created; with ``writes``, ``memory://`` is refused (``lasting``)."""
    url = resolve_store(store)
    if writes:
        lasting(url)
    state.store = url
    path = _local_path(url)
    if path is not None and not create and not path.exists():
        kind = "file" if url.startswith("sqlite") else "directory"
        raise CliError(
            f"no store at {url} (the {kind} {path} does not exist; check --store or "
            "AGENTLEDGER_STORE)",
            EXIT_NOT_FOUND,
        )
    if path is not None and not create and url.startswith("sqlite") and not _holds_a_store(path):
        raise CliError(
            f"no store at {url} (the file {path} holds no agentledger tables; check --store "
            "or AGENTLEDGER_STORE)",
            EXIT_NOT_FOUND,
        )
    if url.startswith(("postgresql://", "postgres://")):
        _probe_postgres(url)
    return Ledger(url, tenant=chosen_tenant(tenant))


def chosen_tenant(tenant: str | None) -> str:
    """The tenant to use: flag or environment, else the config file, else ``default``."""
    chosen = setting("tenant", tenant)
    return "default" if chosen is None else chosen


def _holds_a_store(path: Path) -> bool:
    """Whether the SQLite file at ``path`` holds agentledger's tables, read without changing
    it: opening it as a store would make one in any SQLite file (an application's own
    database, an empty file). A file SQLite cannot read counts as one, so that the store says
    what is wrong with it."""
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            return bool(applied_migrations(conn))
        finally:
            conn.close()
    except (sqlite3.Error, CorruptStoreError):
        return True
