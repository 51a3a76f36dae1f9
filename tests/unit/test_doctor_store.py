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
