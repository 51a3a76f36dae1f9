"""Time to the first answer token and to the whole answer, per value of one setting, on an
idle machine and beside one busy process, in one run.

    .venv/bin/python bench/bench_ttft.py [--vary evidence=passages,sentences]
        [--loads idle,busy] [--questions 8] [--json]

Each value answers the same questions through the whole graph (query generation,
retrieval, evidence, generation, verification) on docs_corpus with the default local
models, after one warm-up question (eight: over the first three alone, the whole-answer
ratio was 0.65, 0.63 and 0.53 in three runs on 2026-11-27, as one question's path through
verification moved the median). Reported per value, as medians: time to the first
draft token (what `rag ask` shows first on a terminal), the part of it after retrieval
(selecting evidence, also reported on its own, reading the prompt, writing the first
token), the whole answer, the prompt the generator read (characters of passages), and
each time as a ratio to the first value on the idle machine, measured in the same run.
The busy process is a pure-Python loop: one core taken, as by another user's job.
``--vary llm_threads=0,1,2`` measures threads the same way. A value may set other settings
with it, joined by ``+``: ``--vary evidence=passages,sentences,sentences+evidence_chars=600``.
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
from tools.config import load_settings
from tools.models.factory import embeddings
from tools.store.collection import Collection

CORPUS = Path(__file__).resolve().parents[1] / "docs_corpus"
WARM_UP = "What does rag doctor do?"
QUESTIONS = [
    "Which setting controls how long a model call may take?",
    "How do I see the trace of an answer?",
    "What does rag ingest do with a file it cannot read?",
    "Which command starts the local chat page?",
    "Which setting holds all persistent state such as Chroma vectors and saved conversations?",
    "What happens when no passage is within the distance threshold?",
    "How do I turn the topic guard's distance check off?",
    "Which store setting lets several servers share collections?",
]


def timed_answer(app, question: str, config) -> dict[str, float]:
    started = time.perf_counter()
    retrieved = first = None
    final: dict = {}
    for mode, chunk in app.stream(
        {"question": question}, config, stream_mode=["updates", "custom", "values"]
    ):
        now = time.perf_counter() - started
        if mode == "updates" and "retrieve" in chunk:
            retrieved = now
        elif mode == "custom" and chunk.get("kind") == DRAFT and first is None:
            first = now
        elif mode == "values":
            final = chunk
    whole = time.perf_counter() - started
    first = whole if first is None else first  # an abstention streams nothing
    return {
        "first_token_s": first,
        "after_retrieval_s": first - (retrieved or 0),
        "evidence_s": (final.get("timings") or {}).get("select_evidence", 0.0),
        "whole_s": whole,
        "prompt_chars": sum(len(p["text"]) for p in final.get("passages") or []),
        "verified": float(final.get("outcome") == "verified"),
    }


def busy() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vary", default="evidence=passages,sentences", metavar="NAME=V1,V2")
    parser.add_argument("--loads", default="idle,busy")
    parser.add_argument("--questions", type=int, default=len(QUESTIONS))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    name, _, values = args.vary.partition("=")
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
    for load in args.loads.split(","):
        for value in values.split(","):
            first, *others = value.split("+")
            also = dict(other.split("=", 1) for other in others)
            config = config_for(data_dir=data, llm_timeout_s=1800, **{name: first}, **also)
            burner = busy() if load == "busy" else None
            try:
                timed_answer(app, WARM_UP, config)
                runs = [timed_answer(app, q, config) for q in questions]
            finally:
                if burner:
                    burner.kill()
            row = {"load": load, name: value}
            for key in runs[0]:
                row[key] = round(statistics.median(r[key] for r in runs), 2)
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    base = rows[0]
    for row in rows:
        row["first_token_ratio"] = round(row["first_token_s"] / base["first_token_s"], 2)
        row["whole_ratio"] = round(row["whole_s"] / base["whole_s"], 2)
    if args.json:
        print(json.dumps({"cores": os.cpu_count(), "rows": rows}, indent=2))
        return 0
    print(
        f"cores: {os.cpu_count()}; medians over {len(questions)} questions; ratios to "
        f"{name}={base[name]} {base['load']}"
    )
    print(
        f"| load | {name} | first token s | after retrieval s | of it evidence s | whole s "
        "| prompt chars | first/base | whole/base |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['load']} | {r[name]} | {r['first_token_s']} | {r['after_retrieval_s']} | "
            f"{r['evidence_s']} | {r['whole_s']} | {r['prompt_chars']:.0f} | "
            f"{r['first_token_ratio']} | {r['whole_ratio']} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
