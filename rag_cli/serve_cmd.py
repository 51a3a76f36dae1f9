"""``rag serve``: the LangGraph server for this service, started with one command.

It runs ``langgraph dev`` (in-memory runtime, offline) on the repository's
langgraph.json, from a working directory under the data directory, so the server's
own state (``.langgraph_api/``) never lands in the source tree.

It binds 127.0.0.1 unless told otherwise, and refuses any other address without an
``api_key`` (or an explicit ``allow_remote``): an open port answers anyone who can
reach it, with the documents of every collection. Loopback is protected too, the way
Jupyter protects it: every user and process of the machine reaches 127.0.0.1, so
without an ``api_key`` the server generates one and keeps it in the data directory,
unless ``open_loopback`` says to serve loopback open.
"""

from __future__ import annotations

import argparse
import importlib.util
import ipaddress
import json
import os
import secrets
import signal
import subprocess
import sys
from pathlib import Path

from server.routes import GRAPH_ID
from server.shared_runtime import RUNTIME_MODULE, RUNTIME_REQUIREMENT
from tools.answer_check import first_reading
from tools.config import ConfigError, Settings
from tools.outbound import without_unasked_telemetry
from tools.store.collection import check_collections
from tools.verifier_thresholds import thresholds_for

OFFLINE_ENV = {
    "LANGGRAPH_CLI_NO_ANALYTICS": "1",
    "LANGGRAPH_NO_VERSION_CHECK": "true",
    "LANGSMITH_TRACING": "false",
}


def register(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = sub.add_parser("serve", help="run the LangGraph server endpoint")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8123)
    parser.set_defaults(run=run)
    return parser


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name other than localhost may resolve anywhere
        return False


def exposure_problem(host: str, settings: Settings) -> str | None:
    """Why binding ``host`` is refused, or None."""
    if is_loopback(host) or settings.requires_key or settings.allow_remote:
        return None
    return (
        f"refusing to serve on {host} without an API key: set RAG_API_KEY (clients then send "
        "it in the X-API-Key header), or set RAG_ALLOW_REMOTE=true to serve it open"
    )


def answering(host: str, settings: Settings) -> Settings:
    """``settings`` with the bind address among the Host names the server answers
    (a wildcard bind answers only the names the operator lists in allowed_hosts)."""
    if is_loopback(host) or host in ("0.0.0.0", "::", "") or host in settings.allowed_hosts:
        return settings
    hosts = ",".join(filter(None, (settings.allowed_hosts, host)))
    return settings.model_copy(update={"allowed_hosts": hosts})


def server_key(settings: Settings, workdir: Path) -> tuple[Settings, Path | None]:
    """``settings`` with the key the server requires, and the file that holds it when
    it was generated here (kept across restarts, readable by its owner only)."""
    if settings.requires_key or settings.allow_remote or settings.open_loopback:
        return settings, None
    path = workdir / "api_key"
    if not path.exists() or not path.read_text().strip():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_urlsafe(32) + "\n")
    path.chmod(0o600)
    return settings.model_copy(update={"api_key": path.read_text().strip()}), path


# What the server runs, as module and attribute: the checkout's langgraph.json names the
# same (for `langgraph dev` run by hand; a test checks that the two agree).
SERVED = {"graph": ("server.graph_factory", "make_graph"), "app": ("server.app", "app")}
SERVED |= {"auth": ("server.auth", "auth")}


def _located(module: str, attribute: str) -> str:
    """``/abs/path/module.py:attribute``, found without importing the module, wherever
    the package is installed (a checkout or site-packages)."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise ConfigError(f"rag serve: module {module} is not installed")
    return f"{spec.origin}:{attribute}"


def server_config(workdir: Path) -> Path:
    """A langgraph.json with absolute paths to the installed modules: the server resolves
    paths against its working directory, which here is under the data directory, and a
    non-editable install has no checkout to point at. The environment comes from
    ``server_env``."""
    graph_file = _located(*SERVED["graph"])
    config = {
        "dependencies": [str(Path(graph_file.rsplit(":", 1)[0]).parents[1])],
        "graphs": {GRAPH_ID: graph_file},
        "http": {"app": _located(*SERVED["app"])},
        "auth": {"path": _located(*SERVED["auth"])},
    }
    path = workdir / "langgraph.json"
    path.write_text(json.dumps(config, indent=2))
    return path


def server_command(host: str, port: int, config: Path, settings: Settings) -> list[str]:
    """``langgraph dev`` (in-memory runtime) for one server; the shared runtime's launcher
    (server/shared_runtime.py) for replicas."""
    where = ["--host", host, "--port", str(port), "--config", str(config)]
    if settings.server_runtime == "shared":
        return [sys.executable, "-m", "server.shared_runtime", *where]
    exe = Path(sys.executable).parent / "langgraph"
    return [str(exe), "dev", "--no-browser", "--no-reload", "--allow-blocking", *where]


def server_env(settings: Settings) -> dict[str, str]:
    """The server process sees exactly this command's settings, as absolute paths."""
    env = {**os.environ, **OFFLINE_ENV}
    for name, value in settings.model_dump().items():
        key = f"RAG_{name.upper()}"
        if value is None:
            env.pop(key, None)
        else:
            env[key] = str(value.resolve() if isinstance(value, Path) else value)
    env.pop("RAG_CONFIG", None)  # already merged into the values above
    if settings.server_runtime == "shared":  # the names langgraph-api reads
        env |= {"DATABASE_URI": settings.database_url, "REDIS_URI": settings.redis_url}
    without_unasked_telemetry(settings, env)
    return env


def _interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def run(args: argparse.Namespace, settings: Settings) -> int:
    problem = exposure_problem(args.host, settings)
    if problem:
        print(f"rag serve: error: {problem}", file=sys.stderr)
        return 2
    if settings.server_runtime == "shared" and not importlib.util.find_spec(RUNTIME_MODULE):
        print(
            f"rag serve: error: server_runtime=shared runs on {RUNTIME_MODULE}, which is not "
            f"installed: pip install --no-deps {RUNTIME_REQUIREMENT} (scripts/bootstrap.sh does)",
            file=sys.stderr,
        )
        return 2
    check_collections(settings)
    settings = answering(args.host, settings)
    workdir = settings.data_dir.resolve() / "server"
    workdir.mkdir(parents=True, exist_ok=True)
    settings, key_file = server_key(settings, workdir)
    runtime = "shared runtime" if settings.server_runtime == "shared" else "in-process runtime"
    print(
        f"serving the RAG graph at http://{args.host}:{args.port} "
        f"(assistant 'rag'; {runtime}; data in {settings.data_dir.resolve()}); Ctrl-C stops",
        flush=True,
    )
    if warning := thresholds_for(settings, first_reading(settings.verifier_confidence)).warning:
        print(f"rag serve: warning: {warning}", file=sys.stderr, flush=True)
    if key_file:
        print(
            f"clients send the key in {key_file} as the X-API-Key header "
            "(RAG_API_KEY sets your own; RAG_OPEN_LOOPBACK=true serves loopback without one)",
            flush=True,
        )
    # SIGTERM (a service manager, a test's teardown) stops the server like Ctrl-C does,
    # so the langgraph child never outlives this process
    signal.signal(signal.SIGTERM, _interrupt)
    command = server_command(args.host, args.port, server_config(workdir), settings)
    proc = subprocess.Popen(command, cwd=workdir, env=server_env(settings))
    try:
        return proc.wait()
    except KeyboardInterrupt:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        print("server stopped", file=sys.stderr)
        return 0
