"""SQuAD 2.0 as an answer benchmark: a seeded sample of questions and the official scores.

The sample takes answerable and unanswerable questions in fixed numbers (SQuAD 2.0 dev
is about half of each), so abstention is measured on a known mix. Every paragraph of
the file becomes a corpus document, not only the sampled questions' own paragraphs:
retrieval then has to find the right paragraph among all of them, as it would in use.
Exact match and token F1 follow the official evaluation script (lower case, no
punctuation, no articles, best over the gold answers).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path

from evaluation.datasets import DatasetError, read_jsonl
from evaluation.lab import DATA
from evaluation.splits import SPLITS, Split, excluded_from_test, side_of
from tools.answer_check import normalize_answer, states, token_overlap

SQUAD_DEV = Path("squad2-dev") / "dev-v2.0.json"  # under the eval_data_dir setting
# The new-documents question sets: one folder of pages per set, its questions beside it
NEWDOCS = DATA / "newdocs"


@dataclass(frozen=True)
class QAItem:
    """One question: gold answers are empty for an unanswerable one."""

    id: str
    question: str
    answers: tuple[str, ...] = ()
    answerable: bool | None = None  # None: unknown (a question set without gold answers)
    context_id: str = ""  # the paragraph (or the page) the question was written from
    split: str = ""  # dev or test, for a question set that carries its frozen split


@dataclass
class SquadSample:
    items: list[QAItem]
    paragraphs: dict[str, str] = field(default_factory=dict)  # corpus id -> text
    titles: dict[str, str] = field(default_factory=dict)  # corpus id -> article title


def load_squad(
    path: Path, *, answerable: int, unanswerable: int, seed: int = 0, split: Split = "dev"
) -> SquadSample:
    """``answerable`` + ``unanswerable`` questions of ``split``'s articles drawn with
    ``seed``, and every paragraph of those articles (evaluation/splits.py: the articles
    are frozen per side, and test never draws a question earlier tuning drew)."""
    try:
        articles = json.loads(path.read_text(encoding="utf-8"))["data"]
    except FileNotFoundError:
        raise DatasetError(f"{path}: no such file") from None
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise DatasetError(f"{path}: not a SQuAD file ({exc})") from None
    burned = excluded_from_test("squad") if split == "test" else frozenset()
    sample = SquadSample(items=[])
    pools: dict[bool, list[QAItem]] = {True: [], False: []}
    for a, article in enumerate(articles):
        if side_of("squad", article.get("title", "")) != split:
            continue
        for p, paragraph in enumerate(article["paragraphs"]):
            pid = f"a{a:03d}p{p:03d}"
            sample.paragraphs[pid] = paragraph["context"]
            sample.titles[pid] = article.get("title", "").replace("_", " ")
            for qa in paragraph["qas"]:
                if qa["id"] in burned:
                    continue
                impossible = bool(qa.get("is_impossible"))
                golds = tuple(dict.fromkeys(x["text"] for x in qa.get("answers", [])))
                pools[not impossible].append(
                    QAItem(qa["id"], qa["question"], golds, not impossible, pid)
                )
    rng = random.Random(seed)
    for is_answerable, wanted in ((True, answerable), (False, unanswerable)):
        pool = pools[is_answerable]
        if wanted > len(pool):
            raise DatasetError(f"{path}: asked for {wanted}, only {len(pool)} available")
        sample.items += rng.sample(pool, wanted)
    rng.shuffle(sample.items)
    return sample


def write_corpus(sample: SquadSample, path: Path) -> Path:
    """The paragraphs as a BEIR ``corpus.jsonl``; unchanged content keeps the same file."""
    lines = "".join(
        json.dumps({"_id": pid, "title": sample.titles[pid], "text": text}) + "\n"
        for pid, text in sample.paragraphs.items()
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.is_file() or path.read_text(encoding="utf-8") != lines:
        path.write_text(lines, encoding="utf-8")
    return path


def newdocs_sets() -> list[str]:
    """The new-documents sets: every folder of pages under ``NEWDOCS``, by name."""
    return sorted(folder.name for folder in NEWDOCS.iterdir() if folder.is_dir())


def newdocs_questions(name: str) -> Path:
    """The questions file of the new-documents set whose pages are in ``NEWDOCS / name``;
    git's set came first and keeps the plain name."""
    return NEWDOCS / ("questions.jsonl" if name == "git" else f"{name}_questions.jsonl")


def load_questions(path: Path) -> list[QAItem]:
    """A generic question set: JSONL with ``question`` and optional ``id`` and ``answers``."""
    items: list[QAItem] = []
    for number, record in read_jsonl(path):
        if not record.get("question"):
            raise DatasetError(f"{path}:{number}: expected a JSON object with a 'question'")
        answers = record.get("answers")
        if answers is not None and not isinstance(answers, list):
            raise DatasetError(f"{path}:{number}: 'answers' must be a list of strings")
        split = record.get("split", "")
        if split not in ("", *SPLITS):
            raise DatasetError(f"{path}:{number}: 'split' must be one of {SPLITS}")
        items.append(
            QAItem(
                str(record.get("id", number)),
                str(record["question"]),
                tuple(str(a) for a in answers or ()),
                None if answers is None else bool(answers),
                context_id=str(record.get("source", "")),
                split=split,
            )
        )
    if not items:
        raise DatasetError(f"{path}: no questions")
    return items


# --- the official SQuAD scores -----------------------------------------------------------------
def exact_match(prediction: str, golds: tuple[str, ...]) -> float:
    return max(
        (float(normalize_answer(prediction) == normalize_answer(g)) for g in golds), default=0.0
    )


def contains_answer(prediction: str, golds: tuple[str, ...]) -> bool:
    """Whether a full-sentence answer states a gold answer (``states``). Token F1 against
    a short gold span marks every sentence wrong."""
    return any(states(prediction, gold) for gold in golds)


def token_f1(prediction: str, golds: tuple[str, ...]) -> float:
    return max((token_overlap(prediction, g) for g in golds), default=0.0)
