"""Model adapters for real providers. Each imports its SDK only when a model is created, and
fails with the pip command to install it when the SDK is missing.

- ``OpenAIChatModel``: OpenAI chat completions and compatible servers (vLLM, Ollama, llama.cpp).
- ``AnthropicModel``: the Anthropic Messages API.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentledger.errors import ModelError

if TYPE_CHECKING:
    from agentledger.agent.providers.anthropic import AnthropicModel
    from agentledger.agent.providers.openai import OpenAIChatModel

__all__ = ["AnthropicModel", "OpenAIChatModel"]

_RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 529})


def __getattr__(name: str) -> Any:
    if name == "OpenAIChatModel":
        from agentledger.agent.providers.openai import OpenAIChatModel

        return OpenAIChatModel
    if name == "AnthropicModel":
        from agentledger.agent.providers.anthropic import AnthropicModel

        return AnthropicModel
    raise AttributeError(name)


def status_error(
    provider: str, status: int, detail: str, *, retry_after: str | None = None
) -> ModelError:
    """The ``ModelError`` for an HTTP error status: rate limits, timeouts, conflicts and server
    errors are retryable, the rest (bad request, auth, not found) are not."""
    retryable = status in _RETRYABLE_STATUS or status >= 500
    kind = {
        400: "rejected the request",
        401: "refused the API key",
        403: "denied access",
        404: "does not know this model or endpoint",
        413: "found the request too large",
        429: "is rate limiting",
    }.get(status, "failed" if status >= 500 else "answered with an error")
    message = f"{provider} {kind} (HTTP {status}): {_clip(detail)}"
    if retry_after:
        message += f"; retry after {retry_after} s"
    return ModelError(message, status=status, retryable=retryable)


def malformed(provider: str, what: str, *, retryable: bool = False) -> ModelError:
    """The ``ModelError`` for an answer that is not a valid response."""
    return ModelError(f"{provider} sent a malformed response: {what}", retryable=retryable)


def _clip(text: str, limit: int = 500) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "..."
