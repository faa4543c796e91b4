"""What ``agentledger serve`` is told, and how each uvicorn worker builds the same app from it.

A worker process started by uvicorn cannot be handed Python objects, so the command's settings
travel as JSON in the environment variable ``AGENTLEDGER_SERVE_CONFIG`` and every worker calls
``app_from_env`` (uvicorn's ``factory=True``). Server tools are named as ``module:attribute``
(a ``Tool``, a function, or a list of them), imported in each worker.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from dataclasses import asdict, dataclass
from typing import Any

from agentledger.agent.tools import Tool
from agentledger.errors import UserError
from agentledger.server.app import DEFAULT_MAX_BODY, create_app
from agentledger.server.auth import load_tokens
from agentledger.store.ids import DEFAULT_TENANT

__all__ = ["ENV_VAR", "ServeConfig", "app_from_env", "load_tools"]

ENV_VAR = "AGENTLEDGER_SERVE_CONFIG"


@dataclass(frozen=True, slots=True)
class ServeConfig:
    """The settings of one ``agentledger serve``."""

    model: str
    store: str | None = None
    tools: str | None = None
    auth_file: str | None = None
    tenant: str = DEFAULT_TENANT
    system_prompt: str | None = None
    max_body: int = DEFAULT_MAX_BODY
    lease_wait: float = 2.0

    def to_env(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_env(cls) -> ServeConfig:
        raw = os.environ.get(ENV_VAR)
        if not raw:
            raise UserError(f"{ENV_VAR} is not set: start workers with `agentledger serve`")
        return cls(**json.loads(raw))

    def build(self) -> Any:
        """The app these settings describe."""
        return create_app(
            model=self.model,
            store=self.store,
            tools=load_tools(self.tools) if self.tools else (),
            system_prompt=self.system_prompt,
            auth=load_tokens(self.auth_file) if self.auth_file else None,
            tenant=self.tenant,
            max_body=self.max_body,
            lease_wait=self.lease_wait,
        )


def app_from_env() -> Any:
    """uvicorn factory for a worker: the app ``AGENTLEDGER_SERVE_CONFIG`` describes."""
    return ServeConfig.from_env().build()


def load_tools(spec: str) -> list[Any]:
    """The tools ``module:attribute`` names (the current directory is importable)."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise UserError(f"--tools takes module:attribute, e.g. myapp.tools:TOOLS (got {spec!r})")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        value = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise UserError(f"cannot load tools {spec!r}: {exc}") from None
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    for item in items:
        if not (isinstance(item, Tool) or callable(item)):
            raise UserError(f"{spec!r} holds {item!r}, which is not a tool or a function")
    return items
