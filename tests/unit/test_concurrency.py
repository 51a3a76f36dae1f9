"""Concurrent questions against one process, and ingestion while questions are answered."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from graph import build_graph, resources
from ingest.partition import PartitionOptions
from ingest.pipeline import IngestOptions, Ingestor
from tests.unit.conftest import EMB, PAGES
from tools.collection import Collection

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


# another process: `rag ingest` (or `--rebuild`) run from a shell while this one serves
OTHER_PROCESS = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {repo!r})
    from ingest.partition import PartitionOptions
    from ingest.pipeline import IngestOptions, Ingestor
    from tests.unit.conftest import EMB
    from tools.collection import Collection, drop_collection
    from tools.config import load_settings
    settings = load_settings()
    if {rebuild!r}:
        drop_collection(settings, "docs")
    col = Collection(settings, "docs", create=True)
    options = IngestOptions(partition=PartitionOptions("structure", 100, 0))
    Ingestor(settings, col, EMB, options, progress=False).run([{root!r}])
    """
)


def test_ingestion_and_rebuild_by_another_process_are_seen_by_a_serving_process(
    corpus_env, models, tmp_path
):
    """Embedded Chroma loads an index once per process: without reopening, a server
    never saw vectors another process added, and a rebuild broke every question."""
    models.chats["generator"].respond = cite_best_passage
    app = build_graph()

    def answer() -> str:
        out = app.invoke({"question": "How do I install the service?"}, {})
        assert out["error"] is None, out["error"]
        return out["answer"]

    def other_process(rebuild: bool) -> None:
        script = OTHER_PROCESS.format(repo=str(REPO), rebuild=rebuild, root=str(root))
        subprocess.run([sys.executable, "-c", script], check=True, cwd=REPO, timeout=120)

    root = tmp_path / "docs"
    assert answer() == "Run make demo to install the service [1]."
    (root / "install.md").write_text("# Install\n\nRun make setup to install the service.\n")
    other_process(rebuild=False)
    assert answer() == "Run make setup to install the service [1]."
    for page in root.iterdir():
        page.unlink()
    (root / "setup.md").write_text("# Setup\n\nRun make quick to install the service.\n")
    other_process(rebuild=True)
    assert answer() == "Run make quick to install the service [1]."


def test_own_commits_do_not_reopen_the_collection(corpus_env):
    """Reopening costs an index load: only another process's commits call for it."""
    handle = resources.collection(corpus_env, "docs")
    writer = Collection(corpus_env, "docs")
    options = IngestOptions(partition=PartitionOptions("structure", 100, 0))
    (corpus_env.data_dir.parent / "docs" / "install.md").write_text("# Install\n\nNew.\n")
    Ingestor(corpus_env, writer, EMB, options, progress=False).run(
        [corpus_env.data_dir.parent / "docs"]
    )
    assert resources.collection(corpus_env, "docs") is handle
