"""Where an answer's time goes: every model call's tokens, per question and in total, and
the least time they can take on this machine.

    .venv/bin/python bench/bench_calls.py [--questions 8] [--data DIR] [--json]

Each question (bench_ttft's, on docs_corpus with the default local models, after its
warm-up question) is answered through the whole graph; its answer object's ``calls``
(tools/models/metered.py) give, for each model call, its step and role, the prompt
tokens, how many of them llama.cpp's KV cache kept from the previous call and how many
it computed, the tokens generated and the time. Reported per question and in total:
calls, tokens read, reused, computed, generated, the time of the calls and of the
whole answer, and the lower bound the tokens imply, computed / prefill rate +
generated / decode rate, at rates measured after the questions on the same loaded
model (prefill: ``PREFILL_TOKENS`` tokens of the corpus from an empty cache; decode:
``DECODE_TOKENS`` tokens one at a time; medians of ``RATE_ROUNDS``). A call time far
above its bound is time spent elsewhere than reading and writing tokens; tokens
computed that another call already computed are what caching could save.

Times need a quiet machine; token counts do not (they depend only on the prompts).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import revision_tree
from bench_ttft import CORPUS, QUESTIONS, WARM_UP, ingest

PREFILL_TOKENS = 512
DECODE_TOKENS = 32
RATE_ROUNDS = 3


def measured_rates(settings) -> dict[str, float]:
    """Prompt tokens read and tokens generated per second by the generator's loaded
    model, measured on it directly (its cache is emptied: run after the questions)."""
    from tools.models.factory import chat_model
    from tools.models.local_llm import shared_model

    model = chat_model(settings, "generator")
    loaded = shared_model(model.model_path, model.n_ctx, model.n_threads)
    llama = loaded.llama
    text = "\n\n".join(p.read_text() for p in sorted(CORPUS.glob("*.md")))
    tokens = llama.tokenize(text.encode(), add_bos=True)[:PREFILL_TOKENS]
    prefill, decode = [], []
    with loaded.lock:
        for _ in range(RATE_ROUNDS):
            llama.reset()
            started = time.perf_counter()
            llama.eval(tokens)
            prefill.append(len(tokens) / (time.perf_counter() - started))
            started = time.perf_counter()
            for token in tokens[:DECODE_TOKENS]:  # one token per evaluation, as decoding
                llama.eval([token])
            decode.append(DECODE_TOKENS / (time.perf_counter() - started))
        llama.reset()
    return {"prefill_per_s": statistics.median(prefill), "decode_per_s": statistics.median(decode)}


def account(calls: list[dict]) -> dict[str, float]:
    """One question's calls added up (tools.models.metered.tally)."""
    from tools.models.metered import tally

    if not calls:
        return {"calls": 0}
    total = next(iter(tally(calls, key=lambda _: "all").values()))
    return {
        "calls": total.calls,
        "read": total.prompt,
        "reused": total.reused,
        "computed": total.computed,
        "generated": total.generated,
        "call_s": round(total.seconds, 3),
        "uncounted": total.uncounted,
    }


def lower_bound(row: dict, rates: dict[str, float]) -> float:
    return (
        row.get("computed", 0) / rates["prefill_per_s"]
        + row.get("generated", 0) / rates["decode_per_s"]
    )


def run(args: argparse.Namespace) -> dict:
    from graph import build_graph, config_for
    from tools.config import load_settings

    data = Path(args.data) if args.data else Path(tempfile.mkdtemp(prefix="bench-calls-"))
    data.mkdir(parents=True, exist_ok=True)
    if not any(data.iterdir()):
        ingest(data, CORPUS)
    app = build_graph()
    config = config_for(data_dir=data, llm_timeout_s=1800)
    app.invoke({"question": WARM_UP}, config)
    rows = []
    for question in QUESTIONS[: args.questions]:
        started = time.perf_counter()
        out = app.invoke({"question": question}, config)
        row = {
            "question": question,
            "outcome": out.get("outcome"),
            "whole_s": round(time.perf_counter() - started, 3),
            **account(out.get("calls") or []),
            "calls_listed": out.get("calls") or [],
        }
        rows.append(row)
    rates = measured_rates(load_settings({"data_dir": data}))
    keys = ("calls", "read", "reused", "computed", "generated", "call_s", "whole_s", "uncounted")
    total = {k: round(sum(r.get(k, 0) for r in rows), 3) for k in keys}
    for row in [*rows, total]:
        row["bound_s"] = round(lower_bound(row, rates), 3)
    return {"rates": rates, "questions": rows, "total": total}


def table(report: dict) -> str:
    rates = report["rates"]
    lines = [
        f"rates on this machine: prefill {rates['prefill_per_s']:.1f} tokens/s, "
        f"decode {rates['decode_per_s']:.1f} tokens/s",
        f"{'question':<48} {'calls':>5} {'read':>6} {'reused':>6} {'computed':>8} "
        f"{'gen':>5} {'calls s':>8} {'whole s':>8} {'bound s':>8}",
    ]
    for row in [*report["questions"], {"question": "total", **report["total"]}]:
        lines.append(
            f"{row['question'][:48]:<48} {row.get('calls', 0):>5} {row.get('read', 0):>6} "
            f"{row.get('reused', 0):>6} {row.get('computed', 0):>8} {row.get('generated', 0):>5} "
            f"{row.get('call_s', 0):>8.2f} {row['whole_s']:>8.2f} {row['bound_s']:>8.2f}"
        )
    if report["total"].get("uncounted"):
        lines.append(f"{report['total']['uncounted']} calls reported no token counts")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=len(QUESTIONS))
    parser.add_argument("--data", help="a data directory to reuse (ingested if empty)")
    parser.add_argument("--json", action="store_true", help="the report as JSON, every call")
    args = parser.parse_args()
    revision_tree.only(revision_tree.REPO)  # this checkout's modules, not the venv's install
    report = run(args)
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        print()
    else:
        print(table(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
