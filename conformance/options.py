"""The kit's options, defined once: the pytest plugin adds them under one prefix (`--hc-endpoint`,
`--hc-model`, ...), the CLI commands with their short names (`--endpoint`, ...), from the same
function, as pytest-benchmark does with its `--benchmark-*` option sets. `validate_options`
checks their values before any request, for both."""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

from harnesscheck.protocol import apis
from harnesscheck.protocol.apis import names as api_names  # the registry's, read when called
from harnesscheck.protocol.wire.redact import redact_url


FEATURES = ("tool-dispatch", "tokenize", "prefix-cache", "preamble-strip", "count-tokens")
# The embedded reference server; it offers every optional feature its --server-arg values leave on. Its
# context window (64K tokens, half the reference server's default) keeps the over-long prompts of the
# context checks (test_context.py) small, with room for the real clients' requests (Claude Code's first is
# ~33K tokens). No modelled time: no check of a run reads the clock while the endpoint offers /tokenize and
# cache usage (the fault matrix runs every fault this way with the same verdicts), so it would only be
# waited out; with --witness timing (embedded_server_args) decode and prefill cost what that witness sees.
EMBEDDED_SERVER_ARGS = ("--decode-ms", "0", "--ttft-base-ms", "0", "--prefill-us-per-token", "0",
                        "--context-window", "65536")
EMBEDDED_TIMING = ("--decode-ms", "0.2", "--ttft-base-ms", "1", "--prefill-us-per-token", "50")


def embedded_server_args(witness: str = "auto") -> tuple[str, ...]:
    """The embedded server's arguments for a run with this `--witness` (timing: a timing model on)."""
    return (*EMBEDDED_SERVER_ARGS, *(EMBEDDED_TIMING if witness == "timing" else ()))


def embedded_features(server_args: Iterable[str]) -> set[str]:
    """The optional features the embedded server offers with these extra arguments."""
    features = set(FEATURES)
    if "--no-enable-streaming-tool-dispatch" in server_args:
        features.discard("tool-dispatch")
    return features


# What --quick leaves out, in words (its help, the run header's settings.quick): a profile for slow
# endpoints (a real model decoding a few tokens a second), whose verdicts stay true but fewer.
QUICK_LEAVES_OUT = (
    "samples beyond the first: --tries is 1 (a rule whose path the model did not take at once is inconclusive)",
    "the timing witnesses (paired TTFT sessions of the history checks, the preamble checks' timing fallback)",
    "the older cch= form of the billing header (rules AN-PREAMBLE-001:cch, AN-PREAMBLE-002:cch)",
    "answers past 512 tokens: every generation request the kit builds goes with its output limit bounded at "
    "512 tokens (a scenario's script may ask for up to 4,096), and an answer the limit cut before the path is "
    "tried once more with four times the limit, within that bound; a lever whose request could not go within "
    "it is not pulled (Anthropic thinking on: its limit must exceed a thinking budget of 1,024 tokens)",
    "replayed client-session answers past 256 tokens: each recorded request goes with its output limit bounded "
    "at 256 tokens (added where the client sent none); the answers are judged the same",
)
QUICK_GROWTH_STEPS = 1  # --quick: how many times a cut answer's budget grows (levers.GROWTH each)
QUICK_BUDGET = 512  # --quick: the most output tokens any generation request the kit builds asks for
QUICK_REPLAY_BUDGET = 256  # --quick: the output limit of each replayed client-session request, in tokens

# Peer profiles (conformance/levers.py): how every generation request is bent for one kind of endpoint.
PEERS = ("dynamo-mocker",)

PYTEST_PREFIX = "--hc-"  # the plugin's options: one prefix, so no bare name is added to every pytest session
CLI_PREFIX = "--"


def add_options(add_argument: Callable[..., Any], *, prefix: str = CLI_PREFIX, files: bool = True) -> None:
    """Add every option as `PREFIX + NAME` (dest `hc_NAME` either way): `--endpoint` in the CLI,
    `--hc-endpoint` in pytest (prefix PYTEST_PREFIX). `files=False` leaves out where the results and
    transcripts go (the CLI's commands have one `--out` folder for both)."""

    def add(flag: str, **kwargs: Any) -> None:
        name = flag[2:]
        add_argument(prefix + name, dest="hc_" + name.replace("-", "_"), **kwargs)

    add("--endpoint", default=None, metavar="URL",
        help="base URL of the endpoint under test (e.g. http://localhost:8000); default: start the embedded "
             "reference server")
    add("--model", default=None, metavar="ID", help="model id to request (default: the endpoint's first model)")
    add("--api-key", default=None, metavar="KEY",
        help="API key sent as x-api-key and Authorization: Bearer (default: env HARNESSCHECK_API_KEY); never written "
             "to transcripts or results")
    add("--apis", default=",".join(apis.names()), metavar="LIST",
        help="comma-separated APIs to check: anthropic, chat, responses (default: all)")
    add("--tries", type=int, default=3, metavar="N",
        help="attempts per scenario before a check that needs a model behaviour is inconclusive (default: 3)")
    add("--quick", action="store_true", default=False,
        help="a profile for slow endpoints; it leaves out: " + "; ".join(QUICK_LEAVES_OUT))
    add("--timeout", type=float, default=30.0, metavar="SECONDS",
        help="deadline for each request, streams included: a hung or trickling endpoint fails its check "
             "(default: 30)")
    if files:
        add("--transcripts", default=None, metavar="DIR",
            help="write every check's transcript here, with index.json, within a size budget (failing checks "
                 "first; docs/results-schema.md); default: transcripts/ beside the results file")
        add("--results", default=None, metavar="FILE", help="write results JSON (harnesscheck.results schema) here")
    add("--expect", action="append", default=[], metavar="FEATURE",
        help=f"declare an optional feature the endpoint offers, so its absence fails instead of skipping; "
             f"repeatable: {', '.join(FEATURES)}")
    add("--witness", default="auto", choices=["auto", "tokenize", "cache", "timing"],
        help="history checks: force one witness (chat-form /tokenize, prefix-cache usage, or paired TTFT timing); "
             "auto takes the strongest the endpoint offers (default: auto)")
    add("--server-arg", action="append", default=[], metavar="ARG",
        help="extra argument for the embedded reference server, repeatable (e.g. --server-arg=--fault=NAME)")
    add("--peer", default="", choices=("", *PEERS), metavar="PROFILE",
        help="a peer profile that bends every generation request: dynamo-mocker sends Dynamo's nvext "
             "output_replay_id annotation of each scenario turn, so its CPU mocker plays the kit's scripted "
             "output (start the mocker with the trace of `python -m harnesscheck.conformance.mocker_replay`; "
             "docs/peers/dynamo-1.6.1.md); default: none")
    add("--context-window", type=int, default=None, metavar="N",
        help="the model's context window in tokens, for the context checks; default: what the endpoint says in "
             "its own dialect (max_model_len and kin in GET /v1/models, llama-server's /props n_ctx, Ollama's "
             "/api/show, a gateway's /model/info), else an over-long prompt of about 4 MB judges the refusal")
    add("--no-preflight", action="store_true", default=False,
        help="do not check the endpoint before the suite (reachable, an LLM API, key accepted, model served; "
             "conformance/preflight.py)")


def split_apis(value: str) -> list[str]:
    """`"anthropic, chat"` -> `["anthropic", "chat"]`."""
    return [a.strip() for a in (value or "").split(",") if a.strip()]


def unknown_choice(flag: str, what: str, value: str, known: Iterable[str]) -> str:
    """One line for a value that is not one of `known`, with the closest known one as a hint."""
    known = list(known)
    close = difflib.get_close_matches(value, known, n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"{flag}: unknown {what} {value!r}{hint}; choose from {', '.join(known)}"


def url_problem(url: str, flag: str = "--endpoint") -> str | None:
    """Why `url` is not a usable base URL (scheme http or https, a host, a valid port), or None (the
    line shows the URL without its credentials)."""
    parts = urlsplit(url)
    if "@" in url or "?" in url:
        url = redact_url(url)
    if parts.scheme not in ("http", "https"):
        if "://" not in url:
            return f"{flag} {url!r} is not a URL: it needs http:// or https:// (did you mean 'http://{url}'?)"
        return f"{flag} {url!r}: the scheme {parts.scheme!r} is not http or https"
    if not parts.hostname:
        return f"{flag} {url!r} has no host (e.g. http://localhost:8000)"
    try:
        parts.port
    except ValueError as error:
        return f"{flag} {url!r}: {error}"
    return None


def validate_options(*, endpoint: str | None, apis: str, expect: Iterable[str], tries: int,
                     timeout: float, prefix: str = CLI_PREFIX) -> str | None:
    """The first thing wrong with the option values, as the one line to print (exit 2), or None.

    Plain values, no argparse or pytest objects, so the CLI and the pytest plugin share it; the
    options are named with `prefix` (PYTEST_PREFIX in the plugin)."""
    if endpoint is not None:
        if not endpoint.strip():
            return f"{prefix}endpoint is empty (an unset variable?); leave it out for the embedded reference server"
        problem = url_problem(endpoint, f"{prefix}endpoint")
        if problem:
            return problem
    chosen = split_apis(apis)
    if not chosen:
        return f"{prefix}apis: no API given; choose from {', '.join(api_names())}"
    for api in chosen:
        if api not in api_names():
            return unknown_choice(f"{prefix}apis", "API", api, api_names())
    for feature in expect:
        if feature not in FEATURES:
            return unknown_choice(f"{prefix}expect", "feature", feature, FEATURES)
    if tries < 1:
        return f"{prefix}tries must be 1 or more, got {tries}"
    if not (timeout > 0 and math.isfinite(timeout)):
        return f"{prefix}timeout must be a number of seconds above 0, got {timeout:g}"
    return None
