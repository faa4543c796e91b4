"""Where offloaded tool output goes: a small filesystem protocol, a local directory, and paths
that no id can steer outside the root.

``OffloadFilesystem`` is two methods, ``write(path, text)`` and ``read(path)``, over relative
paths, so the full text of a large result can live on a local disk (``LocalFilesystem``), a
shared volume or an object store. A path is derived, never taken from a caller:
``<tenant>/<session>/<tool>-<call id>.<digest>.txt``, each id encoded by
``store.ids.path_component`` (only ``[a-z0-9_-]`` kept, every other byte written ``%XX``, an id
too long for a file name replaced by its hash), so ``..``, ``/``, an absolute path, NUL or a
4,000-character tool-call id all become one harmless file name inside the session's folder. The
digest is that of the text: two results that reuse a tool-call id get two files, and writing the
same text twice writes the same file.

Reading goes through the same grammar (``parse_offload_path``): a path that this module could not
have produced is refused before any disk access, and ``LocalFilesystem`` checks once more that the
resolved file lies inside its root.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from agentledger.errors import UserError
from agentledger.store.ids import DEFAULT_TENANT, check_id, path_component

__all__ = [
    "LocalFilesystem",
    "OffloadFilesystem",
    "default_offload_root",
    "offload_path",
    "parse_offload_path",
    "session_folder",
]

_COMPONENT = r"[A-Za-z0-9_%~-]{1,201}"
_PATH = re.compile(rf"({_COMPONENT})/({_COMPONENT})/({_COMPONENT}\.[0-9a-f]{{32}}\.txt)")
_MAX_PATH = 3 * 202 + 38


@runtime_checkable
class OffloadFilesystem(Protocol):
    """Storage for offloaded text, addressed by the relative paths ``offload_path`` makes.

    ``write`` must be durable and atomic when it returns (the context that names the path is
    saved right after) and raise on failure; ``read`` returns exactly the text written.
    """

    def write(self, path: str, text: str) -> None: ...

    def read(self, path: str) -> str: ...


def session_folder(session: str, tenant: str = DEFAULT_TENANT) -> str:
    """The folder (``<tenant>/<session>``) holding a session's offloaded text."""
    tenant = check_id(tenant, "tenant id")
    session = check_id(session, "session id")
    return f"{path_component(tenant)}/{path_component(session)}"


def offload_path(
    text: str, *, session: str, tenant: str = DEFAULT_TENANT, call_id: str = "", tool: str = ""
) -> str:
    """The relative path for ``text``, the full output of call ``call_id`` to ``tool``."""
    digest = hashlib.blake2b(_encode(text), digest_size=16).hexdigest()
    return f"{session_folder(session, tenant)}/{path_component(f'{tool}-{call_id}')}.{digest}.txt"


def parse_offload_path(path: object) -> tuple[str, str, str]:
    """``(tenant folder, session folder, file name)`` of a path ``offload_path`` could have made;
    ``UserError`` for anything else (``..``, absolute, NUL, backslashes, too long ...)."""
    if not isinstance(path, str) or len(path) > _MAX_PATH:
        raise UserError("not an offload path")
    match = _PATH.fullmatch(path)
    if match is None:
        raise UserError(f"not an offload path: {path[:80]!r}")
    return match.group(1), match.group(2), match.group(3)


def _encode(text: str) -> bytes:
    # surrogatepass: a lone surrogate a model emitted still round-trips exactly
    return text.encode("utf-8", "surrogatepass")


class LocalFilesystem:
    """Offloaded text as files under ``root`` (created on first write)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def __repr__(self) -> str:
        return f"LocalFilesystem({str(self.root)!r})"

    @classmethod
    def for_store(cls, store: Any) -> LocalFilesystem:
        """A directory beside a store's own files (a ``Store``, ``Ledger`` or ``AsyncLedger``);
        see ``default_offload_root``."""
        return cls(default_offload_root(store))

    def _file(self, path: str) -> Path:
        tenant, session, name = parse_offload_path(path)
        root = self.root.resolve()
        target = (root / tenant / session / name).resolve()
        if not target.is_relative_to(root):  # a symlinked folder pointing elsewhere
            raise UserError(f"offload path {path!r} resolves outside {root}")
        return target

    def write(self, path: str, text: str) -> None:
        """Write ``text`` atomically and durably (temporary file, fsync, rename)."""
        target = self._file(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=".", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(_encode(text))
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, target)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        folder = os.open(target.parent, os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)

    def read(self, path: str) -> str:
        """The text written at ``path``; ``FileNotFoundError`` if there is none."""
        try:
            data = self._file(path).read_bytes()
        except FileNotFoundError:
            raise FileNotFoundError(f"no offloaded text at {path}") from None  # root not shown
        return data.decode("utf-8", "surrogatepass")


def default_offload_root(store: Any = None) -> Path:
    """The directory that keeps offloaded text beside a store's data.

    SQLite ``state.db`` → ``state.db.offload``; a JSONL store's directory → its ``.offload``
    folder; no store → ``offload`` in the user data directory (beside the default SQLite store).
    A store without local files (memory, PostgreSQL) has no such place: give
    ``LocalFilesystem`` a directory, or implement ``OffloadFilesystem`` on shared storage.
    """
    store = getattr(store, "store", store)  # a Ledger or AsyncLedger
    if store is None:
        from platformdirs import user_data_dir

        return Path(user_data_dir("agentledger", appauthor=False)) / "offload"
    from agentledger.store.jsonl import JsonlStore
    from agentledger.store.sqlite import SqliteStore

    if isinstance(store, SqliteStore):
        return store.path.with_name(store.path.name + ".offload")
    if isinstance(store, JsonlStore):
        return store.root / ".offload"  # "." never starts an encoded tenant folder
    raise UserError(
        f"{type(store).__name__} keeps no local files to put offloaded text beside; "
        "pass LocalFilesystem(a directory) or your own OffloadFilesystem"
    )
