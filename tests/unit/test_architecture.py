"""The layout is the architecture: which top-level package may import which.

`tools` holds the parts; `ingest` and `graph` use them; `server` (the LangGraph server's
HTTP layer) guards the graph; the entry points (`rag_cli`, `rag_ui`, `evaluation`,
`bench`) put them together. Imports point one way, and no two packages import each
other, directly or through a third. Imports inside functions count too.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# what each package may import besides itself (nothing may import the tests)
ALLOWED = {
    "tools": set(),
    "ingest": {"tools"},
    "graph": {"tools"},
    "server": {"graph", "tools"},
    "evaluation": {"graph", "ingest", "tools"},
    "rag_ui": {"server", "graph", "ingest", "tools"},
    "rag_cli": {"rag_ui", "server", "evaluation", "graph", "ingest", "tools"},
    "bench": {"evaluation", "graph", "ingest", "tools"},
}


NUMBERS = dict(enumerate("zero one two three four five six seven eight nine ten".split()))


def imports(package: str) -> dict[str, set[str]]:
    """{other top-level package: the modules of ``package`` that import it}."""
    found: dict[str, set[str]] = {}
    for path in (REPO / package).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top in ALLOWED and top != package:
                    found.setdefault(top, set()).add(str(path.relative_to(REPO)))
    return found


def test_every_top_level_package_is_listed():
    code = {p.name for p in REPO.iterdir() if p.is_dir() and any(p.glob("*.py"))}
    assert code - {"tests", "scripts"} == set(ALLOWED)


def test_the_architecture_page_lists_the_packages_of_the_tree():
    """docs_corpus/architecture.md's count and list of packages are the tree's."""
    page = (REPO / "docs_corpus" / "architecture.md").read_text()
    sentence = re.search(r"code is in (\w+) Python packages: (.+?)\n\(", page, re.S)
    assert sentence, "architecture.md no longer says how many packages there are"
    listed = re.findall(r"`(\w+)/`", sentence.group(2))
    code = {p.name for p in REPO.iterdir() if p.is_dir() and any(p.glob("*.py"))}
    assert sorted(listed) == sorted(code - {"tests", "scripts"}) == sorted(ALLOWED)
    assert NUMBERS[len(listed)] == sentence.group(1)


def test_nothing_imports_the_tests():
    """Checked over every Python file outside tests/, listed package or not (scripts,
    bench): test code may use the product, never the other way round."""
    found = []
    for path in REPO.rglob("*.py"):
        relative = path.relative_to(REPO)
        if relative.parts[0] in ("tests", ".venv") or relative.parts[0].startswith("."):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module]
                if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
                else []
            )
            if any(name.split(".")[0] == "tests" for name in names):
                found.append(str(relative))
    assert not found, found


def test_imports_point_one_way():
    wrong = {
        f"{package} -> {other}": sorted(modules)
        for package in ALLOWED
        for other, modules in imports(package).items()
        if other not in ALLOWED[package]
    }
    assert not wrong, wrong


def test_no_cycle_between_packages():
    edges = {package: set(imports(package)) for package in ALLOWED}

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        return any(
            nxt == goal or (nxt not in seen and reaches(nxt, goal, seen | {nxt}))
            for nxt in edges[start]
        )

    cycles = [package for package in ALLOWED if reaches(package, package, set())]
    assert not cycles, cycles


# A check is named by its name in graph/checks/pipeline.py CHECKS; numbers went stale
# when checks were added and reordered, and graph/verification.py no longer exists.
STALE = re.compile(r"\bchecks? [0-9]\b|graph/verification\.py")


def test_no_code_names_a_numbered_check_or_a_deleted_module():
    stale = [
        f"{path.relative_to(REPO)}:{n}"
        for package in ALLOWED
        for path in (REPO / package).rglob("*.py")
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if STALE.search(line)
    ]
    assert stale == []
