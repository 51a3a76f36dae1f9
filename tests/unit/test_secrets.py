"""No report, log line or error message carries a password, an API key or a client key.

Canaries are planted in every secret the service can hold (the database URL in each
form libpq reads, the server's api_key, client keys, OPENAI_API_KEY, a key inside a
model URL), then every output that can show configuration is produced and grepped.
"""

from __future__ import annotations

import json

import pytest

from rag_cli.main import main
from tools.config import load_settings, masked, redacted_url
from tools.outbound import destinations
from tools.store.postgres import DatabaseError, connect

CANARIES = ("CANARY-DB-1", "CANARY-DB-2", "CANARY-API", "CANARY-ALICE", "CANARY-OPENAI")
DSN_FORMS = [
    "postgresql://rag:CANARY-DB-1@127.0.0.1:9/rag",
    "postgresql://rag@127.0.0.1:9/rag?sslmode=disable&password=CANARY-DB-2",
    "host=127.0.0.1 port=9 user=rag password=CANARY-DB-1 dbname=rag",
    "host=127.0.0.1 port=9 password='CANARY-DB-2 with spaces' dbname=rag",
    "postgresql://rag:CANARY-DB-1@127.0.0.1:9/rag?password=CANARY-DB-2",
]


def leaked(text: str) -> list[str]:
    return [c for c in CANARIES if c in text]


@pytest.mark.parametrize("dsn", DSN_FORMS)
def test_every_libpq_form_is_redacted(dsn):
    assert leaked(redacted_url(dsn)) == []
    assert "***" in redacted_url(dsn)


@pytest.mark.parametrize("dsn", DSN_FORMS)
def test_a_database_that_cannot_be_reached_names_no_password(dsn):
    with pytest.raises(DatabaseError) as caught:
        connect(dsn)
    assert leaked(str(caught.value)) == [], str(caught.value)


@pytest.fixture
def planted(monkeypatch):
    monkeypatch.setenv("RAG_STORE", "postgres")
    monkeypatch.setenv("RAG_DATABASE_URL", DSN_FORMS[4])
    monkeypatch.setenv("RAG_API_KEY", "CANARY-API")
    monkeypatch.setenv("RAG_CLIENT_KEYS", "alice:CANARY-ALICE")
    monkeypatch.setenv("OPENAI_API_KEY", "CANARY-OPENAI")
    monkeypatch.setenv("RAG_GENERATOR_MODEL", "openai:gpt@http://key:CANARY-OPENAI@127.0.0.1:9/v1")
    return load_settings()


def test_masked_settings_and_destinations_hold_no_secret(planted):
    assert leaked(json.dumps(masked(planted))) == []
    assert leaked("\n".join(destinations(planted))) == []


def test_cli_errors_and_reports_hold_no_secret(planted, capsys, tmp_path):
    """Commands that print configuration, or fail on the unreachable database."""
    for argv in (["collections", "--json"], ["flags", "list", "--json"], ["ask", "x", "--json"]):
        main(argv)
        out = capsys.readouterr()
        assert leaked(out.out + out.err) == [], (argv, out)


def test_eval_reports_carry_masked_settings(planted):
    """What `rag eval answers` writes into --out and --json (rag_cli/eval_answers_cmd.py)."""
    report = {"settings": masked(planted)}
    assert leaked(json.dumps(report)) == []


def test_a_port_and_a_path_are_not_a_password():
    assert redacted_url("http://host:8080/path@x") == "http://host:8080/path@x"
    assert redacted_url("postgres://u:p@ss@h:5432/db") == "postgres://u:***@h:5432/db"
