"""A minimal OpenAI-compatible HTTP server on 127.0.0.1 for tests of provider switching.

It stands in for vLLM/Ollama/llama.cpp-server only to prove that one setting routes
calls to another endpoint; it records every request so tests can check what was sent.
"""

from __future__ import annotations

from typing import Any

from tests.net import JsonServer


class OpenAIStub(JsonServer):
    def __init__(self, reply: str = "4", logprobs: bool = True, status: int = 200) -> None:
        super().__init__()
        self.reply = reply
        # a server-side failure (500, 503): a real llama_cpp.server gives a 500 only for
        # a request body it cannot parse, which the product's clients never send
        self.status = status
        self.logprobs = logprobs  # a provider without them (Anthropic's API) answers the same
        self.requests: list[tuple[str, dict[str, Any]]] = []

    def handle(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        self.requests.append((path, body))
        if self.status != 200:
            return self.status, {"error": {"message": "the server failed", "type": "server_error"}}
        if path.endswith("/chat/completions"):
            return 200, self._chat(body)
        if path.endswith("/embeddings"):
            return 200, self._embeddings(body)
        return 404, {"error": {"message": f"no such endpoint: {path}"}}

    def _chat(self, body: dict[str, Any]) -> dict[str, Any]:
        choice: dict[str, Any] = {
            "index": 0,
            "finish_reason": "stop",
            "message": {"role": "assistant", "content": self.reply},
        }
        if body.get("logprobs") and self.logprobs:  # a sure "yes" to any yes/no question
            top = [{"token": "yes", "logprob": -0.1}, {"token": "no", "logprob": -2.5}]
            choice["logprobs"] = {
                "content": [{"token": "yes", "logprob": -0.1, "top_logprobs": top}]
            }
        return {
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [choice],
            "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
        }

    def _embeddings(self, body: dict[str, Any]) -> dict[str, Any]:
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        return {
            "object": "list",
            "model": body["model"],
            "data": [
                {"object": "embedding", "index": i, "embedding": [0.1, 0.2, 0.3]}
                for i, _ in enumerate(inputs)
            ],
            "usage": {"prompt_tokens": 1, "total_tokens": 1},
        }
