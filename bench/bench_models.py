"""Model throughput on this machine, each figure beside a baseline measured in the same run.

    .venv/bin/python bench/bench_models.py [--passages 256] [--json]

Embeddings: 256 CACM passages of ~100 words, batched through our LangChain wrapper,
against the baseline of embedding them one call at a time.
LLM: prompt (prefill) and output tokens/s through ChatLocalLlama, against the same
prompt sent to llama-cpp-python directly (the ratio shows the wrapper's overhead).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from langchain_core.messages import HumanMessage

from tools.config import load_settings
from tools.models import chat_model, embeddings

CACM = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "cacm" / "cacm.json"
WORDS = 100


def passages(count: int) -> list[str]:
    """~100-word passages of real abstracts (short abstracts are skipped)."""
    out: list[str] = []
    with CACM.open() as fh:
        for line in fh:
            words = json.loads(line)["contents"].split()
            if len(words) >= WORDS:
                out.append(" ".join(words[:WORDS]))
            if len(out) == count:
                return out
    raise SystemExit(f"only {len(out)} passages of {WORDS} words in {CACM}")


def bench_embeddings(texts: list[str]) -> dict[str, float]:
    model = embeddings(load_settings())
    model.embed_query("warm up")
    started = time.perf_counter()
    model.embed_documents(texts)
    batched = len(texts) / (time.perf_counter() - started)
    sample = texts[:64]
    started = time.perf_counter()
    for text in sample:
        model.embed_query(text)
    single = len(sample) / (time.perf_counter() - started)
    return {"batched_per_s": batched, "one_by_one_per_s": single, "ratio": batched / single}


def bench_llm(context: str) -> dict[str, float]:
    llm = chat_model(load_settings({"llm_max_tokens": 128}), "generator")
    llama = llm._loaded().llama
    question = "Summarise the passages above in five sentences."
    prompt = f"{context}\n\n{question}"

    def timed_wrapper() -> tuple[float, int, int]:
        llama.reset()  # no prompt-prefix reuse: measure a cold prefill
        started = time.perf_counter()
        first = None
        usage = None
        for chunk in llm.stream([HumanMessage(prompt)]):
            if first is None and chunk.text:
                first = time.perf_counter()
            usage = chunk.usage_metadata or usage
        end = time.perf_counter()
        return first - started, end - first, usage["input_tokens"], usage["output_tokens"]

    def timed_raw() -> tuple[float, float]:
        llama.reset()
        started = time.perf_counter()
        out = llama.create_chat_completion(
            messages=[{"role": "user", "content": prompt}], max_tokens=128, temperature=0.0
        )
        return time.perf_counter() - started, out["usage"]["completion_tokens"]

    prefill, decode, n_in, n_out = timed_wrapper()
    raw_s, raw_out = timed_raw()
    wrapper_s = prefill + decode
    return {
        "prompt_tokens": n_in,
        "output_tokens": n_out,
        "prompt_tok_per_s": n_in / prefill,
        "output_tok_per_s": n_out / decode,
        "wrapper_s": wrapper_s,
        "raw_llama_cpp_s": raw_s,
        "raw_output_tokens": raw_out,
        "wrapper_over_raw": wrapper_s / raw_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--passages", type=int, default=256)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    texts = passages(args.passages)
    report = {
        "embeddings": bench_embeddings(texts),
        "llm": bench_llm("\n\n".join(f"[{i + 1}] {t}" for i, t in enumerate(texts[:4]))),
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return
    e, m = report["embeddings"], report["llm"]
    print(
        f"embeddings: {e['batched_per_s']:.1f} passages/s batched vs "
        f"{e['one_by_one_per_s']:.1f}/s one at a time (x{e['ratio']:.2f})"
    )
    print(
        f"llm: prefill {m['prompt_tok_per_s']:.1f} tok/s ({m['prompt_tokens']} tokens), "
        f"output {m['output_tok_per_s']:.1f} tok/s ({m['output_tokens']} tokens)"
    )
    print(
        f"llm: wrapper {m['wrapper_s']:.2f}s vs raw llama-cpp {m['raw_llama_cpp_s']:.2f}s "
        f"for the same prompt (x{m['wrapper_over_raw']:.2f}; raw made "
        f"{m['raw_output_tokens']} tokens)"
    )


if __name__ == "__main__":
    main()
