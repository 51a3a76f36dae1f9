"""The one redaction of secrets in connection strings, for everything that is shown.

Why its own module: model specs (tools/models/spec.py), settings (tools/config.py),
stores and the CLI all print URLs, and a second copy of these patterns would miss the
form the first one learnt. Every URL or DSN that is printed, logged, raised or written
into a report goes through ``redacted_url``.
"""

from __future__ import annotations

import re

# libpq's secret parameters, wherever a connection string can carry them
_SECRET_PARAMS = r"password|sslpassword|passfile|sslkey|api[_-]?key|secret|token"
_REDACTIONS = (
    # userinfo of a URL: scheme://user:password@host (the last @ before the path ends
    # it; a port and a path with an @ in it are not a password)
    (re.compile(r"(://[^:/@\s]*:)[^\s/]*@"), r"\1***@"),
    # a query parameter: ...?password=x&... or ;password=x
    (re.compile(rf"([?&;](?:{_SECRET_PARAMS})=)[^&;#\s]*", re.I), r"\1***"),
    # a key=value connection string: host=h password='a b' user=u
    (re.compile(rf"(\b(?:{_SECRET_PARAMS})\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s'&;#]+)", re.I), r"\1***"),
)


def redacted_url(text: str) -> str:
    """Text with every password a connection string can hold shown as ***: a URL's
    userinfo, its query parameters and libpq's key=value form. The one redaction
    function: every URL or DSN that is printed, logged or raised goes through it."""
    for pattern, replacement in _REDACTIONS:
        text = pattern.sub(replacement, text)
    return text
