"""The LangGraph server on a runtime that several replicas share (``server_runtime =
shared``): threads, runs, the run queue and checkpoints in PostgreSQL, run streams,
cancellation and each run's heartbeat in Redis or Valkey.

The runtime is ``langgraph-runtime-pg`` (MIT; docs_corpus/deployment.md says why this
one), which the stock ``langgraph-api`` loads as ``LANGGRAPH_RUNTIME_EDITION=pg``. This
module is what ``rag serve`` runs in place of ``langgraph dev`` (in-memory runtime): the
same langgraph.json (graph, HTTP app, auth), served by uvicorn, with no file persistence
and no reloading. A replica killed during a run leaves the run's heartbeat to lapse;
another replica's queue then takes the run up again or marks it failed.

    python -m server.shared_runtime --host 127.0.0.1 --port 8123 --config langgraph.json

DATABASE_URI and REDIS_URI come from the environment (``rag serve`` sets them from
database_url and redis_url).
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

EDITION = "pg"
RUNTIME_MODULE = f"langgraph_runtime_{EDITION}"  # what langgraph-api loads for EDITION
# installed with --no-deps (pyproject.toml says why); scripts/bootstrap.sh reads this line
RUNTIME_REQUIREMENT = "langgraph-runtime-pg==0.11.1.post1"
JOBS_PER_REPLICA = 4  # runs one replica executes at once; the rest wait in the shared queue


def server_environment(config: dict[str, Any], host: str, port: int) -> dict[str, str]:
    """What ``langgraph-api`` reads at import time, as ``langgraph dev`` sets it, for
    the shared runtime."""
    return {
        "LANGGRAPH_RUNTIME_EDITION": EDITION,
        "LANGSERVE_GRAPHS": json.dumps(config["graphs"]),
        "LANGGRAPH_HTTP": json.dumps(config["http"]),
        "LANGGRAPH_AUTH": json.dumps(config["auth"]),
        "LANGGRAPH_ALLOW_BLOCKING": "true",
        "LANGGRAPH_DISABLE_FILE_PERSISTENCE": "true",
        "N_JOBS_PER_WORKER": os.environ.get("N_JOBS_PER_WORKER", str(JOBS_PER_REPLICA)),
        "LANGGRAPH_API_URL": f"http://{host}:{port}",
        "MIGRATIONS_PATH": "__pg",
    }


def make_app() -> Any:
    """The LangGraph server app, with the lifespan (the runtime's pool, queue and
    sweeper) sent straight to its router. Its middleware has nothing to do at start-up,
    and one of them (EnsureStoreAccessible, added with a custom HTTP app) asks the
    runtime for its store before the lifespan has opened the pool, which made uvicorn
    skip the lifespan altogether ("lifespan protocol appears unsupported")."""
    from langgraph_api.server import app  # imported here: it reads the environment above

    async def served(scope: dict, receive: Any, send: Any) -> None:
        target = app.router if scope["type"] == "lifespan" else app
        await target(scope, receive, send)

    return served


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m server.shared_runtime")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8123)
    parser.add_argument("--config", required=True, help="langgraph.json")
    args = parser.parse_args(argv)
    for name in ("DATABASE_URI", "REDIS_URI"):
        if not os.environ.get(name):
            parser.error(f"{name} is not set (rag serve sets it from the settings)")
    with open(args.config, encoding="utf-8") as handle:
        config = json.load(handle)
    os.environ.update(server_environment(config, args.host, args.port))

    import uvicorn

    # lifespan "on": a failure to reach PostgreSQL or Redis at start-up stops the replica
    # with the error, instead of serving requests that all fail
    uvicorn.run(
        make_app,
        factory=True,
        host=args.host,
        port=args.port,
        lifespan="on",
        log_level="warning",
        timeout_graceful_shutdown=20,
    )


if __name__ == "__main__":
    main()
