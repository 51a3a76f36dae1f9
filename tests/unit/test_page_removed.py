"""The answer-page-removed dev set: no question is asked of a collection holding its
answer page, or another page holding its evidence or a distinctive gold answer."""

from __future__ import annotations

import json

import pytest

from evaluation.page_removed import (
    _flat,
    build_collection,
    collection_sources,
    page_texts,
    removed_pages,
)
from evaluation.squad import NEWDOCS, newdocs_questions, newdocs_sets
from tests.unit.conftest import EMB
from tools.config import load_settings


@pytest.mark.parametrize("name", newdocs_sets())
def test_no_question_is_asked_of_its_answer_page(name):
    folder, questions = NEWDOCS / name, newdocs_questions(name)
    records = {r["id"]: r for r in map(json.loads, questions.read_text().splitlines())}
    texts = page_texts(folder)
    for split in ("dev", "test"):
        groups = removed_pages(questions, folder, split)
        assert groups, f"{name} {split}: no question left"
        for group in groups:
            kept = {page: text for page, text in texts.items() if page != group.page}
            assert group.page in texts and group.page not in kept
            for item in group.items:
                record = records[item.id]
                assert record["source"] == group.page and record["split"] == split
                assert item.answerable is False and not item.answers  # unanswerable here
                evidence = _flat(record["evidence"])
                assert not any(evidence in text for text in kept.values()), item.id


def test_the_built_collection_lacks_the_page(tmp_path, monkeypatch):
    monkeypatch.setenv("RAG_DATA_DIR", str(tmp_path / "data"))
    settings = load_settings()
    folder = NEWDOCS / "privoxy"
    group = removed_pages(newdocs_questions("privoxy"), folder, "dev")[0]
    built = build_collection(settings, folder, group, EMB)
    sources = collection_sources(settings, group.collection)
    assert f"privoxy/{group.page}" not in sources
    assert len(sources) == built["files"] == len(page_texts(folder)) - 1
    assert group.collection == f"privoxy-without-{group.page.rsplit('.', 1)[0]}"
