#!/usr/bin/env python3
"""Resolve requirements.lock against the public index alone, as a user's machine would.

Why: these machines' pip reads a local folder of wheels and local index mirrors from
its configuration, so a pin that only that folder holds (``torch==2.13.0+cpu`` once)
installs here and nowhere else. ``pip --isolated`` ignores every pip configuration file
and ``PIP_*`` variable, and ``--index-url`` names the one index a user has.

Two checks, both ``pip install --dry-run`` (nothing is installed):

1. every pin of the lock, and every model wheel ``rag setup`` downloads, exists on the
   index (``--no-deps``), for each Python version asked (other versions are resolved
   for their tags with ``--python-version``);
2. the project's own requirements (``.[dev]``), resolved with the lock as constraints on
   the running interpreter, need nothing the lock does not pin.

Exit status: 0 when both hold, 1 when one fails (pip's own message is printed),
3 when the index cannot be reached (callers skip, they do not pass).
``--sizes`` also prints the download size of what a fresh install fetches.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements.lock"
PUBLIC_INDEX = "https://pypi.org/simple"
UNREACHABLE = 3
# The platform tags of a Linux x86_64 machine with glibc 2.28 (what the README supports).
LINUX_X86_64 = [f"manylinux_2_{glibc}_x86_64" for glibc in range(28, 4, -1)] + [
    "manylinux2014_x86_64",
    "manylinux2010_x86_64",
    "manylinux1_x86_64",
    "linux_x86_64",
]
# What PyPI's (CUDA) torch build pulls in and the CPU-only build does not.
CUDA_ONLY = ("nvidia-", "cuda-", "triton")


def canonical(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def locked_pins(lock: Path = LOCK) -> dict[str, str]:
    """Package name -> pinned version, markers dropped."""
    pins = {}
    for line in lock.read_text().splitlines():
        requirement = line.split(";")[0].split("#")[0].strip()
        if "==" in requirement:
            name, version = requirement.split("==", 1)
            pins[canonical(name)] = version.strip()
    return pins


def index_reachable(index: str, timeout: float = 15.0) -> str | None:
    """None when the index answers, else why not (for the skip message)."""
    try:
        with urllib.request.urlopen(f"{index.rstrip('/')}/pip/", timeout=timeout):
            return None
    except (urllib.error.URLError, OSError) as exc:
        return f"{index} cannot be reached: {exc}"


def pip_dry_run(args: list[str], index: str) -> tuple[int, str, list[dict]]:
    """Run ``pip install --isolated --dry-run`` and return (status, output, report items)."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--isolated",
            "--dry-run",
            "--ignore-installed",
            "--disable-pip-version-check",
            "--quiet",
            "--index-url",
            index,
            "--report",
            str(report),
            *args,
        ]
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
        items = json.loads(report.read_text())["install"] if report.exists() else []
        return done.returncode, done.stdout + done.stderr, items


def model_wheels() -> list[str]:
    """The wheels ``rag setup`` downloads the local models from: pinned too, in code."""
    sys.path.insert(0, str(ROOT))
    from tools.models.local_assets import ASSETS

    return [req for asset in ASSETS.values() for req in asset.requirements]


def check_pins(python_version: str | None, index: str) -> tuple[list[str], list[dict]]:
    """Every pin exists on the index for this Python version (None: the running one)."""
    args = ["--no-deps", "-r", str(LOCK), *model_wheels()]
    if python_version:
        target = tempfile.mkdtemp(prefix="lock-target-")
        args += ["--target", target, "--python-version", python_version, "--implementation", "cp"]
        for tag in LINUX_X86_64:
            args += ["--platform", tag]
    status, output, items = pip_dry_run(args, index)
    label = python_version or f"{sys.version_info.major}.{sys.version_info.minor}"
    if status:
        return [f"pins for Python {label} do not resolve on {index}:\n{output.strip()}"], []
    return [], items


def check_project(index: str) -> tuple[list[str], list[dict]]:
    """The project's requirements, constrained by the lock, need nothing unpinned."""
    status, output, items = pip_dry_run(["-c", str(LOCK), ".[dev]"], index)
    if status:
        return [f"the project's requirements do not resolve with the lock:\n{output}"], []
    pins = locked_pins()
    problems = []
    for item in items:
        name = canonical(item["metadata"]["name"])
        version = item["metadata"]["version"]
        if name == "agentic-rag":
            continue
        if name not in pins:
            problems.append(f"{name}=={version} is installed but not pinned in the lock")
        elif pins[name] != version:
            problems.append(f"{name} resolves to {version}, the lock pins {pins[name]}")
    return problems, items


def download_bytes(items: list[dict], index: str = PUBLIC_INDEX) -> int:
    """Sum the sizes of the files pip chose, from the index's JSON simple API (PEP 691)."""
    total = 0
    for item in items:
        url = item.get("download_info", {}).get("url", "")
        if not url.startswith("http"):
            continue  # the project itself, built from the checkout
        filename = url.rsplit("/", 1)[-1].split("#")[0]
        page = urllib.request.Request(
            f"{index.rstrip('/')}/{canonical(item['metadata']['name'])}/",
            headers={"Accept": "application/vnd.pypi.simple.v1+json"},
        )
        with urllib.request.urlopen(page, timeout=30) as reply:
            files = json.load(reply)["files"]
        total += next((f.get("size", 0) for f in files if f["filename"] == filename), 0)
    return total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--index-url", default=PUBLIC_INDEX)
    parser.add_argument(
        "--python-version",
        action="append",
        default=[],
        help="also resolve the pins for this Python (e.g. 3.12); repeatable",
    )
    parser.add_argument(
        "--sizes", action="store_true", help="print the download size of a fresh install"
    )
    args = parser.parse_args(argv)

    why = index_reachable(args.index_url)
    if why:
        print(f"check_lock: skipped: {why}", file=sys.stderr)
        return UNREACHABLE
    # independent dry runs: in parallel, they take as long as the slowest
    with ThreadPoolExecutor() as pool:
        project = pool.submit(check_project, args.index_url)
        pins = [pool.submit(check_pins, v, args.index_url) for v in [None, *args.python_version]]
        problems = [p for run in pins for p in run.result()[0]]
        more, items = project.result()
        models = [
            i
            for i in pins[0].result()[1]
            if i["metadata"]["name"] not in {i["metadata"]["name"] for i in items}
        ]
    problems += more
    for problem in problems:
        print(f"check_lock: {problem}", file=sys.stderr)
    if problems:
        return 1
    print(
        f"check_lock: requirements.lock resolves on {args.index_url} alone "
        f"({len(items) - 1} packages)"
    )
    if args.sizes:
        names = {canonical(i["metadata"]["name"]): i for i in items}
        cuda = [i for n, i in names.items() if n.startswith(CUDA_ONLY) or n == "torch"]
        print(
            f"check_lock: download {download_bytes(items) / 1e6:,.0f} MB, of which "
            f"{download_bytes(cuda) / 1e6:,.0f} MB are PyPI's torch and the CUDA "
            "libraries it pulls in (the CPU-only torch build replaces them all); "
            f"then {download_bytes(models) / 1e6:,.0f} MB of model wheels (rag setup)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
