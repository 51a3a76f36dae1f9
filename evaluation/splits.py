"""The frozen dev/test splits every benchmark draws from: one committed file per benchmark.

Tuning reads dev; a release figure reads test, once. A split was a hash of a seed and
a group before, so another ``--seed`` moved items across, and pairs written later were
kept only because they hashed to dev at seed 0; questions of one SQuAD article and
passages quoted by several pairs sat on both sides. Now the unit of a split is listed
in ``lab/data/splits/NAME.json`` and sampling (``--seed``, ``--sample-seed``, ``--limit``)
happens inside one side:

- ``squad.json``: whole articles (every paragraph and question of an article on one
  side), plus the test questions earlier tuning runs drew, which no test run samples;
- ``verifier_docs.json``: docs pairs, joined into one unit when they quote the same
  passage text (a component that touched dev stayed dev).

- ``cacm.json``: CACM topics by id (odd dev, even test).

The guard's split is by question id (evaluation/guard.py). A unit listed on neither
side is an error: new data is assigned by editing the file, never by a hash.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from evaluation.datasets import DatasetError
from evaluation.lab import DATA

Split = Literal["dev", "test"]
SPLITS: tuple[Split, ...] = ("dev", "test")
SPLITS_DIR = DATA / "splits"


@lru_cache(maxsize=8)
def frozen(name: str) -> dict[str, Any]:
    path = SPLITS_DIR / f"{name}.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DatasetError(f"{path}: not a readable split file ({exc})") from None


def side_of(name: str, unit: str) -> Split:
    """Which side ``unit`` (an article title, a pair id) is on in split file ``name``."""
    split = frozen(name)
    for side in SPLITS:
        if unit in split[side]:
            return side
    raise DatasetError(
        f"{unit!r} is on neither side of {SPLITS_DIR / name}.json: add it to dev or test"
    )


def excluded_from_test(name: str) -> frozenset[str]:
    return frozenset(frozen(name).get("excluded_from_test", {}).get("ids", []))


def digest(name: str) -> str:
    """The split file's sha256: a report names the exact split it was measured on."""
    return hashlib.sha256((SPLITS_DIR / f"{name}.json").read_bytes()).hexdigest()


def overlaps(dev: dict[str, set[str]], test: dict[str, set[str]]) -> dict[str, set[str]]:
    """What appears on both sides, per kind of key ({"title": {...}, "passage": {...}}):
    empty for a clean split."""
    return {kind: dev[kind] & test[kind] for kind in dev if dev[kind] & test.get(kind, set())}


def provenance(*names: str) -> dict[str, Any]:
    """What a report was measured with: the commit (and whether the tree had changes),
    and each split file's sha256. A test figure is quoted with these, once."""
    repo = Path(__file__).resolve().parents[1]

    def git(*args: str) -> str:
        try:
            done = subprocess.run(
                ["git", *args], cwd=repo, capture_output=True, text=True, check=True
            )
        except (OSError, subprocess.CalledProcessError):
            return ""
        return done.stdout.strip()

    return {
        "commit": git("rev-parse", "HEAD") or "unknown (not a git checkout)",
        "uncommitted_changes": bool(git("status", "--porcelain", "--untracked-files=no")),
        "split_files": {name: digest(name) for name in names},
    }


def sources_on_both_sides(items: Iterable[Any]) -> set[str]:
    """The pages a question set with a ``split`` per question (``QAItem``) has questions
    from on both sides: empty for a clean split."""
    sides: dict[str, set[str]] = {}
    for item in items:
        if item.context_id:
            sides.setdefault(item.context_id, set()).add(item.split)
    return {page for page, seen in sides.items() if len(seen) > 1}
