"""Time to the first answer token and to the whole answer, per value of one setting, on an
idle machine and beside one busy process, in one run.

    .venv/bin/python bench/bench_ttft.py [--vary evidence=passages,sentences]
        [--loads idle,busy] [--questions 8] [--json]

Each value answers the same questions through the whole graph (query generation,
retrieval, evidence, generation, verification) on docs_corpus with the default local
models, after one warm-up question (eight: over the first three alone, the whole-answer
ratio was 0.65, 0.63 and 0.53 in three runs on 2026-11-27, as one question's path through
verification moved the median). Reported per value, as medians: time to the first
draft token (what `rag ask` shows first on a terminal), the part of it after retrieval
(selecting evidence, also reported on its own, reading the prompt, writing the first
token), the whole answer, the prompt the generator read (characters of passages), and
each time as a ratio to the first value on the idle machine, measured in the same run.
The busy process is a pure-Python loop: one core taken, as by another user's job.
``--vary llm_threads=0,1,2`` measures threads the same way. A value may set other settings
with it, joined by ``+``: ``--vary evidence=passages,sentences,sentences+evidence_chars=600``.

``--baseline-rev REV`` instead compares this tree's code with the code at ``REV`` (e.g.
430e608, the commit issue 59 was filed on) at the default settings, in one run. Each side
is a child process on its own tree only (``bench/revision_tree.py``: ``REV``'s whole tree
extracted by ``git archive``, no module of another checkout importable); both ingest the
same corpus (this tree's docs_corpus), answer the warm-up, then take the questions in
turns, ``--rounds`` times, the order of the two sides alternating, so a change of the
machine's load falls on both. Reported per load: medians per side and the paired ratio
new/baseline of the whole checked answer (generation and verification included), the
geometric mean of each question's ratio with its 95% interval over the questions (t), and
whether its upper end is within ``--max-ratio`` (1.05). Questions whose answer, outcome or
attempts differ between the sides are listed: their times do not compare the same work.

    .venv/bin/python bench/bench_ttft.py --baseline-rev 430e608 [--rounds 3] [--loads idle]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import revision_tree

# the project's modules are imported where used, after revision_tree.only() has made one
# tree the only source of them (the venv's editable install would serve another checkout's)
REPO = revision_tree.REPO
CORPUS = REPO / "docs_corpus"
T_975 = {1: 12.71, 2: 4.3, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26}
WARM_UP = "What does rag doctor do?"
QUESTIONS = [
    "Which setting controls how long a model call may take?",
    "How do I see the trace of an answer?",
    "What does rag ingest do with a file it cannot read?",
    "Which command starts the local chat page?",
    "Which setting holds all persistent state such as Chroma vectors and saved conversations?",
    "What happens when no passage is within the distance threshold?",
    "How do I turn the topic guard's distance check off?",
    "Which store setting lets several servers share collections?",
]


def ingest(data: Path, corpus: Path) -> None:
    from ingest.pipeline import IngestOptions, Ingestor
    from tools.config import load_settings
    from tools.models.factory import embeddings
    from tools.store.collection import Collection

    settings = load_settings({"data_dir": data})
    Ingestor(
        settings,
        Collection(settings, create=True),
        embeddings(settings),
        IngestOptions(),
        progress=False,
    ).run([corpus])


def timed_answer(app, question: str, config, path: dict | None = None) -> dict[str, float]:
    """Times of one answer; ``path`` (if given) receives what the answer was."""
    from graph.draft import DRAFT

    started, cpu = time.perf_counter(), time.process_time()
    retrieved = first = None
    final: dict = {}
    for mode, chunk in app.stream(
        {"question": question}, config, stream_mode=["updates", "custom", "values"]
    ):
        now = time.perf_counter() - started
        if mode == "updates" and "retrieve" in chunk:
            retrieved = now
        elif mode == "custom" and chunk.get("kind") == DRAFT and first is None:
            first = now
        elif mode == "values":
            final = chunk
    whole = time.perf_counter() - started
    cpu = time.process_time() - cpu  # every thread of the process (the model's too)
    first = whole if first is None else first  # an abstention streams nothing
    if path is not None:
        path |= {k: final.get(k) for k in ("answer", "outcome", "attempts")}
    return {
        "first_token_s": first,
        "after_retrieval_s": first - (retrieved or 0),
        "evidence_s": (final.get("timings") or {}).get("select_evidence", 0.0),
        "whole_s": whole,
        "cpu_s": cpu,
        "prompt_chars": sum(len(p["text"]) for p in final.get("passages") or []),
        "verified": float(final.get("outcome") == "verified"),
    }


def busy() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def serve(data: Path, corpus: Path) -> None:
    """The child of a comparison: ingest, warm up, then answer each question read from
    stdin (JSON lines) with its times and path on the saved stdout."""
    from graph import build_graph, config_for

    replies = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # whatever the product prints goes to stderr, not into the replies
    ingest(data, corpus)
    app = build_graph()
    config = config_for(data_dir=data, llm_timeout_s=1800)
    timed_answer(app, WARM_UP, config)
    replies.write(json.dumps({"ready": True}) + "\n")
    for line in sys.stdin:
        path: dict = {}
        times = timed_answer(app, json.loads(line)["question"], config, path)
        replies.write(json.dumps({"times": times, "path": path}) + "\n")


class Side:
    """One side of a comparison: a child answering on ``tree``'s code only."""

    def __init__(self, name: str, tree: Path, data: Path) -> None:
        self.name, self.tree = name, tree
        self.proc = revision_tree.child(
            tree,
            Path(__file__),
            "--serve",
            str(data),
            "--corpus",
            str(CORPUS),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self._read()  # ingested and warmed up

    def _read(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"the {self.name} side ({self.tree}) ended: exit {self.proc.wait()}")
        return json.loads(line)

    def answer(self, question: str) -> dict:
        self.proc.stdin.write(json.dumps({"question": question}) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        self.proc.stdin.close()
        if self.proc.wait(timeout=120):
            raise SystemExit(f"the {self.name} side ({self.tree}) failed: {self.proc.returncode}")


def compare(args: argparse.Namespace) -> int:
    questions = QUESTIONS[: args.questions]
    baseline = revision_tree.revision_tree(args.baseline_rev)
    work = Path(tempfile.mkdtemp(prefix="bench-ttft-"))
    began = time.perf_counter()
    print(f"baseline {args.baseline_rev}: {baseline}", file=sys.stderr, flush=True)
    sides = [Side("new", REPO, work / "new"), Side("base", baseline, work / "base")]
    ready = time.perf_counter() - began
    report: dict = {
        "cores": os.cpu_count(),
        "new": str(REPO),
        "baseline": args.baseline_rev,
        "questions": len(questions),
        "rounds": args.rounds,
        "setup_s": round(ready, 1),
        "loads": [],
    }
    try:
        for load in (args.loads or "idle").split(","):
            burner = busy() if load == "busy" else None
            runs: dict[str, list[dict]] = {"new": [], "base": []}
            paths: dict[str, list[dict]] = {"new": [], "base": []}
            try:
                for round_ in range(args.rounds):
                    for i, question in enumerate(questions):
                        order = sides if (round_ + i) % 2 == 0 else sides[::-1]
                        for side in order:
                            reply = side.answer(question)
                            runs[side.name].append(reply["times"])
                            paths[side.name].append(reply["path"])
                        print(
                            json.dumps(
                                {
                                    "load": load,
                                    "round": round_,
                                    "question": i,
                                    "new_whole_s": round(runs["new"][-1]["whole_s"], 2),
                                    "base_whole_s": round(runs["base"][-1]["whole_s"], 2),
                                }
                            ),
                            file=sys.stderr,
                            flush=True,
                        )
            finally:
                if burner:
                    burner.kill()
            report["loads"].append(summary(load, questions, runs, paths, args))
    finally:
        for side in sides:
            side.close()
    report["seconds"] = round(time.perf_counter() - began, 1)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(comparison_table(report, args.max_ratio))
    return 0


def summary(load, questions, runs, paths, args) -> dict:
    """Medians per side, and the paired ratios of the whole answer, its CPU time and the
    first token, each with its interval."""
    n = len(questions)
    row: dict = {"load": load}
    for key in ("first_token_s", "whole_s", "cpu_s", "evidence_s", "prompt_chars", "verified"):
        for side in ("new", "base"):
            row[f"{side}_{key}"] = round(statistics.median(r[key] for r in runs[side]), 2)
    row["whole_median_ratio"] = round(row["new_whole_s"] / row["base_whole_s"], 3)
    for key in ("whole", "cpu", "first_token"):
        ratio, interval, each = paired_ratio(runs, f"{key}_s", n)
        row[f"{key}_ratio"], row[f"{key}_ratio_95"] = ratio, interval
        row[f"per_question_{key}_ratio"] = each
    interval = row["whole_ratio_95"]
    row["within_max"] = None if interval is None else interval[1] <= args.max_ratio
    differ = {}  # by question, the first round where the two sides' answers differ
    for k, (new, base) in enumerate(zip(paths["new"], paths["base"], strict=True)):
        if new != base:
            differ.setdefault(k % n, {"question": questions[k % n], "new": new, "base": base})
    row["different_paths"] = list(differ.values())
    return row


def paired_ratio(runs: dict[str, list[dict]], key: str, n: int):
    """The geometric mean over the ``n`` questions of each one's ratio new/base (the mean
    of its logs over the rounds), its 95% t interval over the questions, and each one's."""
    # run k is question k % n of round k // n
    logs = [
        statistics.mean(
            math.log(runs["new"][k][key] / runs["base"][k][key])
            for k in range(q, len(runs["new"]), n)
        )
        for q in range(n)
    ]
    mean = statistics.mean(logs)
    interval = None
    if n > 1:
        half = T_975.get(n - 1, 1.96 + 2.4 / (n - 1)) * statistics.stdev(logs) / math.sqrt(n)
        interval = [round(math.exp(mean - half), 3), round(math.exp(mean + half), 3)]
    return round(math.exp(mean), 3), interval, [round(math.exp(x), 3) for x in logs]


def comparison_table(report: dict, max_ratio: float) -> str:
    lines = [
        f"cores: {report['cores']}; new: {report['new']}; baseline: {report['baseline']}; "
        f"{report['questions']} questions x {report['rounds']} rounds per side, in turns; "
        f"medians; setup {report['setup_s']} s, whole run {report['seconds']} s",
        "| load | side | first token s | whole s | CPU s | evidence s | prompt chars | verified |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in report["loads"]:
        for side in ("new", "base"):
            lines.append(
                f"| {row['load']} | {side} | {row[f'{side}_first_token_s']} | "
                f"{row[f'{side}_whole_s']} | {row[f'{side}_cpu_s']} | "
                f"{row[f'{side}_evidence_s']} | "
                f"{row[f'{side}_prompt_chars']:.0f} | {row[f'{side}_verified']} |"
            )
    for row in report["loads"]:
        interval = row["whole_ratio_95"]
        verdict = (
            "n/a (one question)"
            if interval is None
            else f"{'within' if row['within_max'] else 'NOT within'} {max_ratio}"
        )
        lines.append(
            f"{row['load']}: whole checked answer, new/baseline = {row['whole_ratio']} "
            f"(95% interval {interval[0] if interval else '-'}-{interval[1] if interval else '-'}"
            f", paired over {report['questions']} questions; ratio of medians "
            f"{row['whole_median_ratio']}); upper end {verdict}"
        )
        lines.append(f"  per question: {row['per_question_whole_ratio']}")
        first = row["first_token_ratio_95"] or ["-", "-"]
        lines.append(
            f"  first token, new/baseline = {row['first_token_ratio']} (95% interval "
            f"{first[0]}-{first[1]}); per question: {row['per_question_first_token_ratio']}"
        )
        cpu = row["cpu_ratio_95"] or ["-", "-"]
        lines.append(
            f"  CPU time of the answering process (less moved by other users' load), "
            f"new/baseline = {row['cpu_ratio']} (95% interval {cpu[0]}-{cpu[1]}); per "
            f"question: {row['per_question_cpu_ratio']}"
        )
        for d in row["different_paths"]:
            lines.append(f"  different path: {d['question']!r}: new {d['new']} / base {d['base']}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vary", default="evidence=passages,sentences", metavar="NAME=V1,V2")
    parser.add_argument("--loads", help="idle,busy (with --baseline-rev: idle)")
    parser.add_argument("--questions", type=int, default=len(QUESTIONS))
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--baseline-rev", metavar="REV", help="compare this tree's code with REV's instead"
    )
    parser.add_argument("--rounds", type=int, default=3, help="with --baseline-rev")
    parser.add_argument("--max-ratio", type=float, default=1.05, help="with --baseline-rev")
    parser.add_argument("--serve", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--corpus", type=Path, default=CORPUS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.corpus)
        return 0
    if args.baseline_rev:
        return compare(args)
    revision_tree.only(REPO)
    from graph import build_graph, config_for

    name, _, values = args.vary.partition("=")
    questions = QUESTIONS[: args.questions]
    data = Path(tempfile.mkdtemp(prefix="bench-ttft-"))
    ingest(data, CORPUS)
    app = build_graph()
    rows = []
    for load in (args.loads or "idle,busy").split(","):
        for value in values.split(","):
            first, *others = value.split("+")
            also = dict(other.split("=", 1) for other in others)
            config = config_for(data_dir=data, llm_timeout_s=1800, **{name: first}, **also)
            burner = busy() if load == "busy" else None
            try:
                timed_answer(app, WARM_UP, config)
                runs = [timed_answer(app, q, config) for q in questions]
            finally:
                if burner:
                    burner.kill()
            row = {"load": load, name: value}
            for key in runs[0]:
                row[key] = round(statistics.median(r[key] for r in runs), 2)
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    base = rows[0]
    for row in rows:
        row["first_token_ratio"] = round(row["first_token_s"] / base["first_token_s"], 2)
        row["whole_ratio"] = round(row["whole_s"] / base["whole_s"], 2)
    if args.json:
        print(json.dumps({"cores": os.cpu_count(), "rows": rows}, indent=2))
        return 0
    print(
        f"cores: {os.cpu_count()}; medians over {len(questions)} questions; ratios to "
        f"{name}={base[name]} {base['load']}"
    )
    print(
        f"| load | {name} | first token s | after retrieval s | of it evidence s | whole s "
        "| prompt chars | first/base | whole/base |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['load']} | {r[name]} | {r['first_token_s']} | {r['after_retrieval_s']} | "
            f"{r['evidence_s']} | {r['whole_s']} | {r['prompt_chars']:.0f} | "
            f"{r['first_token_ratio']} | {r['whole_ratio']} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
