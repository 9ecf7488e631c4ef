"""Redaction of secrets from everything the kit writes: headers, URLs and free text.

- ``redact_headers(headers, extra=())``: values of credential headers become ``[REDACTED]``
  (``Authorization: Bearer sk-...`` keeps its scheme: ``Bearer [REDACTED]``).
- ``redact_url(url, extra_params=())``: credential query parameters and URL user info.
- ``redact_text(text, secrets)``: every occurrence of each given secret string.
- ``secrets_from_headers(headers, extra=())``: the secret values a request carries, so that the
  same values can be scrubbed from bodies, error messages and logs.
- ``secrets_from_url(url)``: the same for a URL (its user info, as given and as the Basic credential
  an HTTP client makes of it, and the values of credential query parameters).
- ``redact_args(args)`` and ``secrets_from_args(args)``: command-line arguments for another program
  (``--server-arg=--api-key=K``): the values of credential options (``--api-key K``, ``--token=T``).
- ``redact_data(value, secrets)``: every string inside JSON-like data (a copy) or an object's
  attributes (in place: pytest's reports), with ``redact_text``.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit, urlunsplit

__all__ = [
    "REDACTED",
    "SECRET_ARG_WORDS",
    "SECRET_HEADERS",
    "SECRET_QUERY_PARAMS",
    "redact_args",
    "redact_data",
    "redact_headers",
    "redact_text",
    "redact_url",
    "secrets_from_args",
    "secrets_from_headers",
    "secrets_from_url",
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

# A command-line option holds a credential when a word of its name (split at - and _) is one of these:
# --api-key, --hf-token, --admin_password, --client-secret, --auth (never --tokenizer, --max-tokens).
SECRET_ARG_WORDS = frozenset({"key", "apikey", "token", "secret", "password", "passwd", "credential",
                              "credentials", "auth", "cookie"})

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


def secrets_from_url(url: str) -> list[str]:
    """The credentials a URL carries: its user info's password (or, with none, the user name: a token
    given as `http://TOKEN@host`), as given and percent-decoded, and the Basic credential a client
    sends for it, and credential query values. A user name beside a password is no secret (scrubbing
    "user" would blank every "role": "user" of a transcript)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return []
    found: set[str] = set()
    if "@" in parts.netloc:
        userinfo = parts.netloc.rsplit("@", 1)[0]
        user, colon, password = userinfo.partition(":")
        for raw in ((userinfo, password) if colon else (user,)):
            found |= {raw, unquote(raw)}
        found.add(base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode()).decode())
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if name.lower() in SECRET_QUERY_PARAMS:
            found.add(value)
            found.add(quote(value, safe=""))
    return sorted((s for s in found if len(s) >= _MIN_SECRET_LEN), key=len, reverse=True)


def _secret_option(arg: str) -> bool:
    if not arg.startswith("-"):
        return False
    words = arg.lstrip("-").split("=", 1)[0].lower().replace("_", "-").split("-")
    return any(w in SECRET_ARG_WORDS for w in words)


def _arg_secrets(args: Iterable[str]) -> list[tuple[int, str]]:
    """(index, value) of each credential value in an argument list: `--api-key=K` or `--api-key K`."""
    args = list(args)
    out: list[tuple[int, str]] = []
    for n, arg in enumerate(args):
        if not _secret_option(arg):
            continue
        if "=" in arg:
            out.append((n, arg.split("=", 1)[1]))
        elif n + 1 < len(args) and not args[n + 1].startswith("--"):
            out.append((n + 1, args[n + 1]))
    return out


def redact_args(args: Iterable[str]) -> list[str]:
    """A copy of a program's arguments with the value of every credential option replaced
    (``--api-key=K`` -> ``--api-key=[REDACTED]``; ``--api-key K`` -> ``--api-key [REDACTED]``)."""
    out = [str(a) for a in args]
    for n, value in _arg_secrets(out):
        out[n] = out[n][: len(out[n]) - len(value)] + REDACTED if out[n] != value else REDACTED
    return out


def secrets_from_args(args: Iterable[str]) -> list[str]:
    """The values of the credential options in a program's arguments (see ``redact_args``)."""
    found = {value for _, value in _arg_secrets(str(a) for a in args)}
    return sorted((s for s in found if len(s) >= _MIN_SECRET_LEN), key=len, reverse=True)


def redact_data(value: Any, secrets: Iterable[str | None], _depth: int = 0) -> Any:
    """Every string inside `value` with ``redact_text``: dicts, lists and tuples are copied (keys
    too); any other object with attributes (pytest's report objects) is changed in place and
    returned. Bounded in depth (64), so a cycle cannot loop."""
    secrets = [s for s in secrets if s and len(s) >= _MIN_SECRET_LEN]
    if not secrets or _depth > 64:
        return value
    if isinstance(value, str):
        return redact_text(value, secrets)
    if isinstance(value, dict):
        return {redact_data(k, secrets, _depth + 1): redact_data(v, secrets, _depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_data(v, secrets, _depth + 1) for v in value]
    if isinstance(value, tuple):
        return tuple(redact_data(v, secrets, _depth + 1) for v in value)
    if isinstance(value, (int, float, bool, bytes, type(None))):
        return value
    attributes = getattr(value, "__dict__", None)
    if isinstance(attributes, dict):
        for name, item in list(attributes.items()):
            new = redact_data(item, secrets, _depth + 1)
            if new is not item:
                try:
                    setattr(value, name, new)
                except (AttributeError, TypeError):  # a frozen object: left as it is
                    pass
    return value
