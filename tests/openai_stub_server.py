"""A minimal OpenAI-compatible HTTP server on 127.0.0.1 for tests of provider switching.

It stands in for vLLM/Ollama/llama.cpp-server only to prove that one setting routes
calls to another endpoint; it records every request so tests can check what was sent.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class OpenAIStub:
    def __init__(self, reply: str = "4", logprobs: bool = True, status: int = 200) -> None:
        self.reply = reply
        # a server-side failure (500, 503): a real llama_cpp.server gives a 500 only for
        # a request body it cannot parse, which the product's clients never send
        self.status = status
        self.logprobs = logprobs  # a provider without them (Anthropic's API) answers the same
        self.requests: list[tuple[str, dict[str, Any]]] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stub.requests.append((self.path, body))
                if stub.status != 200:
                    payload = {"error": {"message": "the server failed", "type": "server_error"}}
                elif self.path.endswith("/chat/completions"):
                    payload = stub._chat(body)
                elif self.path.endswith("/embeddings"):
                    payload = stub._embeddings(body)
                else:
                    self.send_error(404)
                    return
                data = json.dumps(payload).encode()
                self.send_response(stub.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

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

    def __enter__(self) -> OpenAIStub:
        self.thread.start()
        return self

    def __exit__(self, *_: Any) -> None:
        self.server.shutdown()
        self.server.server_close()
