"""Files the service makes hold user data: 0600 files in a 0700 data directory, whatever
the shell's umask (022 leaves new files world-readable)."""

from __future__ import annotations

import os
import stat

from rag_cli.main import main
from tools.config import load_settings


def mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_what_the_cli_writes_is_owner_only(capsys, models, tmp_path):
    data = load_settings().data_dir
    data.mkdir(parents=True)
    data.chmod(0o755)  # as an older version left it
    (data / "old.txt").write_text("x")
    before = os.umask(0o022)
    try:
        docs = tmp_path / "docs"
        docs.mkdir()
        (docs / "page.md").write_text("# Page\n\nA private note.\n")
        assert main(["ingest", str(docs), "--json"], services=models.services) == 0
        assert os.umask(0o022) == 0o022  # the shell's umask is back afterwards
    finally:
        os.umask(before)
    made = [p for p in data.rglob("*") if p.is_file() and p.name != "old.txt"]
    assert made, "the command wrote nothing to check"
    assert mode(data) == 0o700
    assert [(p.name, oct(mode(p))) for p in made if mode(p) & 0o077] == []
