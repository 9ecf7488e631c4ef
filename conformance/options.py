"""The kit's options, defined once: the pytest plugin adds them with the `--` names below and the
CLI commands reuse the same function (as pytest-benchmark does with its option sets)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

def _NEVER(name: str) -> bool:
    return False


FEATURES = ("tool-dispatch", "tokenize", "prefix-cache", "preamble-strip", "count-tokens")


def add_options(add: Callable[..., Any], *, taken: Callable[[str], bool] = _NEVER) -> None:
    """Add every option as `--NAME` (dest `hc_NAME`); in pytest a name another plugin already owns
    (pytest-timeout's --timeout) is only reachable as `--hc-NAME`, which always exists there."""
    _add = add

    def add(flag: str, **kwargs: Any) -> None:  # noqa: F811 - wraps the caller's add
        dest = "hc_" + flag[2:].replace("-", "_")
        names = [flag] if not taken(flag) else []
        if taken is not _NEVER:
            names.append("--hc-" + flag[2:])
        _add(*names, dest=dest, **kwargs)

    add("--endpoint", default=None, metavar="URL",
        help="base URL of the endpoint under test (e.g. http://localhost:8000); default: start the embedded "
             "reference server")
    add("--model", default=None, metavar="ID", help="model id to request (default: the endpoint's first model)")
    add("--api-key", default=None, metavar="KEY",
        help="API key sent as x-api-key and Authorization: Bearer (default: env HARNESSCHECK_API_KEY); never written "
             "to transcripts or results")
    add("--apis", default="anthropic,chat,responses", metavar="LIST",
        help="comma-separated APIs to check: anthropic, chat, responses (default: all)")
    add("--tries", type=int, default=3, metavar="N",
        help="attempts per scenario before a check that needs a model behaviour is inconclusive (default: 3)")
    add("--timeout", type=float, default=30.0, metavar="SECONDS",
        help="deadline for each request, streams included: a hung or trickling endpoint fails its check "
             "(default: 30)")
    add("--transcripts", default=None, metavar="DIR", help="write the transcripts of failing checks here")
    add("--results", default=None, metavar="FILE", help="write results JSON (harnesscheck.results schema) here")
    add("--expect", action="append", default=[], metavar="FEATURE",
        help=f"declare an optional feature the endpoint offers, so its absence fails instead of skipping; "
             f"repeatable: {', '.join(FEATURES)}")
    add("--witness", default="auto", choices=["auto", "tokenize", "cache", "timing"],
        help="history checks: force one witness (chat-form /tokenize, prefix-cache usage, or paired TTFT timing); "
             "auto takes the strongest the endpoint offers (default: auto)")
    add("--server-arg", action="append", default=[], metavar="ARG",
        help="extra argument for the embedded reference server, repeatable (e.g. --server-arg=--fault=NAME)")
