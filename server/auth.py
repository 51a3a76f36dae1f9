"""Who is asking, and what LangGraph itself lets them do (``auth`` in langgraph.json).

Each configured key is a client (``client_keys``, plus ``api_key`` as 'operator'). A
thread is stamped with its creator in ``metadata.owner`` and every thread read,
search, update, delete and run is filtered on it by the LangGraph server itself, so one
client never sees another's conversations. With a single key every request is the same
client, as before.

These handlers are the second layer behind the door (server/app.py): they run inside
LangGraph's own operations, whatever path, transport or Host a request came by, so a
routing mistake in front cannot open what the product does not serve. Only the events
the served routes raise are allowed (``AUTH_EVENTS``, from the table in
server/routes.py); the store, crons, assistant writes and thread state writes are
refused here too. Where a thread or a run is made, whatever route made it (the v2
``commands`` and WebSocket routes fire the same ``threads.create_run``), its limits are
enforced here: the metadata cap, the run's config keys and message history
(server/limits.py), the bytes the client's records hold, and a place among its threads
and active runs, reserved atomically (server/quotas.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from langgraph_sdk import Auth

from server.api_keys import key_of
from server.limits import run_problem
from server.quotas import (
    Refusal,
    check_stored,
    metadata_problem,
    metadata_total_problem,
    records,
    reserve_run,
    reserve_thread,
)
from server.routes import AUTH_EVENTS
from tools.config import client_of, load_settings

auth = Auth()
Filter = dict[str, str] | None


def _refuse(status: int, detail: str, retry_after_s: int | None = None) -> None:
    headers = {"Retry-After": str(retry_after_s)} if retry_after_s else None
    raise Auth.exceptions.HTTPException(status_code=status, detail=detail, headers=headers)


def _refused(refusal: Refusal | None) -> None:
    if refusal is not None:
        _refuse(refusal.status, refusal.detail, refusal.retry_after_s)


@auth.authenticate
async def authenticate(headers: dict[bytes, bytes]) -> str:
    named = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in headers.items()}
    client = client_of(load_settings(), key_of(named))
    if client is None:
        raise Auth.exceptions.HTTPException(
            status_code=401, detail="missing or wrong key (X-API-Key or Authorization: Bearer)"
        )
    return client


@auth.on
async def served_events_only(ctx: Auth.types.AuthContext, value: Any) -> Filter:
    """Every LangGraph operation comes here: an event no served route raises is refused
    (404), a thread or run being made meets its limits, and threads are owned."""
    event = f"{ctx.resource}.{ctx.action}"
    if event not in AUTH_EVENTS:
        _refuse(404, f"{event} is not served here")
    if ctx.resource == "assistants":  # reads of the operator's fixed assistants
        return None
    return await RULES.get(event, own_threads)(ctx, value)


async def own_threads(ctx: Auth.types.AuthContext, value: Any) -> dict[str, str]:
    """A thread operation: the request's metadata stamped with its client, and the
    operation filtered on that owner."""
    owner = {"owner": ctx.user.identity}
    if isinstance(value, dict):  # create, update and run requests carry metadata
        metadata = value.get("metadata")
        if metadata is None:
            metadata = value["metadata"] = {}
        if isinstance(metadata, dict):
            metadata.update(owner)
    return owner


async def create_thread(ctx: Auth.types.AuthContext, value: Any) -> dict[str, str]:
    """``POST /threads``: metadata within its cap, and a place among the client's threads."""
    settings = load_settings()
    _refused(metadata_problem(value, settings))
    thread_id = str(value.get("thread_id"))
    if await records(settings).thread_metadata(thread_id) is None:  # a new one
        _refused(await check_stored(ctx.user.identity, settings))
        _refused(await reserve_thread(ctx.user.identity, thread_id, settings))
    return await own_threads(ctx, value)


async def update_thread(ctx: Auth.types.AuthContext, value: Any) -> dict[str, str]:
    """A metadata PATCH (capped as a whole) or a run cancel; never a state write
    (``POST /threads/ID/state``, a thread created with ``supersteps``)."""
    if value.get("action") is None and value.get("metadata") is None:
        _refuse(404, "writing a thread's state is not served here")
    if value.get("action") is None:  # PATCH /threads/ID: merged into what the thread holds
        settings = load_settings()
        current = await records(settings).thread_metadata(str(value.get("thread_id")))
        _refused(metadata_total_problem(current, value["metadata"], settings))
        return await own_threads(ctx, value)
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


async def create_run(ctx: Auth.types.AuthContext, value: Any) -> dict[str, str]:
    """A run from any route: on the client's own thread, its request within the limits,
    and places reserved for the thread it makes (if any) and among its active runs."""
    client, settings = ctx.user.identity, load_settings()
    if problem := run_problem(value.get("kwargs") or {}):
        _refuse(422, problem)
    _refused(metadata_problem(value, settings))
    owner = await own_threads(ctx, value)
    _plain_user(value)
    thread_id = value.get("thread_id")
    metadata = None
    if thread_id is not None:  # another client's thread: refused before any place is held
        metadata = await records(settings).thread_metadata(str(thread_id))
        if metadata is not None and metadata.get("owner") != client:
            _refuse(404, f"Thread {thread_id} not found")
    _refused(await check_stored(client, settings))  # a run adds checkpoints to what it holds
    run_id = str(value.get("run_id") or id(value))
    if thread_id is None or (metadata is None and value.get("if_not_exists") == "create"):
        _refused(await reserve_thread(client, run_id, settings))  # the run makes a thread
    _refused(await reserve_run(client, run_id, settings))
    return owner


RULES: dict[str, Callable[[Auth.types.AuthContext, Any], Awaitable[dict[str, str]]]] = {
    "threads.create": create_thread,
    "threads.update": update_thread,
    "threads.create_run": create_run,
}
