"""Time to the first answer token and to the whole answer, per ``llm_threads``, on an idle
machine and beside one busy process, in one run.

    .venv/bin/python bench/bench_ttft.py [--threads 0,1,2] [--questions 2] [--json]

Each setting answers the same questions through the whole graph (query generation,
retrieval, generation, verification) on docs_corpus with the default local models,
after one warm-up question. Reported per setting, as medians: time to the first draft
token the generator streams (what `rag ask` shows first on a terminal), the part of it after retrieval
(prompt prefill and the first token), and the whole answer; and each as a ratio to
the default setting (``llm_threads=0``, all cores) on the idle machine, measured in
the same run. The busy process is a pure-Python loop: one core taken, as by another
user's job.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from graph import build_graph, config_for
from graph.draft import DRAFT
from ingest.pipeline import IngestOptions, Ingestor
from tools.collection import Collection
from tools.config import load_settings
from tools.models import embeddings

CORPUS = Path(__file__).resolve().parents[1] / "docs_corpus"
WARM_UP = "What does rag doctor do?"
QUESTIONS = [
    "Which setting controls how long a model call may take?",
    "How do I see the trace of an answer?",
    "What does rag ingest do with a file it cannot read?",
]


def timed_answer(app, question: str, config) -> dict[str, float]:
    started = time.perf_counter()
    generating = first = None
    for mode, chunk in app.stream({"question": question}, config, stream_mode=["updates", "custom"]):
        now = time.perf_counter() - started
        if mode == "updates" and ("retrieve" in chunk or "rerank" in chunk):
            generating = now
        elif mode == "custom" and chunk.get("kind") == DRAFT and first is None:
            first = now
    whole = time.perf_counter() - started
    first = whole if first is None else first  # an abstention streams nothing
    return {
        "first_token_s": first,
        "after_retrieval_s": first - (generating or 0),
        "whole_s": whole,
    }


def busy() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", default="0,1,2")
    parser.add_argument("--questions", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    questions = QUESTIONS[: args.questions]
    data = Path(tempfile.mkdtemp(prefix="bench-ttft-"))
    settings = load_settings({"data_dir": data})
    Ingestor(
        settings,
        Collection(settings, create=True),
        embeddings(settings),
        IngestOptions(),
        progress=False,
    ).run([CORPUS])
    app = build_graph()
    rows = []
    for load in ("idle", "busy"):
        for threads in (int(t) for t in args.threads.split(",")):
            config = config_for(data_dir=data, llm_threads=threads, llm_timeout_s=1800)
            burner = busy() if load == "busy" else None
            try:
                timed_answer(app, WARM_UP, config)
                runs = [timed_answer(app, q, config) for q in questions]
            finally:
                if burner:
                    burner.kill()
            row = {"load": load, "llm_threads": threads}
            for key in runs[0]:
                row[key] = round(statistics.median(r[key] for r in runs), 2)
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    base = next(r for r in rows if r["load"] == "idle" and r["llm_threads"] == 0)
    for row in rows:
        row["first_token_ratio"] = round(row["first_token_s"] / base["first_token_s"], 2)
        row["whole_ratio"] = round(row["whole_s"] / base["whole_s"], 2)
    if args.json:
        print(json.dumps({"cores": os.cpu_count(), "rows": rows}, indent=2))
        return 0
    print(
        f"cores: {os.cpu_count()}; medians over {len(questions)} questions; ratios to "
        "llm_threads=0 idle"
    )
    print(
        "| load | llm_threads | first token s | after retrieval s | whole s | first/base "
        "| whole/base |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['load']} | {r['llm_threads']} | {r['first_token_s']} | "
            f"{r['after_retrieval_s']} | {r['whole_s']} | {r['first_token_ratio']} | "
            f"{r['whole_ratio']} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
