"""Concurrent questions against one process, and ingestion while questions are answered."""

from __future__ import annotations

import re
import threading
from concurrent.futures import ThreadPoolExecutor

from graph import build_graph
from ingest.partition import PartitionOptions
from ingest.pipeline import IngestOptions, Ingestor
from tests.unit.conftest import EMB, PAGES
from tools.collection import Collection

TOPICS = {
    "How do I install the service?": "install.md",
    "What does the verifier check?": "verify.md",
    "How do I send traces to Langfuse?": "tracing.md",
}


def cite_best_passage(messages) -> str:
    """Answers with the first passage's first sentence: right only if the passages
    given were retrieved for *this* question."""
    first = re.search(r"<passage>\n(.*?)\n</passage>", messages[0].text, flags=re.S).group(1)
    sentence = first.split("\n\n", 1)[-1].split(".")[0].strip()
    return f"{sentence} [1]."


def test_concurrent_questions_each_get_their_own_answer(corpus_env, models):
    models.chats["generator"].respond = cite_best_passage
    app = build_graph()
    questions = list(TOPICS) * 8

    def ask(question):
        return question, app.invoke({"question": question}, {"configurable": {"k": 1}})

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(ask, questions))
    assert len(results) == len(questions)
    for question, out in results:
        assert out["error"] is None and out["abstained"] is False
        assert out["citations"][0]["source"] == f"docs/{TOPICS[question]}", question
        assert out["queries"] == [question]
    # each question's answer is the same as when asked alone
    alone = {q: app.invoke({"question": q}, {"configurable": {"k": 1}})["answer"] for q in TOPICS}
    assert all(out["answer"] == alone[q] for q, out in results)


def test_ingestion_while_answering_gives_old_or_new_data_never_an_error(
    corpus_env, models, tmp_path
):
    models.chats["generator"].respond = cite_best_passage
    settings = corpus_env
    root = tmp_path / "docs"
    old = PAGES["install.md"]
    new = "# Install\n\nRun make setup to install the service. It takes 2 minutes.\n"
    writer = Collection(settings, "docs", create=True)  # the ingestion's own handle
    options = IngestOptions(partition=PartitionOptions("structure", 100, 0))
    stop = threading.Event()
    failures: list[BaseException] = []

    def ingest_repeatedly():
        try:
            for i in range(12):
                (root / "install.md").write_text(new if i % 2 == 0 else old)
                Ingestor(settings, writer, EMB, options, progress=False).run([root])
        except BaseException as exc:  # reported by the main thread
            failures.append(exc)
        finally:
            stop.set()

    app = build_graph()
    answers: list[str] = []

    def ask_until_done():
        while not stop.is_set():
            out = app.invoke({"question": "How do I install the service?"}, {})
            assert out["error"] is None, out["error"]
            answers.append(out["answer"])

    thread = threading.Thread(target=ingest_repeatedly)
    thread.start()
    with ThreadPoolExecutor(max_workers=4) as pool:
        for future in [pool.submit(ask_until_done) for _ in range(4)]:
            future.result()
    thread.join()
    assert not failures
    allowed = {f"Run make {v} to install the service [1]." for v in ("demo", "setup")}
    assert answers and set(answers) <= allowed
