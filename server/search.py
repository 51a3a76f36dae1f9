"""Passages for a query, without an answer: the MCP ``search`` tool.

The same retriever the graph's ``retrieve`` step uses (tools/retrieval/hybrid.py), on
settings checked for the client where runs are checked (server/answers.py
``client_settings``), on a collection that exists and the client may read. No model
writes anything: the only model called is the question embedder.
"""

from __future__ import annotations

from typing_extensions import TypedDict

from graph.services import Services
from tools.config import Settings
from tools.retrieval.hybrid import Passage, make_retriever
from tools.store.collection import Collection


class Hit(TypedDict):
    """A passage found for the query, with where it is."""

    n: int  # rank, best first
    source: str
    location: str  # "source, page p, lines a-b"
    page: int | None
    start_line: int | None
    end_line: int | None
    heading: str
    score: float
    text: str


def _hit(n: int, passage: Passage) -> Hit:
    return Hit(
        n=n,
        source=passage.source,
        location=passage.location(),
        page=passage.page,
        start_line=passage.start_line,
        end_line=passage.end_line,
        heading=passage.heading,
        score=round(passage.score, 4),
        text=passage.text,
    )


def search(settings: Settings, services: Services, query: str) -> list[Hit]:
    """The ``k`` best passages for ``query`` in ``settings.collection``."""

    def read(collection: Collection) -> list[Passage]:
        collection.require_embedding(settings.embedding_model)
        retriever = make_retriever(collection, services.embedder(settings), settings)
        return retriever.retrieve([query])[0]

    passages = services.read_collection(settings, settings.collection, read)
    return [_hit(n, p) for n, p in enumerate(passages[: settings.k], 1)]
