"""Compare two `rag eval answers --out` runs item by item: answers, verdicts, confidences.

Used with a recording (`--record` once, then `--replay` through other code): the model
replies are the same, so every difference this prints is the code's. Exit status 1
when any item differs.

    python bench/replay_compare.py RECORDED_OUT_DIR REPLAYED_OUT_DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

# what a refactoring must leave as it was; `seconds` and trace ids differ by nature
COMPARED = ("answer", "abstained", "verdict", "attempts", "queries", "sources", "scores")


def items(folder: Path) -> dict[str, dict]:
    lines = (folder / "answers.items.jsonl").read_text().splitlines()
    return {r["id"]: r for r in map(json.loads, filter(None, lines))}


def differences(before: dict[str, dict], after: dict[str, dict]) -> list[str]:
    found = [f"{i}: only in the first run" for i in before.keys() - after.keys()]
    found += [f"{i}: only in the second run" for i in after.keys() - before.keys()]
    for item in sorted(before.keys() & after.keys()):
        for field in COMPARED:
            if before[item].get(field) != after[item].get(field):
                found.append(
                    f"{item}: {field} differs:\n  {before[item].get(field)!r}\n"
                    f"  {after[item].get(field)!r}"
                )
    return found


def main(argv: list[str]) -> int:
    before, after = items(Path(argv[0])), items(Path(argv[1]))
    found = differences(before, after)
    print("\n".join(found) or f"identical: {len(before)} items ({', '.join(COMPARED)})")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
