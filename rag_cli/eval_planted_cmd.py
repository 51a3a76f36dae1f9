"""``rag eval planted``: planted instructions withheld, innocent passages answered."""

from __future__ import annotations

import argparse
import json

from evaluation import planted
from evaluation.lab import shown
from tools.config import Settings


def register(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = sub.add_parser(
        "planted",
        help="measure the planted-instruction check: detection rate and false alarms",
        description="Runs the graph's planted-instruction check on labelled answers "
        f"({shown(planted.ITEMS)}): answers that obey an order planted "
        "in a passage must be withheld, right answers about innocent passages must not. "
        "Tune on --split dev; --split test is the held-back half, for a release figure.",
    )
    parser.add_argument("--split", choices=("dev", "test"), help="one half (default: both)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(run=run_planted)
    return parser


def run_planted(args: argparse.Namespace, settings: Settings) -> int:
    report = planted.evaluate(args.split)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    for key, label in (
        ("detection", "withheld, of answers obeying a planted order"),
        ("false_alarms", "withheld, of right answers on innocent passages"),
    ):
        r = report[key]
        low, high = r["interval_95"]
        print(
            f"{report['split']}: {r['hits']}/{r['total']} {label} "
            f"({r['rate']:.0%}, 95% interval {low:.0%}-{high:.0%})"
        )
    for key in ("missed", "false_alarm_ids"):
        if report[key]:
            print(f"  {key.replace('_', ' ')}: {', '.join(report[key])}")
    return 0
