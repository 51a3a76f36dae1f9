"""The chat page's HTTP endpoints with fake models over a real (tmp) collection."""

from __future__ import annotations

import json
import re

import pytest
from starlette.testclient import TestClient

from graph import prompts
from graph.builder import DIRECT_PATH
from rag_cli.main import main
from rag_cli.ui_cmd import exposure_problem
from rag_ui.app import MAX_BODY_BYTES, STATIC, create_app
from rag_ui.flags import MAX_COMMENT_CHARS, flag_store
from tools import tracing
from tools.config import load_settings

QUESTION = "How do I install the service?"


@pytest.fixture
def client(corpus_env, models):
    app = create_app(corpus_env, services=models.services)
    with TestClient(app, base_url="http://127.0.0.1:8124") as client:
        yield client


def new_session(client) -> str:
    response = client.post("/api/sessions")
    assert response.status_code == 201
    return response.json()["session"]


def events(response) -> list[tuple[str, dict]]:
    out = []
    for block in response.text.strip().split("\n\n"):
        name = re.search(r"^event: (.*)$", block, flags=re.M).group(1)
        data = re.search(r"^data: (.*)$", block, flags=re.M).group(1)
        out.append((name, json.loads(data)))
    return out


def ask(client, session, question=QUESTION, **toggles) -> dict:
    response = client.post("/api/ask", json={"session": session, "question": question, **toggles})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    stream = events(response)
    assert stream[-1][0] == "answer", stream[-1]
    return {"events": stream, "exchange": stream[-1][1]}


def test_answer_streams_steps_tokens_then_the_whole_exchange(client, models):
    result = ask(client, new_session(client))
    names = [name for name, _ in result["events"]]
    assert names[0] == "start" and names[-1] == "answer"
    steps = [data["node"] for name, data in result["events"] if name == "step"]
    assert tuple(steps) == DIRECT_PATH
    tokens = "".join(data["text"] for name, data in result["events"] if name == "token")
    assert tokens == models.answer  # the generator's text only: not the verifier's JSON
    ex = result["exchange"]
    assert ex["answer"] == models.answer and ex["question"] == QUESTION
    assert ex["verdict"]["grounded"] is True and ex["history"] == []
    cited = ex["passages"][ex["citations"][0]["n"] - 1]
    assert cited["source"] == "docs/install.md" and cited["location"].endswith("lines 1-3")
    assert "Run make demo" in cited["text"]
    assert [turn["role"] for turn in ex["prompt"]] == ["system", "human"]
    assert ex["prompt"][0]["content"].startswith("You answer questions")
    assert QUESTION in ex["prompt"][1]["content"] and ex["attempts"] == 1
    assert {"retrieve", "generate_answer", "total", "first_token"} <= set(ex["timings"])
    assert ex["settings"] == {"collection": "docs", "k": 5, "rerank": "none"}


def test_a_reloaded_page_gets_its_conversation_back(client):
    session = new_session(client)
    first = ask(client, session)["exchange"]
    second = ask(client, session, "And how long does it take?")["exchange"]
    response = client.get(f"/api/sessions/{session}")
    assert response.status_code == 200
    assert response.json() == {"session": session, "exchanges": [first, second]}
    assert client.get("/api/sessions/not-a-session").status_code == 404


def test_toggles_reach_the_graph_and_cuts_are_listed(client):
    ex = ask(client, new_session(client), k="1")["exchange"]
    assert len(ex["passages"]) == 1 and ex["settings"]["k"] == 1  # validated, then typed
    assert any(d["stage"] == "top_k" for d in ex["dropped"])


def test_prompt_of_a_regenerated_answer_carries_the_feedback(client, models):
    models.answer = ["Install with `pip` [1].", "Run make demo to install the service [1]."]
    result = ask(client, new_session(client))
    ex = result["exchange"]
    assert ex["attempts"] == 2
    assert "Install with `pip`" in ex["prompt"][1]["content"]  # the rejected statement, as sent
    calls = {data["call"] for name, data in result["events"] if name == "token"}
    assert len(calls) == 2  # the page restarts the streamed text on a new generator call
    runs = [
        d["seconds"]
        for name, d in result["events"]
        if name == "step" and d["node"] == "generate_answer"
    ]
    assert len(runs) == 2 and sum(runs) == pytest.approx(ex["timings"]["generate_answer"], abs=1e-3)
    running = [d["node"] for name, d in result["events"] if name == "running"]
    assert running.count("generate_answer") == 2 and running[0] == "start_question"


def test_the_page_never_receives_the_not_found_marker_and_withdraws_the_draft(client, models):
    models.answer = f"Run make demo to install the service [1]. {prompts.NOT_FOUND}"
    result = ask(client, new_session(client))
    names = [name for name, _ in result["events"]]
    assert "token" in names and names.index("draft_reset") > names.index("token")
    streamed = [data for name, data in result["events"] if name != "answer"]
    assert prompts.NOT_FOUND not in json.dumps(streamed) + result["exchange"]["answer"]
    assert result["exchange"]["outcome"] == "not_in_documents"
    assert result["exchange"]["closest"][0]["where"].startswith("docs/")


def test_follow_up_is_rephrased_within_a_session_only(client, models):
    session = new_session(client)
    ask(client, session, "How do I enable tracing?")
    follow = ask(client, session, "and how do I turn it off?")["exchange"]
    assert follow["queries"] == [models.rephrased]
    assert [turn["role"] for turn in follow["history"]] == ["human", "ai"]
    fresh = ask(client, new_session(client), "and how do I turn it off?")["exchange"]
    assert fresh["queries"] == ["and how do I turn it off?"] and fresh["history"] == []


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ({"question": QUESTION}, 404, "unknown or expired session"),
        ({"session": "nope", "question": QUESTION}, 404, "unknown or expired session"),
        ({}, 422, "'question' is required"),
        ({"question": "   "}, 422, "'question' is required"),
        ({"question": 42}, 422, "'question' is required"),
        ({"question": "x" * 2001}, 422, "max_question_chars=2000"),
        ({"question": QUESTION, "k": 0}, 422, "k = 0"),
        ({"question": QUESTION, "k": 51}, 422, "k = 51"),
        ({"question": QUESTION, "k": "many"}, 422, "k = 'many'"),
        ({"question": QUESTION, "collection": "nope"}, 422, "unknown collection 'nope'"),
        ({"question": QUESTION, "collection": "../etc"}, 422, "collection"),
        ({"question": QUESTION, "rerank": "magic"}, 422, "rerank"),
        ({"question": QUESTION, "data_dir": "/"}, 422, "unknown field(s) ['data_dir']"),
    ],
)
def test_bad_questions_and_settings_get_4xx_with_the_reason(client, body, status, message):
    if "session" not in body and status != 404:
        body = {"session": new_session(client), **body}
    response = client.post("/api/ask", json=body)
    assert response.status_code == status
    assert message in response.json()["detail"]


def test_junk_bodies_get_4xx(client):
    post = client.post
    assert post("/api/ask", content=b"question=hi").status_code == 415  # form posts: no CSRF
    junk = {"Content-Type": "application/json"}
    assert post("/api/ask", content=b"\xff{", headers=junk).status_code == 422
    listed = post("/api/ask", json=[1, 2])
    assert listed.json()["detail"] == "the request body must be a JSON object"
    huge = post("/api/ask", content=b" " * (MAX_BODY_BYTES + 1), headers=junk)
    assert huge.status_code == 413


def test_a_session_answers_one_question_at_a_time(client):
    session = new_session(client)
    client.app.state.chat.sessions.get(session).busy = True
    response = client.post("/api/ask", json={"session": session, "question": QUESTION})
    assert response.status_code == 409 and "still answering" in response.json()["detail"]


def test_flag_stores_the_whole_exchange(client, corpus_env):
    session = new_session(client)
    ask(client, session, "How do I enable tracing?")
    ex = ask(client, session, QUESTION)["exchange"]
    response = client.post(
        "/api/flag", json={"session": session, "exchange": ex["id"], "comment": " wrong step "}
    )
    assert response.status_code == 201
    assert response.json()["trace_scored"] is False  # tracing is off in this test
    (flag,) = flag_store(corpus_env).list()
    assert flag["id"] == response.json()["id"] and flag["comment"] == "wrong step"
    stored = flag["exchange"]
    assert stored == ex  # the server's own record: question, passages, prompt, answer...
    assert stored["history"][0]["content"] == "How do I enable tracing?"
    assert flag["question"] == QUESTION


def test_flag_posts_a_trace_score_when_tracing_is_on(corpus_env, models, monkeypatch):
    settings = load_settings({"tracing": "local"})
    monkeypatch.setenv("RAG_TRACING", "local")
    app = create_app(settings, services=models.services)
    with TestClient(app, base_url="http://127.0.0.1:8124") as client:
        session = new_session(client)
        ex = ask(client, session)["exchange"]
        assert ex["trace_id"]
        response = client.post(
            "/api/flag", json={"session": session, "exchange": ex["id"], "comment": "bad"}
        )
    assert response.json()["trace_scored"] is True
    scores = tracing.load_scores(settings, ex["trace_id"])
    assert {"name": "user_flag", "value": 0.0, "comment": "bad"}.items() <= scores[-1].items()


def test_bad_flags_get_4xx(client):
    session = new_session(client)
    ex = ask(client, session)["exchange"]
    other = new_session(client)
    cases = [
        ({"session": other, "exchange": ex["id"]}, 404, "unknown answer"),
        ({"session": session, "exchange": "nope"}, 404, "unknown answer"),
        ({"session": session}, 404, "unknown answer"),
        ({"exchange": ex["id"]}, 404, "unknown or expired session"),
        ({"session": session, "exchange": ex["id"], "comment": 5}, 422, "must be a string"),
        (
            {"session": session, "exchange": ex["id"], "comment": "x" * (MAX_COMMENT_CHARS + 1)},
            422,
            f"over the limit of {MAX_COMMENT_CHARS}",
        ),
        ({"session": session, "exchange": ex["id"], "score": 1}, 422, "unknown field"),
    ]
    for body, status, message in cases:
        response = client.post("/api/flag", json=body)
        assert response.status_code == status, body
        assert message in response.json()["detail"]


def test_options_list_collections_and_usable_rerankers(client):
    options = client.get("/api/options").json()
    assert options["collections"] == ["docs"] and options["k"] == 5 and options["k_max"] == 50
    assert options["rerankers"] == ["none", "llm"]  # the others need a rerank_model


def test_page_and_its_assets_come_from_this_server_only(client):
    page = client.get("/")
    assert page.status_code == 200
    assert page.headers["content-security-policy"].startswith("default-src 'self'")
    for name in ("index.html", "app.js", "style.css"):
        text = (STATIC / name).read_text()
        assert not re.search(r"(https?:)?//[\w.-]+\.\w+/", text), name  # no CDN, no host
    for asset in ("/static/app.js", "/static/style.css"):
        assert client.get(asset).status_code == 200


def test_ui_binds_loopback_unless_remote_is_allowed(capsys):
    assert exposure_problem("127.0.0.1", load_settings()) is None
    assert "no login" in exposure_problem("0.0.0.0", load_settings({"api_key": "k"}))
    assert exposure_problem("0.0.0.0", load_settings({"allow_remote": True})) is None
    assert main(["ui", "--host", "0.0.0.0"]) == 2
    assert "refusing to serve the chat page on 0.0.0.0" in capsys.readouterr().err


def test_ui_takes_collection_like_ask_and_names_an_unknown_one(corpus_env, capsys):
    assert main(["ui", "--collection", "nope"]) == 2
    assert "unknown collection 'nope'" in capsys.readouterr().err


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "http://127.0.0.1:9999"},  # another local page
        {"Origin": "null"},  # a sandboxed frame or a file: page
        {"Host": "evil.example:8124"},  # DNS rebinding onto loopback
    ],
)
def test_other_origins_and_host_names_can_neither_read_nor_change_state(client, headers):
    assert client.post("/api/sessions", headers=headers).status_code == 403
    assert client.get("/api/options", headers=headers).status_code == 403
    session = new_session(client)
    body = {"session": session, "question": QUESTION}
    assert client.post("/api/ask", json=body, headers=headers).status_code == 403


def test_same_origin_page_and_nested_or_oversized_bodies(client):
    own = {"Origin": "http://127.0.0.1:8124"}
    assert client.post("/api/sessions", headers=own).status_code == 201
    nested = b"[" * 50_000 + b"]" * 50_000
    json_type = {"content-type": "application/json"}
    assert client.post("/api/flag", content=nested[:60_000], headers=json_type).status_code == 422
    deep = b'{"session": ' + b"[" * 20_000 + b"]" * 20_000 + b"}"
    assert client.post("/api/ask", content=deep, headers=json_type).status_code == 422
    assert client.post("/api/ask", content=nested, headers=json_type).status_code == 413


def test_with_a_token_the_page_answers_only_the_browser_that_opened_its_url(corpus_env, models):
    with TestClient(create_app(corpus_env, token="s3cret"), base_url="http://127.0.0.1:8124") as c:
        for path in ("/", "/api/options", "/static/app.js"):
            assert c.get(path).status_code == 401, path
        assert "?token=" in c.get("/").json()["detail"]
        assert c.post("/api/sessions", json={}).status_code == 401
        assert c.get("/?token=wrong", follow_redirects=False).status_code == 401
        opened = c.get("/?token=s3cret&x=1", follow_redirects=False)
        assert opened.status_code == 303 and opened.headers["location"] == "/?x=1"
        cookie = opened.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        assert c.get("/api/options").status_code == 200  # the client keeps the cookie
        assert c.post("/api/sessions", json={}).status_code == 201
    with TestClient(create_app(corpus_env, token="s3cret"), base_url="http://127.0.0.1:8124") as c:
        assert c.get("/api/options", headers={"X-UI-Token": "s3cret"}).status_code == 200


def test_a_conversation_survives_a_restart_of_rag_ui(corpus_env, models):
    """The page's conversations are kept on disk: after a restart the tab's session is
    read back and its turns are the history a follow-up is rephrased with."""
    url = "http://127.0.0.1:8124"
    with TestClient(create_app(corpus_env, services=models.services), base_url=url) as first:
        session = new_session(first)
        said = ask(first, session, "How do I enable tracing?")["exchange"]
    saved = corpus_env.data_dir.resolve() / "ui" / "sessions" / f"{session}.json"
    assert oct(saved.stat().st_mode & 0o777) == "0o600"

    restarted = create_app(corpus_env, services=models.services)
    with TestClient(restarted, base_url=url) as second:
        shown = second.get(f"/api/sessions/{session}").json()["exchanges"]
        assert [e["id"] for e in shown] == [said["id"]]
        follow_up = ask(second, session, "and how do I turn it off?")["exchange"]
    assert models.chats["query"].calls  # rephrased, with the restored history
    assert "How do I enable tracing?" in models.chats["query"].calls[-1][-1].text
    assert follow_up["history"][0]["content"] == "How do I enable tracing?"
    assert second.get("/api/sessions/not-a-session-id").status_code == 404


def test_the_prompt_says_how_its_passage_numbers_became_the_answers(client, models):
    same = ask(client, new_session(client))["exchange"]
    assert same["prompt_note"] == ""  # the answer cites [1]: nothing was renumbered
    models.answer = "Set LANGFUSE_TRACING_ENABLED=false to turn tracing off [2]."
    ex = ask(client, new_session(client))["exchange"]
    assert ex["citations"][0]["n"] == 1  # the answer's own numbering starts at what it cites
    cited = ex["passages"][0]["location"]
    assert f"[2] ({cited})" in ex["prompt"][0]["content"]  # the generator knew it as [2]
    assert "in this prompt, [2] is the answer's [1], [1] is the answer's [2]" in ex["prompt_note"]


def test_the_chat_page_may_not_be_framed_and_keeps_its_own_policy(client):
    page = client.get("/")
    assert page.headers["x-frame-options"] == "DENY"
    policy = page.headers["content-security-policy"]
    assert policy.startswith("default-src 'self'") and policy.endswith("frame-ancestors 'none'")
