"""model_from_spec: provider prefixes, key errors naming the variable, scripted files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentledger.agent import Model, model_from_spec
from agentledger.agent.providers import AnthropicModel, OpenAIChatModel
from agentledger.errors import UserError
from agentledger.testing.scripted import ScriptedModel

KEY_VARS = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
)


@pytest.fixture(autouse=True)
def no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in KEY_VARS:
        monkeypatch.delenv(var, raising=False)


async def test_openai(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    model = model_from_spec("openai:gpt-4o-mini")
    async with model:  # type: ignore[attr-defined]
        assert isinstance(model, OpenAIChatModel)
        assert isinstance(model, Model)
        assert model.name == "openai:gpt-4o-mini"
        assert model.max_tokens_param == "max_completion_tokens"


async def test_openai_compatible_server_needs_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:11434/v1")
    model = model_from_spec("openai:llama3.2")
    async with model:  # type: ignore[attr-defined]
        assert isinstance(model, OpenAIChatModel)
        assert model.max_tokens_param == "max_tokens"


async def test_anthropic(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    model = model_from_spec("anthropic:claude-sonnet-4-5", max_tokens=2048)
    async with model:  # type: ignore[attr-defined]
        assert isinstance(model, AnthropicModel)
        assert model.name == "anthropic:claude-sonnet-4-5"
        assert model.max_tokens == 2048


def test_scripted(tmp_path: Path) -> None:
    path = tmp_path / "demo.json"
    path.write_text(json.dumps(["hello"]))
    model = model_from_spec(f"scripted:{path}")
    assert isinstance(model, ScriptedModel)
    assert model.name == "scripted:demo.json"


@pytest.mark.parametrize(
    ("spec", "variable"),
    [("openai:gpt-4o-mini", "OPENAI_API_KEY"), ("anthropic:claude-x", "ANTHROPIC_API_KEY")],
)
def test_missing_key_names_the_variable(spec: str, variable: str) -> None:
    with pytest.raises(UserError, match=f"set the {variable} environment variable"):
        model_from_spec(spec)


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ("gemini:pro", "unknown model provider 'gemini'.*anthropic, openai, scripted"),
        ("gpt-4o-mini", "no provider.*provider:model"),
        ("openai:", "needs a model name"),
        ("scripted:", "needs a script path"),
    ],
)
def test_bad_specs(spec: str, match: str) -> None:
    with pytest.raises(UserError, match=match):
        model_from_spec(spec)
