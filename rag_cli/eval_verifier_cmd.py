"""``rag eval verifier``: the verifier as a classifier, on labelled right and wrong answers."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings

from evaluation import verifier as bench
from evaluation.splits import provenance
from evaluation.squad import SQUAD_DEV
from graph.checks.pipeline import verify_answer
from rag_cli.services import services_of
from tools import verifier_thresholds
from tools.config import Settings
from tools.errors import ModelError
from tools.retrieval.evidence import GAP, evidence_for
from tools.retrieval.hybrid import Passage


def register(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = sub.add_parser(
        "verifier",
        help="measure the verifier: precision of 'verified' on labelled right/wrong answers",
        description="Runs the service's verifier (graph/checks/, the verifier_model) "
        "on the benchmark's items of one split (docs_corpus pairs, plus SQuAD 2.0 with "
        "--squad) and reports precision and recall of the verified label, accuracy, ROC AUC "
        "of the confidence and the confusion matrix, overall, per source and per category. "
        "--calibrate (dev split only) chooses, per answer form (sentence, phrase), of the "
        "thresholds reaching 95% precision on every source (evaluation.verifier.TARGETS), "
        "the one whose precision has the highest lower 95% confidence bound, and records "
        "them for the verifier_model and the confidence it was read by in "
        "<data_dir>/verifier_thresholds.json, where answering finds them.",
    )
    parser.add_argument("--split", choices=bench.SPLITS, default="dev")
    parser.add_argument(
        "--squad",
        nargs="?",
        const="",
        metavar="FILE",
        help=f"add SQuAD 2.0 items (default file: eval_data_dir/{SQUAD_DEV})",
    )
    parser.add_argument("--squad-per-split", type=int, default=100)
    parser.add_argument(
        "--seed", type=int, default=0, help="SQuAD sample seed, inside the frozen split"
    )
    parser.add_argument("--limit", type=int, help="only the first N items (a quick look)")
    parser.add_argument("--threshold", type=float, help="default: verify_threshold")
    parser.add_argument("--phrase-threshold", type=float, help="default: verify_threshold_phrase")
    parser.add_argument("--calibrate", action="store_true", help="choose a threshold (dev)")
    parser.add_argument("--out", metavar="FILE", help="write every item's record (JSON)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(run=run_verifier)
    return parser


def passages_read(
    item: bench.VerifierItem, settings: Settings, embedder: Embeddings
) -> list[dict[str, Any]]:
    """The item's passages as the verifier reads them in the graph: with
    evidence=sentences, each cut to the evidence selected for the question. Each keeps
    its number: the item's answer was written citing them in the item's order, while
    the graph's selector orders passages by their best sentence and leaves out those
    with none (the generator cites after that). A passage left out reads "[...]"."""
    passages = [
        Passage(p["text"], p["source"], [str(n)], 0.0, 0.0) for n, p in enumerate(item.passages)
    ]
    if settings.evidence == "sentences":
        kept, _ = evidence_for(
            passages,
            [item.question],
            embedder,
            settings.evidence_chars,
            settings.evidence_neighbours,
            settings.evidence_score_ratio,
        )
        cut = {p.chunk_ids[0]: p for p in kept}
        passages = [cut.get(p.chunk_ids[0], replace(p, text=GAP.strip())) for p in passages]
    return [asdict(p) for p in passages]


def run_verifier(args: argparse.Namespace, settings: Settings) -> int:
    if args.calibrate and args.split != "dev":
        print("rag eval verifier: error: calibrate on --split dev only", file=sys.stderr)
        return 2
    measured_with = provenance("verifier_docs", "squad")  # the code as the run starts
    squad = (
        None
        if args.squad is None
        else Path(args.squad)
        if args.squad
        else settings.eval_data(SQUAD_DEV, "--squad")
    )
    items = bench.load_items(
        squad, split=args.split, seed=args.seed, squad_per_split=args.squad_per_split
    )[: args.limit]
    services = services_of(args)
    judge = services.judge(settings)

    def check(item: bench.VerifierItem) -> dict[str, Any]:
        try:
            return verify_answer(
                judge,
                item.question,
                item.answer,
                passages_read(item, settings, services.embedder(settings)),
                # every item gets every check: the report applies the thresholds
                threshold=0.0,
                phrase_threshold=0.0,
                extractive=item.source == "squad",  # SQuAD items are short-style answers
            )
        except ModelError as exc:  # counted as not verified, and shown
            return {"confidence": None, "error": str(exc)}

    def progress(n: int, record: dict[str, Any]) -> None:
        print(
            f"[{n}/{len(items)}] {record['source']}/{record['category']} "
            f"right={record['right']} confidence={record['confidence']}",
            file=sys.stderr,
            flush=True,
        )

    records = bench.run(items, check, progress=progress)
    thresholds = {
        "sentence": settings.verify_threshold if args.threshold is None else args.threshold,
        "phrase": settings.verify_threshold_phrase
        if args.phrase_threshold is None
        else args.phrase_threshold,
    }
    method = judge.method_in_use
    recorded_in = None
    if args.calibrate:
        thresholds = bench.choose_thresholds(records)
        recorded_in = str(
            verifier_thresholds.record(
                settings, method, thresholds, split=args.split, **measured_with
            )
        )
    result = {
        "verifier": {
            "model": settings.verifier_model,
            "confidence": method,
            "samples": settings.verifier_samples if method == "sampled" else None,
            "thresholds_recorded_in": recorded_in,
        },
        "split": args.split,
        "seed": args.seed,
        "provenance": measured_with,
        **bench.report(records, thresholds),
    }
    if args.out:
        Path(args.out).write_text(json.dumps({**result, "records": records}, indent=1))
    print(json.dumps(result, indent=1) if args.json else bench.markdown(result))
    return 0
