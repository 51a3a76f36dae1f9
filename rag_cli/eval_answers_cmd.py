"""``rag eval answers``: the full graph over SQuAD 2.0 or any question set, scored."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import sys
from pathlib import Path
from typing import Any

from evaluation import answer_report
from evaluation.answers import evaluate_answers, summarize
from evaluation.datasets import Dataset
from evaluation.page_removed import RemovedPage, build_collection, removed_pages
from evaluation.retrieval import prepare_collection
from evaluation.splits import SPLITS, provenance
from evaluation.squad import SQUAD_DEV, QAItem, load_questions, load_squad, write_corpus
from graph.services import Services
from rag_cli.services import services_of
from tools.config import Settings, load_settings, masked
from tools.models.factory import chat_model, embeddings
from tools.models.recording import recording, replaying
from tools.store.collection import Collection


def register(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = sub.add_parser(
        "answers",
        help="answer a question set with the full graph and score the answers",
        description="SQuAD 2.0 (--squad): its paragraphs become a cached evaluation "
        "collection and a seeded sample of answerable and unanswerable questions is asked; "
        "reports exact match and token F1 on answerable ones, correct abstention on "
        "unanswerable ones. Any question set (--questions JSONL with 'question' and optional "
        "'answers') is asked of --collection. Both report the verifier's grounded rate and "
        "latency; --judge adds the LLM judge's completeness and contextual accuracy (1-5).",
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--squad",
        nargs="?",
        const="",
        metavar="FILE",
        help=f"a SQuAD 2.0 JSON file (default: eval_data_dir/{SQUAD_DEV})",
    )
    source.add_argument("--questions", metavar="FILE", help="JSONL question set")
    parser.add_argument("--collection", help="collection to ask (with --questions)")
    parser.add_argument(
        "--without-answer-page",
        metavar="DIR",
        help="with --questions: ask each answerable question of DIR's pages ingested without "
        "the page its 'source' names (collections <set>-without-<page>, built once), so that "
        "every passage is related and none answers: any verified answer is wrong "
        "(evaluation/page_removed.py)",
    )
    parser.add_argument(
        "--limit", type=int, default=100, help="questions to ask (SQuAD: half answerable)"
    )
    parser.add_argument("--sample-seed", type=int, default=0, help="seed of the sample")
    parser.add_argument(
        "--split",
        choices=SPLITS,
        default="dev",
        help="the frozen half to draw from: --squad's articles (evaluation/splits.py), or a "
        "--questions set's 'split' field; test is for a release figure, run once",
    )
    parser.add_argument("--judge", action="store_true", help="LLM-judged quality scores")
    parser.add_argument(
        "--answer-style",
        choices=("full", "short"),
        help="default: short for --squad (SQuAD scores short spans), else the setting",
    )
    parser.add_argument("--k", type=int, help="overrides k")
    parser.add_argument("--out", metavar="DIR", help="write answers.json, answers.md, answers.png")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--record",
        metavar="FILE",
        help="append every model call and its reply to FILE (JSON lines); with --replay, "
        "only the calls the recording lacks, which then go to the models",
    )
    parser.add_argument(
        "--replay",
        metavar="FILE",
        help="answer every model call from a --record FILE instead of the models: the same "
        "replies through other code; a call it lacks fails the item (with --record, it is "
        "made and recorded)",
    )
    parser.set_defaults(run=run_answers)
    return parser


def _squad(args: argparse.Namespace, settings: Settings) -> tuple[list[QAItem], str, str]:
    if args.collection:
        raise ValueError("--collection goes with --questions; --squad builds its own")
    path = Path(args.squad) if args.squad else settings.eval_data(SQUAD_DEV, "--squad")
    answerable = args.limit // 2
    sample = load_squad(
        path,
        answerable=answerable,
        unanswerable=args.limit - answerable,
        seed=args.sample_seed,
        split=args.split,
    )
    folder = settings.data_dir / "eval" / "squad"
    corpus = write_corpus(sample, folder / f"corpus-{args.split}.jsonl")
    dataset = Dataset(f"{path.stem}-{args.split}", corpus, {}, {})
    collection, info = prepare_collection(settings, dataset, embeddings(settings), progress=True)
    collection.close()
    print(
        f"collection {info['name']}: {info['documents']} paragraphs, "
        + ("reused" if info["reused"] else f"ingested in {info['seconds']} s"),
        file=sys.stderr,
    )
    name = f"SQuAD 2.0 ({path.name}, {args.split} articles, seed {args.sample_seed})"
    return sample.items, info["name"], name


def _services(args: argparse.Namespace) -> Services:
    """The caller's services, or ones whose chat models record or replay (the embedder
    is the real one either way: it is deterministic). Both: replayed, and what the
    recording lacks is asked of the models and recorded."""
    live = recording(chat_model, Path(args.record)) if args.record else None
    if args.replay:
        return Services(chat=replaying(Path(args.replay), fallback=live))
    return Services(chat=live) if live else services_of(args)


def run_answers(args: argparse.Namespace, settings: Settings) -> int:
    if args.limit < 1:
        raise ValueError("--limit must be at least 1")
    measured_with = provenance("squad")  # the code as the run starts
    if args.without_answer_page:
        return _page_removed(args, settings, measured_with)
    if args.squad is not None:
        items, collection, dataset = _squad(args, settings)
        style = args.answer_style or "short"
    else:
        items = load_questions(Path(args.questions))
        if any(item.split for item in items):  # a set with its frozen split: one side only
            items = [item for item in items if item.split == args.split]
        if len(items) > args.limit:
            items = random.Random(args.sample_seed).sample(items, args.limit)
        collection = args.collection or settings.collection
        Collection(settings, collection).close()  # a missing collection fails here, once
        dataset, style = Path(args.questions).name, args.answer_style or settings.answer_style
    overrides: dict[str, Any] = {"collection": collection, "answer_style": style, "k": args.k}
    settings = load_settings(overrides, base=settings, source="command line")
    log = _item_log(args)
    version = _version(settings, collection)
    report = evaluate_answers(settings, items, judge=args.judge, log=log, services=_services(args))
    report |= {
        "dataset": dataset,
        "collection": collection,
        "collection_version": version,
        "split": args.split if args.squad is not None or items[0].split else None,
    }
    return _written(args, settings, report, measured_with)


def _item_log(args: argparse.Namespace) -> Path | None:
    """The file each item's record lands in as soon as it is scored (``--out``), emptied
    first: an interrupted run keeps what it measured."""
    if not args.out:
        return None
    Path(args.out).mkdir(parents=True, exist_ok=True)
    log = Path(args.out) / "answers.items.jsonl"
    log.unlink(missing_ok=True)
    return log


def _version(settings: Settings, name: str) -> int | None:
    """The collection's version as it is answered from (as_of, or the latest)."""
    collection = Collection(settings, name)
    try:
        return collection.version
    finally:
        collection.close()


def _written(
    args: argparse.Namespace, settings: Settings, report: dict[str, Any], measured_with: Any
) -> int:
    report |= {
        "created": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "settings": masked(settings),  # secrets shown only as set (***), never their values
        "provenance": measured_with,
    }
    if args.out:
        for path in answer_report.write_outputs(report, Path(args.out)):
            print(f"wrote {path}", file=sys.stderr)
    print(json.dumps(report, indent=2) if args.json else answer_report.markdown(report, None))
    return 0


def _page_removed(args: argparse.Namespace, settings: Settings, measured_with: Any) -> int:
    """Each answerable question of the split asked of its set without its answer page."""
    if not args.questions:
        raise ValueError("--without-answer-page goes with --questions (the set's questions)")
    folder = Path(args.without_answer_page)
    if not folder.is_dir():
        raise ValueError(f"--without-answer-page: {folder} is not a folder of pages")
    groups = removed_pages(Path(args.questions), folder, args.split, args.collection)
    wanted = sum(len(g.items) for g in groups)
    if wanted > args.limit:  # a seeded sample of questions, each still asked of its own
        keep = {
            i.id
            for i in random.Random(args.sample_seed).sample(
                [i for g in groups for i in g.items], args.limit
            )
        }
        groups = [g for g in groups if any(i.id in keep for i in g.items)]
        groups = [
            RemovedPage(g.page, g.collection, tuple(i for i in g.items if i.id in keep))
            for g in groups
        ]
    services = _services(args)
    log = _item_log(args)
    records: list[dict[str, Any]] = []
    asked: dict[str, int | None] = {}
    style = args.answer_style or settings.answer_style
    for group in groups:
        built = build_collection(settings, folder, group, embeddings(settings))
        print(
            f"collection {group.collection}: {built['chunks']} chunks of {built['files']} "
            f"files, without {group.page}",
            file=sys.stderr,
        )
        scoped = load_settings(
            {"collection": group.collection, "answer_style": style, "k": args.k},
            base=settings,
            source="command line",
        )
        part = evaluate_answers(scoped, group.items, judge=args.judge, log=log, services=services)
        for record in part["items"]:
            record |= {"without": group.page, "collection": group.collection}
        records += part["items"]
        asked[group.collection] = _version(scoped, group.collection)
    report = {
        "kind": "answers",
        "run_id": part["run_id"],
        "prompts": part["prompts"],
        "summary": summarize(records),
        "items": records,
        "dataset": f"{Path(args.questions).name}, answer page removed",
        "collection": f"{args.collection or folder.name}-without-<page>",
        "collections": asked,
        "split": args.split,
    }
    settings = load_settings(
        {"answer_style": style, "k": args.k}, base=settings, source="command line"
    )
    return _written(args, settings, report, measured_with)
