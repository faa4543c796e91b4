"""Import optional extras lazily, failing with the pip command that installs them."""

from __future__ import annotations

import importlib
from types import ModuleType

from agentledger.errors import MissingDependencyError

__all__ = ["require"]


def require(module: str, extra: str) -> ModuleType:
    """Import ``module`` or raise ``MissingDependencyError`` naming ``agentledger[extra]``."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependencyError(
            f"{module!r} is needed for this feature and is not installed. "
            f'Install it with: pip install "agentledger[{extra}]"'
        ) from exc
