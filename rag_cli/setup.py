"""``rag setup``: assemble and verify the local model files, then prove the build runs them.

The smoke test loads each local model and generates a few tokens in a child process
(``tools.isolated``): a llama-cpp-python build that crashes on this CPU is reported in
one line with what to do, instead of a bare "Segmentation fault" at the first answer.
"""

from __future__ import annotations

import argparse

from tools.config import Settings
from tools.isolated import run_isolated
from tools.models.factory import ROLES, chat_spec
from tools.models.local_assets import ASSETS, DEFAULT_LLM, SMOLLM2_135M, LocalAsset, ensure
from tools.models.local_llm import REBUILD_ADVICE, smoke_generate

SMOKE_TIMEOUT_S = 300.0  # load + 8 tokens: ~2 s idle, far more on a loaded machine


def register(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = sub.add_parser("setup", help="assemble and verify local model files (idempotent)")
    parser.add_argument(
        "--test-models",
        action="store_true",
        help="also install the tiny SmolLM2 model used by the fast model tests",
    )
    parser.add_argument(
        "--no-smoke", action="store_true", help="skip loading each model to generate a few tokens"
    )
    parser.set_defaults(run=run)
    return parser


def smoke(asset: LocalAsset, path: str) -> str | None:
    """One line of failure, or None when the model loaded and generated."""
    result = run_isolated(smoke_generate, path, timeout_s=SMOKE_TIMEOUT_S)
    if not result.ok:
        return f"FAIL smoke {asset.name}: {result.reason(SMOKE_TIMEOUT_S)}; {REBUILD_ADVICE}"
    info = result.value
    if info["amx"]:
        return (
            f"FAIL smoke {asset.name}: this llama.cpp build uses AMX, which crashes; "
            f"{REBUILD_ADVICE}"
        )
    print(
        f"ok  smoke {asset.name}: loaded in {info['load_s']:.1f}s, "
        f"{info['tokens']} tokens in {info['generate_s']:.1f}s",
        flush=True,
    )
    return None


def run(args: argparse.Namespace, settings: Settings) -> int:
    wanted = [SMOLLM2_135M] if args.test_models else []  # the small one first: fails fast
    for role in ROLES:
        spec = chat_spec(settings, role)
        if spec.provider == "local" and not spec.name:
            wanted.append(DEFAULT_LLM)
        elif spec.provider == "local" and spec.name in ASSETS:
            wanted.append(ASSETS[spec.name])
    cache = settings.resolved_cache_dir()
    paths = {}
    for asset in dict.fromkeys(wanted):
        paths[asset] = ensure(asset, cache, progress=True)
        print(f"ok  {asset.name}: {paths[asset]}")
    for asset, path in paths.items():
        if not args.no_smoke and (failure := smoke(asset, str(path))):
            print(failure, flush=True)
            return 1
    return 0
