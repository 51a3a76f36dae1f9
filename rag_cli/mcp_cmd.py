"""``rag mcp``: the service's MCP tools (server/mcp_tools.py) over stdio, for desktop
clients and coding agents that start a local process. Questions are answered in this
process with this command's settings, as ``rag ask`` answers them: the caller is the
operator. stdout carries the protocol only; everything else goes to stderr."""

from __future__ import annotations

import argparse

from rag_cli.ask_cmd import ANSWER_ROLES
from rag_cli.services import services_of
from tools.config import Settings
from tools.models.factory import check_models
from tools.store.collection import check_collections


def register(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = sub.add_parser(
        "mcp", help="serve the ask and search tools to an MCP client over stdio"
    )
    parser.set_defaults(run=run)
    return parser


def run(args: argparse.Namespace, settings: Settings) -> int:
    from server.answers import LocalAsker
    from server.mcp_tools import Caller, build_mcp

    check_models(settings, ANSWER_ROLES)
    check_collections(settings)
    services = services_of(args)
    caller = Caller(LocalAsker(services, settings), None, services, settings)
    build_mcp(lambda _ctx: caller).run("stdio")
    return 0
