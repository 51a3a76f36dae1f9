"""The store registry is the one place a backend is named, and nothing outside
tools/store/ knows a store's driver."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest

from tools.config import ConfigError, load_settings
from tools.store.backends import BACKENDS, backend_named
from tools.store.protocol import Backend

REPO = Path(__file__).resolve().parents[2]
PRODUCT = ("tools", "ingest", "graph", "server", "rag_ui", "rag_cli", "evaluation")
DRIVERS = ("psycopg", "psycopg_pool", "chromadb", "sqlite3")
# the backends' own modules: their types are a driver's too, seen from outside
BACKEND_MODULES = re.compile(r"tools\.store\.(postgres|pg_\w+|chroma_vectors|embedded)$")


def test_every_backend_answers_the_whole_protocol():
    wanted = {n for n, _ in inspect.getmembers(Backend, inspect.isfunction)}
    for name in BACKENDS:
        found = backend_named(name)
        assert found.name == name
        assert wanted <= set(dir(found)), (name, wanted - set(dir(found)))


def test_the_store_setting_takes_the_registered_names_only():
    assert load_settings({"store": "embedded"}).store == "embedded"
    with pytest.raises(ConfigError, match="unknown store; use one of embedded, postgres"):
        load_settings({"store": "mongo"})


def test_no_product_module_outside_the_stores_imports_a_store_driver():
    """A new backend changes no caller: servers catch ``tools.store.UNREACHABLE``, and the
    chat page's flags and sessions are the backend's (``flag_log``, ``session_log``), and
    a failed write is ``tools.store.STORAGE_FAILED``."""
    allowed = {"tools/store"}
    found = []
    for package in PRODUCT:
        for path in (REPO / package).rglob("*.py"):
            relative = str(path.relative_to(REPO))
            if any(relative.startswith(a) for a in allowed):
                continue
            for node in ast.walk(ast.parse(path.read_text(), relative)):
                names = (
                    [a.name for a in node.names]
                    if isinstance(node, ast.Import)
                    else [node.module]
                    if isinstance(node, ast.ImportFrom) and node.module
                    else []
                )
                found += [
                    f"{relative}: {n}"
                    for n in names
                    if n.split(".")[0] in DRIVERS or BACKEND_MODULES.match(n)
                ]
    assert not found, found
