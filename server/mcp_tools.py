"""The service as MCP tools (Model Context Protocol), for agents and desktop assistants:
``ask`` (a checked answer with its references, quoted support and outcome) and
``search`` (passages with their source and lines). Each returns structured content (its
output schema is published with the tool) and the same as text.

Served by ``rag serve`` at ``/mcp`` (Streamable HTTP, stateless, JSON responses: no
session to keep, so any replica answers any request) and by ``rag mcp`` over stdio.

Why not LangGraph's own ``/mcp``: it publishes each assistant as a tool whose input is
the graph's input schema and whose result is the run's whole state as text, with no
``search`` and no output schema; a client would have to know the state's layout to find
the outcome. This module publishes the product's two tools with typed results, and
still answers through LangGraph's runs (server/answers.py ``ServerAsker``), so every
rule about clients holds exactly as on the LangGraph routes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Annotated, Any

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import CallToolResult, TextContent
from pydantic import Field
from starlette.responses import JSONResponse
from typing_extensions import TypedDict

from graph.services import Services
from server.answers import (
    Ask,
    Asker,
    QuestionSettings,
    Refused,
    Reply,
    answer,
    client_settings,
    open_collection,
    reply_text,
)
from server.search import Hit, search
from tools.config import Settings
from tools.errors import ModelError

INSTRUCTIONS = (
    "Answers questions from the operator's document collections with citations. "
    "`ask` returns the answer with [n] markers, its references, the quoted lines each "
    "statement rests on and an outcome: verified, not verified, or the documents do not "
    "say. `search` returns passages with their source and lines, without an answer."
)


@dataclass(frozen=True)
class Caller:
    """Who is calling and how their questions are answered. ``client`` None: the
    operator (``rag mcp``, a local process)."""

    asker: Asker
    client: str | None
    services: Services
    base: Settings


class Found(TypedDict):
    collection: str
    passages: list[Hit]


def _fail(exc: Refused) -> ToolError:
    return ToolError(f"{exc.detail} (HTTP {exc.status})")


def _settings(collection: str | None, settings: QuestionSettings | None) -> dict[str, Any]:
    chosen = settings.model_dump(exclude_none=True) if settings else {}
    return {**chosen, **({"collection": collection} if collection else {})}


def build_mcp(caller_of: Callable[[Context], Caller]) -> MCPServer:
    """The MCP server with its two tools; ``caller_of`` says who calls a request."""
    server = MCPServer("agentic-rag", instructions=INSTRUCTIONS)

    @server.tool(title="Ask the documents")
    async def ask(
        question: Annotated[str, Field(description="the question, in plain words")],
        ctx: Context,
        collection: Annotated[
            str | None, Field(description="the collection to answer from (default: the server's)")
        ] = None,
        settings: Annotated[
            QuestionSettings | None,
            Field(description="how this question is answered (the settings a client may set)"),
        ] = None,
    ) -> Annotated[CallToolResult, Reply]:
        """Answer a question from the documents, with [n] citations, references, quoted
        support and an outcome: verified, not verified, or the documents do not say."""
        try:
            reply = await answer(
                caller_of(ctx).asker, Ask(question, [], _settings(collection, settings))
            )
        except Refused as exc:
            raise _fail(exc) from None
        return CallToolResult(
            content=[TextContent(type="text", text=reply_text(reply))],
            structured_content=dict(reply),
        )

    @server.tool(name="search", title="Search the documents")
    async def search_passages(
        query: Annotated[str, Field(description="what to look for")],
        ctx: Context,
        collection: Annotated[
            str | None, Field(description="the collection to search (default: the server's)")
        ] = None,
        k: Annotated[int | None, Field(description="passages returned", ge=1, le=50)] = None,
    ) -> Annotated[CallToolResult, Found]:
        """Passages for a query, best first, each with its source and lines; no answer."""
        caller = caller_of(ctx)
        overrides = {"collection": collection, "k": k}
        try:
            chosen = client_settings(
                caller.base, caller.client, {n: v for n, v in overrides.items() if v is not None}
            )
            open_collection(chosen, caller.client)
            if not query.strip() or len(query) > chosen.max_question_chars:
                raise Refused(422, f"'query' must be 1 to {chosen.max_question_chars} characters")
        except Refused as exc:
            raise _fail(exc) from None
        try:
            hits = await anyio.to_thread.run_sync(search, chosen, caller.services, query)
        except (ModelError, ValueError) as exc:  # the embedder failed; a mismatched collection
            raise ToolError(f"search failed: {exc}") from None
        found = Found(collection=chosen.collection, passages=hits)
        text = "\n\n".join(f"[{h['n']}] {h['location']}\n{h['text']}" for h in hits)
        return CallToolResult(
            content=[TextContent(type="text", text=text or "no passage found")],
            structured_content=dict(found),
        )

    return server


class HttpMcp:
    """The Streamable HTTP endpoint (an ASGI app) and the lifespan it needs running: each
    start of the server makes its own session manager (the SDK runs one only once).
    The SDK's own Host/Origin checks are off: the server's HttpGuard applies the
    operator's rules (allowed_hosts, allowed_origins) to this route as to every other."""

    def __init__(self, caller_of: Callable[[Context], Caller]) -> None:
        self.caller_of = caller_of
        self.manager: StreamableHTTPSessionManager | None = None

    @asynccontextmanager
    async def lifespan(self, _app: Any) -> AsyncIterator[None]:
        server = build_mcp(self.caller_of)
        server.streamable_http_app(
            stateless_http=True,
            json_response=True,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        self.manager = server.session_manager
        try:
            async with self.manager.run():
                yield
        finally:
            self.manager = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if self.manager is None:  # an app used without its lifespan (a bare test client)
            response = JSONResponse({"detail": "the MCP endpoint is not running"}, 503)
            await response(scope, receive, send)
            return
        await self.manager.handle_request(scope, receive, send)
