"""The graph's nodes and edges. Each takes the state and the run (graph/run.py: its
checked settings, its services and its config) and returns an update, or for an edge
the next node's name.

Nodes never resolve settings or build a model: the run brings both. ``build_graph``
wraps each node to time it into ``timings`` and announce it on the ``custom`` stream.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, replace
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langgraph.config import get_stream_writer
from langgraph.constants import TAG_NOSTREAM
from pydantic import BaseModel, Field

from graph import prompts
from graph.budget import takes_second_look
from graph.checks.judgement import judge
from graph.checks.pipeline import Bars, Case, feedback, regenerates, run_checks
from graph.checks.repairs import ATTEMPTS, CITING, WRITTEN, Attempt, DraftContext, repaired
from graph.checks.support import closest, recited, renumbered
from graph.configuration import PER_QUESTION_FIELDS
from graph.context import context_message, header_location
from graph.draft import DraftStream, Event
from graph.guard import decide, nearest_distance, refusal
from graph.run import Run
from graph.services import Services
from graph.state import PER_QUESTION, State
from tools import tracing
from tools.config import Settings
from tools.errors import ModelError
from tools.resilient import TextSink, invoke_text
from tools.retrieval.evidence import evidence_for
from tools.retrieval.hybrid import Passage, RetrievalReport, cut, make_retriever
from tools.retrieval.rerank import rerank
from tools.store.collection import Collection
from tools.store.protocol import StaleStoreError
from tools.structured import invoke_structured
from tools.text import (
    cited_numbers,
    renumber,
    strip_markers,
)
from tools.verifier_thresholds import thresholds_per_reading

MAX_DROPPED_LISTED = 20
HISTORY_TURNS = 6  # messages of history the rephrasing model sees


def stream_writer() -> Callable[[Event], None]:
    """The run's ``custom`` stream (graph/draft.py); a node called on its own, outside a
    graph run, has none and writes nowhere."""
    try:
        return get_stream_writer()
    except RuntimeError:
        return lambda _event: None


def validate_question(question: Any, limit: int) -> str:
    if not isinstance(question, str) or not question.strip():
        raise ValueError("question must be a non-empty string")
    if len(question) > limit:
        raise ValueError(f"question is {len(question)} characters, over max_question_chars={limit}")
    return question.strip()


class _Queries(BaseModel):
    queries: list[str] = Field(max_length=5)


def failure(exc: ModelError | StaleStoreError, stage: str) -> dict[str, Any]:
    """A fault as a typed ``error`` in the answer object, plus an honest abstention."""
    error = {"type": exc.kind, "stage": stage, "message": str(exc)}
    return {"error": error, "abstain_reason": prompts.ABSTAIN_ERROR.format(**error)}


def _history(state: State) -> list[BaseMessage]:
    return [m for m in state.get("messages") or [] if m.type in ("human", "ai")]


def start_question(state: State, run: Run) -> dict[str, Any]:
    """The first node: a valid question, every per-question field fresh, and its trace."""
    settings, config = run.settings, run.config
    return {
        **PER_QUESTION,
        "question": validate_question(state.get("question"), settings.max_question_chars),
        "trace_id": (config.get("metadata") or {}).get("rag_trace_id")
        or tracing.current_trace_id(settings),
    }


def generate_queries(state: State, run: Run) -> dict[str, Any]:
    """Rephrase a follow-up into a standalone query; optionally add alternative queries.

    No LLM call when it cannot help: the first turn of a conversation with one query.
    """
    settings, services, config = run.settings, run.services, run.config
    question = state["question"]
    history = _history(state)
    standalone = question
    if history:  # a failed rephrasing keeps the question as asked: retrieval still works
        conversation = "\n".join(
            f"{'User' if m.type == 'human' else 'Assistant'}: {m.text[:500]}"
            for m in history[-HISTORY_TURNS:]
        )
        try:
            reply = invoke_text(
                services.llm(settings, "query"),
                [
                    SystemMessage(prompts.REPHRASE.text),
                    HumanMessage(
                        prompts.REPHRASE_INPUT.format(conversation=conversation, question=question)
                    ),
                ],
                retries=settings.llm_max_retries,
                what="rephrasing",
                config=config,
            )
        except ModelError:
            reply = ""
        candidate = reply.split("\n")[0].removeprefix("Rephrased:").strip()
        candidate = candidate.strip('"').strip()
        if candidate and len(candidate) <= 3 * len(question) + 200:
            standalone = candidate
    queries = [standalone]
    if settings.multi_query > 1:
        try:
            extra = invoke_structured(
                services.llm(settings, "query"),
                _Queries,
                [
                    HumanMessage(
                        prompts.MULTI_QUERY.text.format(
                            n=settings.multi_query - 1, question=standalone
                        )
                    )
                ],
                retries=settings.llm_max_retries,
                config=config,
            ).queries
        except ModelError:  # alternatives only widen recall; the question alone still works
            extra = []
        queries += [q.strip() for q in extra if q.strip()]
        queries = list(dict.fromkeys(queries))[: settings.multi_query]
    return {"queries": queries}


def guard(state: State, run: Run) -> dict[str, Any]:
    """The topic guard, before anything is retrieved: the (standalone) question is
    off-topic when no passage is near it, else the query model judges it against the
    operator's domain and blocked topics. ``refuse`` ends the question with
    ``guard_message``; ``warn`` answers and says so. A guard that cannot decide lets the
    question through, with its error: it keeps answers on topic, it is not what keeps
    them right (the verifier is)."""
    settings, services, config = run.settings, run.services, run.config
    question = state["queries"][0]
    try:
        distance = services.read_collection(
            settings,
            settings.collection,
            lambda col: nearest_distance(col, services.embedder(settings), question),
        )
        decision = decide(services.llm(settings, "query"), settings, question, distance, config)
    except (ModelError, StaleStoreError) as exc:
        return {"guard": {"mode": settings.guard, "verdict": "allowed", "error": str(exc)}}
    update: dict[str, Any] = {"guard": decision}
    if decision["verdict"] != "allowed" and settings.guard == "refuse":
        update["abstain_reason"] = refusal(settings)
    return update


def retrieve(state: State, run: Run) -> dict[str, Any]:
    settings, services = run.settings, run.services

    def read(col: Collection) -> tuple[list[Passage], RetrievalReport, int | None]:
        col.require_embedding(settings.embedding_model)
        retriever = make_retriever(col, services.embedder(settings), settings)
        return col.stable_read(  # the version read with the passages, not after them
            lambda: (*retriever.retrieve(state["queries"]), col.version),
            consistent=lambda result: not result[1].missing_vectors,
        )

    try:
        passages, report, version = services.read_collection(settings, settings.collection, read)
    except (ModelError, StaleStoreError) as exc:
        return {"passages": [], **failure(exc, "retrieve")}
    keep = settings.k if settings.rerank == "none" else max(2 * settings.k, settings.rerank_keep)
    kept = _ordered(passages[:keep], settings, "retrieve")
    beyond = [cut(p, "top_k", f"ranked below the top {keep}") for p in passages[keep:]]
    info = {
        "collection": settings.collection,
        "version": version,  # the collection version answered from (as_of, or the latest)
        "candidates": report.candidates,
        "over_threshold": report.over_threshold,
        "duplicates": report.duplicates,
        "threshold": report.threshold,
        "closest_distance": report.closest_distance,
        "kept": len(kept),
        "strategy": settings.retrieval_strategy,
        "dropped": _best_cut(report.dropped + beyond),
    }
    update: dict[str, Any] = {"passages": [asdict(p) for p in kept], "retrieval": info}
    if not kept:
        detail = ""
        if report.over_threshold:
            detail = (
                f" ({report.over_threshold} candidates, the closest at cosine distance "
                f"{report.closest_distance}, were beyond the threshold "
                f"{report.threshold}; raise distance_threshold to include them)"
            )
        update["abstain_reason"] = prompts.ABSTAIN_NO_CONTEXT.format(detail=detail)
        update["unsaid"] = True
    return update


def _ordered(passages: list[Passage], settings: Settings, stage: str) -> list[Passage]:
    """``passages`` in the order the generator reads them (``passage_order``), applied
    by the last step that orders them: evidence selection ranks its passages by their
    best sentence, and a reranker by its scores."""
    if settings.evidence == "sentences":
        last = "evidence"
    else:
        last = "retrieve" if settings.rerank == "none" else "rerank"
    reverse = stage == last and settings.passage_order == "reversed"
    return passages[::-1] if reverse else passages


def _best_cut(dropped: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The highest-scoring cut candidates: those a user tuning settings wants to see."""
    return sorted(dropped, key=lambda d: -d["score"])[:MAX_DROPPED_LISTED]


def rerank_passages(state: State, run: Run) -> dict[str, Any]:
    settings, services, config = run.settings, run.services, run.config
    reranker = services.reranker(settings)
    passages = [Passage(**p) for p in state["passages"]]
    keep = settings.rerank_keep or settings.k
    info = dict(state.get("retrieval") or {})
    try:
        kept = rerank(reranker, state["queries"][0], passages, keep, config)
        stage, reason = "rerank", f"reranked below the top {keep}"
    except ModelError as exc:  # reranking only reorders: fall back to retrieval order
        info["rerank_error"] = {"type": exc.kind, "message": str(exc)}
        kept = passages[:keep]
        stage, reason = "top_k", f"ranked below the top {keep} (reranker failed)"
    kept = _ordered(kept, settings, "rerank")
    chosen = {id(p) for p in kept}
    info["dropped"] = _best_cut(
        [cut(p, stage, reason) for p in passages if id(p) not in chosen]
        + list(info.get("dropped") or [])
    )
    return {"passages": [asdict(p) for p in kept], "retrieval": info}


def select_evidence(state: State, run: Run) -> dict[str, Any]:
    """The sentences of the kept passages that bear on the question (tools/retrieval/evidence.py):
    what the generator and the verifier read instead of whole passages."""
    settings, services = run.settings, run.services
    passages = [Passage(**p) for p in state["passages"]]
    try:
        kept, units = evidence_for(
            passages,
            state["queries"],
            services.embedder(settings),
            settings.evidence_chars,
            settings.evidence_neighbours,
            settings.evidence_score_ratio,
        )
    except ModelError as exc:  # selection only narrows: read the whole passages instead
        info = {**(state.get("retrieval") or {}), "evidence_error": str(exc)}
        return {"retrieval": info}
    kept = _ordered(kept, settings, "evidence")
    left_out = {p.chunk_ids[0] for p in passages} - {p.chunk_ids[0] for p in kept}
    info = dict(state.get("retrieval") or {})
    info["evidence"] = {
        "units": units,
        "chars_read": sum(len(p.text) for p in kept),
        "chars_retrieved": sum(len(p.text) for p in passages),
    }
    info["dropped"] = _best_cut(
        [
            cut(p, "evidence", "no sentence among the closest to the question")
            for p in passages
            if p.chunk_ids[0] in left_out
        ]
        + list(info.get("dropped") or [])
    )
    return {"passages": [asdict(p) for p in kept], "retrieval": info}


def _answer(
    settings: Settings,
    services: Services,
    question: str,
    passages: list[dict[str, Any]],
    config: RunnableConfig,
    *,
    numbers: list[int] | None = None,
    feedback: list[str] | None = None,
    sink: TextSink | None = None,
    prompt: prompts.Prompt | None = None,
) -> str:
    """The generator's answer to ``question`` from ``passages`` (numbered ``numbers``);
    with ``sink``, streamed into it instead of to the run's message listeners."""
    if prompt is None:
        prompt = prompts.ANSWER_SHORT if settings.answer_style == "short" else prompts.ANSWER
    instructions = prompt.text.format(not_found=prompts.NOT_FOUND, question=question)
    if feedback:
        unsupported = "\n".join(f"- {s}" for s in feedback)
        instructions += prompts.RETRY.text.format(unsupported=unsupported)
    draft = invoke_text(
        services.llm(settings, "generator"),
        [context_message(passages, numbers), HumanMessage(instructions)],
        retries=settings.llm_max_retries,
        what="answer generation",
        config={**config, "tags": [*(config.get("tags") or []), TAG_NOSTREAM]} if sink else config,
        sink=sink,
    )
    return prompts.without_notes(draft)


def generate_answer(state: State, run: Run) -> dict[str, Any]:
    """The generator's answer, through the repairs of graph/checks/repairs.py: each
    written draft through ``WRITTEN``; a first answer that found nothing asked again as
    ``ATTEMPTS`` says (with takes_second_look); the kept one through ``CITING``."""
    settings = run.settings
    attempts = state.get("attempts", 0) + 1
    write = stream_writer()
    passages = state["passages"]
    context = DraftContext(
        question=state["queries"][0],
        passages=[p["text"] for p in passages],
        locations=[header_location(p) for p in passages],
        short=settings.answer_style == "short",
    )

    def write_answer(attempt: Attempt, feedback: list[str] | None = None) -> str:
        sink = DraftStream(len(passages), attempts, write)
        written = _answer(
            settings,
            run.services,
            context.question,
            passages,
            run.config,
            sink=sink,
            feedback=feedback,
            prompt=attempt.prompt,
        )
        draft = repaired(written, replace(context, copy=attempt.copy), WRITTEN)
        if draft == prompts.NOT_FOUND != written:
            sink.withdraw()  # what was streamed is no answer
        return draft

    first, *again = ATTEMPTS
    tried = [first]
    try:
        draft = write_answer(first, feedback=state.get("feedback"))
        if attempts == 1 and takes_second_look(settings):
            for attempt in again:
                if prompts.NOT_FOUND not in draft:
                    break
                tried.append(attempt)
                draft = write_answer(attempt)
    except ModelError as exc:
        return {"draft": "", "attempts": attempts, **failure(exc, "generate_answer")}
    draft = repaired(draft, context, CITING)
    found = prompts.NOT_FOUND not in draft
    update: dict[str, Any] = {
        "draft": draft,
        "attempts": attempts,
        "second_look": len(tried) > 1,
        "copied": tried[-1].copy and found,
    }
    if not found:
        update |= {"abstain_reason": prompts.ABSTAIN_NOT_FOUND, "unsaid": True}
    return update


def verify(state: State, run: Run) -> dict[str, Any]:
    """The checks of graph/checks/pipeline.py, in order, on the draft and the passages
    it cites; the verdict says verified or not, with a confidence and what each found."""
    settings, services, config = run.settings, run.services, run.config
    judge = services.judge(settings)
    pairs = thresholds_per_reading(settings)
    short = settings.answer_style == "short"

    def answer_again(passages: list[dict[str, Any]], numbers: list[int]) -> str:
        question = state["queries"][0]
        return _answer(settings, services, question, passages, config, numbers=numbers)

    def embed(texts: list[str]) -> list[list[float]]:
        try:  # it only ranks the quotes: without it, the words shared do
            return services.embedder(settings).embed_documents(texts)
        except ModelError:
            return []

    try:
        if pairs["logprobs"].pair != pairs["sampled"].pair:
            judge.settle(config)  # the first check must be read against the right pair
        thresholds = pairs[judge.method_in_use]
        bars = Bars(
            thresholds.sentence,
            thresholds.phrase,
            settings.verify_threshold_agreed,
            settings.verify_threshold_agreed_bare,
            settings.verify_threshold_alone,
            settings.verify_own_answer_sure,
        )
        case = Case(
            judge,
            state["queries"][0],
            state["draft"],
            state["passages"],
            bars,
            copied=bool(state.get("copied")),
            extractive=short,
            config=config,
            answer_again=answer_again if short and settings.second_opinion else None,
            embed=embed,
        )
        verdict = run_checks(case)
        # the pairs are equal when settle was skipped: label what the reading was
        method = verdict.get("confidence_method", judge.method_in_use)
        verdict["thresholds"] = pairs[method].as_dict()
    except ModelError as exc:  # a verifier failure must not lose the answer: mark it unchecked
        unchecked = {"grounded": False, "confidence": None, "error": f"verifier failed: {exc}"}
        error = {"type": exc.kind, "stage": "verify", "message": str(exc)}
        return {"verdict": {"checked_by": settings.verifier_model, **unchecked}, "error": error}
    verdict["checked_by"] = settings.verifier_model
    if verdict["confidence"] is not None:
        tracing.score(settings, state.get("trace_id"), "verifier_confidence", verdict["confidence"])
    return {"verdict": verdict, "feedback": feedback(verdict)}


def _numbered_by_citation(
    answer: str, passages: list[dict[str, Any]], verdict: dict[str, Any]
) -> tuple[str, list[dict[str, Any]], dict[str, Any]]:
    """Passages renumbered so an answer cites [1], [2], ... in reading order (the cited
    ones first, then the rest as ranked); the answer and the verdict's statements follow.
    A reader who meets [3] first, and no [1], assumes something is missing."""
    cited = cited_numbers(answer)
    order = cited + [n for n in range(1, len(passages) + 1) if n not in cited]
    new_of = {old: new for new, old in enumerate(order, 1)}
    if all(old == new for old, new in new_of.items()):
        return answer, passages, verdict
    verdict = dict(verdict)
    if "cited" in verdict:
        verdict["cited"] = sorted(new_of[n] for n in verdict["cited"] if n in new_of)
    if "unsupported" in verdict:
        verdict["unsupported"] = [renumber(s, new_of) for s in verdict["unsupported"]]
    if "missing" in verdict:
        verdict["missing"] = {renumber(k, new_of): v for k, v in verdict["missing"].items()}
    if "statement_support" in verdict:
        verdict["statement_support"] = renumbered(verdict["statement_support"], new_of)
    opinion = verdict.get("second_opinion") or {}
    if "answer" in opinion:  # it cites by the same passage numbers as the draft
        verdict["second_opinion"] = {**opinion, "answer": renumber(opinion["answer"], new_of)}
    return renumber(answer, new_of), [passages[old - 1] for old in order], verdict


def finalize(state: State, run: Run) -> dict[str, Any]:
    """Build the answer object: the judgement (graph/checks/judgement.py), and the cited
    answer with its references, or the message saying why there is none. Each statement
    cites the passage its quote was found in (the model's marker was a hint)."""
    settings = run.settings
    passages = state.get("passages") or []
    draft, verdict = state.get("draft", ""), dict(state.get("verdict") or {})
    stopped = state.get("abstain_reason") or ("" if draft else prompts.ABSTAIN_NOT_FOUND)
    judgement, shown = judge(
        question=state["question"],
        draft=draft,
        verdict=verdict,
        passages=passages,
        stopped=stopped,
        unsaid=bool(state.get("unsaid")) or not (draft or state.get("abstain_reason")),
        withhold_unverified=settings.on_unverified == "abstain",
    )
    citations: list[dict[str, Any]] = []
    answer = shown
    if shown == draft:
        found = verdict.get("statement_support") or []
        answer, passages, verdict = _numbered_by_citation(
            strip_markers(recited(draft, found), set(range(1, len(passages) + 1))),
            passages,
            verdict,
        )
        judgement["statements"] = verdict.get("statement_support") or []
        for n in cited_numbers(answer):
            p = Passage(**passages[n - 1])
            citations.append(
                {
                    "n": n,
                    "source": p.source,
                    "chunk_id": p.chunk_ids[0],
                    "chunk_ids": p.chunk_ids,
                    "page": p.page,
                    "start_line": p.start_line,
                    "end_line": p.end_line,
                    "heading": p.heading,
                    "snippet": p.text[:240],
                }
            )
    outcome = judgement["outcome"]
    tracing.score(settings, state.get("trace_id"), "verified", outcome == "verified", outcome)
    references = [
        f"[{c['n']}] {Passage(**passages[c['n'] - 1]).location()}"
        + (f" ({c['heading']})" if c["heading"] else "")
        for c in citations
    ]
    shown_statements = judgement["statements"] if shown == draft else []
    return {
        "answer": answer,
        "passages": passages,
        "abstained": shown != draft,
        "outcome": outcome,
        "judgement": judgement,
        "citations": citations,
        "support": [q for s in shown_statements for q in s["quotes"]],
        "closest": closest(state["question"], passages) if outcome == "not_in_documents" else [],
        "reason": judgement["reason"] if outcome == "not_verified" else None,
        "references": references,
        "verdict": verdict,
        "error": state.get("error"),
        "guard": state.get("guard"),
        "prompts": prompts.versions(),
        "messages": [HumanMessage(state["question"]), AIMessage(answer)],
        # the question's own settings end with it: a later turn on the thread that does
        # not set them again runs on the request's settings, never on an earlier turn's
        **dict.fromkeys(PER_QUESTION_FIELDS),
    }


# --- edges -------------------------------------------------------------------------------
def after_queries(state: State, run: Run) -> str:
    return "retrieve" if run.settings.guard == "off" else "guard"


def after_guard(state: State, run: Run) -> str:
    return "finalize" if state.get("abstain_reason") else "retrieve"


def after_retrieve(state: State, run: Run) -> str:
    if not state.get("passages"):
        return "finalize"
    return "rerank" if run.settings.rerank != "none" else to_reader(state, run)


def after_rerank(state: State, run: Run) -> str:
    return to_reader(state, run) if state.get("passages") else "finalize"


def to_reader(state: State, run: Run) -> str:
    """The node that prepares what the generator reads: evidence, or the passages as is."""
    evidence_mode = run.settings.evidence
    return "select_evidence" if evidence_mode == "sentences" else "generate_answer"


def after_answer(state: State, run: Run) -> str:
    return "finalize" if state.get("abstain_reason") else "verify"


def after_verify(state: State, run: Run) -> str:
    """Back to the generator when graph/checks/pipeline.py's ``regenerates`` says so."""
    if state.get("abstain_reason"):
        return "finalize"
    again = regenerates(
        state.get("verdict") or {},
        told=state.get("feedback") or [],
        second_look=bool(state.get("second_look")),
        attempts=state.get("attempts", 0),
        cap=run.settings.max_regenerations,
    )
    return "generate_answer" if again else "finalize"
