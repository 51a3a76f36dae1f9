"""Against a real Langfuse instance, when LANGFUSE_* points at one; skipped (with the reason)
otherwise. No Langfuse server can run on the development machines (it needs ClickHouse)."""

from __future__ import annotations

import os
import time

import httpx
import pytest

from tools import tracing
from tools.config import load_settings

pytestmark = pytest.mark.slow
REASON = (
    "no Langfuse instance configured: set LANGFUSE_PUBLIC_KEY, LANGFUSE_SECRET_KEY and "
    "LANGFUSE_BASE_URL to run this smoke test"
)


@pytest.mark.skipif(
    not (
        os.environ.get("LANGFUSE_PUBLIC_KEY")
        and os.environ.get("LANGFUSE_SECRET_KEY")
        and os.environ.get("LANGFUSE_BASE_URL")
    ),
    reason=REASON,
)
def test_trace_and_score_reach_a_real_langfuse():
    settings = load_settings({"tracing": "langfuse"})
    lf = tracing.client(settings)
    assert lf.auth_check(), "Langfuse rejected the keys"
    trace_id = tracing.new_trace_id()
    with lf.start_as_current_observation(name="rag-smoke", trace_context={"trace_id": trace_id}):
        pass
    tracing.score(settings, trace_id, "smoke", 1.0)
    tracing.flush()
    base = os.environ["LANGFUSE_BASE_URL"].rstrip("/")
    auth = (os.environ["LANGFUSE_PUBLIC_KEY"], os.environ["LANGFUSE_SECRET_KEY"])
    for _ in range(30):
        response = httpx.get(f"{base}/api/public/traces/{trace_id}", auth=auth, timeout=10)
        if response.status_code == 200:
            return
        time.sleep(1)
    pytest.fail(f"trace {trace_id} did not appear in Langfuse")
