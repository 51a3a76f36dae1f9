import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from pydantic import BaseModel

from tools.errors import ModelOutputError
from tools.structured import invoke_structured, parse_json_reply, parser_for


class Verdict(BaseModel):
    grounded: bool
    reason: str


class ScriptedModel(GenericFakeChatModel):
    """Replays canned replies; stands in for an LLM only to test the retry logic."""

    def with_structured_output(self, schema, **_):
        return self | parser_for(schema)


def test_parse_plain_and_fenced_json():
    assert parse_json_reply('{"grounded": true, "reason": "ok"}', Verdict).grounded is True
    fenced = '```json\n{"grounded": false, "reason": "x"}\n```'
    assert parse_json_reply(fenced, Verdict).grounded is False


@pytest.mark.parametrize("bad", ['{"grounded": true, "rea', "[1, 2]", '{"grounded": "maybe"}'])
def test_malformed_replies_raise_model_output_error(bad):
    with pytest.raises(ModelOutputError):
        parse_json_reply(bad, Verdict)


def test_retries_truncated_reply_then_succeeds():
    model = ScriptedModel(
        messages=iter(
            [
                AIMessage('{"grounded": true, "reason": "cut off mid'),
                AIMessage('{"grounded": true, "reason": "all claims supported"}'),
            ]
        )
    )
    result = invoke_structured(model, Verdict, [HumanMessage("check")], retries=2)
    assert result == Verdict(grounded=True, reason="all claims supported")


def test_gives_up_after_retries_with_clear_error():
    model = ScriptedModel(messages=iter([AIMessage("not json")] * 3))
    with pytest.raises(ModelOutputError, match="no valid Verdict after 3 attempts"):
        invoke_structured(model, Verdict, [HumanMessage("check")], retries=2)
