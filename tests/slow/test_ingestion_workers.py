"""Two `rag ingest` workers on one collection (store = postgres, a real PostgreSQL): they
share its files, each committed exactly once, and when one is killed (kill -9) the
other takes up the files it held. The real local embedding model embeds."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import psycopg
import pytest

from bench.local_service import RAG, smollm2_env

pytestmark = pytest.mark.slow
FILES = 48


def _worker(env: dict[str, str], folder, log) -> subprocess.Popen:
    return subprocess.Popen(
        [RAG, "ingest", str(folder), "--collection", "notes", "--json"],
        env=env,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )


def _commits(url: str) -> dict[str, int]:
    """How many times each file was committed (a row per version that changed it)."""
    with psycopg.connect(url) as conn:
        if conn.execute("SELECT to_regclass('rag_notes.version_files')").fetchone()[0] is None:
            return {}
        rows = conn.execute("SELECT file, count(*) FROM rag_notes.version_files GROUP BY file")
        return dict(rows.fetchall())


def test_two_workers_commit_every_file_once_even_when_one_is_killed(database_url, tmp_path):
    notes = tmp_path / "notes"
    notes.mkdir()
    for n in range(FILES):
        (notes / f"note{n:02d}.md").write_text(
            f"# Note {n}\n\nThe code word of note {n} is word{n * 7919 % 10007}. "
            + " ".join(f"Sentence {k} of note {n} says {k * n} about topic {k}." for k in range(6))
        )
    env = smollm2_env(tmp_path / "data", store="postgres", database_url=database_url)
    first = _worker(env, notes, tmp_path / "first.log")
    second = _worker(env, notes, tmp_path / "second.log")
    deadline = time.monotonic() + 300
    while not _commits(database_url) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _commits(database_url), (tmp_path / "second.log").read_text()[-2000:]
    os.kill(second.pid, signal.SIGKILL)  # mid-run: its claimed files are not committed
    second.wait(timeout=30)
    assert first.wait(timeout=600) == 0, (tmp_path / "first.log").read_text()[-3000:]

    commits = _commits(database_url)
    assert sorted(commits) == sorted(f"{notes}/note{n:02d}.md" for n in range(FILES)) or (
        sorted(commits) == sorted(f"note{n:02d}.md" for n in range(FILES))
    ), sorted(commits)[:5]
    assert set(commits.values()) == {1}, {f: c for f, c in commits.items() if c != 1}

    # a third run finds nothing to do: every file is in the collection as it is on disk
    again = subprocess.run(
        [RAG, "ingest", str(notes), "--collection", "notes", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert again.returncode == 0, again.stderr
    report = json.loads(again.stdout)
    assert report["files_indexed"] == 0 and report["files_unchanged"] == FILES, report
