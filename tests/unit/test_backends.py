"""The store registry is the one place a backend is named."""

from __future__ import annotations

import inspect

from tools.config import choices
from tools.store.backends import BACKENDS, Backend
from tools.store.collection import Collection


def test_every_store_setting_has_a_backend_and_every_backend_a_setting():
    assert set(BACKENDS) == set(choices("store"))


def test_every_backend_answers_the_whole_protocol_and_can_be_opened():
    wanted = {n for n, _ in inspect.getmembers(Backend, inspect.isfunction)}
    for name, backend in BACKENDS.items():
        assert backend.name == name
        assert wanted <= {n for n in dir(backend)}, name
        assert callable(getattr(Collection, f"_open_{name}")), name
