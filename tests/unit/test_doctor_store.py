"""`rag doctor` checks the store too: a database it cannot reach fails the check, naming
what to set, before any question is asked."""

from __future__ import annotations

from rag_cli.doctor import check_store
from tests.net import free_port
from tools.config import load_settings
from tools.outbound import destinations


def test_the_embedded_store_is_its_data_directory(tmp_path):
    found = check_store(load_settings({"data_dir": tmp_path}))
    assert (found["store"], found["error"]) == ("embedded", None)
    assert found["where"] == str(tmp_path.resolve())


def test_a_postgres_store_names_its_server_and_collections(tmp_path, database_url):
    settings = load_settings(
        {"data_dir": tmp_path, "store": "postgres", "database_url": database_url}
    )
    found = check_store(settings)
    assert found["error"] is None and "pgvector 0.8" in found["detail"], found
    assert "0 collections" in found["detail"]
    assert any("(PostgreSQL)" in line for line in destinations(settings))


def test_an_unreachable_database_fails_the_check_without_its_password(tmp_path):
    url = f"postgresql://rag:hunter2@127.0.0.1:{free_port()}/rag"
    settings = load_settings({"data_dir": tmp_path, "store": "postgres", "database_url": url})
    found = check_store(settings)
    assert "RAG_DATABASE_URL" in found["error"] and "hunter2" not in str(found)
    assert not any("hunter2" in line for line in destinations(settings))


def test_the_doctor_prints_every_setting_under_its_section(tmp_path, capsys, monkeypatch):
    from rag_cli.doctor import print_settings
    from tools.config import SECTIONS

    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    print_settings(load_settings({"data_dir": tmp_path, "k": 4, "api_key": "hunter2"}))
    lines = capsys.readouterr().out.splitlines()
    headers = [line.strip() for line in lines if not line.startswith("    ")]
    environment = "environment (shown only as set):"
    assert headers == ["configuration:", *(f"[{s}]" for s in SECTIONS), environment]
    shown = {}
    section = ""
    for line in lines[1:]:
        if not line.startswith("    "):
            section = line.strip().strip("[]")
            continue
        name, _, value = line.strip().partition(" ")
        shown[name] = (section, value.strip())
    assert {n for n, (s, _) in shown.items() if s in SECTIONS} == {
        f for fields in SECTIONS.values() for f in fields
    }
    assert all(name in SECTIONS[s] for name, (s, _) in shown.items() if s in SECTIONS)
    assert shown["k"] == ("retrieval", "4") and shown["api_key"] == ("server", "***")
    assert "hunter2" not in str(lines) and "sk-secret" not in str(lines)
