"""Store backends by name: the one list of them, and the one way to reach one.

Why a registry: the choice of store once lived in a dozen branches on its name across
collections, conversations, flags, the doctor and the outbound list, and a new backend
meant finding them all. Now each backend is one module holding one object that answers
``tools.store.protocol.Backend`` (named ``BACKEND``), and every caller asks
``backend(settings)`` for what it needs. To add a backend, write its module and add one
line to ``BACKENDS`` (or call ``register`` at run time, as the contract test of a toy
backend does: tests/contract/test_toy_backend.py); docs_corpus/architecture.md says the
rest. Modules are imported on first use, so a process loads only the store it uses.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from tools.store.protocol import Backend, CollectionBusy, SoleWriter, Workers

if TYPE_CHECKING:
    from tools.config import Settings

# name -> the module whose BACKEND object is that store (the `store` setting's values)
BACKENDS: dict[str, str] = {
    "embedded": "tools.store.embedded",
    "postgres": "tools.store.pg_backend",
}

__all__ = [
    "BACKENDS",
    "Backend",
    "CollectionBusy",
    "SoleWriter",
    "Workers",
    "backend",
    "backend_named",
    "register",
]


def register(name: str, module: str) -> None:
    """Add a backend at run time: the same as a line in ``BACKENDS``."""
    BACKENDS[name] = module


def backend_named(name: str) -> Backend:
    """The backend registered as ``name``."""
    found = importlib.import_module(BACKENDS[name]).BACKEND
    assert found.name == name, f"{BACKENDS[name]}.BACKEND is named {found.name!r}, not {name!r}"
    return found


def backend(settings: Settings) -> Backend:
    """The backend ``settings.store`` names (validated with the settings)."""
    return backend_named(settings.store)
