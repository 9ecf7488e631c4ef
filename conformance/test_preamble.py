"""Preamble stripping (article 1): Claude Code's per-session `x-anthropic-billing-header` at prompt
position 0 must not defeat prefix-cache reuse. Witness: cache usage (cache_read_input_tokens of a
new session that differs only in the header), with a control request proving the endpoint reports
cache reads at all; otherwise timing (TTFT of new-header sessions vs repeats)."""

from __future__ import annotations

import statistics
import uuid

import pytest

from harnesscheck.conformance import apis
from harnesscheck.conformance.session import Session
from harnesscheck.conformance.verdict import fail, inconclusive, ok_response

LONG = "\n".join(f"Rule {i}: keep every change small, tested and explained; prefer the project's own helpers."
                 for i in range(120))  # ~2K tokens of stable scaffolding


def _header() -> str:
    return f"x-anthropic-billing-header: cc_version=2.1.197; cc_entrypoint=cli; cch={uuid.uuid4().hex[:12]};"


def _body(hc: Session, header: str, *, only_block: bool, nonce: str) -> dict:
    stable = f"You are a coding agent ({nonce}).\n{LONG}"
    if only_block:
        system = [{"type": "text", "text": header}]
        first = stable + "\n\nSay ok."
    else:
        system = [{"type": "text", "text": header}, {"type": "text", "text": stable}]
        first = "Say ok."
    return {"model": hc.endpoint.model, "max_tokens": 16, "system": system,
            "messages": [{"role": "user", "content": first}]}


def _usage(hc: Session, body: dict, label: str) -> dict:
    t = hc.post("anthropic", apis.anthropic.PATH, body, label=label)
    ok_response(t, label)
    return (t.json_body() or {}).get("usage") or {}


def _ttft_ms(hc: Session, body: dict, label: str) -> float:
    t = hc.post("anthropic", apis.anthropic.PATH, {**body, "stream": True}, stream=True, label=label)
    ok_response(t, label)
    first = next((f for f in t.events if isinstance(f.json, dict) and f.json.get("type") == "content_block_delta"),
                 None)
    if first is None or first.t_ns is None:
        fail("no content in the stream", transcript=t)
    return first.t_ns / 1e6


def _judge(hc: Session, *, only_block: bool) -> None:
    nonce = uuid.uuid4().hex
    _usage(hc, _body(hc, _header(), only_block=only_block, nonce=nonce), "warm-up session")
    session = _body(hc, _header(), only_block=only_block, nonce=nonce)
    new_session = _usage(hc, session, "new session, new header")
    repeat = _usage(hc, session, "same session repeated (control)")
    total = sum(int(repeat.get(k) or 0) for k in ("input_tokens", "cache_read_input_tokens",
                                                  "cache_creation_input_tokens"))
    if int(repeat.get("cache_read_input_tokens") or 0) > total // 2:
        read = int(new_session.get("cache_read_input_tokens") or 0)
        if read < total // 2:
            fail(f"a new session that differs only in its billing header read {read} of {total} prompt tokens from "
                 f"the cache (a repeat read {repeat.get('cache_read_input_tokens')}): the header defeats prefix reuse",
                 transcript=hc.attached[-2][1])
        return
    # No cache reads reported: fall back to timing, paired over a few sessions.
    fresh = [_ttft_ms(hc, _body(hc, _header(), only_block=only_block, nonce=nonce), "timing: new header")
             for _ in range(5)]
    repeats = [_ttft_ms(hc, session, "timing: repeat") for _ in range(5)]
    if statistics.median(repeats) * 1.2 >= statistics.median(fresh) - 5:
        if statistics.median(fresh) > 1.5 * statistics.median(repeats):
            return
        inconclusive(f"no cache usage reported and timing does not separate (new header {statistics.median(fresh):.1f}"
                     f" ms vs repeat {statistics.median(repeats):.1f} ms)")
    fail(f"new-header sessions take {statistics.median(fresh):.1f} ms to the first token vs "
         f"{statistics.median(repeats):.1f} ms for repeats: the header defeats prefix reuse",
         transcript=hc.attached[-1][1])


@pytest.mark.check("AN-PREAMBLE-001")
def test_billing_header_does_not_defeat_reuse(hc: Session) -> None:
    _judge(hc, only_block=False)


@pytest.mark.check("AN-PREAMBLE-002")
def test_billing_header_as_only_system_block(hc: Session) -> None:
    _judge(hc, only_block=True)
