"""How stable the label is: the same question set under three perturbations, each run's
outcome (verified, not verified, the documents do not say, abstained) compared with
the plain run's, question by question (issue 70 item 5).

The perturbations:

(a) ``shift-citations RECORDING OUT``: a recording (lab/recordings) whose generator
    replies cite the neighbouring passage ([n] becomes [n+1], the last becomes [n-1]).
    Replayed (``rag eval answers --replay OUT --record NEW``), the answers are the same
    words with the citations moved, and what the checks then ask the verifier anew is
    asked of the model (and kept in NEW). Without ``--record`` such an item fails as a
    model error, which ``agreement`` counts apart (not comparable), never as agreeing.
(b) chunk size +-25%: ``rag ingest DIR --collection NAME-small --chunk-size N`` with N
    three quarters (and five quarters) of the default, then the set asked of it with the
    real models.
(c) ``add-sentence PAGES OUT QUESTIONS``: a copy of the pages with one sentence added to
    each page a question names as its source (after its first paragraph), to ingest and
    ask with the real models.

``agreement PLAIN RUN...`` prints, for each run folder (``rag eval answers --out``), the
share of questions whose outcome is the plain run's, with its 95% interval, and the
questions that changed::

    python bench/label_stability.py shift-citations dev-kea.calls.jsonl kea-shifted.jsonl
    python bench/label_stability.py agreement runs/plain runs/shifted
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
from pathlib import Path

from evaluation.answers import outcome_of
from evaluation.metrics import wilson_interval
from graph.context import numbers_by_location
from tools.text import MARKER

# The sentence (c) adds: true of any page, about nothing a question asks.
ADDED = "This page is part of the product's documentation and may change between releases."
_FIRST_PARAGRAPH_END = re.compile(r"\n\s*\n")


def shifted(reply: str, passages: int) -> str:
    """``reply`` citing each passage's neighbour: [n] as [n+1], the last as [n-1]."""
    if passages < 2:
        return reply
    return MARKER.sub(lambda m: f"[{_neighbour(int(m[1]), passages)}]", reply)


def _neighbour(n: int, passages: int) -> int:
    return n + 1 if n < passages else n - 1


def shift_citations(recording: Path, out: Path) -> int:
    """Write ``recording`` with every generator reply's citations moved (a); the keys
    (what was asked) stay, so a replay asks the same first question of the generator."""
    lines = []
    changed = 0
    for line in recording.read_text().splitlines():
        if not line.strip():
            continue
        call = json.loads(line)
        if call["role"] == "generator":
            prompt = "\n".join(text for _, text in call["messages"])
            passages = len(numbers_by_location(prompt))
            moved = shifted(call["content"], passages)
            changed += moved != call["content"]
            call["content"] = moved
        lines.append(json.dumps(call))
    out.write_text("\n".join(lines) + "\n")
    return changed


def add_sentence(pages: Path, out: Path, questions: Path) -> list[str]:
    """Copy ``pages`` to ``out`` with ``ADDED`` after the first paragraph of each page a
    question of ``questions`` names as its ``source`` (c); the pages changed."""
    shutil.copytree(pages, out)
    sources = {
        json.loads(line).get("source")
        for line in questions.read_text().splitlines()
        if line.strip()
    }
    changed = []
    for source in sorted(s for s in sources if s):
        page = out / source
        if not page.is_file():
            continue
        text = page.read_text()
        end = _FIRST_PARAGRAPH_END.search(text)
        at = end.start() if end else len(text)
        page.write_text(f"{text[:at]}\n\n{ADDED}{text[at:]}")
        changed.append(source)
    return changed


def _outcomes(folder: Path) -> dict[str, str]:
    lines = (folder / "answers.items.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines if line.strip()]
    return {r["id"]: "error" if "error" in r else outcome_of(r) for r in records}


def agreement(plain: Path, run: Path) -> dict[str, object]:
    """The share of questions (answered in both runs) whose outcome is the plain run's."""
    a, b = _outcomes(plain), _outcomes(run)
    both = [i for i in a if i in b and "error" not in (a[i], b[i])]
    same = sum(a[i] == b[i] for i in both)
    low, high = wilson_interval(same, len(both)) if both else (0.0, 0.0)
    return {
        "run": str(run),
        "compared": len(both),
        "same": same,
        "agreement": round(same / len(both), 4) if both else None,
        "interval": [round(low, 4), round(high, 4)],
        "not_comparable": sorted(i for i in a if i in b and "error" in (a[i], b[i])),
        "changed": {i: f"{a[i]} -> {b[i]}" for i in both if a[i] != b[i]},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    shift = sub.add_parser("shift-citations", help="(a) a recording citing the neighbours")
    shift.add_argument("recording", type=Path)
    shift.add_argument("out", type=Path)
    added = sub.add_parser("add-sentence", help="(c) pages with one sentence added")
    added.add_argument("pages", type=Path)
    added.add_argument("out", type=Path)
    added.add_argument("questions", type=Path)
    agree = sub.add_parser("agreement", help="label agreement with the plain run")
    agree.add_argument("plain", type=Path)
    agree.add_argument("runs", type=Path, nargs="+")
    args = parser.parse_args(argv)
    if args.command == "shift-citations":
        print(f"{shift_citations(args.recording, args.out)} generator replies shifted")
    elif args.command == "add-sentence":
        print(f"added to {len(add_sentence(args.pages, args.out, args.questions))} pages")
    else:
        print(json.dumps([agreement(args.plain, run) for run in args.runs], indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
