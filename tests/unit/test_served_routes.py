"""What the real LangGraph app serves, against the table of served routes.

The app is the one `rag serve` runs: langgraph-api's server module imported with the
langgraph.json `rag serve` writes, in a fresh interpreter per runtime (its import reads
the environment once), as `langgraph dev` sets it (in-memory runtime) or as
server/shared_runtime.py does (PostgreSQL runtime; importing it opens no connection).
Every HTTP and WebSocket route it holds is walked from the ASGI app itself and sent a
request: one the table does not name must be answered by the door's 404, and every
row of the table must be a route the app holds. A route langgraph-api adds in a new
release is in neither the table nor DECIDED_CLOSED below, and fails this test until
someone decides.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rag_cli.serve_cmd import server_config
from server.routes import SERVED, Transport, served
from server.shared_runtime import server_environment

# langgraph-api 0.16.7's routes the product does not use: refused on purpose
DECIDED_CLOSED = {
    *(f"GET {p}" for p in ("/", "/ok", "/info", "/metrics", "/docs")),
    "GET /internal/debug/thread/{thread_id}",
    "POST /internal/truncate",
    "GET /deploy",
    "POST /deploy",
    "DELETE /deploy",
    "GET /deploy/{operation_id}/stream",
    "POST /assistants",
    "POST /assistants/count",
    "POST /assistants/{assistant_id}/latest",
    "POST /assistants/{assistant_id}/versions",
    "GET /assistants/{assistant_id}/graph",
    "GET /assistants/{assistant_id}/subgraphs",
    "GET /assistants/{assistant_id}/subgraphs/{namespace}",
    "PATCH /assistants/{assistant_id}",
    "DELETE /assistants/{assistant_id}",
    "POST /runs/batch",
    "POST /runs/crons",
    "POST /runs/crons/search",
    "POST /runs/crons/count",
    "GET /runs/crons/{cron_id}",
    "PATCH /runs/crons/{cron_id}",
    "DELETE /runs/crons/{cron_id}",
    "DELETE /threads/{thread_id}/runs/{run_id}",
    "POST /threads/{thread_id}/runs/crons",
    "POST /threads/count",
    "POST /threads/prune",
    "GET /threads/{thread_id}/storage",
    "POST /threads/{thread_id}/state",
    "GET /threads/{thread_id}/history",
    "POST /threads/{thread_id}/history",
    "POST /threads/{thread_id}/copy",
    "GET /threads/{thread_id}/state/{checkpoint_id}",
    "POST /threads/{thread_id}/state/checkpoint",
    "GET /threads/{thread_id}/stream",
    "POST /threads/{thread_id}/stream/events",
    "POST /threads/{thread_id}/commands",
    "WEBSOCKET /threads/{thread_id}/stream/events",
    *(f"{m} /store/items" for m in ("PUT", "GET", "DELETE")),
    "POST /store/items/search",
    "POST /store/namespaces",
    "POST /ui/{graph_id}",
    "GET /ui/{path}",
    *(f"{m} /mcp" for m in ("GET", "POST", "DELETE")),
    *(f"{m} /a2a/{{assistant_id}}" for m in ("GET", "POST", "DELETE")),
    *(f"{m} /a2a/{{assistant_id}}/" for m in ("GET", "POST", "DELETE")),
    "GET /a2a/{assistant_id}/.well-known/agent-card.json",
    "GET /a2a/{assistant_id}/.well-known/agent.json",
    "GET /.well-known/agent-card.json",
}

# Run in a fresh interpreter: walk the app langgraph-api builds, send each route one
# request, print what came back. No lifespan runs: the door answers before any handler.
WALK = r"""
import json, re, sys
from starlette.routing import Mount, Route, WebSocketRoute
from starlette.testclient import TestClient, WebSocketDenialResponse
from langgraph_api.server import app

def walk(routes, prefix=""):
    for route in routes:
        if isinstance(route, Mount):
            inner = getattr(route, "routes", None)
            if inner:
                yield from walk(inner, prefix + route.path)
            else:  # a mounted app (static files): any path below it
                yield "http", "GET", prefix + route.path + "/{path}"
        elif isinstance(route, WebSocketRoute):
            yield "websocket", "GET", prefix + route.path  # a handshake is a GET
        elif isinstance(route, Route):
            for method in sorted(route.methods or ()):
                if method != "HEAD":
                    yield "http", method, prefix + route.path

from server.routes import SERVED

rows = {(r.transport.value, r.method, r.template) for r in SERVED}
client = TestClient(app, base_url="http://127.0.0.1:8123")
seen = []
for transport, method, template in sorted(set(walk(app.router.routes))):
    path = re.sub(r"\{[^}]+\}", "x1", template)
    if (transport, method, template) in rows:
        status, text = 0, "a row of the table: not sent"
    elif transport == "websocket":
        try:
            with client.websocket_connect("ws://127.0.0.1:8123" + path):
                status, text = 101, ""
        except WebSocketDenialResponse as denied:
            status, text = denied.status_code, denied.text
    else:
        reply = client.request(method, path, json={})
        status, text = reply.status_code, reply.text
    seen.append([transport, method, template, status, text[:200]])
print(json.dumps(seen))
"""


def _inmem(config: dict) -> dict[str, str]:
    """What `langgraph dev` sets before it imports the server (langgraph_api/cli.py)."""
    return {
        "LANGGRAPH_RUNTIME_EDITION": "inmem",
        "MIGRATIONS_PATH": "__inmem",
        "LANGSERVE_GRAPHS": json.dumps(config["graphs"]),
        "LANGGRAPH_HTTP": json.dumps(config["http"]),
        "LANGGRAPH_AUTH": json.dumps(config["auth"]),
        "LANGGRAPH_DISABLE_FILE_PERSISTENCE": "true",
        "ALLOW_PRIVATE_NETWORK": "true",
    }


def _shared(config: dict) -> dict[str, str]:
    unreachable = {"DATABASE_URI": "postgresql://nobody@127.0.0.1:9/none"}
    return {**server_environment(config, "127.0.0.1", 8123), **unreachable}


@pytest.fixture(scope="module")
def walks(tmp_path_factory) -> dict[str, list[list]]:
    """Both runtimes' walks, run at once: (transport, method, template, status, text)."""
    tmp = tmp_path_factory.mktemp("walk")
    config = json.loads(server_config(tmp).read_text())
    running = {}
    for name, runtime in (("process", _inmem), ("shared", _shared)):
        env = {**os.environ, **runtime(config), "REDIS_URI": "redis://127.0.0.1:9/0"}
        env["RAG_DATA_DIR"] = str(tmp / "data")
        running[name] = subprocess.Popen(
            [sys.executable, "-c", WALK],
            env=env,
            cwd=tmp,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    found = {}
    for name, proc in running.items():
        out, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err[-3000:]
        found[name] = json.loads(out.strip().splitlines()[-1])
    return found


@pytest.mark.parametrize("runtime", ["process", "shared"])
def test_the_app_serves_only_what_the_table_names(walks, runtime):
    seen = walks[runtime]
    held = {(t, m, p) for t, m, p, _, _ in seen}
    rows = {(r.transport.value, r.method, r.template) for r in SERVED}
    assert rows <= held, f"rows the app does not serve: {sorted(rows - held)}"
    undecided, leaks = [], []
    for transport, method, template, status, text in seen:
        if (transport, method, template) in rows:
            continue
        name = f"{'WEBSOCKET' if transport == 'websocket' else method} {template}"
        if name not in DECIDED_CLOSED:
            undecided.append(name)
        if status != 404 or "not served here" not in text:
            leaks.append((method, template, status, text))
    assert undecided == [], f"langgraph-api serves routes nobody decided about: {undecided}"
    assert leaks == [], f"routes the table does not name reached past the door: {leaks}"
    assert len(seen) > len(rows) + 30  # the walk found langgraph-api's routes


@pytest.mark.parametrize("row", SERVED, ids=lambda r: f"{r.method} {r.template}")
def test_each_row_is_found_by_the_lookup_the_door_uses(row):
    path = row.template.replace("{thread_id}", "t-1").replace("{run_id}", "r-1")
    path = path.replace("{assistant_id}", "rag")
    scope = {"type": row.transport.value, "method": row.method, "path": path}
    assert served(scope) == row
    # a longer path is not this row (it may be another, "/runs" + "/r-1")
    assert served({**scope, "path": path + "/extra"}) != row
    assert served({**scope, "type": "websocket"}) is None or row.transport is Transport.WEBSOCKET


def test_the_security_page_lists_the_table():
    page = (Path(__file__).resolve().parents[2] / "docs_corpus" / "security.md").read_text()
    header = "| method | path | transport | who may call | kind |"
    lines = page.split(header, 1)[1].strip().splitlines()[1:]
    listed = []
    for line in lines:
        if not line.startswith("|"):
            break
        method, path, transport, caller, kind = (
            c.strip().strip("`") for c in line[1:-1].split("|")
        )
        listed.append((method, path, transport, caller, kind))
    table = [
        (r.method, r.template, r.transport.value, r.caller.value, r.kind.value) for r in SERVED
    ]
    assert listed == table
