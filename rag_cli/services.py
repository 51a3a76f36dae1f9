"""The CLI process's services (graph/services.py): a caller's (a test's fakes, given to
``rag_cli.main.main``), else one ``Services`` made on first use, so a command that
answers nothing (``rag doctor``, ``rag --help``) never imports the graph or a model."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from graph.services import Services


def services_of(args: argparse.Namespace) -> Services:
    if args.services is None:
        from graph.services import Services

        args.services = Services()
    return args.services
