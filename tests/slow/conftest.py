"""Fixtures shared by the slow tests that drive a real browser."""

from __future__ import annotations

from pathlib import Path

import pytest

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
