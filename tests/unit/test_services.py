"""Services: each model, reranker and collection handle built once per configuration."""

from __future__ import annotations

from graph.services import Services
from tests.fakes import RuleChat
from tools.config import load_settings


def test_resources_are_keyed_by_what_builds_them_not_by_the_whole_settings(tmp_path):
    built: list[str] = []

    def chat(settings, role):
        built.append(role)
        return RuleChat(respond=lambda m: "ok")

    services = Services(chat=chat)
    base = load_settings({"data_dir": tmp_path, "rerank": "llm"})
    other_k = load_settings({"data_dir": tmp_path, "rerank": "llm", "k": 9})
    assert services.llm(base, "query") is services.llm(other_k, "query")  # k builds no model
    assert services.reranker(base) is services.reranker(other_k)
    assert built == ["query"]
    longer = load_settings({"data_dir": tmp_path, "rerank": "llm", "llm_timeout_s": 5})
    assert services.llm(longer, "query") is not services.llm(base, "query")
    assert services.reranker(load_settings({"data_dir": tmp_path})) is None
