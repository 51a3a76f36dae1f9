"""``rag eval``: retrieval evaluation on test collections, CACM conversion, report comparison.

Each subcommand registers itself in ``SUBCOMMANDS``; ``rag eval`` is a parser with its own
subparsers, so more (``judgments``, ``answers``) slot in as further entries.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evaluation import answer_report
from evaluation.datasets import CACM_SOURCE, Dataset, convert_cacm, load_beir, load_files
from evaluation.lab import shown
from evaluation.report import (
    compare,
    compare_markdown,
    load_report,
    markdown_report,
    write_outputs,
)
from evaluation.retrieval import MODES, SWEEPABLE, evaluate_retrieval, parse_sweep
from evaluation.splits import SPLITS_DIR
from ingest.partition import SPLITTERS
from ingest.pipeline import IngestError
from rag_cli import (
    eval_answers_cmd,
    eval_guard_cmd,
    eval_judgments_cmd,
    eval_planted_cmd,
    eval_verifier_cmd,
)
from rag_cli.services import services_of
from tools.config import Settings, load_settings

# flag -> setting, for the retrieval and ingestion settings an evaluation may override
SETTING_FLAGS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "--k": ("k", int),
    "--fetch-k": ("fetch_k", int),
    "--distance-threshold": ("distance_threshold", float),
    "--hybrid-weight": ("hybrid_weight", float),
    "--retrieval-strategy": ("retrieval_strategy", str),
    "--window": ("window", int),
    "--dedup-similarity": ("dedup_similarity", float),
    "--splitter": ("splitter", str),
    "--chunk-size": ("chunk_size", int),
    "--overlap": ("chunk_overlap", int),
}


def _register_retrieval(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = sub.add_parser(
        "retrieval",
        help="rank every judged query with the service's retrieval and score the rankings",
        description="Ingests the corpus into a cached evaluation collection (reused while the "
        "corpus and ingestion settings are unchanged), ranks every judged query with the "
        "service's hybrid retrieval, and reports nDCG@10, MAP, MRR@10, Recall@10/100, hit "
        "rate and latency.",
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--beir", metavar="DIR", help="BEIR folder: corpus.jsonl, queries.jsonl, qrels/"
    )
    source.add_argument("--corpus", metavar="FILE", help="corpus JSONL (_id, title, text)")
    source.add_argument(
        "--judgments",
        metavar="FILE",
        help="a judgment list (rag eval judgments generate): hit@k and MRR@k on --collection",
    )
    parser.add_argument("--collection", help="collection the judgment list was made from")
    parser.add_argument(
        "--queries", metavar="FILE", help="queries JSONL (_id, text), with --corpus"
    )
    parser.add_argument("--qrels", metavar="FILE", help="qrels, BEIR TSV or TREC, with --corpus")
    parser.add_argument("--split", default="test", help="BEIR qrels split (default: test)")
    parser.add_argument(
        "--mode",
        action="append",
        choices=(*MODES, "all"),
        help="hybrid (default), bm25 or dense only; repeat it, or 'all' for the three",
    )
    parser.add_argument(
        "--sweep",
        action="append",
        default=[],
        metavar="KEY=V1,V2",
        help=f"one run per value (combined across keys); KEY is one of {', '.join(SWEEPABLE)}",
    )
    parser.add_argument(
        "--depth", type=int, help="documents ranked per query (default max(100, k))"
    )
    parser.add_argument("--limit", type=int, help="only the first N judged queries")
    parser.add_argument(
        "--topics",
        choices=("dev", "test"),
        help="CACM: only this half of the frozen topic split "
        f"({shown(SPLITS_DIR / 'cacm.json')}); sweeps run on dev, a release figure on test",
    )
    for flag, (name, kind) in SETTING_FLAGS.items():
        extra: dict[str, Any] = {"choices": SPLITTERS} if name == "splitter" else {}
        parser.add_argument(flag, dest=name, type=kind, help=f"overrides {name}", **extra)
    parser.add_argument(
        "--strategy", dest="retrieval_strategy", choices=("top_n", "window"), help=argparse.SUPPRESS
    )
    parser.add_argument("--out", metavar="DIR", help="write report.json, report.md and chart.png")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(run=run_retrieval)
    return parser


def _register_convert_cacm(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = sub.add_parser("convert-cacm", help="write the CACM test collection as a BEIR folder")
    parser.add_argument("out", metavar="OUT_DIR")
    parser.add_argument("--source", help=f"CACM files (default: eval_data_dir/{CACM_SOURCE})")
    parser.set_defaults(run=run_convert_cacm)
    return parser


def _register_compare(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = sub.add_parser(
        "compare", help="two reports (retrieval or answers) side by side, per-query wins"
    )
    parser.add_argument("a", metavar="A.json")
    parser.add_argument("b", metavar="B.json")
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON")
    parser.set_defaults(run=run_compare)
    return parser


SUBCOMMANDS = (
    _register_retrieval,
    eval_judgments_cmd.register,
    eval_answers_cmd.register,
    eval_verifier_cmd.register,
    eval_guard_cmd.register,
    eval_planted_cmd.register,
    _register_convert_cacm,
    _register_compare,
)


def register(sub: argparse._SubParsersAction) -> list[argparse.ArgumentParser]:
    parser = sub.add_parser("eval", help="evaluate retrieval and answer quality")
    eval_sub = parser.add_subparsers(dest="eval_command", required=True, metavar="COMMAND")
    return [add(eval_sub) for add in SUBCOMMANDS]


def _dataset(args: argparse.Namespace) -> Dataset:
    if args.beir:
        if args.queries or args.qrels:
            raise ValueError("--queries and --qrels go with --corpus, not --beir")
        return load_beir(Path(args.beir), args.split)
    if not (args.queries and args.qrels):
        raise ValueError("--corpus needs --queries and --qrels")
    return load_files(Path(args.corpus), Path(args.queries), Path(args.qrels))


def run_retrieval(args: argparse.Namespace, settings: Settings) -> int:
    settings = load_settings(
        {name: getattr(args, name) for name, _ in SETTING_FLAGS.values()},
        base=settings,
        source="command line",
    )
    if args.judgments:
        return eval_judgments_cmd.run_score(args, settings)
    if args.collection:
        raise ValueError("--collection goes with --judgments; a test collection is ingested")
    modes = MODES if "all" in (args.mode or []) else tuple(dict.fromkeys(args.mode or ["hybrid"]))
    if args.depth is not None and not 10 <= args.depth <= 500:
        raise ValueError("--depth must be between 10 and 500 (fetch_k's range)")
    if args.limit is not None and args.limit < 1:
        raise ValueError("--limit must be at least 1")
    dataset = _dataset(args)
    sweep = parse_sweep(args.sweep)
    show = not args.json

    def finished(run: dict[str, Any]) -> None:
        m = run["metrics"]
        print(
            f"{run['label']}: nDCG@10 {m['ndcg@10']:.3f}, MAP {m['map']:.3f}, "
            f"p50 {run['latency']['p50_ms']:.0f} ms",
            file=sys.stderr,
        )

    try:
        report = evaluate_retrieval(
            dataset,
            settings,
            services_of(args).embedder(settings),
            modes=modes,
            sweep=sweep,
            depth=args.depth,
            limit=args.limit,
            topics=args.topics,
            progress=show,
            on_run=finished if show else None,
        )
    except IngestError as exc:
        print(f"rag eval: error: {exc}", file=sys.stderr)
        return 1
    if args.out:
        written = write_outputs(report, Path(args.out))
        if show:
            print("wrote " + ", ".join(str(p) for p in written), file=sys.stderr)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(markdown_report(report, chart=None))
    return 0


def run_convert_cacm(args: argparse.Namespace, settings: Settings) -> int:
    source = Path(args.source) if args.source else settings.eval_data(CACM_SOURCE, "--source")
    report = convert_cacm(source, Path(args.out))
    print(
        f"wrote {args.out}: {report.documents} documents, {report.queries} queries "
        f"({report.judged_queries} with judgments), {report.judgments} judgments"
    )
    return 0


def run_compare(args: argparse.Namespace, settings: Settings) -> int:
    a, b = load_report(Path(args.a)), load_report(Path(args.b))
    if a["kind"] != b["kind"]:
        raise ValueError(f"cannot compare a {a['kind']} report with a {b['kind']} report")
    if a["kind"] == "answers":
        result = answer_report.compare(a, b)
        text = answer_report.compare_markdown(result, (args.a, args.b))
    else:
        result = compare(a, b)
        text = compare_markdown(result, {**a["queries"], **b["queries"]}, (args.a, args.b))
    print(json.dumps(result, indent=2) if args.json else text)
    return 0
