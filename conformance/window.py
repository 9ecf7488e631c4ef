"""The context window, as the overflow and long-session checks see it (test_context.py).

``announced_window(hc)`` reads the window the endpoint announces for the model in ``GET /v1/models``
(vLLM and SGLang: ``max_model_len``; others: ``context_window``, ``context_length``,
``max_context_length``, ``max_input_tokens``; at the top of the entry or in its ``metadata``).

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
"""

from __future__ import annotations

from typing import Any

from harnesscheck.protocol import apis
from harnesscheck.protocol.wire.transcript import Transcript

WINDOW_FIELDS = ("max_model_len", "context_window", "context_length", "max_context_length", "max_input_tokens")
OVERSHOOT = 1.1  # the over-long prompt: this many times the window (the filler measured on the endpoint)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def window_of(entry: Any) -> int | None:
    """The window a model entry of GET /v1/models announces (module doc), or None."""
    if not isinstance(entry, dict):
        return None
    for where in (entry, entry.get("metadata")):
        if isinstance(where, dict):
            for name in WINDOW_FIELDS:
                if _int(where.get(name)):
                    return where[name]
    return None


def announced_window(hc: Any) -> int | None:
    """The model's context window from GET /v1/models (its entry, else the only one), or None."""
    listing = hc.get("chat", "/v1/models", label="GET /v1/models (context window)")
    data = (listing.json_body() or {}).get("data") if listing.ok else None
    if not isinstance(data, list):
        return None
    entries = [e for e in data if isinstance(e, dict) and e.get("id") == hc.endpoint.model] or \
        (data if len(data) == 1 else [])
    return window_of(entries[0]) if entries else None


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


def over_long(hc: Any, api: str, body: dict[str, Any], window: int, *, label: str, base_tokens: int = 0,
              ratio: float | None = None) -> tuple[Transcript, int]:
    """``body`` with enough filler to pass ``window`` by a tenth (``base_tokens``: what the body
    already holds, if known), sent streamed; and the filler's size in characters."""
    ratio = ratio or tokens_per_char(hc, api, body, label)
    chars = int(max(window * OVERSHOOT - base_tokens, window * (OVERSHOOT - 1)) / ratio) + 1
    big = apis.get(api).with_system_prefix(body, filler(chars))
    return hc.post(api, apis.get(api).PATH, big, stream=True, label=f"{label}: over the window"), chars


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
