"""Model throughput on this machine, each figure beside a baseline measured in the same run.

    .venv/bin/python bench/bench_models.py [--passages 256] [--json] [--builds [--rounds 3]]

Embeddings: 256 CACM passages of ~100 words, batched through our LangChain wrapper,
against the baseline of embedding them one call at a time.
LLM: prompt (prefill) and output tokens/s through ChatLocalLlama, against the same
prompt sent to llama-cpp-python directly (the ratio shows the wrapper's overhead).
Builds (``--builds``): raw prefill and output tokens/s of the installed llama-cpp-python
(scripts/build_llama.sh's default flags for this CPU), of the AVX2 baseline build, and
of a native build (``GGML_NATIVE=ON``), the last two built once into the cache, on the
same prompt, taking turns in child processes for ``--rounds`` rounds; medians, and each
as a ratio to native. A native build that uses AMX is refused: that is the build that
crashes (llama.cpp issue 20824).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from langchain_core.messages import HumanMessage

from tools.config import load_settings
from tools.models.factory import chat_model, embeddings
from tools.models.local_llm import uses_amx

REPO = Path(__file__).resolve().parents[1]
CACM = REPO.parent / "shared" / "data" / "cacm" / "cacm.json"
WORDS = 100
NATIVE_CMAKE_ARGS = "-DLLAVA_BUILD=OFF -DGGML_NATIVE=ON"
BUILD_SCRIPT = str(REPO / "scripts" / "build_llama.sh")


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


def raw_speed(context: str) -> dict[str, float]:
    """Cold prefill and output tokens/s of whichever llama_cpp this process imports."""
    import llama_cpp

    from tools.models.local_assets import DEFAULT_LLM, verify

    settings = load_settings()
    path = verify(DEFAULT_LLM, settings.resolved_cache_dir())
    llama = llama_cpp.Llama(
        model_path=str(path), n_ctx=2048, n_threads=os.cpu_count(), verbose=False
    )
    tokens = llama.tokenize(f"{context}\n\nSummarise the passages above.".encode())
    started = time.perf_counter()
    first = 0.0
    for made, _ in enumerate(llama.generate(tokens, temp=0.0), start=1):
        if made == 1:  # the prompt is read (prefill) before the first token comes
            first = time.perf_counter()
        if made == 65:
            break
    prefill_s, decode_s = first - started, time.perf_counter() - first
    out = made - 1
    return {
        "prompt_tokens": len(tokens),
        "prompt_tok_per_s": len(tokens) / prefill_s,
        "output_tok_per_s": out / decode_s,
        "amx": uses_amx(),
    }


def build_llama(*args: str) -> str:
    """What scripts/build_llama.sh prints: a wheel's path, or flags (its progress shows)."""
    done = subprocess.run([BUILD_SCRIPT, *args], cwd=REPO, check=True, stdout=subprocess.PIPE)
    return done.stdout.decode()


def build_site(flags: str) -> Path:
    """A llama-cpp-python built with ``flags`` (once, cached), unpacked for PYTHONPATH."""
    wheel = Path(build_llama(flags).strip())
    target = wheel.parent / "site"
    if not (target / "llama_cpp").is_dir():
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", target, wheel],
            check=True,
        )
    return target


def bench_builds(context: str, rounds: int) -> dict[str, object]:
    baseline = build_llama("--baseline")
    sites: dict[str, Path | None] = {
        "installed": None,
        "baseline": build_site(baseline),
        "native": build_site(NATIVE_CMAKE_ARGS),
    }

    def measure(pythonpath: Path | None) -> dict[str, float]:
        env = dict(os.environ)
        if pythonpath:
            env["PYTHONPATH"] = f"{pythonpath}{os.pathsep}{env.get('PYTHONPATH', '')}"
        done = subprocess.run(
            [sys.executable, __file__, "--measure-raw"],
            input=context,
            env=env,
            cwd=REPO,
            check=True,
            capture_output=True,
            text=True,
        )
        return json.loads(done.stdout)

    runs: dict[str, list[dict[str, float]]] = {name: [] for name in sites}
    for _ in range(rounds):  # take turns, so drifting load hits every build alike
        for name, site in sites.items():
            runs[name].append(measure(site))
    if any(r["amx"] for r in runs["native"]):
        raise SystemExit("the native build uses AMX on this CPU: not measured (it crashes)")
    flags = build_llama("--flags")
    report: dict[str, object] = {
        "flags": {
            "installed": flags,
            "baseline": baseline,
            "native": NATIVE_CMAKE_ARGS,
        },
        "rounds": rounds,
    }
    for name, measured in runs.items():
        report[name] = {
            key: statistics.median(r[key] for r in measured)
            for key in ("prompt_tokens", "prompt_tok_per_s", "output_tok_per_s")
        }
    for name in ("installed", "baseline"):
        for key in ("prompt_tok_per_s", "output_tok_per_s"):
            report[f"{name}_over_native_{key}"] = report[name][key] / report["native"][key]
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--passages", type=int, default=256)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--builds", action="store_true", help="portable against native build")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--measure-raw", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure_raw:  # a child of --builds: the context comes on stdin
        print(json.dumps(raw_speed(sys.stdin.read())))
        return
    texts = passages(args.passages)
    context = "\n\n".join(f"[{i + 1}] {t}" for i, t in enumerate(texts[:4]))
    if args.builds:
        report = bench_builds(context, args.rounds)
        if args.json:
            print(json.dumps(report, indent=2))
            return
        for name, flags in report["flags"].items():
            print(f"{name}: CMAKE_ARGS={flags}")
        for key, label in (("prompt_tok_per_s", "prefill"), ("output_tok_per_s", "output")):
            i, b, n = (report[name][key] for name in ("installed", "baseline", "native"))
            print(
                f"{label}: installed {i:.1f}, AVX2 baseline {b:.1f}, native {n:.1f} tok/s "
                f"(installed x{report[f'installed_over_native_{key}']:.2f} of native, "
                f"baseline x{report[f'baseline_over_native_{key}']:.2f}; median of "
                f"{args.rounds}, {report['native']['prompt_tokens']:.0f}-token prompt)"
            )
        return
    report = {
        "embeddings": bench_embeddings(texts),
        "llm": bench_llm(context),
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
