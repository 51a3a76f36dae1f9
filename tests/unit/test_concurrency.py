"""Concurrent questions against one process, and ingestion while questions are answered."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from graph import build_graph
from graph.services import Services
from ingest.partition import PartitionOptions
from ingest.pipeline import IngestOptions, Ingestor
from tests.unit.conftest import EMB, PAGES
from tools.config import load_settings
from tools.store.collection import Collection
from tools.store.protocol import StaleStoreError

REPO = Path(__file__).resolve().parents[2]
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
        return question, app.invoke(
            {"question": question}, {"configurable": {"k": 1}}, context=models.services
        )

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(ask, questions))
    assert len(results) == len(questions)
    for question, out in results:
        assert out["error"] is None and out["abstained"] is False
        assert out["citations"][0]["source"] == f"docs/{TOPICS[question]}", question
        assert out["queries"] == [question]
    # each question's answer is the same as when asked alone
    alone = {
        q: app.invoke({"question": q}, {"configurable": {"k": 1}}, context=models.services)[
            "answer"
        ]
        for q in TOPICS
    }
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
            out = app.invoke(
                {"question": "How do I install the service?"}, {}, context=models.services
            )
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


# another process: `rag ingest` (or `--rebuild`) run from a shell while this one serves
OTHER_PROCESS = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {repo!r})
    from ingest.partition import PartitionOptions
    from ingest.pipeline import IngestOptions, Ingestor
    from tests.unit.conftest import EMB
    from tools.store.collection import Collection, drop_collection
    from tools.config import load_settings
    settings = load_settings()
    if {rebuild!r}:
        drop_collection(settings, "shell")
    col = Collection(settings, "shell", create=True)
    options = IngestOptions(partition=PartitionOptions("structure", 100, 0))
    Ingestor(settings, col, EMB, options, progress=False).run([{root!r}])
    """
)


def test_ingestion_and_rebuild_by_another_process_are_seen_by_a_serving_process(
    corpus_env, models, tmp_path, monkeypatch
):
    """Embedded Chroma loads an index once per process: without reopening, a server
    never saw vectors another process added (nor, on its first question, those added
    after it started), and a rebuild broke every question."""
    models.chats["generator"].respond = cite_best_passage
    app = build_graph()
    root = tmp_path / "shell"
    root.mkdir()
    monkeypatch.setenv("RAG_DATA_DIR", str(tmp_path / "shell-data"))  # a store new here
    settings = load_settings()

    def answer() -> str:
        out = app.invoke(
            {"question": "How do I install the service?"},
            {"configurable": {"collection": "shell"}},
            context=models.services,
        )
        assert out["error"] is None, out["error"]
        return out["answer"]

    def other_process(page: str, text: str, rebuild: bool = False) -> None:
        """`rag ingest` (or `--rebuild`) of ``page`` alone, run from a shell."""
        for old in root.iterdir():
            old.unlink()
        (root / page).write_text(f"# Install\n\nRun make {text} to install the service.\n")
        script = OTHER_PROCESS.format(repo=str(REPO), rebuild=rebuild, root=str(root))
        subprocess.run([sys.executable, "-c", script], check=True, cwd=REPO, timeout=120)

    other_process("install.md", "demo")
    Collection(settings, "shell").close()  # as `rag serve` checks collections at start
    other_process("install.md", "setup")
    # the first search (hybrid retrieval also reads vectors by id: search the index alone)
    hits = models.services.collection(settings, "shell").dense_search(EMB.embed_query("setup"), 3)
    assert [h[0].text for h in hits] == ["# Install\n\nRun make setup to install the service."]
    assert answer() == "Run make setup to install the service [1]."
    other_process("install.md", "build")
    assert answer() == "Run make build to install the service [1]."  # a later question
    other_process("setup.md", "quick", rebuild=True)
    assert answer() == "Run make quick to install the service [1]."


def test_own_commits_do_not_reopen_the_collection(corpus_env):
    """Reopening costs an index load: only another process's commits call for it."""
    services = Services()
    handle = services.collection(corpus_env, "docs")
    writer = Collection(corpus_env, "docs")
    options = IngestOptions(partition=PartitionOptions("structure", 100, 0))
    (corpus_env.data_dir.parent / "docs" / "install.md").write_text("# Install\n\nNew.\n")
    Ingestor(corpus_env, writer, EMB, options, progress=False).run(
        [corpus_env.data_dir.parent / "docs"]
    )
    assert services.collection(corpus_env, "docs") is handle


def test_a_read_that_meets_vectors_deleted_elsewhere_is_repeated_on_a_reopened_handle(
    corpus_env,
):
    handles = []

    def flaky(col):
        handles.append(col)
        if len(handles) < 2:
            raise StaleStoreError("collection 'docs': Error finding id")
        return "read"

    assert Services().read_collection(corpus_env, "docs", flaky) == "read"
    assert handles[0] is not handles[1]  # the second read ran on a reopened collection

    def always(col):
        raise StaleStoreError("collection 'docs': Error finding id")

    with pytest.raises(StaleStoreError, match="ask again when its ingestion is done"):
        Services().read_collection(corpus_env, "docs", always)
