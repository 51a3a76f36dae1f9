"""Langfuse tracing of every run, switched on by configuration alone, and a local sink.

- ``tracing = "auto"`` (default): Langfuse when ``LANGFUSE_PUBLIC_KEY`` and
  ``LANGFUSE_SECRET_KEY`` are set (``LANGFUSE_BASE_URL`` picks the server), else off.
- ``"local"``: no server needed; spans are written to ``<data_dir>/traces/spans.jsonl``
  and ``rag trace show TRACE_ID`` prints the tree. ``"langfuse"`` also writes there.
- ``"off"``: nothing is created.

The Langfuse SDK exports in a background thread, so an unreachable, hanging or
401-answering host never slows or breaks answering; only ``flush`` waits, bounded
by ``LANGFUSE_TIMEOUT`` (seconds, set here to 5 unless given).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tools.config import ConfigError, Settings

log = logging.getLogger(__name__)
_LOCK = threading.Lock()
_CLIENTS: dict[tuple[str, ...], Any] = {}


def mode(settings: Settings) -> str:
    """The effective tracing mode: off, local or langfuse."""
    keys = bool(os.environ.get("LANGFUSE_PUBLIC_KEY") and os.environ.get("LANGFUSE_SECRET_KEY"))
    if os.environ.get("LANGFUSE_TRACING_ENABLED", "").lower() == "false":
        return "off"
    if settings.tracing == "auto":
        return "langfuse" if keys else "off"
    if settings.tracing == "langfuse" and not keys:
        raise ConfigError(
            "tracing=langfuse needs LANGFUSE_PUBLIC_KEY and LANGFUSE_SECRET_KEY "
            "(and LANGFUSE_BASE_URL for a self-hosted server)"
        )
    return settings.tracing


def spans_file(settings: Settings) -> Path:
    return settings.data_dir.resolve() / "traces" / "spans.jsonl"


class JsonlSpanExporter:
    """An OpenTelemetry span exporter that appends finished spans to JSONL files.

    One exporter serves the process; each trace goes to the sink of the data directory
    its run was configured with (``route``), so runs on two data directories never mix.
    """

    def __init__(self) -> None:
        self._routes: dict[str, Path] = {}
        self._lock = threading.Lock()

    def route(self, trace_id: str, path: Path) -> None:
        with self._lock:
            self._routes[trace_id] = path

    def export(self, spans: Sequence[Any]) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        rows: dict[Path, list[dict[str, Any]]] = {}
        for span in spans:
            trace_id = format(span.context.trace_id, "032x")
            path = self._routes.get(trace_id)
            if path is None:
                continue  # not a run of ours
            parent = span.parent.span_id if span.parent else None
            rows.setdefault(path, []).append(
                {
                    "trace_id": trace_id,
                    "span_id": format(span.context.span_id, "016x"),
                    "parent_id": format(parent, "016x") if parent else None,
                    "name": span.name,
                    "start_ns": span.start_time,
                    "end_ns": span.end_time,
                    "attributes": {k: _plain(v) for k, v in (span.attributes or {}).items()},
                }
            )
        try:
            with self._lock:
                for path, items in rows.items():
                    path.parent.mkdir(parents=True, exist_ok=True)
                    with path.open("a") as fh:
                        fh.writelines(json.dumps(r) + "\n" for r in items)
        except OSError as exc:  # tracing must never break answering
            log.warning("could not write local trace files: %s", exc)
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def client(settings: Settings) -> Any | None:
    """The process's Langfuse client for this configuration, or None when tracing is off."""
    current = mode(settings)
    if current == "off":
        return None
    key = (
        current,
        os.environ.get("LANGFUSE_PUBLIC_KEY", ""),
        os.environ.get("LANGFUSE_BASE_URL", ""),
    )
    with _LOCK:
        if key not in _CLIENTS:
            _CLIENTS[key] = _make_client(current)
        return _CLIENTS[key]


LOCAL_SINK = JsonlSpanExporter()
_EXPORT_LOGGERS = ("opentelemetry.exporter.otlp.proto.http.trace_exporter", "langfuse")


class _OneExportWarning(logging.Filter):
    """A dead tracing host must cost at most one log line per process, not one per batch:
    the first export/score failure is reported, later ones are dropped."""

    def __init__(self) -> None:
        super().__init__()
        self.reported = False

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        text = record.getMessage()
        if not any(m in text for m in ("export", "Failed to send", "error", "Transient")):
            return True
        if self.reported:
            return False
        self.reported = True
        record.msg, record.args = f"tracing host problem (further ones not logged): {text}", ()
        return True


_ONE_WARNING = _OneExportWarning()
for _name in _EXPORT_LOGGERS:
    logging.getLogger(_name).addFilter(_ONE_WARNING)


def _make_client(current: str) -> Any:
    from langfuse import Langfuse
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    os.environ.setdefault("LANGFUSE_TIMEOUT", "5")
    provider = TracerProvider()
    if current == "local":
        # No server: the Langfuse SDK still shapes the spans, our exporter stores them.
        return Langfuse(
            public_key="local",
            secret_key="local",
            base_url="http://127.0.0.1:9",
            tracer_provider=provider,
            span_exporter=LOCAL_SINK,
        )
    provider.add_span_processor(BatchSpanProcessor(LOCAL_SINK))
    return Langfuse(tracer_provider=provider)


def current_trace_id(settings: Settings) -> str | None:
    """The trace a node runs in (when the graph was invoked with a Langfuse handler)."""
    lf = client(settings)
    return lf.get_current_trace_id() if lf is not None else None


def new_trace_id(seed: str | None = None) -> str:
    from langfuse import Langfuse

    return Langfuse.create_trace_id(seed=seed)


def run_config(
    settings: Settings,
    *,
    trace_id: str,
    session_id: str | None = None,
    user_id: str | None = None,
    metadata: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Callbacks and metadata that make one LangGraph run one Langfuse trace."""
    meta: dict[str, Any] = {"rag_trace_id": None, **(metadata or {})}
    if mode(settings) == "off":
        return {"metadata": meta}
    from langfuse.langchain import CallbackHandler

    lf = client(settings)
    LOCAL_SINK.route(trace_id, spans_file(settings))
    meta["rag_trace_id"] = trace_id
    if session_id:
        meta["langfuse_session_id"] = session_id
    if user_id:
        meta["langfuse_user_id"] = user_id
    handler = CallbackHandler(
        public_key=lf._resources.public_key, trace_context={"trace_id": trace_id}
    )
    return {"callbacks": [handler], "metadata": meta, "run_name": "agentic-rag"}


def scores_file(settings: Settings) -> Path:
    return spans_file(settings).with_name("scores.jsonl")


def score(
    settings: Settings,
    trace_id: str | None,
    name: str,
    value: float | bool,
    comment: str | None = None,
) -> None:
    """Attach a score to a trace: sent to Langfuse, or kept by the local sink in local mode."""
    lf = client(settings)
    if lf is None or not trace_id:
        return
    if mode(settings) == "local":
        row = {"trace_id": trace_id, "name": name, "value": float(value), "comment": comment}
        path = scores_file(settings)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as fh:
            fh.write(json.dumps(row) + "\n")
        return
    kind = "BOOLEAN" if isinstance(value, bool) else "NUMERIC"
    lf.create_score(
        trace_id=trace_id, name=name, value=float(value), data_type=kind, comment=comment
    )


@contextmanager
def span(settings: Settings, name: str, *, root: bool = False, **fields: Any) -> Iterator[Any]:
    """A traced block outside the graph (an ingestion run and its stages).

    Yields an object with ``update(output=..., metadata=...)``; a do-nothing one when
    tracing is off, so callers never branch on it.
    """
    lf = client(settings)
    if lf is None:
        yield _NoSpan()
        return
    context = None
    if root:
        trace_id = new_trace_id()
        LOCAL_SINK.route(trace_id, spans_file(settings))
        context = {"trace_id": trace_id}
    with lf.start_as_current_observation(
        name=name, as_type="span", trace_context=context, **fields
    ) as observation:
        yield observation


class _NoSpan:
    def update(self, **_: Any) -> None:
        pass


def flush() -> None:
    """Send what is buffered (bounded by LANGFUSE_TIMEOUT); called before a process exits."""
    with _LOCK:
        clients = list(_CLIENTS.values())
    for lf in clients:
        try:
            lf.flush()
        except Exception as exc:  # never let a dead tracing host fail the command
            log.warning("trace flush failed: %s", exc)


def _rows(path: Path, trace_id: str) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    with path.open() as fh:
        return [row for line in fh if (row := json.loads(line))["trace_id"] == trace_id]


def load_trace(settings: Settings, trace_id: str) -> list[dict[str, Any]]:
    return _rows(spans_file(settings), trace_id)


def load_scores(settings: Settings, trace_id: str) -> list[dict[str, Any]]:
    return _rows(scores_file(settings), trace_id)


def render_tree(spans: list[dict[str, Any]]) -> list[str]:
    """Indented span tree with durations, children in start order."""
    children: dict[str | None, list[dict[str, Any]]] = {}
    ids = {s["span_id"] for s in spans}
    for span in sorted(spans, key=lambda s: s["start_ns"]):
        parent = span["parent_id"] if span["parent_id"] in ids else None
        children.setdefault(parent, []).append(span)
    lines: list[str] = []

    def walk(parent: str | None, depth: int) -> None:
        for span in children.get(parent, []):
            seconds = (span["end_ns"] - span["start_ns"]) / 1e9
            kind = span["attributes"].get("langfuse.observation.type", "span")
            model = span["attributes"].get("langfuse.observation.model.name")
            lines.append(
                f"{'  ' * depth}{span['name']} [{kind}] {seconds:.3f}s"
                + (f" model={model}" if model else "")
            )
            walk(span["span_id"], depth + 1)

    walk(None, 0)
    return lines
