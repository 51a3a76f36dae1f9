import pytest

from tools.models.spec import ModelSpec, parse_model_spec


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("local", ModelSpec("local", "")),
        ("local:smollm2", ModelSpec("local", "smollm2")),
        ("local:/models/x.gguf", ModelSpec("local", "/models/x.gguf")),
        ("openai:gpt-4o-mini", ModelSpec("openai", "gpt-4o-mini")),
        (
            "openai:qwen@http://127.0.0.1:8000/v1",
            ModelSpec("openai", "qwen", "http://127.0.0.1:8000/v1"),
        ),
        ("litellm:ollama/llama3", ModelSpec("litellm", "ollama/llama3")),
    ],
)
def test_parse(text, expected):
    assert parse_model_spec(text, kind="chat") == expected
    assert str(expected) == text


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "unknown model provider"),
        ("gpt-4", "unknown model provider"),
        ("openai:", "needs a model name"),
        ("litellm:gpt4", "'<provider>/<model>'"),
        ("openai:m@ftp://x", "must start with http"),
    ],
)
def test_rejects(text, message):
    with pytest.raises(ValueError, match=message):
        parse_model_spec(text, kind="chat")
