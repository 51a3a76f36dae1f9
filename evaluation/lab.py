"""Where the lab keeps what this package reads and what it has measured: ``lab/``, beside
the product's packages at the top of the repository (lab/README.md).

- ``lab/data``: the data sets and their frozen dev/test splits;
- ``lab/reports``: the committed reports every quoted figure names;
- ``lab/recordings``: recorded model calls, replayed through changed code.

They are in a checkout of the repository, not in an installed package. Every default
path of ``evaluation`` starts from these names; nothing else spells ``lab/``.
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LAB = REPO / "lab"
DATA = LAB / "data"
REPORTS = LAB / "reports"
RECORDINGS = LAB / "recordings"


def shown(path: Path) -> str:
    """``path`` as a help text names it: relative to the repository, as typed from its root."""
    return path.relative_to(REPO).as_posix()
