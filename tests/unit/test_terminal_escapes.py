"""No command prints a raw control character, whatever documents and file names hold.

A folder with a file named with an ESC sequence (which would clear the screen), holding
text with a title-setting sequence, goes through every command that prints document
text or file names; the output must show each sequence escaped (``\\x1b``) and hold no
raw ESC, BEL or C1 control.
"""

from __future__ import annotations

import re

from rag_cli.main import main

CLEAR = "\x1b[2J"
TITLE = "\x1b]0;owned\x07"
EVIL_NAME = f"install{CLEAR}.md"
RAW = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def shown(capsys) -> str:
    captured = capsys.readouterr()
    out = captured.out + captured.err
    assert not RAW.search(out.replace("\r", "")), repr(out)
    return out


def test_every_command_escapes_what_documents_and_file_names_hold(
    corpus_env, models, capsys, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    root = tmp_path / "evil"
    root.mkdir()
    (root / EVIL_NAME).write_text(f"# Install {TITLE}\n\nRun make demo{CLEAR} to install.\n")
    (root / f"empty{CLEAR}.txt").write_text("")  # skipped: its name is on the skipped line
    run = lambda *argv: main([*argv], services=models.services)  # noqa: E731

    assert run("ingest", str(root), "--collection", "evil") == 0
    out = shown(capsys)
    assert "empty\\x1b[2J.txt" in out

    source = f"evil/{EVIL_NAME}"
    assert run("inspect", source, "--collection", "evil") == 0
    assert "\\x1b]0;owned\\x07" in shown(capsys)

    (root / EVIL_NAME).write_text(f"# Install {TITLE}\n\nRun make demo{CLEAR} now.\n")
    assert run("ingest", str(root), "--collection", "evil") == 0
    shown(capsys)
    assert run("collections", "diff", "evil", "1", "2") == 0
    assert "install\\x1b[2J.md" in shown(capsys)

    models.answer = f"Run make demo{CLEAR} [1]."
    assert run("ask", "How do I install it?", "--collection", "evil") == 0
    out = shown(capsys)
    assert "make demo\\x1b[2J" in out and "install\\x1b[2J.md" in out
