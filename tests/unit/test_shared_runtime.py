"""`rag serve` on the shared runtime: which server it starts, with what, and the run's
user stored as data the runtime can write (the slow test tests/slow/test_replicas.py
runs the real thing)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from rag_cli.serve_cmd import server_command, server_env
from server.auth import _plain_user
from server.shared_runtime import server_environment
from tools.config import load_settings

POSTGRES = {"store": "postgres", "database_url": "postgresql://u:pw@db/rag"}


def _settings(tmp_path: Path, **more: str):
    return load_settings({"data_dir": tmp_path, **more})


def test_the_default_runtime_is_langgraph_dev_and_shared_is_the_launcher(tmp_path, monkeypatch):
    monkeypatch.delenv("REDIS_URI", raising=False)
    config = tmp_path / "langgraph.json"
    dev = server_command("127.0.0.1", 8123, config, _settings(tmp_path))
    assert Path(dev[0]).name == "langgraph" and dev[1] == "dev"
    shared_settings = _settings(
        tmp_path, **POSTGRES, server_runtime="shared", redis_url="redis://cache:6379/0"
    )
    shared = server_command("0.0.0.0", 9000, config, shared_settings)
    assert shared[:3] == [sys.executable, "-m", "server.shared_runtime"]
    assert shared[3:] == ["--host", "0.0.0.0", "--port", "9000", "--config", str(config)]
    env = server_env(shared_settings)
    assert env["DATABASE_URI"] == "postgresql://u:pw@db/rag"
    assert env["REDIS_URI"] == "redis://cache:6379/0"
    assert "REDIS_URI" not in server_env(_settings(tmp_path))


def test_the_launcher_serves_the_same_graph_app_and_auth_on_the_pg_edition():
    config = {"graphs": {"rag": "g.py:make"}, "http": {"app": "a.py:app"}, "auth": {"path": "x"}}
    env = server_environment(config, "127.0.0.1", 8123)
    assert env["LANGGRAPH_RUNTIME_EDITION"] == "pg"
    assert json.loads(env["LANGSERVE_GRAPHS"]) == config["graphs"]
    assert json.loads(env["LANGGRAPH_HTTP"]) == config["http"]
    assert json.loads(env["LANGGRAPH_AUTH"]) == config["auth"]
    assert env["LANGGRAPH_DISABLE_FILE_PERSISTENCE"] == "true"


class _User:
    identity = "alice"
    display_name = "alice"


def test_a_runs_user_is_kept_as_a_plain_dict_the_worker_reads_back():
    value = {"kwargs": {"config": {"configurable": {"langgraph_auth_user": _User()}}}}
    _plain_user(value)
    user = value["kwargs"]["config"]["configurable"]["langgraph_auth_user"]
    assert json.loads(json.dumps(user)) == user  # JSON, as the runtime stores it
    # what langgraph_api.auth.custom.normalize_user turns back into a user
    assert user["identity"] == "alice" and user["is_authenticated"] is True
    _plain_user({"kwargs": None})  # nothing to convert: no error
