"""rag: ask questions of your documents and get cited, verified answers.

Start with `rag ingest DIR` then `rag ask "QUESTION"`; `rag chat` keeps a
conversation, `rag serve` and `rag ui` serve it. Settings come from defaults,
rag.toml, RAG_* variables and the options below, before or after the command.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rag_cli.terminal import safe_terminal
from tools import tracing
from tools.config import ConfigError, Settings, load_settings
from tools.errors import ModelError
from tools.models.local_assets import AssetError
from tools.outbound import without_unasked_telemetry

if TYPE_CHECKING:  # the graph loads only for the commands that answer questions
    from graph.services import Services

Command = Callable[[argparse.Namespace, Settings], int]

_FLAG_SETTINGS = (
    "data_dir",
    "as_of",
    "generator_model",
    "query_model",
    "verifier_model",
    "judge_model",
    "embedding_model",
)


def _add_common(parser: argparse.ArgumentParser) -> None:
    """Options every command takes, before or after its name (``rag --set k=3 ask ...``):
    unset ones are left out of the namespace, so one level never erases the other's."""
    unset = argparse.SUPPRESS
    parser.add_argument(
        "--config", default=unset, help="path to a rag.toml (default: ./rag.toml if present)"
    )
    for name in _FLAG_SETTINGS:
        parser.add_argument(
            "--" + name.replace("_", "-"),
            dest=name,
            default=unset,
            help=f"overrides RAG_{name.upper()}",
        )
    parser.add_argument(
        "--set",
        action="append",
        default=unset,
        metavar="KEY=VALUE",
        help="override any setting, e.g. --set llm_timeout_s=60",
    )


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    values: dict[str, Any] = {name: getattr(args, name, None) for name in _FLAG_SETTINGS}
    for item in getattr(args, "set", []):
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"--set expects KEY=VALUE, got {item!r}")
        values[key.strip()] = value
    return values


def build_parser() -> argparse.ArgumentParser:
    from rag_cli import (
        ask_cmd,
        doctor,
        eval_cmd,
        flags_cmd,
        ingest_cmd,
        mcp_cmd,
        serve_cmd,
        setup,
        trace_cmd,
        ui_cmd,
    )

    parser = argparse.ArgumentParser(
        prog="rag", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"rag {_version()}")
    _add_common(parser)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands = (setup, doctor, ingest_cmd, ask_cmd, serve_cmd, mcp_cmd, ui_cmd, flags_cmd)
    commands += (trace_cmd,)
    for module in (*commands, eval_cmd):
        registered = module.register(sub)
        for command_parser in registered if isinstance(registered, list) else [registered]:
            _add_common(command_parser)
    return parser


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("agentic-rag")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown"


def main(argv: Sequence[str] | None = None, services: Services | None = None) -> int:
    """``services``: the models and stores questions are answered with (graph/services.py);
    this process's own unless a caller (a test) brings its fakes."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    args = build_parser().parse_args(argv)
    args.services = services
    with safe_terminal():
        return _run(args)


# Files this process makes hold user data (questions, answers, flags, traces, the
# server's threads): owner-only, whatever the shell's umask. Children (the LangGraph
# server of `rag serve`) inherit it.
PRIVATE_UMASK = 0o077


def _private(data_dir: Path) -> None:
    """The data directory, 0700: what it holds is then out of other users' reach even
    where an older version left a file world-readable."""
    if data_dir.is_dir() and data_dir.stat().st_uid == os.getuid():
        data_dir.chmod(0o700)


def _run(args: argparse.Namespace) -> int:
    umask = os.umask(PRIVATE_UMASK)
    try:
        settings = load_settings(
            _overrides(args), config_file=getattr(args, "config", None), source="command line"
        )
        without_unasked_telemetry(settings, os.environ)
        _private(settings.data_dir)
        return args.run(args, settings)
    except (AssetError, ModelError) as exc:
        print(f"rag {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except ValueError as exc:  # ConfigError and invalid input (e.g. an empty question)
        print(f"rag {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"rag {args.command}: interrupted", file=sys.stderr)
        return 130
    finally:
        tracing.flush()  # bounded by LANGFUSE_TIMEOUT; a no-op when tracing is off
        os.umask(umask)


if __name__ == "__main__":
    sys.exit(main())
