"""Where a setting comes from: the flag, else the environment, else the config file, else a default.

Flags and environment variables (``AGENTLEDGER_STORE``, ``AGENTLEDGER_TENANT``,
``AGENTLEDGER_MODEL``) are read by the options themselves (``options.py``); what they leave unset
is looked up here, in a TOML file in the user config directory (``config_path``), e.g.::

    store = "sqlite:////home/me/agents.db"
    tenant = "acme"
    model = "openai:gpt-4o-mini"

``AGENTLEDGER_CONFIG`` names another file. A file that cannot be parsed, or a key that is not a
string, is a usage error naming the file: a setting is never silently ignored.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

from agentledger.cli.errors import EXIT_USAGE, CliError
from agentledger.store.ids import shown

__all__ = ["KEYS", "config_path", "setting"]

#: The keys the config file may hold.
KEYS = ("store", "tenant", "model")


def config_path() -> Path:
    """``$AGENTLEDGER_CONFIG``, else ``config.toml`` in the platform's user config directory."""
    if os.environ.get("AGENTLEDGER_CONFIG"):
        return Path(os.environ["AGENTLEDGER_CONFIG"])
    from platformdirs import user_config_dir

    return Path(user_config_dir("agentledger", appauthor=False)) / "config.toml"


def _read(path: Path) -> dict[str, str]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise CliError(f"cannot read the config file {path}: {exc}", EXIT_USAGE) from None
    unknown = sorted(set(data) - set(KEYS))
    if unknown:
        raise CliError(
            f"unknown key(s) {', '.join(map(shown, unknown))} in {path}; known: {', '.join(KEYS)}",
            EXIT_USAGE,
        )
    for key, value in data.items():
        if not isinstance(value, str):
            raise CliError(
                f"{key} in {path} must be a string, got {type(value).__name__}", EXIT_USAGE
            )
    return data


def setting(key: str, given: str | None) -> str | None:
    """``given`` (from a flag or the environment) if set, else the config file's ``key``.
    An empty ``given`` is set: ``-t ""`` is refused as an empty tenant id, never taken for the
    default."""
    if given is not None:
        return given
    return _read(config_path()).get(key)
