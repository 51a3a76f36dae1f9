"""Latency of the agentic graph against a plain retrieve-then-generate chain, same run.

    .venv/bin/python bench/bench_graph.py [--json]

Both use the same local model, the same collection (docs_corpus/), the same retriever
and k, and the same answer prompt; the plain chain just skips query generation,
verification and regeneration. The model's KV cache is reset before every measured
run and the order alternates, so neither side reuses the other's cached prompt.
Target (issue 16): graph / chain <= 1.3. Also measures the prompt-prefix cache: a
verifier call after the generator (shared leading block) against the same call after an
unrelated prompt.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

from langchain_core.messages import HumanMessage, SystemMessage

from graph import build_graph, config_for, prompts
from graph.builder import DIRECT_PATH
from graph.context import context_message
from ingest.pipeline import IngestOptions, Ingestor
from tools.config import load_settings
from tools.models.factory import chat_model, embeddings
from tools.retrieval.hybrid import make_retriever
from tools.store.collection import Collection

CORPUS = Path(__file__).resolve().parents[1] / "docs_corpus"
QUESTIONS = [
    "How do I switch the answer generator to an OpenAI-compatible server?",
    "What happens when the model file does not match its sha256?",
    "Which setting controls how long a model call may take?",
    "What does the window retrieval strategy do?",
    "How do I see the trace of an answer?",
    "What does rag ingest do with a file it cannot read?",
]


def cold(llama, run) -> tuple[float, object]:
    """Time ``run`` after clearing the model's cached prompt prefix."""
    llama.reset()
    started = time.perf_counter()
    result = run()
    return time.perf_counter() - started, result


def plain_chain(settings, retriever, llm, question: str) -> object:
    passages, _ = retriever.retrieve([question])
    context = context_message([asdict(p) for p in passages[: settings.k]])
    instructions = prompts.ANSWER.text.format(not_found=prompts.NOT_FOUND, question=question)
    return llm.invoke([context, HumanMessage(instructions)])


def prefix_cache(llm, context: SystemMessage) -> dict[str, float]:
    """Verifier-shaped call after the generator's prefix vs after an unrelated prompt."""
    verify = HumanMessage(
        prompts.VERIFY.text.format(question="A question?", answer="A statement [1].")
    )
    llm.invoke([context, HumanMessage("Question: warm the cache")], max_tokens=1)
    started = time.perf_counter()
    llm.invoke([context, verify], max_tokens=8)
    shared = time.perf_counter() - started
    llm.invoke([SystemMessage("Unrelated."), HumanMessage("Say hi.")], max_tokens=1)
    started = time.perf_counter()
    llm.invoke([context, verify], max_tokens=8)
    cold = time.perf_counter() - started
    return {
        "verifier_after_shared_prefix_s": round(shared, 2),
        "verifier_cold_s": round(cold, 2),
        "saving_ratio": round(cold / shared, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        settings = load_settings({"data_dir": Path(tmp), "llm_timeout_s": 900})
        collection = Collection(settings, create=True)
        embedder = embeddings(settings)
        Ingestor(settings, collection, embedder, IngestOptions(), progress=False).run([CORPUS])
        llm = chat_model(settings, "generator")
        retriever = make_retriever(collection, embedder, settings)
        app = build_graph()
        plain_chain(settings, retriever, llm, "warm up the model")  # loads belong to no one
        graph_runs, chain_runs, per_node = [], [], []
        llama = llm._loaded().llama
        for i, question in enumerate(QUESTIONS):
            runs = {
                "chain": lambda q=question: plain_chain(settings, retriever, llm, q),
                "graph": lambda q=question: app.invoke({"question": q}, config_for(settings)),
            }
            # alternate which goes first; every run starts with a cold KV cache
            order = ["chain", "graph"] if i % 2 == 0 else ["graph", "chain"]
            measured = {name: cold(llama, runs[name]) for name in order}
            chain_runs.append(measured["chain"][0])
            graph_runs.append(measured["graph"][0])
            out = measured["graph"][1]
            per_node.append(
                {
                    **out["timings"],
                    "outcome": out["outcome"],
                    "attempts": out.get("attempts", 0),
                }
            )
        passages, _ = retriever.retrieve([QUESTIONS[0]])
        cache = prefix_cache(llm, context_message([asdict(p) for p in passages[: settings.k]]))
    report = {
        "questions": len(QUESTIONS),
        "chain_s": [round(x, 2) for x in chain_runs],
        "graph_s": [round(x, 2) for x in graph_runs],
        "graph_over_chain": round(sum(graph_runs) / sum(chain_runs), 3),
        "median_node_s": {
            node: round(statistics.median(r.get(node, 0.0) for r in per_node), 2)
            for node in DIRECT_PATH
        },
        "outcomes": [r["outcome"] for r in per_node],
        "answers_generated": [r["attempts"] for r in per_node],
        "prefix_cache": cache,
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"plain chain: {report['chain_s']} s; graph: {report['graph_s']} s")
    print(
        f"graph / chain = {report['graph_over_chain']} (target <= 1.3); "
        f"outcomes: {report['outcomes']}; answers generated: {report['answers_generated']}"
    )
    print(
        "median seconds per node: "
        + ", ".join(f"{k} {v}" for k, v in report["median_node_s"].items())
    )
    c = report["prefix_cache"]
    print(
        f"verifier call after the generator's prefix {c['verifier_after_shared_prefix_s']} s "
        f"vs cold {c['verifier_cold_s']} s (x{c['saving_ratio']})"
    )


if __name__ == "__main__":
    main()
