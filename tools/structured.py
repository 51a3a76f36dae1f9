"""Structured (JSON) model output for every provider, with bounded retries.

Small local models occasionally stop mid-object when they hit ``max_tokens``;
that is a fault to retry, never a crash and never a silently empty answer.
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda
from pydantic import BaseModel, ValidationError

from tools.errors import ModelOutputError
from tools.resilient import with_retries


def parse_json_reply(text: str, schema: dict[str, Any] | type[BaseModel]) -> Any:
    """Parse a model's JSON reply into ``schema`` (a pydantic class or a JSON schema dict)."""
    cleaned = text.strip()
    if cleaned.startswith("```"):
        cleaned = cleaned.strip("`").removeprefix("json").strip()
    try:
        data = json.loads(cleaned)
    except json.JSONDecodeError as exc:
        raise ModelOutputError(
            f"model reply is not valid JSON ({exc.msg}): {text[:200]!r}"
        ) from exc
    if isinstance(schema, dict):
        if not isinstance(data, dict):
            raise ModelOutputError(f"expected a JSON object, got {type(data).__name__}")
        return data
    try:
        return schema.model_validate(data)
    except ValidationError as exc:
        raise ModelOutputError(f"model reply does not match {schema.__name__}: {exc}") from exc


def parser_for(schema: dict[str, Any] | type[BaseModel]) -> RunnableLambda:
    return RunnableLambda(lambda message: parse_json_reply(message.text, schema), name="parse_json")


def invoke_structured(
    model: BaseChatModel,
    schema: type[BaseModel],
    messages: list[BaseMessage],
    *,
    retries: int,
    config: RunnableConfig | None = None,
) -> Any:
    """Call ``model`` for a ``schema`` object, retrying failed or malformed replies
    ``retries`` times; any failure ends as a typed ``ModelError`` (see tools.resilient)."""
    runnable = model.with_structured_output(schema)

    def call() -> Any:
        try:
            result = runnable.invoke(messages, config=config)
        except (ValidationError, json.JSONDecodeError) as exc:
            raise ModelOutputError(str(exc)) from exc
        if result is None:  # some providers return None when parsing fails
            raise ModelOutputError("model returned no parsable object")
        return result

    try:
        return with_retries(call, retries=retries, what=f"structured {schema.__name__}")
    except ModelOutputError as exc:
        raise ModelOutputError(
            f"no valid {schema.__name__} after {retries + 1} attempts: {exc}"
        ) from exc
