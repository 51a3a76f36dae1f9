"""Run a benchmark's child process on the code of one tree only: this checkout, or a git
revision's whole tree extracted on its own.

Why: the venv holds an editable install of some checkout. Its import finder serves every
project module that the tree on ``sys.path`` lacks from that checkout, so a child given
an old revision's code on ``PYTHONPATH`` quietly ran a mix of both trees as soon as a
module moved (``tools/collection.py`` became ``tools/store/collection.py``). A child
started here has:

- the tree's root first on ``sys.path`` and as its working directory;
- no editable-install finder, and no other checkout's root, so a module the tree lacks
  fails to import instead of coming from elsewhere;
- this folder (the benchmark scripts, which hold no project package) on ``sys.path``,
  so the same harness runs on both sides;
- a check when it ends that every project module it loaded came from the tree (exit
  status 3 otherwise).

    tree = revision_tree("430e608")                   # extracted once, then reused
    proc = child(tree, "bench/bench_ttft.py", "--serve", ..., stdin=PIPE, stdout=PIPE)

``python bench/revision_tree.py TREE SCRIPT [ARGS...]`` is the child's entry point.
"""

from __future__ import annotations

import os
import runpy
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
# the project's top-level packages (pyproject's [tool.setuptools.packages.find])
PACKAGES = ("graph", "tools", "ingest", "server", "rag_cli", "evaluation", "rag_ui")
CACHE = Path(tempfile.gettempdir()) / "agentic-rag-revisions"


def revision_tree(rev: str, cache: Path = CACHE) -> Path:
    """The whole tree of ``rev`` (``git archive``), extracted once under ``cache``."""
    sha = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--verify", f"{rev}^{{commit}}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    target = cache / f"tree-{sha[:12]}"
    if (target / ".extracted").exists():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    part = Path(tempfile.mkdtemp(prefix=f"tree-{sha[:12]}-", dir=cache))
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", sha], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(part)], input=archive, check=True)
    (part / ".extracted").write_text(sha + "\n")
    try:
        part.rename(target)
    except OSError:  # another process extracted it meanwhile
        if not (target / ".extracted").exists():
            raise
    return target


def _editable(hook: object) -> bool:
    return str(getattr(hook, "__module__", "")).startswith("__editable__")


def only(tree: Path) -> None:
    """Make ``tree`` the only source of project code in this process (before any of it
    is imported): its root first on ``sys.path``, no other checkout's root, and no
    editable-install finder."""
    tree = tree.resolve()
    sys.meta_path[:] = [f for f in sys.meta_path if not _editable(f)]
    sys.path_hooks[:] = [h for h in sys.path_hooks if not _editable(h)]
    kept = []
    for entry in sys.path:
        if not entry or "__editable__" in entry:
            continue
        path = Path(entry).resolve()
        if path == tree or all((path / p).is_dir() for p in ("graph", "tools")):
            continue  # the tree goes first; another checkout's root goes
        kept.append(entry)
    sys.path[:] = [str(tree), *kept]
    sys.path_importer_cache.clear()
    loaded = foreign(tree)
    if loaded:
        raise RuntimeError(f"project modules already imported from elsewhere: {loaded}")


def foreign(tree: Path) -> list[str]:
    """Project modules loaded in this process from outside ``tree``."""
    tree = tree.resolve()
    found = []
    for name, module in list(sys.modules.items()):
        if name.split(".")[0] not in PACKAGES:
            continue
        files = [getattr(module, "__file__", None), *(getattr(module, "__path__", None) or [])]
        for file in filter(None, files):
            if not Path(file).resolve().is_relative_to(tree):
                found.append(f"{name} ({file})")
    return found


def command(tree: Path, script: str | Path, *args: str) -> list[str]:
    """The command line of a child running ``script`` on ``tree``'s code only."""
    return [sys.executable, str(HERE / "revision_tree.py"), str(tree), str(script), *args]


def environment(tree: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(tree.resolve())}


def child(tree: Path, script: str | Path, *args: str, **popen: object) -> subprocess.Popen:
    """A child process running ``script`` (a path, as from the current tree: the harness)
    with ``tree``'s code and no other project code."""
    return subprocess.Popen(  # type: ignore[call-overload]
        command(tree, Path(script).resolve(), *args),
        cwd=tree,
        env=environment(tree),
        **popen,
    )


def run(tree: Path, script: str | Path, *args: str, **options: object):
    """``subprocess.run`` of :func:`child`'s command."""
    return subprocess.run(  # type: ignore[call-overload]
        command(tree, Path(script).resolve(), *args),
        cwd=tree,
        env=environment(tree),
        **options,
    )


def _main(argv: list[str]) -> int:
    tree, script, *args = argv
    tree_path = Path(tree).resolve()
    only(tree_path)
    sys.argv = [script, *args]
    status: object = 0
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        status = exc.code
    mixed = foreign(tree_path)
    if mixed:
        print(f"{script}: project code from outside {tree}: {mixed}", file=sys.stderr)
        return 3
    if status is None or isinstance(status, int):
        return status or 0
    print(status, file=sys.stderr)
    return 1


if __name__ == "__main__":
    # this script's folder (the harness) stays on sys.path; only() takes out the rest
    raise SystemExit(_main(sys.argv[1:]))
