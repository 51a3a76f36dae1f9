"""``rag setup``: assemble and verify the local model files the configuration needs."""

from __future__ import annotations

import argparse

from tools.config import Settings
from tools.local_assets import ASSETS, DEFAULT_LLM, SMOLLM2_135M, ensure
from tools.models import ROLES, chat_spec


def register(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = sub.add_parser("setup", help="assemble and verify local model files (idempotent)")
    parser.add_argument(
        "--test-models",
        action="store_true",
        help="also install the tiny SmolLM2 model used by the fast model tests",
    )
    parser.set_defaults(run=run)
    return parser


def run(args: argparse.Namespace, settings: Settings) -> int:
    wanted = []
    for role in ROLES:
        spec = chat_spec(settings, role)
        if spec.provider == "local" and not spec.name:
            wanted.append(DEFAULT_LLM)
        elif spec.provider == "local" and spec.name in ASSETS:
            wanted.append(ASSETS[spec.name])
    if args.test_models:
        wanted.append(SMOLLM2_135M)
    cache = settings.resolved_cache_dir()
    for asset in dict.fromkeys(wanted):
        path = ensure(asset, cache, progress=True)
        print(f"ok  {asset.name}: {path}")
    return 0
