"""Redaction of secrets from everything the kit writes: headers, URLs and free text.

- ``redact_headers(headers, extra=())``: values of credential headers become ``[REDACTED]``
  (``Authorization: Bearer sk-...`` keeps its scheme: ``Bearer [REDACTED]``).
- ``redact_url(url, extra_params=())``: credential query parameters and URL user info.
- ``redact_text(text, secrets)``: every occurrence of each given secret string.
- ``secrets_from_headers(headers, extra=())``: the secret values a request carries, so that the
  same values can be scrubbed from bodies, error messages and logs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

__all__ = [
    "REDACTED",
    "SECRET_HEADERS",
    "SECRET_QUERY_PARAMS",
    "redact_headers",
    "redact_text",
    "redact_url",
    "secrets_from_headers",
]

REDACTED = "[REDACTED]"

SECRET_HEADERS = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "x-api-key",
        "api-key",
        "cookie",
        "set-cookie",
        "openai-api-key",
        "anthropic-api-key",
        "x-goog-api-key",
        "x-auth-token",
    }
)

SECRET_QUERY_PARAMS = frozenset(
    {
        "key",
        "api_key",
        "api-key",
        "apikey",
        "token",
        "access_token",
        "auth",
        "auth_token",
        "password",
        "secret",
        "client_secret",
        "sig",
        "signature",
        "x-api-key",
    }
)

_SCHEMES = ("bearer ", "basic ", "token ")
_MIN_SECRET_LEN = 4  # never scrub tiny strings like "a" out of every text


def _is_secret_header(name: str, extra: Iterable[str]) -> bool:
    low = name.lower()
    return low in SECRET_HEADERS or low in {e.lower() for e in extra}


def _redact_value(name: str, value: str) -> str:
    low = value.lower()
    if name.lower() in ("authorization", "proxy-authorization"):
        for scheme in _SCHEMES:
            if low.startswith(scheme):
                return value[: len(scheme)] + REDACTED
    return REDACTED


def redact_headers(
    headers: Mapping[str, str] | Iterable[tuple[str, str]] | None, extra: Iterable[str] = ()
) -> dict[str, str]:
    """A copy of the headers with credential values replaced. Repeated names are joined by ", "."""
    extra = tuple(extra)
    out: dict[str, str] = {}
    if headers is None:
        return out
    items = headers.items() if isinstance(headers, Mapping) else headers
    for name, value in items:
        name = str(name)
        value = str(value)
        if _is_secret_header(name, extra):
            value = _redact_value(name, value)
        out[name] = f"{out[name]}, {value}" if name in out else value
    return out


def secrets_from_headers(
    headers: Mapping[str, str] | Iterable[tuple[str, str]] | None, extra: Iterable[str] = ()
) -> list[str]:
    """The credential values in the headers (with an auth scheme stripped), longest first."""
    extra = tuple(extra)
    found: set[str] = set()
    if headers is None:
        return []
    items = headers.items() if isinstance(headers, Mapping) else headers
    for name, value in items:
        if not _is_secret_header(str(name), extra):
            continue
        value = str(value)
        found.add(value)
        low = value.lower()
        for scheme in _SCHEMES:
            if low.startswith(scheme):
                found.add(value[len(scheme):].strip())
    return sorted((s for s in found if len(s) >= _MIN_SECRET_LEN), key=len, reverse=True)


def redact_url(url: str, extra_params: Iterable[str] = ()) -> str:
    """The URL with credential query parameters and any user:password@ replaced."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    names = SECRET_QUERY_PARAMS | {p.lower() for p in extra_params}
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{REDACTED}@{netloc.rsplit('@', 1)[1]}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(k.lower() in names for k, _ in pairs):
            pairs = [(k, REDACTED if k.lower() in names else v) for k, v in pairs]
            query = urlencode(pairs, safe="[]", quote_via=quote)
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def redact_text(text: str, secrets: Iterable[str | None]) -> str:
    """Replace every occurrence of each secret (strings shorter than 4 characters are ignored)."""
    for secret in sorted({s for s in secrets if s and len(s) >= _MIN_SECRET_LEN}, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return text
