"""Every spelling of a secret in a URL, a connection string or a header is redacted:
canaries planted in each form libpq, OAuth, signed URLs and HTTP carry them in, and in
percent-encoded names, which libpq and web servers decode (tools/redact.py)."""

from __future__ import annotations

import pytest

from tools.redact import redacted_url, secret_name

CANARY = "CANARY-7f3a"
SPELLINGS = [
    # libpq URIs: userinfo (a password may hold @, ? and #), query parameters
    f"postgresql://rag:{CANARY}@127.0.0.1:5432/rag",
    f"postgres://rag:{CANARY}@h1:5432,h2:5433/rag?target_session_attrs=any",
    f"postgresql://rag:p@{CANARY}@db.example/rag",
    f"postgresql://rag:{CANARY}?x#y@db.example/rag",
    f"postgresql://rag@db.example/rag?sslmode=require&password={CANARY}",
    f"postgresql://rag@db.example/rag?pass%77ord={CANARY}",
    f"postgresql://rag@db.example/rag?PASSWORD={CANARY}",
    f"postgresql://rag@db.example/rag?pass%2577ord={CANARY}",
    f"postgresql:///rag?host=/var/run/postgresql&sslpassword={CANARY}",
    f"postgresql://db.example/rag?passfile=/home/{CANARY}/.pgpass",
    f"postgresql://db.example/rag?sslkey=/keys/{CANARY}.key",
    # libpq keyword/value form
    f"host=127.0.0.1 port=5432 user=rag password={CANARY} dbname=rag",
    f"host=127.0.0.1 password='{CANARY} with spaces' dbname=rag",
    f"host=127.0.0.1 password = '{CANARY}\\' quoted' dbname=rag",
    f"dbname=rag passfile=/home/{CANARY}/.pgpass",
    f"dbname=rag sslpassword={CANARY}&more",
    # query parameters of other services
    f"https://api.example/v1?access_token={CANARY}&page=2",
    f"https://auth.example/token?client_id=app&client_secret={CANARY}",
    f"https://maps.example/api?key={CANARY}",
    f"https://blob.example/c/f.txt?sv=2022-11-02&se=2026&sig={CANARY}",
    f"https://s3.example/b/o?X-Amz-Credential=AK&X-Amz-Signature={CANARY}",
    f"https://app.example/callback#access_token={CANARY}&state=1",
    f"https://api.example/v1?api-key={CANARY}",
    f"GET /search?q=x&token={CANARY} HTTP/1.1",
    f"http://key:{CANARY}@127.0.0.1:9/v1",
    # headers
    f"Authorization: Bearer {CANARY}",
    f"authorization: Basic {CANARY}",
    f"X-Api-Key: {CANARY}",
    f"curl -H 'Authorization: Bearer {CANARY}' https://api.example",
    f"Cookie: session={CANARY}",
    f"request failed: Bearer {CANARY} was refused",
    f"{{'password': '{CANARY}', 'user': 'rag'}}",
]


@pytest.mark.parametrize("text", SPELLINGS)
def test_every_spelling_of_a_secret_is_redacted(text):
    shown = redacted_url(text)
    assert CANARY not in shown, shown
    assert "***" in shown


@pytest.mark.parametrize(
    "text",
    [
        "postgresql://rag@db.example:5432/rag?sslmode=require",
        "http://host:8080/path@x",
        "https://docs.example/search?q=password&k=4",
        "host=127.0.0.1 port=5432 user=rag dbname=rag",
        "openai:qwen@http://127.0.0.1:8000/v1",
        "the session: ended; keyword=monkey",
    ],
)
def test_what_is_not_a_secret_is_left_as_it_is(text):
    assert redacted_url(text) == text


def test_only_the_secret_is_masked():
    assert redacted_url("postgres://u:p@ss@h:5432/db") == "postgres://u:***@h:5432/db"
    assert (
        redacted_url("https://h/b?sv=1&sig=abc&se=2&pass%77ord=x")
        == "https://h/b?sv=1&sig=***&se=2&pass%77ord=***"
    )
    assert redacted_url("host=h password='a b' dbname=d") == "host=h password='***' dbname=d"


@pytest.mark.parametrize(
    "name",
    [
        "password",
        "pass%77ord",
        "PASSWORD",
        "access_token",
        "client_secret",
        "key",
        "sig",
        "X-Amz-Signature",
        "Authorization",
        "x-ui-token",
        "passfile",
        "sslpassword",
        "apiKey",
    ],
)
def test_secret_names_are_judged_decoded(name):
    assert secret_name(name)


@pytest.mark.parametrize("name", ["host", "user", "dbname", "sslmode", "q", "keyword", "k"])
def test_ordinary_names_are_not_secrets(name):
    assert not secret_name(name)
