"""Preamble stripping (article 1): Claude Code's per-session `x-anthropic-billing-header` at prompt
position 0 must not defeat prefix-cache reuse. Witness: cache usage (cache_read_input_tokens of a
new session that differs only in the header), with a control request proving the endpoint reports
cache reads at all; otherwise timing (TTFT of new-header sessions vs repeats). --quick leaves out the
timing fallback and the older form.

Two forms of the header, judged apart, the real client's first:

- rule ``<ID>``: the header exactly as the installed Claude Code 2.1.197 writes it,
  `x-anthropic-billing-header: cc_version=2.1.197.<3 hex>; cc_entrypoint=sdk-cli;` (the three hex
  digits hash the session's first user message, so they change per session; no `cch`: its binary adds
  a constant ` cch=00000;` only for some providers; docs/API_FACTS.md, "What the real clients send");
- rule ``<ID>:cch`` (SHOULD): the longer form of older clients that the article shows,
  `cc_version=0.2.93; cch=<12 hex>==;`, a per-request stamp.

A server that handles only one form is described as such: the failure names the form that defeats
reuse and says the other one does not.
"""

from __future__ import annotations

import statistics
import uuid
from dataclasses import dataclass

import pytest

from harnesscheck.protocol import apis
from harnesscheck.conformance.session import Session
from harnesscheck.conformance.verdict import fail, inconclusive, ok_response
from harnesscheck.protocol.wire.transcript import Transcript

LONG = "\n".join(f"Rule {i}: keep every change small, tested and explained; prefer the project's own helpers."
                 for i in range(120))  # ~2K tokens of stable scaffolding
TIMING_SESSIONS = 5


def real_header() -> str:
    """Claude Code 2.1.197's header for a new session (its `cc_version` suffix: 3 hex digits of a hash)."""
    return f"x-anthropic-billing-header: cc_version=2.1.197.{uuid.uuid4().hex[:3]}; cc_entrypoint=sdk-cli;"


def article_header() -> str:
    """The article's (older clients') header: a 12-character `cch` stamp per request."""
    return f"x-anthropic-billing-header: cc_version=0.2.93; cch={uuid.uuid4().hex[:12]}==;"


FORMS = {"real": ("Claude Code 2.1.197's header (cc_version=2.1.197.<3 hex>; cc_entrypoint=sdk-cli;, no cch)",
                  real_header),
         "cch": ("the older form with a per-request stamp (cc_version=0.2.93; cch=<12 hex>==;)", article_header)}


@dataclass(frozen=True, slots=True)
class Reading:
    """One form's outcome: "reused", "defeated" or "unknown" (no witness separated), in words."""

    outcome: str
    words: str
    transcript: Transcript | None = None


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


def _read(hc: Session, form: str, *, only_block: bool) -> Reading:
    """Whether a new session in this header form reads the stable prompt from the cache."""
    what, header = FORMS[form]
    nonce = uuid.uuid4().hex
    _usage(hc, _body(hc, header(), only_block=only_block, nonce=nonce), f"{form} header: warm-up session")
    session = _body(hc, header(), only_block=only_block, nonce=nonce)
    new_session = _usage(hc, session, f"{form} header: new session, new header")
    new_t = hc.attached[-1][1]
    repeat = _usage(hc, session, f"{form} header: same session repeated (control)")
    total = sum(int(repeat.get(k) or 0) for k in ("input_tokens", "cache_read_input_tokens",
                                                  "cache_creation_input_tokens"))
    if int(repeat.get("cache_read_input_tokens") or 0) > total // 2:
        read = int(new_session.get("cache_read_input_tokens") or 0)
        words = (f"with {what}, a new session read {read} of {total} prompt tokens from the cache (a repeat read "
                 f"{repeat.get('cache_read_input_tokens')})")
        return Reading("defeated" if read < total // 2 else "reused", words, new_t)
    if hc.endpoint.quick:
        return Reading("unknown", f"{what}: no cache usage reported, and --quick leaves out the timing fallback")
    # No cache reads reported: fall back to timing, paired over a few sessions, new header and repeat in turn
    # (timed in two blocks, a change of the machine's load between them read as a gap: the Gemma run)
    fresh: list[float] = []
    repeats: list[float] = []
    for _ in range(TIMING_SESSIONS):
        fresh.append(_ttft_ms(hc, _body(hc, header(), only_block=only_block, nonce=nonce), f"{form} timing: new header"))
        repeats.append(_ttft_ms(hc, session, f"{form} timing: repeat"))
    med_fresh, med_repeat = statistics.median(fresh), statistics.median(repeats)
    slower = sum(f > r * 1.2 + 5 for f, r in zip(fresh, repeats))
    words = (f"with {what}, new-header sessions take {med_fresh:.1f} ms to the first token vs {med_repeat:.1f} ms "
             "for repeats")
    if med_repeat * 1.2 >= med_fresh - 5 or slower < TIMING_SESSIONS - 1:  # defeated: (nearly) every pair says so
        if med_fresh > 1.5 * med_repeat:
            return Reading("reused", words)
        return Reading("unknown", f"{what}: no cache usage reported and timing does not separate (new header "
                                  f"{med_fresh:.1f} ms vs repeat {med_repeat:.1f} ms)")
    return Reading("defeated", words, hc.attached[-1][1])


def _judge(hc: Session, check_id: str, *, only_block: bool) -> None:
    real = _read(hc, "real", only_block=only_block)
    older = (Reading("unknown", "--quick leaves it out") if hc.endpoint.quick
             else _read(hc, "cch", only_block=only_block))
    if real.outcome == "defeated":
        other = {"reused": "; the older cch= form does not (the endpoint handles only that form)",
                 "defeated": f"; the older cch= form defeats it too ({older.words})",
                 "unknown": ""}[older.outcome]
        fail(f"the billing header defeats prefix reuse: {real.words}{other}", transcript=real.transcript,
             rule=check_id)
    if older.outcome == "defeated":
        handled = "is handled" if real.outcome == "reused" else "was not judged"
        fail(f"{older.words}: that form defeats prefix reuse, while Claude Code 2.1.197's form {handled} "
             f"({real.words}): the endpoint handles only the current form", transcript=older.transcript,
             rule=f"{check_id}:cch")
    if real.outcome == "unknown":
        inconclusive(real.words)
    if older.outcome == "unknown":
        hc.note(f"the older cch= form was not judged: {older.words}")


@pytest.mark.check("AN-PREAMBLE-001")
def test_billing_header_does_not_defeat_reuse(hc: Session) -> None:
    _judge(hc, "AN-PREAMBLE-001", only_block=False)


@pytest.mark.check("AN-PREAMBLE-002")
def test_billing_header_as_only_system_block(hc: Session) -> None:
    _judge(hc, "AN-PREAMBLE-002", only_block=True)
