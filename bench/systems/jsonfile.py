"""The baseline: the whole conversation as one JSON file, rewritten on every save.

What many agent loops do by hand: serialize every message with the standard library's ``json``
to a temporary file, then ``os.replace`` it over the old one (atomic on POSIX; no fsync, as such
code usually has none). ``json.dumps`` + one write is used rather than ``json.dump(obj, fh)``,
which streams through the pure-Python encoder and is several times slower: the baseline is
given its best case.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from bench.systems.base import System


class JsonFile(System):
    name = "json-file"
    api = {
        "grow": "json.dumps(all messages) to a temp file + os.replace, after each turn",
        "edit": "the same whole-file rewrite",
        "noop": "the same whole-file rewrite (the file cannot tell what changed)",
        "reload": "json.load",
    }
    durability = "write to a temp file + os.replace, no fsync"

    def versions(self) -> dict[str, str]:
        return {"python json": json.__version__, "python": sys.version.split()[0]}

    def path(self) -> str:
        return os.path.join(self.workdir, f"session{self.generation}.json")

    def storage_path(self) -> str | None:
        return self.path()

    def convert(self, message: dict[str, Any]) -> Any:
        return message

    def edited(self, item: Any) -> Any:
        from bench.workload import preview

        return {**item, "content": preview(item["content"])}

    def open(self) -> Any:
        os.makedirs(self.workdir, exist_ok=True)
        return self.path()

    def _write(self, path: str, live: list[Any]) -> int:
        tmp = path + ".tmp"
        data = json.dumps(live).encode()
        with open(tmp, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
        return len(data)

    def append_turn(self, handle: Any, live: list[Any], new: list[Any]) -> int:
        return self._write(handle, live)

    def bulk_seed(self, handle: Any, live: list[Any]) -> None:
        self._write(handle, live)

    def edit(self, handle: Any, live: list[Any], position: int) -> int:
        return self._write(handle, live)

    def persist_unchanged(self, handle: Any, loaded: Any) -> int:
        return self._write(handle, loaded)

    def load(self, handle: Any) -> Any:
        with open(handle, encoding="utf-8") as fh:
            return json.load(fh)

    def ids_of(self, loaded: Any) -> list[str]:
        return [m["id"] for m in loaded]

    def tool_text(self, loaded: Any, position: int) -> str:
        return loaded[position]["content"]
