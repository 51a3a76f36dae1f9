"""Does the evidence still hold the answer? The evidence selector (tools/retrieval/evidence.py) on
dev questions, without any LLM.

    .venv/bin/python bench/bench_evidence.py [--corpus newdocs|docs] [--set git]
        [--split dev] [--json]

``newdocs``: one set of lab/data/newdocs (``--set``: the name of its folder of pages)
and its answerable questions; the evidence holds the answer when it holds a gold answer.
``docs``: docs_corpus and the questions of the verifier benchmark's right documentation
pairs; the evidence holds the answer when it holds every number, name and code token of
the pair's right answer (tools/text.missing_facts), so a pair whose answer has none
is left out. The corpus
is ingested with the default settings and every question retrieved as the graph
retrieves it (k passages). Reported per selector setting (keyword weight, character
budget, score ratio: 0 for a fixed budget, or ``evidence_score_ratio`` past
evidence.FLOOR_CHARS): the share of questions whose evidence still holds the answer,
beside the share whose whole passages hold it (the ceiling), and the characters the generator would
read, against the whole passages'.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import tempfile
from pathlib import Path

from evaluation.splits import side_of
from evaluation.squad import (
    NEWDOCS,
    contains_answer,
    load_questions,
    newdocs_questions,
    newdocs_sets,
)
from evaluation.verifier import docs_items
from ingest.pipeline import IngestOptions, Ingestor
from tools.config import load_settings
from tools.models.factory import embeddings
from tools.retrieval import evidence
from tools.retrieval.hybrid import make_retriever
from tools.store.collection import Collection
from tools.text import missing_facts

ROOT = Path(__file__).resolve().parents[1]
WEIGHTS = (0.0, 0.25, 0.5, 1.0)
BUDGETS = (600, 900, 1200, 1600)
# 0 (the default): a fixed budget; above it, evidence_score_ratio past evidence.FLOOR_CHARS
RATIOS = (0.0, evidence.SCORE_RATIO)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", choices=("newdocs", "docs"), default="newdocs")
    parser.add_argument("--set", default="git", choices=newdocs_sets(), help="a newdocs set")
    parser.add_argument("--split", choices=("dev", "test"), default="dev")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.corpus == "newdocs":
        folder = NEWDOCS / args.set
        questions = [
            (q.question, q.answers)
            for q in load_questions(newdocs_questions(args.set))
            if q.split == args.split and q.answerable
        ]

        def holds(text: str, answers) -> bool:
            return contains_answer(text, answers)
    else:
        folder = ROOT / "docs_corpus"
        questions = [
            (i.question, i.answer)
            for i in docs_items()
            if i.right
            and side_of("verifier_docs", i.group) == args.split
            and missing_facts(i.answer, "")
        ]

        def holds(text: str, answer) -> bool:
            return not missing_facts(answer, text)

    settings = load_settings({"data_dir": tempfile.mkdtemp(prefix="bench-evidence-")})
    embedder = embeddings(settings)
    collection = Collection(settings, create=True)
    Ingestor(settings, collection, embedder, IngestOptions(), progress=False).run([folder])
    retriever = make_retriever(collection, embedder, settings)
    retrieved = []
    for question, answers in questions:
        passages, _ = retriever.retrieve([question])
        passages = passages[: settings.k]
        units = evidence.units_of(passages)
        retrieved.append((question, answers, passages, units))
    ceiling = [holds(" ".join(p.text for p in ps), gold) for _, gold, ps, _ in retrieved]
    whole_chars = statistics.median(sum(len(p.text) for p in ps) for _, _, ps, _ in retrieved)
    rows = []
    neighbours, floor = settings.evidence_neighbours, evidence.FLOOR_CHARS
    for weight in WEIGHTS:
        scored = [
            evidence.score_units(units, ps, [question], embedder, weight)
            for question, _, ps, units in retrieved
        ]
        for budget, ratio in itertools.product(BUDGETS, RATIOS):
            held, chars = [], []
            for (_, gold, ps, units), scores in zip(retrieved, scored, strict=True):
                kept = evidence.select(ps, units, scores, budget, neighbours, floor, ratio)
                text = " ".join(p.text for p in kept)
                held.append(holds(text, gold))
                chars.append(len(text))
            rows.append(
                {
                    "keyword_weight": weight,
                    "budget_chars": budget,
                    "score_ratio": ratio,
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
        "corpus": args.corpus if args.corpus == "docs" else f"newdocs/{args.set}",
        "split": args.split,
        "questions": len(questions),
        "answer_in_passages": round(sum(ceiling) / len(ceiling), 3),
        "passages_median_chars": whole_chars,
        "k": settings.k,
        "rows": rows,
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(
        f"{result['corpus']} {args.split}: {len(questions)} answerable questions; the answer is "
        f"in the {settings.k} whole passages for {result['answer_in_passages']:.0%} "
        f"(median {whole_chars:.0f} characters)"
    )
    header = ("keyword weight", "budget", "score ratio", "answer in evidence", "of those", "chars")
    print("| " + " | ".join(header) + " |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['keyword_weight']} | {r['budget_chars']} | {r['score_ratio']} "
            f"| {r['answer_in_evidence']:.0%} "
            f"| {r['of_those_in_passages']:.0%} | {r['median_chars']:.0f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
