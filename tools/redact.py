"""The one redaction of secrets in what is shown: URLs, connection strings and headers.

Why its own module: model specs (tools/models/spec.py), settings (tools/config.py),
stores and the CLI all print URLs, and a second copy would miss the form the first one
learnt. Every URL or DSN that is printed, logged, raised or written into a report goes
through ``redacted_url``.

Why parsing rather than patterns of secret names: a list of names in a pattern misses
every spelling it did not list (``?access_token=``, ``&sig=``, ``?pass%77ord=``, which
libpq decodes to ``password``). Here the text is read as what carries secrets, and each
name is judged by one rule (``secret_name``) after percent-decoding:

- a URL: its userinfo's password (``scheme://user:PASSWORD@host``, ending at the last
  ``@`` before the path, as libpq reads it), and every query and fragment parameter;
- libpq's keyword/value form and any other ``name=value`` (a value in single quotes
  may hold spaces and ``\\'``);
- a header line (``Authorization: Bearer ...``, ``X-Api-Key: ...``) and a quoted
  ``"name": "value"`` pair; and a ``Bearer`` credential wherever it stands.
"""

from __future__ import annotations

import re
from urllib.parse import unquote_plus

MASK = "***"
# words that make a parameter, header or key name a secret's; a name is split into
# words at anything not a letter or digit ("X-Api-Key", "client_secret")
_SECRET_WORDS = frozenset(
    (
        "password passwd pwd pass passphrase passfile sslpassword sslkey secret token key "
        "keys apikey sig signature credential credentials authorization auth cookie session "
        "sessionid jwt"
    ).split()
)
# ...and word endings: "accesstoken", "clientsecret", "dbpassword"
_SECRET_ENDINGS = ("password", "passwd", "secret", "token", "apikey", "signature", "credential")

_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]*")
# the start of name=value: at the text's start, after a blank or a separator
_PAIR = re.compile(r"(?:^|(?<=[\s?&;#,(]))(?P<name>[\w.%+-]+)\s*=\s*")
# a header line, also as curl's -H 'Name: value' writes it; its value runs to the end
# of the line
_HEADER = re.compile(r"(?:^[ \t>]*|-H\s*)['\"]?(?P<name>[\w%.-]+):[ \t]+", re.M)
# "name": "value" or 'name': 'value' (a dict or JSON in a message)
_QUOTED = re.compile(r"(?P<q>[\"'])(?P<name>[^\"'\s]+)(?P=q)\s*:\s*(?=[\"'])")
_BEARER = re.compile(r"\bBearer\s+(?!\*\*\*)[^\s'\",;]+", re.I)


def _decoded(name: str) -> str:
    """``name`` percent-decoded until it stops changing (twice-encoded names too)."""
    for _ in range(4):
        plain = unquote_plus(name)
        if plain == name:
            break
        name = plain
    return name


def secret_name(name: str) -> bool:
    """Whether a parameter, header or key called ``name`` holds a secret."""
    words = re.split(r"[^a-z0-9]+", _decoded(name).lower())
    return any(w in _SECRET_WORDS or w.endswith(_SECRET_ENDINGS) for w in words if w)


def _value_end(text: str, start: int, stops: str, *, blanks: bool = True) -> int:
    """Where a value starting at ``start`` ends: after its closing quote (libpq's
    single quotes with backslash escapes, or double quotes), else at one of ``stops``
    or (with ``blanks``) a blank."""
    if start < len(text) and text[start] in "'\"":
        quote, i = text[start], start + 1
        while i < len(text) and text[i] != quote:
            i += 2 if text[i] == "\\" else 1
        return min(i + 1, len(text))
    i = start
    while i < len(text) and not (blanks and text[i].isspace()) and text[i] not in stops:
        i += 2 if text[i] == "\\" else 1
    return min(i, len(text))


def _masked(text: str, pattern: re.Pattern[str], stops: str, *, blanks: bool = True) -> str:
    """Each match of ``pattern`` whose ``name`` is a secret's, with the value that
    follows it masked (a quoted value keeps its quotes)."""
    out, at = [], 0
    for match in pattern.finditer(text):
        if match.start() < at or not secret_name(match["name"]):
            continue
        end = _value_end(text, match.end(), stops, blanks=blanks)
        quoted = end > match.end() and text[match.end()] in "'\""
        quote = text[match.end()] if quoted else ""
        out += [text[at : match.end()], quote + MASK + quote]
        at = end
    return "".join(out) + text[at:]


def _pairs(text: str, in_query: bool = False) -> str:
    """Every ``name=value`` whose name is a secret's, with its value masked. In a
    query a value ends at the next ``&``, ``;`` or ``#``; in libpq's keyword/value form
    only at a blank (or its closing quote)."""
    return _masked(text, _PAIR, "&;#" if in_query else "")


def _url(url: str) -> str:
    """A URL with its userinfo's password and its secret parameters masked."""
    scheme, _, rest = url.partition("://")
    authority = rest.split("/", 1)[0]
    at, host = authority.rfind("@"), 0
    if at >= 0:  # libpq reads userinfo up to the last @ before the path, ? and # included
        user, colon, _ = authority[:at].partition(":")
        userinfo = user + (":" + MASK if colon else "")
        rest, host = userinfo + rest[at:], len(userinfo) + 1
    marks = [i for i in (rest.find("?", host), rest.find("#", host)) if i >= 0]
    query = min(marks, default=len(rest))
    return f"{scheme}://{rest[:query]}" + _pairs(rest[query:], in_query=True)


def _headers(text: str) -> str:
    """Header lines and quoted pairs whose name is a secret's, with the value masked:
    a header's value runs to the end of its line (or a closing quote)."""
    lines = _masked(text, _HEADER, "\r\n'\"", blanks=False)
    return _masked(lines, _QUOTED, "")


def redacted_url(text: str) -> str:
    """Text with every secret a URL, a connection string or a header can carry shown
    as ***: the one redaction function, for everything printed, logged or raised."""
    text = _headers(text)
    out, at = [], 0
    for match in _URL.finditer(text):
        out += [_pairs(text[at : match.start()]), _url(match[0])]
        at = match.end()
    out.append(_pairs(text[at:]))
    return _BEARER.sub(lambda m: m[0].split()[0] + " " + MASK, "".join(out))
