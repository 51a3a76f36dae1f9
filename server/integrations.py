"""The routes `rag serve` adds for tools people already use: MCP at ``/mcp``
(server/mcp_tools.py) and the OpenAI-compatible chat routes under ``/v1``
(server/openai_chat.py), with the lifespan the MCP endpoint needs. server/app.py mounts
them; server/routes.py lists them among the served routes, so the door's rules (Host,
Origin, key, body limits) hold for them as for every route."""

from __future__ import annotations

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from starlette import routing

from server.answers import ServerAsker
from server.api_keys import key_of
from server.graph_factory import server_services
from server.mcp_tools import Caller, HttpMcp
from server.openai_chat import chat_completions, list_models
from tools.config import client_of, load_settings


def http_caller(ctx: Context) -> Caller:
    """Who sent an MCP request, from its key (the door refused a wrong one already),
    answered through the server's own runs."""
    request = ctx.request_context.request
    key = key_of(request.headers)
    settings = load_settings()
    client = client_of(settings, key)
    if client is None:
        raise ToolError("missing or wrong API key")
    return Caller(ServerAsker(key, request.scope["app"]), client, server_services(), settings)


mcp_endpoint = HttpMcp(http_caller)
lifespan = mcp_endpoint.lifespan
ROUTES = [
    routing.Route("/mcp", mcp_endpoint, methods=["POST"]),
    routing.Route("/v1/models", list_models, methods=["GET"]),
    routing.Route("/v1/chat/completions", chat_completions, methods=["POST"]),
]
