"""A real OpenAI-compatible model server for tests: llama-cpp-python's ``llama_cpp.server``
in its own process on loopback, started and stopped by the test that needs it.

Also a pass-through proxy that takes the log-probabilities out of every request and reply,
the shape of a provider that never returns them (Anthropic's API, several behind
litellm), with a real model's replies behind it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import IO, Any

from tests.net import JsonServer, free_port

STARTUP_S = 120.0  # imports and the model load, on a loaded 2-core machine


class LlamaServer:
    """``python -m llama_cpp.server`` serving one GGUF as model ``alias``."""

    def __init__(self, model: Path, alias: str, *, n_ctx: int = 4096, threads: int = 0) -> None:
        self.model, self.alias, self.n_ctx = model, alias, n_ctx
        self.threads = threads or os.cpu_count() or 1
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.process: subprocess.Popen[bytes] | None = None
        self.log = b""
        self._log_file: IO[bytes] | None = None

    def spec(self) -> str:
        """The model spec a setting takes: ``openai:<alias>@<base_url>``."""
        return f"openai:{self.alias}@{self.base_url}"

    def __enter__(self) -> LlamaServer:
        args = ["--model", str(self.model), "--model_alias", self.alias]
        args += ["--host", "127.0.0.1", "--port", str(self.port), "--n_ctx", str(self.n_ctx)]
        args += ["--n_threads", str(self.threads), "--n_threads_batch", str(self.threads)]
        # a file, not a pipe: llama.cpp logs enough at load to fill a pipe no one reads
        self._log_file = tempfile.TemporaryFile()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", *args],
            stdout=subprocess.DEVNULL,
            stderr=self._log_file,
        )
        deadline = time.monotonic() + STARTUP_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self.stop()
                raise RuntimeError(f"llama_cpp.server exited at start: {self.log[-2000:]!r}")
            try:
                urllib.request.urlopen(f"{self.base_url}/models", timeout=2).close()
                return self
            except (urllib.error.URLError, OSError):
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"llama_cpp.server did not answer in {STARTUP_S} s")

    def kill(self) -> None:
        """Kill the server at once, as a crash would: replies in flight break off."""
        if self.process is not None:
            self.process.kill()
        self.stop()

    def stop(self) -> None:
        """Stop the server now (a test can call it mid-answer)."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self._log_file is not None:
            self._log_file.seek(0)
            self.log = self._log_file.read()
            self._log_file.close()
            self._log_file = None

    def __exit__(self, *_: object) -> None:
        self.stop()


_LOGPROB_FIELDS = ("logprobs", "top_logprobs")


class WithoutLogprobs(JsonServer):
    """Forwards every request to ``upstream`` (a base URL) without the log-probability
    fields, and every reply without them: a real model behind a provider's shape."""

    def __init__(self, upstream: str) -> None:
        super().__init__()
        self.upstream = upstream.rstrip("/")
        self.requests: list[dict[str, Any]] = []

    def handle(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        self.requests.append(dict(body))
        for field in _LOGPROB_FIELDS:
            body.pop(field, None)
        if body.get("stream"):  # the verifier never streams: keep the proxy simple
            return 400, {"error": {"message": "streaming is not proxied"}}
        status, reply = self._forward(path, body)
        for choice in reply.get("choices", []):
            choice.pop("logprobs", None)
        return status, reply

    def _forward(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        url = self.upstream + path.removeprefix("/v1")
        request = urllib.request.Request(
            url, json.dumps(body).encode(), {"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=120) as reply:
                return reply.status, json.loads(reply.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"{}")
