"""Web pages against a default `rag serve` and `rag ui`, in real Chromium.

An attacker's page on another origin, and a page reached through a rebinding host
name (``rebind.test`` resolves to 127.0.0.1 in this browser), try to read threads and
start runs. Each such request must be refused by the servers themselves (HTTP 403 from
the Host/Origin guard, seen on the wire), whatever the browser's CORS rules would
have let the page read, and no thread may appear. The same requests from the
servers' own origin pass, so the test can fail.
"""

from __future__ import annotations

import http.server
import json
import threading

import httpx
import pytest

from bench.local_service import smollm2_env, start, ui_token, wait_until_up
from tests.net import free_port

pytestmark = pytest.mark.slow
QUESTION = {"assistant_id": "rag", "input": {"question": "What does rag doctor do?"}}

# Requests a hostile page makes: reads (fetch with CORS) and state changes a browser
# sends without a preflight (no-cors, text/plain), each recorded with what came back.
ATTACK = """
async ([serve, ui, key]) => {
  const tries = [
    [serve + "/threads/search", {method: "POST", body: "{}",
      headers: {"Content-Type": "application/json", "X-API-Key": key}}],
    [serve + "/threads", {method: "POST", body: "{}", mode: "no-cors",
      headers: {"Content-Type": "text/plain", "X-API-Key": key}}],
    [serve + "/runs/wait", {method: "POST", body: BODY, mode: "no-cors",
      headers: {"Content-Type": "text/plain"}}],
    [ui + "/api/sessions", {method: "POST", body: "{}", mode: "no-cors",
      headers: {"Content-Type": "text/plain"}}],
    [ui + "/api/ask", {method: "POST", body: BODY, mode: "no-cors",
      headers: {"Content-Type": "text/plain"}}],
  ];
  const out = [];
  for (const [url, init] of tries) {
    try {
      const r = await fetch(url, init);
      out.push([url, r.type, r.status, r.type === "opaque" ? "" : await r.text()]);
    } catch (e) {
      out.push([url, "error", 0, String(e)]);
    }
  }
  return out;
}
""".replace("BODY", json.dumps(json.dumps(QUESTION)))


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    """A default `rag serve` (it generates its key) and `rag ui`, one data directory."""
    data = tmp_path_factory.mktemp("origin-data")
    env = smollm2_env(data)
    serve_port, ui_port = free_port(), free_port()
    serve = start(["serve", "--port", str(serve_port)], env, data / "serve.log")
    ui = start(["ui", "--port", str(ui_port)], env, data / "ui.log")
    key_file = data / "server" / "api_key"
    key = lambda: {"X-API-Key": key_file.read_text().strip()}  # noqa: E731
    serve_url, ui_url = f"http://127.0.0.1:{serve_port}", f"http://127.0.0.1:{ui_port}"
    try:
        wait_until_up(serve, f"{serve_url}/healthz", data / "serve.log", headers=key)
        token = ui_token(data / "ui.log")
        wait_until_up(
            ui, f"{ui_url}/api/options", data / "ui.log", headers=lambda: {"X-UI-Token": token}
        )
        yield {"serve": serve_url, "ui": ui_url, "key": key()["X-API-Key"], "token": token}
    finally:
        for proc in (serve, ui):
            proc.terminate()
            proc.wait(timeout=30)


@pytest.fixture
def attacker_site(tmp_path):
    """Another origin: a page served from another loopback port."""
    (tmp_path / "index.html").write_text("<!doctype html><title>elsewhere</title>")
    handler = lambda *a: http.server.SimpleHTTPRequestHandler(  # noqa: E731
        *a, directory=str(tmp_path)
    )
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()


def watch(page, *urls: str) -> list[tuple[str, int]]:
    """Every answer the servers sent this page to a request that was not a CORS
    preflight, as the network saw it."""
    seen: list[tuple[str, int]] = []

    def record(response) -> None:
        if response.url.startswith(urls) and response.request.method != "OPTIONS":
            seen.append((response.url, response.status))

    page.on("response", record)
    return seen


def threads(servers) -> list:
    response = httpx.post(
        f"{servers['serve']}/threads/search", json={}, headers={"X-API-Key": servers["key"]}
    )
    assert response.status_code == 200, response.text
    return response.json()


def test_a_page_on_another_origin_can_neither_read_nor_start_anything(
    servers, attacker_site, browser
):
    before = threads(servers)
    page = browser.new_page()
    seen = watch(page, servers["serve"], servers["ui"])
    page.goto(attacker_site)
    results = page.evaluate(ATTACK, [servers["serve"], servers["ui"], servers["key"]])
    assert len(results) == 5
    for url, kind, _, text in results:
        assert kind in ("error", "opaque") and not text.startswith("["), (url, kind, text)
    # the servers answered every request that reached them with the guard's 403; the
    # no-cors ones reach them whatever CORS says (a refused preflight stops the first)
    assert seen and all(status == 403 for _, status in seen), seen
    assert {url for url, _ in seen} >= {r[0] for r in results[1:]}
    assert threads(servers) == before


def test_a_rebinding_host_name_is_refused_by_both_servers(servers, browser):
    page = browser.new_page()
    for name in ("serve", "ui"):
        port = servers[name].rsplit(":", 1)[1]
        rebound = f"http://rebind.test:{port}"
        seen = watch(page, rebound)
        response = page.goto(f"{rebound}/")
        assert response.status == 403, (name, response.status)
        # same-origin now, so the browser would let the page read anything it got
        paths = ["/threads/search", "/threads"] if name == "serve" else ["/api/sessions"]
        for path in paths:
            status = page.evaluate(
                """async ([path, key]) => (await fetch(path, {method: "POST", body: "{}",
                     headers: {"Content-Type": "application/json", "X-API-Key": key}})).status""",
                [path, servers["key"]],
            )
            assert status == 403, (name, path, status)
        assert seen and all(status == 403 for _, status in seen), seen


def test_the_servers_own_origin_still_works(servers, browser):
    """The control: the same kind of request from the page's own origin passes."""
    before = len(threads(servers))
    page = browser.new_page()
    page.goto(f"{servers['ui']}/?token={servers['token']}")  # the URL rag ui printed
    status = page.evaluate(
        """async () => (await fetch("/api/sessions", {method: "POST", body: "{}",
             headers: {"Content-Type": "application/json"}})).status"""
    )
    assert status == 201  # a new chat session
    page.goto(f"{servers['serve']}/healthz", wait_until="commit")
    status = page.evaluate(
        """async (key) => (await fetch("/threads", {method: "POST", body: "{}",
             headers: {"Content-Type": "application/json", "X-API-Key": key}})).status""",
        servers["key"],
    )
    assert status == 200
    assert len(threads(servers)) == before + 1
