"""Where a request carries its API key: ``X-API-Key``, or ``Authorization: Bearer <key>``
(what OpenAI and MCP clients send). One reading for every layer that asks who is
calling (server/app.py, server/auth.py, the MCP and chat routes)."""

from __future__ import annotations

from collections.abc import Mapping

API_KEY_HEADER = "X-API-Key"


def key_of(headers: Mapping[str, str]) -> str:
    """The key in ``headers`` (names lower-case, or a case-insensitive mapping);
    ``X-API-Key`` when both are sent; "" when neither is."""
    key = headers.get("x-api-key")
    if key is not None:
        return key
    scheme, _, token = headers.get("authorization", "").strip().partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""
