import re
from pathlib import Path

import pytest

from tools.config import REQUEST_SETTINGS, ConfigError, load_settings, masked, redacted_url


def test_defaults_are_local_models(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    s = load_settings(environ={})
    assert (s.generator_model, s.query_model, s.verifier_model) == ("local",) * 3
    assert s.embedding_model == "local"
    assert s.data_dir == Path(".rag")


def test_precedence_toml_then_env_then_override(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "rag.toml").write_text("llm_max_tokens = 100\nllm_timeout_s = 5\nllm_threads = 1\n")
    env = {"RAG_LLM_TIMEOUT_S": "7", "RAG_LLM_THREADS": "2"}
    s = load_settings({"llm_threads": 3}, environ=env)
    assert (s.llm_max_tokens, s.llm_timeout_s, s.llm_threads) == (100, 7.0, 3)


def test_rag_table_in_toml(tmp_path):
    cfg = tmp_path / "custom.toml"
    cfg.write_text('[rag]\ngenerator_model = "openai:gpt-4o-mini"\n')
    assert load_settings(config_file=cfg, environ={}).generator_model == "openai:gpt-4o-mini"


def test_bad_model_spec_names_setting_and_accepted_values(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as err:
        load_settings(environ={"RAG_VERIFIER_MODEL": "ollama:llama3"})
    msg = str(err.value)
    assert "verifier_model" in msg and "RAG_VERIFIER_MODEL" in msg
    assert "openai:<model>" in msg and "litellm:" in msg


def test_unknown_env_setting_is_rejected(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="RAG_GENERATOR_MODLE is not a setting"):
        load_settings(environ={"RAG_GENERATOR_MODLE": "local"})


def test_out_of_range_value_says_where_it_came_from(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=r"llm_context_tokens = '10' \(from RAG_LLM_CONTEXT"):
        load_settings(environ={"RAG_LLM_CONTEXT_TOKENS": "10"})


def test_unknown_toml_key_suggests_the_setting_or_lists_them(tmp_path):
    cfg = tmp_path / "rag.toml"
    cfg.write_text("chunk_sizee = 3\n")
    with pytest.raises(
        ConfigError, match=r"chunk_sizee .*unknown setting; did you mean chunk_size\?"
    ):
        load_settings(config_file=cfg, environ={})
    cfg.write_text("zzzz = 3\n")
    with pytest.raises(ConfigError, match=r"zzzz .*unknown setting; known settings: "):
        load_settings(config_file=cfg, environ={})


def test_a_bad_value_names_where_it_came_from(tmp_path):
    with pytest.raises(ConfigError, match=r"from command line.*Change --set k="):
        load_settings({"k": "abc"}, environ={}, source="command line")
    with pytest.raises(ConfigError, match=r"from RAG_K\).*Change RAG_K\."):
        load_settings(environ={"RAG_K": "abc"})


def test_global_options_work_before_or_after_the_command(capsys):
    from rag_cli.main import main

    assert main(["--set", "k=abc", "ask", "q"]) == 2
    assert "k = 'abc' (from command line)" in capsys.readouterr().err
    assert main(["ask", "q", "--set", "k=0"]) == 2
    assert "k = '0' (from command line)" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0 and capsys.readouterr().out.startswith("rag ")


def test_missing_explicit_config_file(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(config_file=tmp_path / "nope.toml", environ={})


def test_invalid_toml(tmp_path):
    cfg = tmp_path / "rag.toml"
    cfg.write_text("this is = = not toml")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_settings(config_file=cfg, environ={})


def test_masked_hides_secrets(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    shown = masked(load_settings(environ={}))
    assert shown["openai_api_key"] == "***"
    assert "sk-secret" not in str(shown)


def test_the_security_page_lists_exactly_the_settings_a_request_may_change():
    page = (Path(__file__).parents[2] / "docs_corpus" / "security.md").read_text()
    paragraph = page.split("What a request may change:", 1)[1]
    listed = paragraph.split("waited runs):", 1)[1].split("; the input may carry", 1)[0]
    assert set(re.findall(r"`(\w+)`", listed)) == REQUEST_SETTINGS


def test_the_postgres_store_needs_a_url_and_no_chroma_server(tmp_path):
    with pytest.raises(ValueError, match="RAG_DATABASE_URL=postgresql://"):
        load_settings({"data_dir": tmp_path, "store": "postgres"})
    with pytest.raises(ValueError, match="unset chroma_host"):
        load_settings(
            {
                "data_dir": tmp_path,
                "store": "postgres",
                "database_url": "postgresql://h/db",
                "chroma_host": "h:8000",
            }
        )


def test_the_shared_server_runtime_needs_postgres_and_a_redis_url(tmp_path):
    with pytest.raises(ValueError, match="set RAG_STORE=postgres"):
        load_settings({"data_dir": tmp_path, "server_runtime": "shared"})
    postgres = {"data_dir": tmp_path, "store": "postgres", "database_url": "postgresql://h/db"}
    with pytest.raises(ValueError, match="RAG_REDIS_URL=redis://"):
        load_settings(postgres | {"server_runtime": "shared"})
    shared = load_settings(postgres | {"server_runtime": "shared", "redis_url": "redis://:pw@h"})
    assert "pw" not in str(masked(shared)["redis_url"])


def test_a_database_password_is_never_shown(tmp_path):
    url = "postgresql://rag:s3cr@t:x@db.example:5432/rag"
    settings = load_settings({"data_dir": tmp_path, "store": "postgres", "database_url": url})
    assert masked(settings)["database_url"] == "postgresql://rag:***@db.example:5432/rag"
    assert redacted_url("postgresql://db.example/rag") == "postgresql://db.example/rag"


def test_an_unreachable_database_is_a_clear_error_without_its_password():
    from tests.net import free_port
    from tools.store.postgres import DatabaseError, connect

    url = f"postgresql://rag:hunter2@127.0.0.1:{free_port()}/rag"
    with pytest.raises(DatabaseError, match="check RAG_DATABASE_URL") as caught:
        connect(url)
    assert "hunter2" not in str(caught.value) and "rag:***@" in str(caught.value)


def test_every_setting_is_in_exactly_one_section():
    from collections import Counter

    from tools.config import SECTIONS, Settings

    counts = Counter(field for fields in SECTIONS.values() for field in fields)
    assert set(counts) == set(Settings.model_fields)
    assert {field for field, n in counts.items() if n > 1} == set()
    assert list(Settings.model_fields) == [f for fields in SECTIONS.values() for f in fields]


def test_a_section_is_its_settings_and_their_values(tmp_path):
    settings = load_settings({"data_dir": tmp_path, "k": 4, "rerank": "llm"}, environ={})
    assert dict(settings.section("retrieval"))["k"] == 4
    assert settings.section("reranking") == (("rerank", "llm"), ("rerank_model", ""))
    with pytest.raises(ConfigError, match="no settings section 'retreival'; sections: models"):
        settings.section("retreival")


def test_toml_takes_flat_keys_and_section_tables_together(tmp_path):
    cfg = tmp_path / "rag.toml"
    cfg.write_text(
        "llm_timeout_s = 60\n\n[retrieval]\nk = 4\nfetch_k = 20\n\n"
        '[store]\nstore = "embedded"\nhnsw_ef_search = 100\n\n[tracing]\ntracing = "off"\n'
    )
    s = load_settings(config_file=cfg, environ={})
    assert (s.llm_timeout_s, s.k, s.fetch_k, s.hnsw_ef_search, s.tracing) == (
        60.0,
        4,
        20,
        100,
        "off",
    )
    cfg.write_text("[rag]\nk = 3\n\n[rag.verification]\nverify_threshold = 0.7\n")
    s = load_settings(config_file=cfg, environ={})
    assert (s.k, s.verify_threshold) == (3, 0.7)
    # a bad value in a table says where it came from, as a flat key's does
    cfg.write_text("[retrieval]\nk = 0\n")
    with pytest.raises(ConfigError, match=rf"k = 0 \(from {re.escape(str(cfg))}\)"):
        load_settings(config_file=cfg, environ={})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "[retrieval]\nverify_threshold = 0.7\n",
            r"verify_threshold is a \[verification\] setting, not a \[retrieval\] one: "
            r"move it under \[verification\] \(or to the top level\)",
        ),
        (
            "[retreival]\nk = 4\n",
            r"\[retreival\] is not a section of settings; did you mean \[retrieval\]\? "
            r"the sections are \[models\], \[local_runtime\]",
        ),
        ("[retrieval]\nkk = 4\n", r"\[retrieval\] kk is not a setting; did you mean k\?"),
        ("k = 3\n[retrieval]\nk = 4\n", r"k is set twice; keep it in one place, at the top "),
    ],
)
def test_a_toml_key_in_the_wrong_table_or_an_unknown_table_says_what_to_set(
    tmp_path, text, message
):
    cfg = tmp_path / "rag.toml"
    cfg.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_settings(config_file=cfg, environ={})


CONFIGURATION_PAGE = Path(__file__).parents[2] / "docs_corpus" / "configuration.md"


def test_the_configuration_page_lists_every_setting_under_its_section():
    from tools.config import SECTIONS

    listed: dict[str, set[str]] = {}
    section = None
    for line in CONFIGURATION_PAGE.read_text().splitlines():
        if heading := re.fullmatch(r"### .* \(`\[(\w+)\]`\)", line):
            section = heading.group(1)
        elif line.startswith("## "):
            section = None
        elif section and (row := re.match(r"\| `(\w+)` \|", line)):
            listed.setdefault(section, set()).add(row.group(1))
    assert listed == {name: set(fields) for name, fields in SECTIONS.items()}


def test_the_configuration_page_examples_mean_the_same(tmp_path):
    page = CONFIGURATION_PAGE.read_text().split("## Example rag.toml", 1)[1]
    flat, sectioned = re.findall(r"```toml\n(.*?)```", page, flags=re.S)
    loaded = []
    for text in (flat, sectioned):
        (tmp_path / "rag.toml").write_text(text)
        loaded.append(load_settings(config_file=tmp_path / "rag.toml", environ={}))
    assert loaded[0] == loaded[1] and loaded[0].k == 4
