"""The context window, as the overflow and long-session checks see it (test_context.py).

``known_window(hc)`` is the model's window and where it was read, in each stack's own dialect, first
found first: ``--context-window N``; ``GET /v1/models`` (vLLM and SGLang: ``max_model_len``; others:
``context_window``, ``context_length``, ``max_context_length``, ``max_input_tokens``, ``n_ctx``; at the
top of the entry or in its ``metadata``, ``meta`` or ``model_info``; llama-server's ``meta.n_ctx_train``
only when nothing serves the running ``n_ctx``); llama-server's ``GET /props``
(``default_generation_settings.n_ctx``); Ollama's ``POST /api/show`` (``num_ctx`` in its
``parameters``, else ``model_info``'s ``<arch>.context_length``); a gateway's model-info route
(LiteLLM's ``GET /model/info``: ``model_info.max_input_tokens``). A zero (Dynamo's ``context_window:
0``) says nothing. Read once per endpoint and model. ``announced_window(hc)`` is its size alone.

When no window is known, ``FAR_CHARS`` of filler (about 4 MB: past any served window) make a prompt that
is over it whatever it is: the refusal's status, shape and marker are judged without knowing the window.

``over_long(hc, api, body, window, ...)`` sends ``body`` with a filler put before its system prompt,
sized to pass the window by a tenth. The filler's tokens per character are measured on the
endpoint (``tokens_per_char``: its /tokenize, else two small answers), so the prompt is over the
window for any tokenizer without sending far more than it takes.

``refusal_problems(api, transcript)`` judges the answer against the refusal the clients recognise,
per API (docs/API_FACTS.md "Context overflow"):

- every API: HTTP 400 in the API's own error shape (a 5xx, a body in no API's shape or any other
  status is not a refusal a client can act on) -> part ``""`` (the check's own rule);
- Anthropic: the message says ``prompt is too long`` (what Claude Code matches; it also reads
  ``N tokens > M maximum`` from it) -> part ``"marker"``;
- Chat and Responses: ``error.code`` is ``context_length_exceeded`` -> part ``"marker"``. A streamed
  Responses request may instead be answered with a stream whose ``response.failed`` carries that
  code (how Codex recognises it, codex-rs codex-api/src/sse/responses.rs ``is_context_window_error``).

A 200 stream that ends normally is an answer in every API: the endpoint took the prompt. One that the API's
in-stream error ends (Anthropic ``event: error``, a Chat chunk holding only ``error``, a Responses
``response.failed`` without the overflow code or an ``error`` event; Dynamo 1.6.1's answer to a 4 MiB
prompt) is the endpoint refusing it after the 200, judged as an HTTP error is: part ``""`` (not the 400 the
clients act on) and the marker read from the error it carries. Which streams are which is the API
module's ``streamed_refusal``.
"""

from __future__ import annotations

from typing import Any

from harnesscheck.protocol import apis
from harnesscheck.protocol.wire.transcript import Transcript

WINDOW_FIELDS = ("max_model_len", "context_window", "context_length", "max_context_length", "max_input_tokens",
                 "n_ctx")
NESTED = ("metadata", "meta", "model_info")  # where an entry may hold its window besides its top level
TRAINED = "n_ctx_train"  # llama-server's /v1/models meta: the trained window, an upper bound of the served one
OVERSHOOT = 1.1  # the over-long prompt: this many times the window (the filler measured on the endpoint)
FAR_CHARS = 4 * 1024 * 1024  # the filler when no window is known: past any served window, bounded in bytes
# ... sent in steps: a prompt past the common windows first, the whole FAR_CHARS only when that one was taken
FAR_STEPS = (256 * 1024, FAR_CHARS)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def window_of(entry: Any) -> int | None:
    """The window a model entry of GET /v1/models announces (module doc), or None."""
    if not isinstance(entry, dict):
        return None
    places = [entry, *(entry.get(n) for n in NESTED)]
    for where in places:
        if isinstance(where, dict):
            for name in WINDOW_FIELDS:
                if _int(where.get(name)):
                    return int(where[name])
    return None


def _trained(entry: Any) -> int | None:
    meta = entry.get("meta") if isinstance(entry, dict) else None
    return _int(meta.get(TRAINED)) if isinstance(meta, dict) else None


def _entry(hc: Any) -> dict[str, Any] | None:
    listing = hc.get("chat", "/v1/models", label="GET /v1/models (context window)")
    data = (listing.json_body() or {}).get("data") if listing.ok else None
    if not isinstance(data, list):
        return None
    entries = [e for e in data if isinstance(e, dict) and e.get("id") == hc.endpoint.model] or \
        (data if len(data) == 1 else [])
    return entries[0] if entries and isinstance(entries[0], dict) else None


def _props(hc: Any) -> int | None:
    """llama-server's GET /props: default_generation_settings.n_ctx (or n_ctx at its top)."""
    t = hc.get("chat", "/props", label="GET /props (llama-server: context window)")
    body = t.json_body() if t.ok else None
    if not isinstance(body, dict):
        return None
    settings = body.get("default_generation_settings")
    return _int(settings.get("n_ctx")) if isinstance(settings, dict) and _int(settings.get("n_ctx")) \
        else _int(body.get("n_ctx"))


def _ollama(hc: Any) -> int | None:
    """Ollama's POST /api/show: num_ctx in its parameters, else model_info's <arch>.context_length."""
    t = hc.post("chat", "/api/show", {"model": hc.endpoint.model}, label="POST /api/show (Ollama: context window)")
    body = t.json_body() if t.ok else None
    if not isinstance(body, dict):
        return None
    parameters = body.get("parameters")
    if isinstance(parameters, str):
        for line in parameters.splitlines():
            words = line.split()
            if len(words) == 2 and words[0] == "num_ctx" and words[1].isdigit() and int(words[1]) > 0:
                return int(words[1])
    info = body.get("model_info")
    if isinstance(info, dict):
        for key, value in info.items():
            if isinstance(key, str) and key.endswith(".context_length") and _int(value):
                return int(value)
    return None


def _gateway(hc: Any) -> int | None:
    """A gateway's model-info route (LiteLLM's GET /model/info, /v1/model/info): model_info.max_input_tokens."""
    for path in ("/v1/model/info", "/model/info"):
        t = hc.get("chat", path, label=f"GET {path} (gateway: context window)")
        data = (t.json_body() or {}).get("data") if t.ok and isinstance(t.json_body(), dict) else None
        if not isinstance(data, list):
            continue
        for entry in data:
            if isinstance(entry, dict) and (entry.get("model_name") == hc.endpoint.model or len(data) == 1):
                size = window_of(entry)
                if size:
                    return size
    return None


_KNOWN: dict[tuple[str, str], tuple[int, str] | None] = {}  # (endpoint URL, model) -> known_window's answer


def known_window(hc: Any) -> tuple[int, str] | None:
    """The model's context window and where it was read (module doc), or None when nothing says it."""
    if hc.endpoint.context_window:
        return hc.endpoint.context_window, "--context-window"
    key = (hc.endpoint.url, hc.endpoint.model)
    if key not in _KNOWN:
        _KNOWN[key] = _discover(hc)
    return _KNOWN[key]


def _discover(hc: Any) -> tuple[int, str] | None:
    entry = _entry(hc)
    size = window_of(entry)
    if size:
        return size, "GET /v1/models"
    for read, where in ((_props, "GET /props default_generation_settings.n_ctx"),
                        (_ollama, "POST /api/show"), (_gateway, "GET /model/info")):
        size = read(hc)
        if size:
            return size, where
    trained = _trained(entry)
    return (trained, "GET /v1/models meta.n_ctx_train") if trained else None


def announced_window(hc: Any) -> int | None:
    """The model's context window (``known_window``'s size), or None."""
    known = known_window(hc)
    return known[0] if known else None


def filler(chars: int) -> str:
    """``chars`` characters of numbered lines (deterministic, no long repeats), ending in a newline."""
    lines, size, n = [], 0, 0
    while size < chars:
        line = f"note {n}: entry {n * 7919 % 100003} of the log, value {n * 104729 % 1000003}\n"
        lines.append(line)
        size += len(line)
        n += 1
    return "".join(lines)[:chars]


def prompt_tokens(api: str, transcript: Transcript) -> int | None:
    """The prompt total an answer reported (usage), or None when it reported none."""
    answer = apis.get(api).final_answer(transcript) if transcript.frames else transcript.json_body()
    if not isinstance(answer, dict) or not apis.get(api).usage(answer):
        return None
    return apis.get(api).usage_tokens(answer)[0] or None


SAMPLE_CHARS = 4000  # the filler sample the tokens per character are measured on


def tokens_per_char(hc: Any, api: str, body: dict[str, Any], label: str) -> float:
    """How many tokens a character of filler costs on this endpoint: from its /tokenize (prompt form,
    vLLM's and Dynamo's; nothing is generated) when offered, else from the prompt totals of two small
    answers, with and without a filler sample; 1.0 (a safe overestimate of the characters needed)
    when neither tells."""
    from harnesscheck.conformance.verdict import ok_response

    sample = filler(SAMPLE_CHARS)
    for path in ("/tokenize", "/v1/tokenize"):
        counted = hc.post(api, path, {"model": hc.endpoint.model, "prompt": sample, "add_special_tokens": False},
                          label=f"{label}: filler tokens ({path})")
        count = (counted.json_body() or {}).get("count") if counted.ok else None
        if isinstance(count, int) and count > 0:
            return count / SAMPLE_CHARS
    bare = hc.post(api, apis.get(api).PATH, body, stream=True, label=f"{label}: probe without filler")
    ok_response(bare, f"{label}: probe")
    probe = hc.post(api, apis.get(api).PATH, apis.get(api).with_system_prefix(body, sample), stream=True,
                    label=f"{label}: probe with {SAMPLE_CHARS} characters of filler")
    ok_response(probe, f"{label}: probe")
    with_filler, without = prompt_tokens(api, probe), prompt_tokens(api, bare)
    if with_filler is None or without is None or with_filler <= without:
        return 1.0
    return (with_filler - without) / SAMPLE_CHARS


def over_long(hc: Any, api: str, body: dict[str, Any], window: int | None, *, label: str, base_tokens: int = 0,
              ratio: float | None = None) -> tuple[Transcript, int]:
    """``body`` with enough filler to pass ``window`` by a tenth (``base_tokens``: what the body
    already holds, if known; None: no window known, ``FAR_CHARS`` of filler), sent streamed; and the
    filler's size in characters."""
    if window is None:
        return far(hc, api, lambda chars: apis.get(api).with_system_prefix(body, filler(chars)), label=label)
    ratio = ratio or tokens_per_char(hc, api, body, label)
    chars = int(max(window * OVERSHOOT - base_tokens, window * (OVERSHOOT - 1)) / ratio) + 1
    big = apis.get(api).with_system_prefix(body, filler(chars))
    return hc.post(api, apis.get(api).PATH, big, stream=True, label=f"{label}: over the window"), chars


def far(hc: Any, api: str, build: Any, *, label: str) -> tuple[Transcript, int]:
    """With no window known: the request ``build(chars)`` makes, sent with each of ``FAR_STEPS`` characters
    of filler until one is not taken (a refusal, an error: the answer to judge); the last answer and its
    filler's size."""
    for chars in FAR_STEPS:
        t = hc.post(api, apis.get(api).PATH, build(chars), stream=True,
                    label=f"{label}: {chars} characters of filler (no window known)")
        taken = t.status is not None and 200 <= t.status < 300 and not t.error and \
            apis.get(api).streamed_refusal(t.frames) is None
        if not taken:
            break
    return t, chars


def refusal_problems(api: str, transcript: Transcript) -> list[tuple[str, str]]:
    """(part, problem) for an answer to an over-long prompt: part "" for the status and shape, "marker"
    for the overflow marker (module doc); [] for the refusal the clients recognise. What the marker is, and
    whether a 200 stream can be a refusal, is the API module's (``overflow_marker_problem``,
    ``streamed_refusal``)."""
    module = apis.get(api)
    status = transcript.status
    body = transcript.json_body() if transcript.status and not transcript.frames else None
    text = transcript.text_body()[:300] if not transcript.frames else ""
    streamed = module.streamed_refusal(transcript.frames) if status == 200 and transcript.frames else None
    if streamed is not None:
        return streamed
    if status is not None and 200 <= status < 300:
        return [("", f"the over-long prompt was answered (HTTP {status}): the endpoint took it (truncated "
                     "silently, or its window is larger than announced)")]
    problems: list[tuple[str, str]] = []
    if status != 400 or not module.is_error_body(body):
        shape = "the API's error shape" if module.is_error_body(body) else "no API error shape"
        problems.append(("", f"refused with HTTP {status} and {shape} ({text!r}); the clients act on a 400 in "
                             "the API's error shape"))
    marker = module.overflow_marker_problem(body)
    if marker is not None:
        problems.append(("marker", marker))
    return problems
