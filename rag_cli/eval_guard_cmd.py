"""``rag eval guard``: the topic guard as a classifier, on labelled questions."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from evaluation import guard as bench
from evaluation.lab import shown
from graph.guard import decide, nearest_distance
from rag_cli.services import services_of
from tools.config import Settings, load_settings
from tools.errors import ModelError


def register(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = sub.add_parser(
        "guard",
        help="measure the topic guard: precision and recall of refusing off-topic questions",
        description="Runs the topic guard on labelled questions "
        f"({shown(bench.GUARD_ITEMS)}: on-topic, off-topic, blocked and near "
        "misses) against a collection of this service's documentation (`rag ingest "
        "docs_corpus` first; `--set collection=NAME` picks another), with the domain and blocked "
        "topics the labels were written for, and reports precision and recall of "
        "refusing, on the dev and test halves and overall, accuracy per kind and the time "
        "a decision adds to each question.",
    )
    parser.add_argument(
        "--calibrate",
        action="store_true",
        help="also choose guard_max_distance on the dev half: the largest distance that "
        "still refuses 90%% of the questions to refuse",
    )
    parser.add_argument("--limit", type=int, help="only the first N questions")
    parser.add_argument("--out", metavar="FILE", help="write every question's record (JSON)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(run=run_guard)
    return parser


def run_guard(args: argparse.Namespace, settings: Settings) -> int:
    guarded = load_settings(
        {
            **settings.model_dump(),
            "guard": "refuse",
            "guard_domain": bench.DOMAIN,
            "guard_blocked": bench.BLOCKED,
        },
        environ={},
    )
    services = services_of(args)
    model = services.llm(guarded, "query")
    embedder = services.embedder(guarded)
    collection = services.collection(guarded, guarded.collection)
    items = bench.load()[: args.limit]

    def decide_one(question: str) -> dict[str, Any]:
        distance = nearest_distance(collection, embedder, question)
        try:
            return decide(model, guarded, question, distance)
        except ModelError as exc:  # counted as allowed, as the graph does, and shown
            return {"verdict": "allowed", "error": str(exc), "distance": distance}

    def progress(n: int, record: dict[str, Any]) -> None:
        print(
            f"[{n}/{len(items)}] {record['kind']}: {record['label']} -> "
            f"{record.get('verdict')} ({record['seconds']:.1f}s)",
            file=sys.stderr,
            flush=True,
        )

    records = bench.run(items, decide_one, progress)
    report = {
        **bench.score(records),
        "guard_max_distance": guarded.guard_max_distance,
        "collection": guarded.collection,
        "by_split": {
            split: bench.score([r for r in records if bench.split_of(r) == split])
            for split in bench.SPLITS
        },
    }
    if args.calibrate:
        report["calibrated_max_distance"] = bench.choose_distance(
            [r for r in records if bench.split_of(r) == "dev"]
        )
    if args.out:
        Path(args.out).write_text(json.dumps({**report, "records": records}, indent=1))
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    lat = report["latency"] or {}
    print(
        f"{report['items']} questions: refusal precision {report['refusal_precision']}, "
        f"recall {report['refusal_recall']} ({report['refused_but_allowed']} refused that "
        f"should be answered, {report['allowed_but_should_refuse']} answered that should be "
        f"refused), verdict accuracy {report['verdict_accuracy']}, {report['errors']} errors; "
        f"p50 {lat.get('p50_ms', 0) / 1000:.1f}s, p95 {lat.get('p95_ms', 0) / 1000:.1f}s a "
        "decision"
    )
    for split, row in report["by_split"].items():
        print(
            f"  {split} half ({row['items']}): refusal precision {row['refusal_precision']}, "
            f"recall {row['refusal_recall']}"
        )
    for kind, row in report["by_kind"].items():
        print(f"  {kind}: {row['right_decision']}/{row['items']} right decisions")
    if args.calibrate:
        print(f"guard_max_distance chosen on the dev half: {report['calibrated_max_distance']}")
    return 0
