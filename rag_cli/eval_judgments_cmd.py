"""``rag eval judgments generate`` and the ``rag eval retrieval --judgments`` scorer."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from evaluation import judgments
from rag_cli.services import services_of
from tools.config import Settings
from tools.store.collection import Collection


def register(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = sub.add_parser(
        "judgments",
        help="make a judgment list: LLM-written questions per chunk of a collection",
    )
    actions = parser.add_subparsers(dest="judgments_command", required=True, metavar="ACTION")
    gen = actions.add_parser(
        "generate",
        help="write questions per chunk (JSONL with the source chunk id)",
        description="The judge model (judge_model) writes questions from chunks of the "
        "collection; score them with `rag eval retrieval --judgments FILE`.",
    )
    gen.add_argument("--collection", help="default: the collection setting")
    gen.add_argument("--out", required=True, metavar="FILE", help="JSONL to write")
    gen.add_argument("--per-chunk", type=int, default=1, choices=range(1, 6), metavar="1-5")
    gen.add_argument("--limit", type=int, help="a seeded sample of N chunks (default: all)")
    gen.add_argument("--sample-seed", type=int, default=0)
    gen.set_defaults(run=run_generate)
    return gen


def run_generate(args: argparse.Namespace, settings: Settings) -> int:
    collection = Collection(settings, args.collection)
    model = services_of(args).llm(settings, "judge")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    written = 0
    partial = out.with_name(out.name + ".partial")  # a crash never leaves a half list as FILE
    with partial.open("w", encoding="utf-8") as fh:
        for record in judgments.generate(
            settings,
            collection,
            model,
            per_chunk=args.per_chunk,
            limit=args.limit,
            seed=args.sample_seed,
        ):
            fh.write(json.dumps(record) + "\n")
            written += 1
    partial.replace(out)
    print(f"wrote {written} judgments to {out}", file=sys.stderr)
    return 0 if written else 1


def run_score(args: argparse.Namespace, settings: Settings) -> int:
    collection = Collection(settings, args.collection)
    records = judgments.load(Path(args.judgments))
    embedder = services_of(args).embedder(settings)
    report = judgments.score(settings, collection, embedder, records)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    k = report["k"]
    print(
        f"{report['evaluated']} judgments on '{report['collection']}' "
        f"({report['stale']} stale: their chunk is no longer in the collection): "
        f"hit@{k} {report[f'hit@{k}']}, MRR@{k} {report[f'mrr@{k}']}, "
        f"p50 {report['latency'].get('p50_ms', 0):.0f} ms"
    )
    for row in report["queries"]:
        if row["rank"] is None:
            print(f"  missed: {row['question']}  ({row['source']})")
    return 0
