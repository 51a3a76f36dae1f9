"""Who is asking, for LangGraph's own resource filters (``auth`` in langgraph.json).

Each configured key is a client (``client_keys``, plus ``api_key`` as 'operator'). A
thread is stamped with its creator in ``metadata.owner`` and every thread read,
search, update, delete and run is filtered on it by the LangGraph server itself, so one
client never sees another's conversations. With a single key every request is the same
client, as before.
"""

from __future__ import annotations

from typing import Any

from langgraph_sdk import Auth

from graph.configuration import service_settings
from tools.config import client_of

API_KEY_HEADER = b"x-api-key"
auth = Auth()


@auth.authenticate
async def authenticate(headers: dict[bytes, bytes]) -> str:
    client = client_of(service_settings(), headers.get(API_KEY_HEADER, b"").decode("latin-1"))
    if client is None:
        raise Auth.exceptions.HTTPException(status_code=401, detail="missing or wrong X-API-Key")
    return client


@auth.on.threads
async def own_threads(ctx: Auth.types.AuthContext, value: Any) -> dict[str, str]:
    owner = {"owner": ctx.user.identity}
    if isinstance(value, dict):  # create, update and run requests carry metadata
        metadata = value.get("metadata")
        if metadata is None:
            metadata = value["metadata"] = {}
        if isinstance(metadata, dict):
            metadata.update(owner)
    return owner
