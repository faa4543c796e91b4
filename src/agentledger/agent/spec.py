"""Model spec strings: ``"provider:model"`` → a ``Model``.

- ``openai:gpt-4o-mini``: ``OpenAIChatModel`` (``OPENAI_API_KEY``; ``OPENAI_BASE_URL`` for any
  OpenAI-compatible server: vLLM, Ollama, llama.cpp ...)
- ``anthropic:claude-sonnet-4-5``: ``AnthropicModel`` (``ANTHROPIC_API_KEY``)
- ``scripted:path/to/script.json``: ``ScriptedModel.from_file`` (no network, no key)

Keyword arguments are passed to the model's constructor (``base_url=``, ``api_key=`` ...).
"""

from __future__ import annotations

from typing import Any

from agentledger.agent.model import Model
from agentledger.errors import UserError

__all__ = ["PROVIDERS", "model_from_spec"]

PROVIDERS = ("anthropic", "openai", "scripted")


def model_from_spec(spec: str, **options: Any) -> Model:
    """The model a spec string names. Raises ``UserError`` for an unknown provider, a missing
    model name, or a missing API key (naming the environment variable to set)."""
    if not isinstance(spec, str):
        raise UserError(f"a model spec is a string like 'openai:gpt-4o-mini', got {spec!r}")
    provider, sep, name = spec.partition(":")
    provider, name = provider.strip().lower(), name.strip()
    if not sep:
        raise UserError(
            f"model spec {spec!r} has no provider: write it as provider:model, "
            f"e.g. openai:gpt-4o-mini (providers: {', '.join(PROVIDERS)})"
        )
    if provider not in PROVIDERS:
        raise UserError(
            f"unknown model provider {provider!r} in {spec!r}; known: {', '.join(PROVIDERS)}"
        )
    if not name:
        what = "a script path" if provider == "scripted" else "a model name"
        raise UserError(f"model spec {spec!r} needs {what} after {provider}:")
    if provider == "openai":
        from agentledger.agent.providers.openai import OpenAIChatModel

        return OpenAIChatModel(name, **options)
    if provider == "anthropic":
        from agentledger.agent.providers.anthropic import AnthropicModel

        return AnthropicModel(name, **options)
    from agentledger.testing.scripted import ScriptedModel

    return ScriptedModel.from_file(name, **options)
