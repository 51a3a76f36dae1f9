"""What a run request may hold: its config's keys, its message history, no webhook and
no command.

Checked twice, from this one definition: by the door (server/app.py) on the routes it
knows, for an early 422 that names the field, and by the auth handler LangGraph calls
as it inserts any run, from any route (server/auth.py), on the run's arguments as the
server stored them. A route the door does not check therefore cannot carry more.
"""

from __future__ import annotations

from typing import Any

# what a run's top-level ``config`` may hold: anything else (a setting put beside
# ``configurable``) would be stored in the thread's record and break reading it back
CONFIG_KEYS = frozenset({"configurable", "tags", "recursion_limit"})
MAX_MESSAGES = 100
MAX_MESSAGE_CHARS = 20_000


def config_problem(config: Any) -> str | None:
    """What is wrong with a run's ``config``, or None."""
    if not isinstance(config, dict):
        return "'config' must be an object"
    if stray := sorted(set(config) - CONFIG_KEYS):
        return (
            f"'config' may hold only {sorted(CONFIG_KEYS)}, not {stray}: settings go in "
            "config.configurable"
        )
    return None


def messages_problem(messages: Any) -> str | None:
    """What is wrong with a run's ``input.messages``, or None."""
    if messages is None:
        return None
    if not isinstance(messages, list):
        return "'input.messages' must be a list"
    if len(messages) > MAX_MESSAGES:
        return f"'input.messages' has {len(messages)} messages, over {MAX_MESSAGES}"
    for message in messages:
        text = message.get("content") if isinstance(message, dict) else message
        if len(str(text)) > MAX_MESSAGE_CHARS:
            return f"a message in 'input.messages' is over {MAX_MESSAGE_CHARS} characters"
    return None


def run_problem(body: dict[str, Any]) -> str | None:
    """What a run request (or the run arguments LangGraph stored from one) holds that no
    run may: a config key beside the allowed ones, a webhook, a command, or a message
    history over the caps."""
    if problem := config_problem(body.get("config") or {}):
        return problem
    if body.get("webhook") is not None:
        return "'webhook' is not accepted: this server sends run records to no URL"
    if body.get("command") is not None:
        return "'command' is not accepted: this graph never pauses for input"
    payload = body.get("input")
    return messages_problem(payload.get("messages")) if isinstance(payload, dict) else None
