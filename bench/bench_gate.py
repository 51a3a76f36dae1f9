"""The relevance gate, measured: how often does it throw away the passage that answers?

On the answerable docs_corpus questions of the verifier benchmark's dev split (each names
the file its answer comes from; the test split is never used to choose a setting) plus
paraphrased, follow-up and non-English questions, against
an ingested docs_corpus collection (``rag ingest docs_corpus`` first). Every candidate is
ranked once with no cut; each gate is then applied to that ranking. Reported per gate:

- false abstention: the answer's file is among the top 20 candidates, yet the gate
  keeps nothing (the service would say "the documents do not say");
- answer kept: the answer's file is among the k passages the generator would read.

    .venv/bin/python bench/bench_gate.py
"""

from __future__ import annotations

import json
from pathlib import Path

from evaluation.splits import side_of
from evaluation.verifier import docs_items
from tools.config import load_settings
from tools.models.factory import embeddings
from tools.retrieval.hybrid import make_retriever
from tools.store.collection import Collection

# questions a first-hour user asked (issue 22), with the file that answers each
EXTRA = [
    ("How do I run the server?", "server.md"),
    ("How do I protect the server with a key?", "server.md"),
    ("Comment changer le nombre de passages donnés au générateur ?", "configuration.md"),
    ("What does the verifier check?", "answering-and-verification.md"),
    ("where do traces go", "tracing.md"),
]
GATES = [  # (absolute floor, margin over the closest candidate; None = no margin)
    (0.75, None),
    (0.9, None),
    (0.9, 0.1),
    (0.9, 0.15),
    (0.95, 0.15),
    (1.0, 0.2),
]


def main() -> None:
    settings = load_settings({"distance_threshold": 2.0})
    retriever = make_retriever(Collection(settings), embeddings(settings), settings)
    questions = {
        (i.question, Path(i.passages[0]["source"]).name)
        for i in docs_items()
        if i.right and side_of("verifier_docs", i.group) == "dev"
    }
    questions |= set(EXTRA)
    rows = []
    for question, gold in sorted(questions):
        passages, _ = retriever.retrieve([question])
        ranked = [(Path(p.source).name, p.distance) for p in passages[:20]]
        rows.append((question, gold, ranked))
    k = settings.k
    results = []
    for floor, margin in GATES:
        false_abstain = kept_gold = reachable = 0
        for _, gold, ranked in rows:
            closest = min((d for _, d in ranked), default=2.0)
            limit = floor if margin is None else min(floor, closest + margin)
            kept = [name for name, d in ranked if d <= limit][:k]
            in_top20 = gold in [name for name, _ in ranked]
            reachable += in_top20
            false_abstain += in_top20 and not kept
            kept_gold += gold in kept
        results.append(
            {
                "floor": floor,
                "margin": margin,
                "questions": len(rows),
                "false_abstention": round(false_abstain / max(reachable, 1), 3),
                "answer_kept": round(kept_gold / len(rows), 3),
            }
        )
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
