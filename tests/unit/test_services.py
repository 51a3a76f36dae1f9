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


def test_every_key_holds_the_whole_sections_its_factory_reads(tmp_path):
    """A setting added to a section is in the key of every factory that reads it."""
    from tools.config import MODEL_SPECS, SECTIONS
    from tools.models.factory import ROLES, chat_key, embeddings_key
    from tools.store.collection import handle_key

    settings = load_settings({"data_dir": tmp_path})

    def names(pairs):
        return [name for name, _ in pairs]

    calls = [f for f in SECTIONS["models"] if f not in MODEL_SPECS]
    assert {f"{role}_model" for role in ROLES} | {"embedding_model"} == MODEL_SPECS
    assert names(chat_key(settings, "verifier")[3]) == calls + list(SECTIONS["local_runtime"])
    assert names(embeddings_key(settings)[2]) == calls
    assert names(handle_key(settings, "docs")[1]) == list(SECTIONS["store"])


def test_a_request_setting_rebuilds_only_what_reads_it(tmp_path):
    """A request may change REQUEST_SETTINGS: of those only as_of (the collection's
    version), rerank (the reranker) and collection (a name, not a key's) reach a key."""
    from tools.config import REQUEST_SETTINGS, load_settings
    from tools.models.factory import ROLES, chat_key, embeddings_key
    from tools.store.collection import handle_key

    def keys(s):
        return ([chat_key(s, role) for role in ROLES], embeddings_key(s), handle_key(s, "docs"))

    services = Services(chat=lambda settings, role: RuleChat(respond=lambda m: "ok"))
    base = load_settings({"data_dir": tmp_path, "rerank": "llm"})
    other = {
        "k": 9,
        "fetch_k": 9,
        "hybrid_weight": 0.2,
        "retrieval_strategy": "window",
        "window": 2,
        "dedup_similarity": 0.8,
        "multi_query": 2,
        "rerank_keep": 3,
        "evidence": "passages",
        "evidence_chars": 500,
        "evidence_score_ratio": 0.8,
        "evidence_neighbours": 2,
        "answer_style": "short",
        "max_regenerations": 2,
        "second_look": False,
        "on_unverified": "abstain",
    }
    assert set(other) == REQUEST_SETTINGS - {"collection", "as_of", "rerank"}
    request = load_settings(other, base=base)
    assert keys(request) == keys(base)
    assert services.judge(request) is services.judge(base)
    assert services.reranker(request) is services.reranker(base)
    assert handle_key(load_settings({"as_of": 2}, base=base), "docs") != handle_key(base, "docs")
    more_samples = load_settings({"verifier_samples": 5}, base=base)
    assert services.judge(more_samples) is not services.judge(base)
