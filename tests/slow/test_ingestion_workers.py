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
FILES = 160  # enough that both workers are still at work when one is killed


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


def _versions(url: str) -> int:
    """How many workers have committed files (each worker's commits are a version)."""
    with psycopg.connect(url) as conn:
        if conn.execute("SELECT to_regclass('rag_notes.version_files')").fetchone()[0] is None:
            return 0
        return conn.execute(
            "SELECT count(DISTINCT version) FROM rag_notes.version_files"
        ).fetchone()[0]


def _claimers(url: str) -> int:
    """How many workers hold file claims now (exclusive advisory locks; the collection's
    shared writer lock is a ShareLock)."""
    with psycopg.connect(url) as conn:
        return conn.execute(
            "SELECT count(DISTINCT pid) FROM pg_locks WHERE locktype = 'advisory' "
            "AND mode = 'ExclusiveLock' AND granted"
        ).fetchone()[0]


def test_two_workers_commit_every_file_once_even_when_one_is_killed(database_url, tmp_path):
    notes = tmp_path / "notes"
    notes.mkdir()
    for n in range(FILES):
        (notes / f"note{n:03d}.md").write_text(
            f"# Note {n}\n\nThe code word of note {n} is word{n * 7919 % 10007}. "
            + " ".join(f"Sentence {k} of note {n} says {k * n} about topic {k}." for k in range(6))
        )
    env = smollm2_env(tmp_path / "data", store="postgres", database_url=database_url)
    first = _worker(env, notes, tmp_path / "first.log")
    second = _worker(env, notes, tmp_path / "second.log")
    deadline = time.monotonic() + 300
    while not (_versions(database_url) == 2 and _claimers(database_url) == 2):
        assert time.monotonic() < deadline, (tmp_path / "second.log").read_text()[-2000:]
        time.sleep(0.05)  # both have committed files, and both hold claims on more
    os.kill(second.pid, signal.SIGKILL)  # mid-round: the files it claimed are not committed
    second.wait(timeout=30)
    assert first.wait(timeout=600) == 0, (tmp_path / "first.log").read_text()[-3000:]

    report = json.loads(
        (tmp_path / "first.log").read_text()[(tmp_path / "first.log").read_text().index("{") :]
    )
    commits = _commits(database_url)
    assert sorted(commits) == [f"notes/note{n:03d}.md" for n in range(FILES)], sorted(commits)
    assert set(commits.values()) == {1}, {f: c for f, c in commits.items() if c != 1}
    # the survivor committed the rest, the files the killed one held among them
    accounted = ("files_indexed", "files_unchanged", "files_by_other_workers")
    assert sum(report[k] for k in accounted) == FILES, report
    assert 0 < report["files_indexed"] < FILES, report

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
