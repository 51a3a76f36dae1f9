"""``rag flags list`` and ``rag flags export``: the answers users flagged in `rag ui`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rag_ui.flags import flag_store
from tools.config import Settings


def register(sub: argparse._SubParsersAction) -> list[argparse.ArgumentParser]:
    flags = sub.add_parser("flags", help="answers flagged in `rag ui`, for review")
    flags_sub = flags.add_subparsers(dest="flags_command", required=True)
    listing = flags_sub.add_parser("list", help="the flags, oldest first")
    listing.add_argument("--json", action="store_true", help="every flag with its exchange")
    listing.add_argument("--limit", type=int, help="only the last N flags")
    listing.set_defaults(run=run_list)
    export = flags_sub.add_parser("export", help="every flag as JSON Lines")
    export.add_argument("--out", type=Path, help="write to this file (default: stdout)")
    export.set_defaults(run=run_export)
    return [listing, export]


def _one_line(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def run_list(args: argparse.Namespace, settings: Settings) -> int:
    if args.limit is not None and args.limit < 1:
        raise ValueError("--limit must be at least 1")
    flags = flag_store(settings).list(args.limit)
    if args.json:
        print(json.dumps(flags, indent=2, ensure_ascii=False))
        return 0
    if not flags:
        print(f"no flags in {flag_store(settings).where}")
        return 0
    for flag in flags:
        verdict = flag["exchange"].get("verdict") or {}
        print(
            f"#{flag['id']}  {flag['created_at']}  trace={flag['trace_id'] or '-'}  "
            f"grounded={verdict.get('grounded')}\n"
            f"    question: {_one_line(flag['question'], 100)}\n"
            f"    comment:  {_one_line(flag['comment'], 100) or '-'}"
        )
    return 0


def run_export(args: argparse.Namespace, settings: Settings) -> int:
    flags = flag_store(settings).list()
    lines = "".join(json.dumps(flag, ensure_ascii=False) + "\n" for flag in flags)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(lines)
        print(f"{len(flags)} flag(s) written to {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(lines)
    return 0
