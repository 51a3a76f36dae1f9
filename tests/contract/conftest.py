"""Every store backend runs the same contract suite: embedded Chroma, a real ``chroma run``
server started on 127.0.0.1 for the session, and a real PostgreSQL with pgvector
(bench/local_service.py), a fresh database per test.

``CONTRACT_BACKEND=NAME=MODULE`` runs the suite on that backend alone, registered as the
recipe says (tools.store.backends.register): test_toy_backend.py does, with a toy."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import chromadb
import pytest

from tests.net import free_port


@pytest.fixture(scope="session")
def chroma_server(tmp_path_factory):
    exe = shutil.which("chroma", path=str(Path(sys.executable).parent))
    assert exe, "the chroma CLI ships with chromadb; it must be in the venv"
    port = free_port()
    proc = subprocess.Popen(
        [
            exe,
            "run",
            "--path",
            str(tmp_path_factory.mktemp("chroma-server")),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            chromadb.HttpClient(host="127.0.0.1", port=port).heartbeat()
            break
        except Exception:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                pytest.fail("chroma server did not start within 30 s")
            time.sleep(0.2)
    yield f"127.0.0.1:{port}"
    proc.terminate()
    proc.wait(timeout=10)


def _backends() -> list[str]:
    """The backends the suite runs on: the product's, or the one ``CONTRACT_BACKEND`` adds."""
    if added := os.environ.get("CONTRACT_BACKEND"):
        from tools.store.backends import register

        name, module = added.split("=")
        register(name, module)
        return [name]
    return ["embedded", "server", "postgres"]


@pytest.fixture(params=_backends())
def backend_settings(request, tmp_path):
    from tools.config import load_settings

    values = {"data_dir": tmp_path / "data", "store": request.param}
    if request.param == "server":
        values["store"] = "embedded"
        values["chroma_host"] = request.getfixturevalue("chroma_server")
    if request.param == "postgres":
        values["database_url"] = request.getfixturevalue("database_url")
    return load_settings(values)
