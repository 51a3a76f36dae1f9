"""Who is asking, and what LangGraph itself lets them do (``auth`` in langgraph.json).

Each configured key is a client (``client_keys``, plus ``api_key`` as 'operator'). A
thread is stamped with its creator in ``metadata.owner`` and every thread read,
search, update, delete and run is filtered on it by the LangGraph server itself, so one
client never sees another's conversations. With a single key every request is the same
client, as before.

These handlers are the second layer behind the middleware (server/app.py): they run
inside LangGraph's own operations, whatever path or Host a request came by, so a
routing mistake in front cannot open what the product does not serve. Only what the
product uses is allowed: threads (owned), runs on them, assistant reads. The store,
crons, assistant writes and thread state writes are refused here too, and a run's
place in its client's quota is reserved here, atomically (server/quotas.py).
"""

from __future__ import annotations

from typing import Any

from langgraph_sdk import Auth

from graph.configuration import service_settings
from server.quotas import metadata_total_problem, reserve_run, thread_metadata
from tools.config import client_of

API_KEY_HEADER = b"x-api-key"
auth = Auth()


def _refuse(status: int, detail: str, retry_after_s: int | None = None) -> None:
    headers = {"Retry-After": str(retry_after_s)} if retry_after_s else None
    raise Auth.exceptions.HTTPException(status_code=status, detail=detail, headers=headers)


@auth.authenticate
async def authenticate(headers: dict[bytes, bytes]) -> str:
    client = client_of(service_settings(), headers.get(API_KEY_HEADER, b"").decode("latin-1"))
    if client is None:
        raise Auth.exceptions.HTTPException(status_code=401, detail="missing or wrong X-API-Key")
    return client


@auth.on
async def not_served(ctx: Auth.types.AuthContext, value: Any) -> None:
    """Everything no handler below allows: the store, crons, assistant writes."""
    _refuse(404, f"{ctx.resource} {ctx.action} is not served here")


def _stamp(ctx: Auth.types.AuthContext, value: Any) -> dict[str, str]:
    owner = {"owner": ctx.user.identity}
    if isinstance(value, dict):  # create, update and run requests carry metadata
        metadata = value.get("metadata")
        if metadata is None:
            metadata = value["metadata"] = {}
        if isinstance(metadata, dict):
            metadata.update(owner)
    return owner


@auth.on.threads
async def own_threads(ctx: Auth.types.AuthContext, value: Any) -> dict[str, str]:
    return _stamp(ctx, value)


@auth.on.threads.update
async def update_own_threads(ctx: Auth.types.AuthContext, value: Any) -> dict[str, str]:
    """A metadata PATCH (capped as a whole) or a run cancel; never a state write
    (``POST /threads/ID/state``, a thread created with ``supersteps``)."""
    if value.get("action") is None and value.get("metadata") is None:
        _refuse(404, "writing a thread's state is not served here")
    if value.get("action") is None:  # PATCH /threads/ID: merged into what the thread holds
        settings = service_settings()
        current = await thread_metadata(str(value.get("thread_id")), settings)
        if refusal := metadata_total_problem(current, value["metadata"], settings):
            _refuse(refusal.status, refusal.detail)
        return _stamp(ctx, value)
    return {"owner": ctx.user.identity}  # cancel: its metadata names runs, not the owner


def _plain_user(value: Any) -> None:
    """The run's copy of the client as a plain dict. The server puts its user object in
    the run's config; the shared runtime stores a run's kwargs as JSON, which cannot
    hold that object (every run failed with a 500), and the worker turns a dict with an
    ``identity`` back into a user (langgraph_api.auth.custom.normalize_user)."""
    kwargs = value.get("kwargs") if isinstance(value, dict) else None
    configurable = ((kwargs or {}).get("config") or {}).get("configurable") or {}
    user = configurable.get("langgraph_auth_user")
    if user is not None and not isinstance(user, dict):
        configurable["langgraph_auth_user"] = {
            "identity": user.identity,
            "display_name": user.display_name,
            "is_authenticated": True,
        }


@auth.on.threads.create_run
async def runs_within_quota(ctx: Auth.types.AuthContext, value: Any) -> dict[str, str]:
    """Owned like any thread write, and within the client's cap on active runs."""
    owner = _stamp(ctx, value)
    _plain_user(value)
    settings = service_settings()
    thread_id = value.get("thread_id")
    if thread_id is not None:  # another client's thread: refused before any place is held
        metadata = await thread_metadata(str(thread_id), settings)
        if metadata is not None and metadata.get("owner") != ctx.user.identity:
            _refuse(404, f"Thread {thread_id} not found")
    run_id = str(value.get("run_id") or id(value))
    if refusal := await reserve_run(ctx.user.identity, run_id, settings):
        _refuse(refusal.status, refusal.detail, refusal.retry_after_s)
    return owner


@auth.on.assistants.read
async def read_assistants(ctx: Auth.types.AuthContext, value: Any) -> None:
    return None


@auth.on.assistants.search
async def search_assistants(ctx: Auth.types.AuthContext, value: Any) -> None:
    return None
