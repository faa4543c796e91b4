"""The public API is exactly what ``__all__`` says, sorted, and importable."""

from __future__ import annotations

import importlib

import pytest

import agentledger

MODULES = [
    "agentledger",
    "agentledger.agent",
    "agentledger.context",
    "agentledger.errors",
    "agentledger.integrations.openai_agents",
    "agentledger.integrations.pydantic_ai",
    "agentledger.messages",
    "agentledger.store",
    "agentledger.testing",
    "agentledger.wire",
]


@pytest.mark.parametrize("name", MODULES)
def test_all_is_unique_and_importable(name: str) -> None:
    module = importlib.import_module(name)
    exported = module.__all__
    assert len(set(exported)) == len(exported)  # ruff (RUF022) keeps the list sorted
    for attr in exported:
        assert hasattr(module, attr), f"{name}.{attr} is in __all__ but missing"


def test_root_exports_public_names_only() -> None:
    public = {n for n in vars(agentledger) if not n.startswith("_")}
    submodules = {
        "errors",
        "messages",
        "store",
        "wire",
        "testing",
        "cli",
        "agent",
        "server",
        "context",
        "integrations",
    }
    assert public - submodules - {"annotations"} <= set(agentledger.__all__)


def test_core_imports_without_optional_extras() -> None:
    """Importing the library must not import provider SDKs, FastAPI or psycopg."""
    import subprocess
    import sys

    code = (
        "import sys, agentledger, agentledger.store, agentledger.wire, agentledger.agent;"
        "heavy = {'fastapi', 'openai', 'anthropic', 'psycopg', 'ag_ui', 'uvicorn', 'pydantic_ai'};"
        "print(sorted(heavy & {m.split('.')[0] for m in sys.modules}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
