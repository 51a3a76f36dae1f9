"""The models and stores the graph's nodes call, handed to them as LangGraph's runtime
context.

``graph.invoke(inputs, config, context=Services(...))`` gives a run its services; a run
without one (the LangGraph server's) uses the services its graph was built with
(graph/run.py). Each entry point makes one ``Services`` per process and passes it on;
tests pass fakes the same way, through the constructor, so no node imports a model or
a store by itself.

The trust boundary is the one of graph/configuration.py: a server request may carry a
JSON ``context``, but JSON never makes a ``Services`` instance, so it is ignored and a
request cannot swap a model or a store in.

Models are expensive to load and collections hold open database handles, so each is
built once per process and reused, in bounded caches keyed by what determines it (the
model spec and the settings its factory reads; the data directory and collection name),
not by the whole run configuration: a request with ``k=4`` reuses everything.

The weights of a local model are the one thing held per process rather than per
``Services``: tools/models/local_llm.py and local_embeddings.py load each model file
once (keyed by file, context size and threads), so every role and every ``Services`` in
the process share one copy of a gigabyte of weights, and one lock serialising calls
into it (llama.cpp is not re-entrant).

A node gets ``metered(meter)``: a view sharing these caches whose chat models count each
call against the question's ceiling and record it (tools/models/metered.py), so every
model call a node or a check makes is counted, whichever service it came through.
"""

from __future__ import annotations

import copy
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel

from tools.answer_check import FirstTokenJudge, judge_for
from tools.config import MODEL_SPECS, Settings, section_key
from tools.models.factory import Role, chat_key, chat_model, embeddings, embeddings_key
from tools.models.metered import CallMeter, metered
from tools.models.spec import parse_model_spec
from tools.resilient import ResilientEmbeddings
from tools.retrieval.rerank import Reranker, make_reranker
from tools.store.collection import Collection, handle_key
from tools.store.protocol import StaleStoreError

T = TypeVar("T")
V = TypeVar("V")
STALE_ATTEMPTS = 3
STALE_BACKOFF_S = 0.1
MODELS_KEPT = 8  # chat models (per role), embedders and rerankers held at once
COLLECTIONS_KEPT = 32  # open collection handles


class _Bounded(Generic[V]):
    """A small thread-safe LRU map: the least recently used entry goes when it is full.
    A handle that goes is left to runs still using it (garbage collection closes it)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[Hashable, V] = OrderedDict()
        self.lock = threading.RLock()

    def get(self, key: Hashable, build: Callable[[], V], *, stale: bool = False) -> V:
        with self.lock:
            if key in self._items and not stale:
                self._items.move_to_end(key)
                return self._items[key]
            value = build()
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)
            return value

    def peek(self, key: Hashable) -> V | None:
        with self.lock:
            return self._items.get(key)


def question_embeddings(settings: Settings) -> Embeddings:
    """Question-time embeddings: a remote provider retries with backoff and fails as a
    typed ModelError, so an outage is the answer's ``error.stage = retrieve``, not a crash
    (ingestion has its own retry around whole batches: one layer on each path)."""
    model = embeddings(settings)
    if parse_model_spec(settings.embedding_model, kind="embedding").provider == "local":
        return model
    return ResilientEmbeddings(model, settings.llm_max_retries)


class Services:
    """What the nodes call. ``chat`` and ``embed`` build a model from settings (the
    product's factories by default; a test passes its fakes)."""

    def __init__(
        self,
        chat: Callable[[Settings, Role], BaseChatModel] = chat_model,
        embed: Callable[[Settings], Embeddings] = question_embeddings,
        embed_documents: Callable[[Settings], Embeddings] = embeddings,
    ) -> None:
        self._chat = chat
        self._embed = embed
        self._embed_documents = embed_documents
        self._models: _Bounded[Any] = _Bounded(MODELS_KEPT)
        self._collections: _Bounded[Collection] = _Bounded(COLLECTIONS_KEPT)
        self.meter: CallMeter | None = None

    def metered(self, meter: CallMeter) -> Services:
        """These services for one node of one question: the same models and collections,
        every chat call counted and recorded by ``meter``."""
        view = copy.copy(self)
        view.meter = meter
        return view

    def _model(self, settings: Settings, role: Role) -> BaseChatModel:
        return self._models.get(chat_key(settings, role), lambda: self._chat(settings, role))

    def llm(self, settings: Settings, role: Role) -> BaseChatModel:
        model = self._model(settings, role)
        return model if self.meter is None else metered(model, role, self.meter)

    def judge(self, settings: Settings) -> FirstTokenJudge:
        """The verifier model with the way its confidence is read; kept like the models, so
        ``auto``'s discovery that a provider gives no log-probabilities is made once."""
        key = ("judge", chat_key(settings, "verifier"), section_key(settings, "verification"))
        judge = self._models.get(
            key,
            lambda: judge_for(
                self._model(settings, "verifier"), settings, retries=settings.llm_max_retries
            ),
        )
        return judge if self.meter is None else judge.over(self.llm(settings, "verifier"))

    def embedder(self, settings: Settings) -> Embeddings:
        return self._models.get(embeddings_key(settings), lambda: self._embed(settings))

    def document_embedder(self, settings: Settings) -> Embeddings:
        """Ingestion's embeddings: without the question-time retry, because ingestion
        retries whole batches itself (ingest/pipeline.py): one retry layer per path."""
        return self._embed_documents(settings)

    def reranker(self, settings: Settings) -> Reranker | None:
        """Built once per configuration, like the models: a cross-encoder loads weights.
        The LLM grader is built for each metered view: it holds the view's model."""
        if settings.rerank == "none":
            return None
        uses_llm = settings.rerank == "llm"
        if uses_llm and self.meter is not None:
            return make_reranker(settings, self.llm(settings, "query"))
        query_model = self.llm(settings, "query") if uses_llm else None
        key = (
            "reranker",
            section_key(settings, "reranking", "models", leave_out=MODEL_SPECS),
            chat_key(settings, "query") if uses_llm else None,
        )
        return self._models.get(key, lambda: make_reranker(settings, query_model))

    def collection(self, settings: Settings, name: str, *, reopen: bool = False) -> Collection:
        """The process's handle on a collection, opened again when it is outdated: a
        ``rag ingest`` (or ``--rebuild``) in another process while this one serves."""
        key = handle_key(settings, name)
        with self._collections.lock:
            current = self._collections.peek(key)
            stale = current is None or reopen or current.outdated()
            return self._collections.get(
                key,
                lambda: Collection(settings, name, fresh_store=current is not None),
                stale=stale,
            )

    def read_collection(self, settings: Settings, name: str, read: Callable[[Collection], T]) -> T:
        """``read(collection)``, repeated on a reopened collection when another Chroma
        system deleted vectors during the read (a commit by another process between our
        check and our search)."""
        for attempt in range(STALE_ATTEMPTS):
            try:
                return read(self.collection(settings, name, reopen=attempt > 0))
            except StaleStoreError as exc:
                if attempt + 1 == STALE_ATTEMPTS:
                    raise StaleStoreError(
                        f"{exc}; another process kept changing the collection while "
                        f"{STALE_ATTEMPTS} reads ran: ask again when its ingestion is done"
                    ) from exc
                time.sleep(STALE_BACKOFF_S * 2**attempt)  # let the other finish a commit
        raise AssertionError("unreachable")
