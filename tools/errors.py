"""Errors a user can act on. Entry points print their message and exit non-zero.

Model errors carry a ``kind``: the answer object's ``error.type``, so a caller can
tell a timeout from a malformed reply without parsing messages.
"""


class ModelError(RuntimeError):
    """A model could not be loaded or called."""

    kind = "model_error"
    retried = True  # whether another attempt can help (tools.resilient.with_retries)


class LLMTimeoutError(ModelError, TimeoutError):
    """A model call ran past its deadline (``llm_timeout_s``)."""

    kind = "timeout"


class ModelOutputError(ModelError, ValueError):
    """A model answered, but not in the shape asked for (truncated or invalid JSON)."""

    kind = "malformed_output"


class NoLogprobsError(ModelOutputError):
    """A model replied without the token log-probabilities asked for: its provider does
    not return them (Anthropic, several behind litellm). Asking again cannot help."""

    retried = False


class EmptyReplyError(ModelError):
    """A model answered with nothing at all, on every attempt."""

    kind = "empty_answer"


class ContextOverflowError(ModelError):
    """The prompt does not fit the model's context window; retrying cannot help."""

    kind = "context_overflow"
    retried = False
    hint = (
        "the prompt does not fit the model's context window: lower k (fewer passages), "
        "ask a shorter question, or raise llm_context_tokens (local models)"
    )


class GenerationCancelled(ModelError):
    """The person waiting cancelled the answer (Ctrl-C in ``rag chat``)."""

    kind = "cancelled"
    retried = False
