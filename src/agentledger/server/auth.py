"""Bearer tokens → tenants: a thread is only ever visible within its tenant.

Without tokens every request belongs to one tenant (the server's default). With tokens, a
request must carry ``Authorization: Bearer <token>`` naming a known token, and its tenant is
the one the token maps to; every thread it runs or reads is keyed by that tenant, so another
tenant's thread of the same id is a different thread. Tokens are compared in constant time.

An auth file is a JSON object ``{"<token>": "<tenant>", ...}``.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Mapping
from pathlib import Path

from agentledger.errors import UserError
from agentledger.store.ids import DEFAULT_TENANT, check_id

__all__ = ["Auth", "Unauthorized", "load_tokens"]


class Unauthorized(UserError):
    """No valid bearer token (HTTP 401)."""


def load_tokens(path: str | Path) -> dict[str, str]:
    """The token → tenant map of an auth file. Raises ``UserError`` saying what is wrong."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot read the auth file {str(path)!r}: {exc}") from None
    if not isinstance(data, dict) or not data:
        raise UserError(f'the auth file {str(path)!r} must be a JSON object {{"token": "tenant"}}')
    return dict(data)


class Auth:
    """Resolves a request's tenant from its ``Authorization`` header."""

    def __init__(self, tokens: Mapping[str, str] | None = None, *, tenant: str = DEFAULT_TENANT):
        self.default = check_id(tenant, "tenant")
        self.tokens: dict[bytes, str] = {}
        for token, name in (tokens or {}).items():
            if not isinstance(token, str) or len(token) < 8:
                raise UserError("auth tokens must be strings of at least 8 characters")
            self.tokens[token.encode()] = check_id(name, "tenant")

    @property
    def required(self) -> bool:
        return bool(self.tokens)

    def tenant(self, authorization: str | None) -> str:
        """The tenant for an ``Authorization`` header value; raises ``Unauthorized``."""
        if not self.tokens:
            return self.default
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthorized("send Authorization: Bearer <token>")
        given = token.strip().encode()
        found = None
        for known, tenant in self.tokens.items():  # every token compared: no timing hint
            if hmac.compare_digest(known, given):
                found = tenant
        if found is None:
            raise Unauthorized("unknown bearer token")
        return found
