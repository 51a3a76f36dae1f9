"""The answer object's published JSON schema (graph/answer.schema.json): written from
the state's types, and every answer `rag ask --json` prints validates against it."""

from __future__ import annotations

import json

import jsonschema
import pytest

from graph import prompts
from graph.state import ANSWER_SCHEMA_FILE, answer_schema
from rag_cli.main import main


def test_the_published_schema_is_the_one_the_types_give():
    published = json.loads(ANSWER_SCHEMA_FILE.read_text())
    assert published == answer_schema(), (
        "graph/answer.schema.json is out of date: regenerate it with\n"
        'python -c "import json; from graph.state import answer_schema, ANSWER_SCHEMA_FILE; '
        "ANSWER_SCHEMA_FILE.write_text(json.dumps(answer_schema(), indent=2, sort_keys=True)"
        " + '\\n')\""
    )


def _asked(capsys, models, question: str) -> dict:
    main(["ask", question, "--json"], services=models.services)
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize(
    "answer",
    [
        "Install it with `make demo` [1].",  # verified or not, with a verdict
        prompts.NOT_FOUND,  # an abstention
        "It uses port 9999 [1].",  # a literal no passage holds: unsupported
    ],
)
def test_every_answer_validates(corpus_env, models, capsys, answer):
    models.answer = answer
    out = _asked(capsys, models, "How do I install the service?")
    jsonschema.validate(out, answer_schema())


def test_a_key_the_types_do_not_declare_fails(corpus_env, models, capsys):
    out = _asked(capsys, models, "How do I install the service?")
    out["verdict"]["invented"] = 1
    with pytest.raises(jsonschema.ValidationError, match="invented"):
        jsonschema.validate(out, answer_schema())
