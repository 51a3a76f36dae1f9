"""``rag trace show TRACE_ID`` (local span tree) and ``rag feedback TRACE_ID``."""

from __future__ import annotations

import argparse
import sys

from tools import tracing
from tools.config import Settings


def register(sub: argparse._SubParsersAction) -> list[argparse.ArgumentParser]:
    trace = sub.add_parser("trace", help="look at traces recorded by the local sink")
    trace_sub = trace.add_subparsers(dest="trace_command", required=True)
    show = trace_sub.add_parser("show", help="print a trace's span tree with timings")
    show.add_argument("trace_id")
    show.set_defaults(run=run_show)

    feedback = sub.add_parser("feedback", help="score an answer's trace (Langfuse score)")
    feedback.add_argument("trace_id")
    feedback.add_argument("--score", type=float, required=True, help="e.g. 1 good, 0 bad")
    feedback.add_argument("--comment")
    feedback.add_argument("--name", default="user_feedback")
    feedback.set_defaults(run=run_feedback)
    return [show, feedback]


def run_show(args: argparse.Namespace, settings: Settings) -> int:
    spans = tracing.load_trace(settings, args.trace_id)
    if not spans:
        print(
            f"rag trace show: no spans for {args.trace_id} in {tracing.spans_file(settings)} "
            "(traces are stored locally with tracing=local or tracing=langfuse)",
            file=sys.stderr,
        )
        return 1
    print("\n".join(tracing.render_tree(spans)))
    for row in tracing.load_scores(settings, args.trace_id):
        comment = f" ({row['comment']})" if row.get("comment") else ""
        print(f"score {row['name']} = {row['value']}{comment}")
    return 0


def run_feedback(args: argparse.Namespace, settings: Settings) -> int:
    if tracing.client(settings) is None:
        print(
            "rag feedback: tracing is off; set LANGFUSE_PUBLIC_KEY/LANGFUSE_SECRET_KEY "
            "(or tracing=local)",
            file=sys.stderr,
        )
        return 2
    tracing.score(settings, args.trace_id, args.name, args.score, args.comment)
    print(f"score {args.name}={args.score} sent for trace {args.trace_id}")
    return 0
