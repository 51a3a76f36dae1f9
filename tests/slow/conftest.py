"""Fixtures shared by the slow tests: a real browser, and the frozen docs ingested."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.corpus import FROZEN_DOCS

CHROMIUM = Path("/usr/bin/chromium")  # Debian's, from scripts/install_browser.sh
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    # a rebinding name: resolves to loopback, as an attacker's DNS would make it
    "--host-resolver-rules=MAP rebind.test 127.0.0.1",
]


@pytest.fixture
def browser():
    """Headless Chromium through Playwright; `playwright install` is never run."""
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: run scripts/install_browser.sh (make test does)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    """A data directory whose default collection holds the frozen copy of the docs
    (tests/corpus/), ingested with the real embedder, once per test module."""
    from ingest.pipeline import IngestOptions, Ingestor
    from tools.config import load_settings
    from tools.models.factory import embeddings
    from tools.store.collection import Collection

    path = tmp_path_factory.mktemp("data")
    settings = load_settings({"data_dir": path})
    collection = Collection(settings, create=True)
    report = Ingestor(
        settings, collection, embeddings(settings), IngestOptions(), progress=False
    ).run([FROZEN_DOCS])
    assert report.chunks_added > 0 and not report.skipped
    return path
