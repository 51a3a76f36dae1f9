"""``rag ask`` (one question) and ``rag chat`` (a conversation with history)."""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from typing import Any

from langgraph.checkpoint.memory import InMemorySaver

from graph import build_graph, config_for
from graph.checks.explain import not_verified, quoted_statement
from graph.checks.support import where
from graph.services import Services
from graph.state import OutputState
from rag_cli.ctrl_c import ctrl_c_cancels
from rag_cli.live import LiveAnswer
from rag_cli.services import services_of
from rag_cli.threads import Threads, check_thread, open_threads
from rag_ui.exchange import PromptRecorder, prompt_note
from tools.config import Settings, choices
from tools.models.factory import check_models
from tools.models.metered import ModelCall, tally

ANSWER_ROLES = ("query", "generator", "verifier")  # the chat models answering a question
# shown under "the documents do not say": what the documents hold near the question
CLOSEST_TITLE = "Closest passages (none states the answer)"
OUTPUT_KEYS = tuple(OutputState.__annotations__)  # the answer object, as the graph defines it


def register(sub: argparse._SubParsersAction) -> list[argparse.ArgumentParser]:
    ask = sub.add_parser("ask", help="answer one question from a collection, with citations")
    ask.add_argument("question", help="the question, in quotes")
    chat = sub.add_parser("chat", help="a conversation: follow-up questions use the history")
    for parser in (ask, chat):
        parser.add_argument("--collection", help="the collection to answer from")
        parser.add_argument("--k", type=int, help="passages given to the generator")
        parser.add_argument(
            "--rerank", choices=choices("rerank"), help="reorder the passages before answering"
        )
        parser.add_argument(
            "--strategy",
            choices=choices("retrieval_strategy"),
            help="window: merge neighbouring chunks into each passage",
        )
        parser.add_argument("--user-id", help="attached to traces")
        parser.add_argument(
            "--thread",
            help="continue the conversation saved under this id (<data_dir>/threads.sqlite, or the "
            "database with store=postgres)",
        )
        shown = parser.add_mutually_exclusive_group()
        shown.add_argument(
            "--quiet", action="store_true", help="leave out the quoted lines under the answer"
        )
        shown.add_argument(
            "--verbose",
            action="store_true",
            help="also show the checks' own readings (confidence, thresholds, each check)",
        )
    ask.add_argument("--json", action="store_true", help="print the answer object as JSON")
    ask.set_defaults(run=run_ask)
    chat.set_defaults(run=run_chat)
    return [ask, chat]


def _flags(args: argparse.Namespace) -> dict[str, Any]:
    """The settings this command's flags change (on top of the CLI's settings)."""
    values = {
        "collection": args.collection,
        "k": args.k,
        "rerank": args.rerank,
        "retrieval_strategy": args.strategy,
    }
    return {k: v for k, v in values.items() if v is not None}


def answer(
    app: Any,
    inputs: dict[str, Any],
    config: dict[str, Any],
    show: bool,
    services: Services | None = None,
) -> dict[str, Any]:
    """Run the graph; with ``show``, print each node as it finishes (stderr) and, on a
    terminal, the draft as the generator writes it (rag_cli/live.py).

    The answer object then carries ``streamed``: the answer text the screen already
    shows, so the caller does not print it twice. Ctrl-C cancels the answer and raises
    KeyboardInterrupt here, after the graph has stopped (rag_cli/ctrl_c.py).
    """
    result: dict[str, Any] = {}
    live = LiveAnswer(sys.stdout, sys.stderr) if show else None
    with ctrl_c_cancels() as pressed:
        stream = app.stream(
            inputs, config, stream_mode=["updates", "values", "custom"], context=services
        )
        try:
            for mode, chunk in stream:
                if pressed.is_set():
                    break
                if mode == "values":
                    result = chunk
                elif live and mode == "custom":
                    live.event(chunk)
                elif live and mode == "updates":
                    for node, update in chunk.items():
                        live.step(node, update or {})
        except Exception:
            if not pressed.is_set():  # else the cancelled generation's own error
                raise
        finally:
            stream.close()  # waits for the running node, which the cancel has stopped
    if pressed.is_set():
        raise KeyboardInterrupt
    out = {k: result.get(k) for k in OUTPUT_KEYS}
    if live is None:
        return out
    return {**out, "streamed": out["answer"] if live.finish(out["answer"] or "") else ""}


def print_answer(out: dict[str, Any], *, quiet: bool = False, verbose: bool = False) -> None:
    """The answer (unless it was streamed as is), references, each statement's quoted
    support (not with ``quiet``) and the label, with its reason in plain words, all as
    the answer object's ``judgement`` says (graph/checks/judgement.py); ``verbose`` adds
    the checks' own readings."""
    judgement = out.get("judgement") or {}
    outcome = judgement.get("outcome")
    if " ".join(out.get("streamed", "").split()) != " ".join(out["answer"].split()):
        print()
        print(out["answer"])
    if out["references"]:
        print("\nReferences:")
        for ref in out["references"]:
            print(f"  {ref}")
    passages = out.get("passages") or []
    shown = outcome in ("verified", "not_verified")
    if shown and judgement.get("statements") and not quiet:
        print("\nQuoted support:")
        for line in support_lines(judgement["statements"], passages):
            print(f"  {line}")
    if out.get("closest") and not quiet:  # each quote with its place, as the page shows it
        print(f"\n{CLOSEST_TITLE}:")
        for item in out["closest"]:
            place = where(passages[item["n"] - 1], item["line"])
            print(f'  [{item["n"]}] {place}: "{item["quote"]}"')
    verdict = out.get("verdict") or {}
    guard = out.get("guard") or {}
    if guard.get("verdict") not in (None, "allowed"):
        topic = "a blocked topic" if guard["verdict"] == "blocked" else "off-topic"
        print(f"\ntopic guard: this question looks {topic} ({guard.get('reason', '')}).")
    if out.get("error"):
        error = out["error"]
        print(f"\nerror ({error['type']} in {error['stage']}): {error['message']}")
    if outcome == "abstained":
        print("\n(abstained)")
    elif outcome == "verified":
        print("\nVerified: the quoted lines state this answer.")
    elif outcome == "not_verified":
        print(f"\nNOT VERIFIED: {not_verified(judgement)}")
    # not_in_documents: the answer says so, and the closest passages are above
    if verbose and verdict:
        print(f"\nchecks: {readings(verdict)}")
    if verbose and out.get("calls"):
        print("\nmodel calls, tokens read (reused from the cache + computed) and generated:")
        for line in call_lines(out["calls"]):
            print(f"  {line}")
    if warning := (verdict.get("thresholds") or {}).get("warning"):
        print(f"warning: {warning}")
    if out.get("trace_id"):
        print(f"trace: {out['trace_id']}")


def support_lines(statements: list[dict[str, Any]], passages: list[dict[str, Any]]) -> list[str]:
    """One line per quote, ``[n] file, line L: "quote"``, and one per statement that
    carries a fact and has none, naming it."""
    lines = []
    for statement in statements:
        for q in statement["quotes"]:
            lines.append(f'[{q["n"]}] {where(passages[q["n"] - 1], q["line"])}: "{q["quote"]}"')
        if statement["facts"] and not statement["supported"]:
            lines.append(f"(none) {quoted_statement(statement['statement'])}: no passage states it")
    return lines


def call_lines(calls: list[ModelCall]) -> list[str]:
    """Per step and in all, for ``--verbose``: the model calls, the prompt tokens read,
    how many of them the KV cache served and how many were computed, the tokens
    generated and the time (tools/models/metered.py)."""
    steps = tally(calls)
    steps["total"] = next(iter(tally(calls, key=lambda _: "total").values()))
    lines = []
    for step, t in steps.items():
        unknown = f" ({t.uncounted} without token counts)" if t.uncounted else ""
        lines.append(
            f"{step}: {t.calls} call{'s' * (t.calls != 1)}, read {t.prompt} "
            f"({t.reused} reused + {t.computed} computed), generated {t.generated}, "
            f"{t.seconds:.2f} s{unknown}"
        )
    return lines


def readings(verdict: dict[str, Any]) -> str:
    """The checks' own readings, for ``--verbose``: each check that ran, and the
    verifier's confidence against its threshold."""
    ran = ", ".join(
        f"{c['check']} {'passed' if c['passed'] else 'failed'}" for c in verdict.get("checks") or []
    )
    confidence = verdict.get("confidence")
    level = f"confidence {confidence} against threshold {verdict.get('threshold')}"
    if own := verdict.get("own_answer"):
        agrees = "agrees" if own["agrees"] else "does not agree"
        level += f"; the verifier's own answer {own['answer']!r} {agrees} (sure {own['sure']})"
    return f"{ran or 'none ran'}; {level}"


def run_ask(args: argparse.Namespace, settings: Settings) -> int:
    if args.thread:
        check_thread(args.thread)
    check_models(settings, ANSWER_ROLES)
    config = config_for(settings, thread_id=args.thread, user_id=args.user_id, **_flags(args))
    show = not args.json
    if not args.thread:
        app = build_graph()
        out = answer(
            app, {"question": args.question}, config, show=show, services=services_of(args)
        )
    else:
        with open_threads(settings) as threads:
            inputs = {"question": args.question, "messages": threads.history(args.thread)}
            app = build_graph(checkpointer=threads.checkpointer)
            out = answer(app, inputs, config, show=show, services=services_of(args))
    if args.json:
        print(json.dumps(out, indent=2, default=str))
    else:
        print_answer(out, quiet=args.quiet, verbose=args.verbose)
    return 1 if out.get("error") and out["abstained"] else 0


CHAT_HELP = "commands: /passages (what was retrieved), /prompt (the full prompt), /new, /quit"


def run_chat(args: argparse.Namespace, settings: Settings) -> int:
    if args.thread:
        check_thread(args.thread)
    check_models(settings, ANSWER_ROLES)
    with open_threads(settings) as threads:
        return _chat(args, settings, threads)


def _chat(args: argparse.Namespace, settings: Settings, threads: Threads) -> int:
    history = threads.history(args.thread)  # an older version's file, sent once
    earlier = threads.earlier(args.thread)
    # an unnamed conversation lives as long as the chat; a named one in the checkpointer
    app = build_graph(checkpointer=threads.checkpointer if args.thread else InMemorySaver())
    session = args.thread or str(uuid.uuid4())  # one chat = one thread = one Langfuse session
    print(f"rag chat on collection {args.collection or settings.collection!r}. {CHAT_HELP}")
    if earlier:
        print(f"(conversation {args.thread!r} resumed: {len(earlier) // 2} earlier turns)")
    recorder = PromptRecorder()  # the generator's real calls of the last question
    while True:
        try:
            line = input("\nyou> ").strip()
        except (EOFError, KeyboardInterrupt):  # Ctrl-D, or Ctrl-C at the prompt: leave
            print()
            return 0
        if not line:
            continue
        if line in ("/quit", "/exit"):
            return 0
        if line == "/new":
            session, history = str(uuid.uuid4()), []
            print("(new conversation" + (", not saved under --thread)" if args.thread else ")"))
            continue
        config = config_for(settings, thread_id=session, user_id=args.user_id, **_flags(args))
        if line in ("/passages", "/prompt"):
            _show_last(app, config, line, recorder)
            continue
        inputs = {"question": line, "messages": history}
        recorder = PromptRecorder()
        config["callbacks"] = [*(config.get("callbacks") or []), recorder]
        try:
            print_answer(
                answer(app, inputs, config, show=True, services=services_of(args)),
                quiet=args.quiet,
                verbose=args.verbose,
            )
            history = []  # from now on the thread's own state holds the conversation
        except ValueError as exc:
            print(f"error: {exc}")
        except KeyboardInterrupt:  # Ctrl-C while answering cancels that answer only
            print("\n(answer cancelled; the conversation goes on. Ctrl-C again or /quit leaves)")


def _show_last(app: Any, config: dict[str, Any], command: str, recorder: PromptRecorder) -> None:
    state = app.get_state(config).values
    passages = state.get("passages") or []
    if state.get("queries"):
        print(f"searched for: {state['queries'][0]}")
    if not passages:
        info = state.get("retrieval") or {}
        print(
            "(no passage kept"
            + (
                f": {info.get('candidates', 0)} candidates, the closest at distance "
                f"{info.get('closest_distance')}, threshold {info.get('threshold')})"
                if info
                else " yet)"
            )
        )
        return
    if command == "/passages":
        for i, p in enumerate(passages, 1):
            print(f"[{i}] {p['source']} score={p['score']:.3f} distance={p['distance']:.3f}")
            print("    " + p["text"][:300].replace("\n", " "))
        return
    if not recorder.prompts:
        print("(the generator was not called for the last question)")
        return
    for turn in recorder.prompts[-1]:  # the last call: a regeneration's, if there was one
        print(f"--- {turn['role']} ---\n{turn['content']}")
    if note := prompt_note(recorder.prompts[-1], passages):
        print(f"({note})")
