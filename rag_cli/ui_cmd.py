"""``rag ui``: the local chat page (rag_ui), served by uvicorn on this command's settings."""

from __future__ import annotations

import argparse
import sys

from rag_cli.serve_cmd import answering, is_loopback
from rag_ui.flags import flag_store
from tools.config import Settings, load_settings
from tools.store.collection import Collection, check_collections


def register(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = sub.add_parser("ui", help="a local chat page: answers, sources, prompt, flagging")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8124)
    parser.add_argument("--collection", help="the collection to answer from")
    parser.set_defaults(run=run)
    return parser


def exposure_problem(host: str, settings: Settings) -> str | None:
    """The page has no login, so unlike `rag serve` an api_key cannot open it to others:
    only an explicit allow_remote lets it bind a non-loopback address."""
    if is_loopback(host) or settings.allow_remote:
        return None
    return (
        f"refusing to serve the chat page on {host}: it has no login and answers anyone who "
        "can reach it; set RAG_ALLOW_REMOTE=true to serve it open"
    )


def run(args: argparse.Namespace, settings: Settings) -> int:
    import uvicorn

    from rag_ui.app import create_app
    from rag_ui.token import new_token

    problem = exposure_problem(args.host, settings)
    if problem:
        print(f"rag ui: error: {problem}", file=sys.stderr)
        return 2
    settings = load_settings({"collection": args.collection}, base=settings, source="command line")
    check_collections(settings)
    if args.collection:  # a name the user typed: unknown is an error now, not at the question
        Collection(settings, args.collection).close()
    open_page = settings.open_loopback or settings.allow_remote
    token = None if open_page else new_token()
    print(
        f"chat page at http://{args.host}:{args.port}/"
        + (f"?token={token}" if token else "")
        + f" (data in {settings.data_dir.resolve()}, "
        f"flags in {flag_store(settings).where}); Ctrl-C stops",
        flush=True,
    )
    uvicorn.run(
        create_app(answering(args.host, settings), token),
        host=args.host,
        port=args.port,
        log_level="warning",
    )
    return 0
