"""Ingestion workers on one collection (store = postgres): one worker against two, each
with one thread, on the same files, in one run.

    .venv/bin/python bench/bench_ingest_workers.py [--abstracts 600] [--per-file 4] [--json]

Writes CACM abstracts (../shared/data/cacm) into files of ``--per-file`` abstracts, starts
PostgreSQL (the wheel the tests use), and ingests them with the real local embedding
model into a fresh database: once with one `rag ingest` process, once with two started
together. Every process is held to one thread (OMP_NUM_THREADS=1 and the like), as two
workers on two machines of one core each would be. Reported: wall time from start to
the last worker's end, chunks per second, the ratio two/one, and that each file was
committed exactly once (the collection's version records).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script
from bench.local_service import RAG, LocalPostgres, smollm2_env

CACM = Path(__file__).resolve().parents[2] / "shared" / "data" / "cacm" / "cacm.json"  # ../shared
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}


def _write_files(folder: Path, abstracts: int, per_file: int) -> int:
    lines = CACM.read_text().splitlines()  # one JSON object per line
    texts = [json.loads(line)["contents"] for line in lines]
    texts = [t for t in texts if len(t) > 200][:abstracts]  # abstracts, not bare titles
    folder.mkdir(parents=True)
    for n in range(0, len(texts), per_file):
        part = texts[n : n + per_file]
        body = "\n\n".join(f"## Abstract {n + k}\n\n{t}" for k, t in enumerate(part))
        (folder / f"part{n // per_file:04d}.md").write_text(f"# Part {n // per_file}\n\n{body}\n")
    return len(texts)


def _ingest(workers: int, folder: Path, database_url: str, data: Path) -> dict:
    env = smollm2_env(data, store="postgres", database_url=database_url) | ONE_THREAD
    started = time.monotonic()
    procs = [
        subprocess.Popen(
            [RAG, "ingest", str(folder), "--collection", "cacm", "--json"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        for _ in range(workers)
    ]
    reports = []
    for proc in procs:
        out, _ = proc.communicate(timeout=3600)
        if proc.returncode != 0:
            raise SystemExit(f"a worker failed ({proc.returncode})")
        reports.append(json.loads(out))
    seconds = time.monotonic() - started
    with psycopg.connect(database_url) as conn:
        counts = conn.execute(
            "SELECT count(*) FROM rag_cacm.version_files GROUP BY file"
        ).fetchall()
    chunks = sum(r["chunks_added"] for r in reports)
    return {
        "workers": workers,
        "seconds": round(seconds, 1),
        "files": len(counts),
        "files_committed_once": all(c[0] == 1 for c in counts),
        "files_per_worker": [r["files_indexed"] for r in reports],
        "chunks": chunks,
        "chunks_per_s": round(chunks / seconds, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--abstracts", type=int, default=600)
    parser.add_argument("--per-file", type=int, default=4)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-ingest-workers-") as tmp:
        root = Path(tmp)
        abstracts = _write_files(root / "cacm", args.abstracts, args.per_file)
        postgres = LocalPostgres(root / "postgres")
        try:
            rows = [
                _ingest(n, root / "cacm", postgres.new_database(), root / f"data{n}")
                for n in (1, 2)
            ]
        finally:
            postgres.stop()
    report = {
        "abstracts": abstracts,
        "per_file": args.per_file,
        "rows": rows,
        "two_over_one_seconds": round(rows[1]["seconds"] / rows[0]["seconds"], 3),
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return
    for row in rows:
        print(json.dumps(row))
    print(f"two workers / one: {report['two_over_one_seconds']} of the time")


if __name__ == "__main__":
    main()
