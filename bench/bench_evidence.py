"""Does the evidence still hold the answer? The evidence selector (tools/evidence.py) on
the new-documents question set's dev half, without any LLM.

    .venv/bin/python bench/bench_evidence.py [--split dev] [--json]

git's documentation (evaluation/data/newdocs) is ingested with the default settings and
every answerable question retrieved as the graph retrieves it (k passages). Reported per
selector setting (keyword weight, character budget): the share of questions whose
evidence still holds a gold answer, beside the share whose whole passages hold one (the
ceiling), and the characters the generator would read, against the whole passages'.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

from evaluation.squad import contains_answer, load_questions
from ingest.pipeline import IngestOptions, Ingestor
from tools import evidence
from tools.collection import Collection
from tools.config import load_settings
from tools.models import embeddings
from tools.retrieval import make_retriever

NEWDOCS = Path(__file__).resolve().parents[1] / "evaluation" / "data" / "newdocs"
WEIGHTS = (0.0, 0.25, 0.5, 1.0)
BUDGETS = (600, 900, 1200, 1600)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=("dev", "test"), default="dev")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    items = [
        q
        for q in load_questions(NEWDOCS / "questions.jsonl")
        if q.split == args.split and q.answerable
    ]
    settings = load_settings({"data_dir": tempfile.mkdtemp(prefix="bench-evidence-")})
    embedder = embeddings(settings)
    collection = Collection(settings, create=True)
    Ingestor(settings, collection, embedder, IngestOptions(), progress=False).run([NEWDOCS / "git"])
    retriever = make_retriever(collection, embedder, settings)
    retrieved = []
    for item in items:
        passages, _ = retriever.retrieve([item.question])
        passages = passages[: settings.k]
        units = evidence.units_of(passages)
        retrieved.append((item, passages, units))
    ceiling = [contains_answer(" ".join(p.text for p in ps), it.answers) for it, ps, _ in retrieved]
    whole_chars = statistics.median(sum(len(p.text) for p in ps) for _, ps, _ in retrieved)
    rows = []
    for weight in WEIGHTS:
        scored = [
            evidence.score_units(units, ps, [it.question], embedder, weight)
            for it, ps, units in retrieved
        ]
        for budget in BUDGETS:
            held, chars = [], []
            for (it, ps, units), scores in zip(retrieved, scored, strict=True):
                kept = evidence.select(ps, units, scores, budget, settings.evidence_neighbours)
                text = " ".join(p.text for p in kept)
                held.append(contains_answer(text, it.answers))
                chars.append(len(text))
            rows.append(
                {
                    "keyword_weight": weight,
                    "budget_chars": budget,
                    "answer_in_evidence": round(sum(held) / len(held), 3),
                    "of_those_in_passages": round(
                        sum(h for h, c in zip(held, ceiling, strict=True) if c)
                        / max(1, sum(ceiling)),
                        3,
                    ),
                    "median_chars": statistics.median(chars),
                }
            )
    result = {
        "split": args.split,
        "questions": len(items),
        "answer_in_passages": round(sum(ceiling) / len(ceiling), 3),
        "passages_median_chars": whole_chars,
        "k": settings.k,
        "rows": rows,
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(
        f"{args.split}: {len(items)} answerable questions; a gold answer is in the "
        f"{settings.k} whole passages for {result['answer_in_passages']:.0%} "
        f"(median {whole_chars:.0f} characters)"
    )
    print("| keyword weight | budget | answer in evidence | of those in passages | chars |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['keyword_weight']} | {r['budget_chars']} | {r['answer_in_evidence']:.0%} "
            f"| {r['of_those_in_passages']:.0%} | {r['median_chars']:.0f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
