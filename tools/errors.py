"""Errors a user can act on. Entry points print their message and exit non-zero."""


class ModelError(RuntimeError):
    """A model could not be loaded or called."""


class LLMTimeoutError(ModelError, TimeoutError):
    """A model call ran past its deadline (``llm_timeout_s``)."""


class ModelOutputError(ModelError, ValueError):
    """A model answered, but not in the shape asked for (truncated or invalid JSON)."""
