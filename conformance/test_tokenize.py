"""Tokenizer routes (Dynamo PR #7699 shape, vLLM's `/tokenize` without `/v1`), when offered: both
routes are probed, each in the prompt form (tokenize then detokenize gives the text back) and the
chat form (the rendered conversation holds the message text; count equals the tokens).

A route that answers a non-empty prompt with no token ids does not speak that form (llama.cpp's
server takes `{"content": ...}` and answers `{"tokens": []}` to anything else): that form is not
offered there, never a failed round trip."""

from __future__ import annotations

from typing import Any

import pytest

from harnesscheck.conformance.session import Session
from harnesscheck.conformance.verdict import fail, ok_response, skip
from harnesscheck.protocol.wire.transcript import Transcript

TEXT = "Tokenize me: 15 * 23 = 345, 世界, <think>"
PREFIXES = ("/v1", "")  # vLLM serves /tokenize; Dynamo and the reference server /v1/tokenize
ABSENT = (404, 405)


def _spoken(t: Transcript) -> bool:
    """The route speaks the form it was sent: it answered with a non-empty list of token ids (the
    texts sent are never empty, so an empty list means the route read none of them)."""
    got = t.json_body()
    tokens = got.get("tokens") if isinstance(got, dict) else None
    return isinstance(tokens, list) and bool(tokens)


def _counted(t: Transcript, form: str) -> list[int]:
    got = t.json_body() or {}
    tokens = got.get("tokens")
    if not isinstance(tokens, list) or got.get("count") != len(tokens):
        fail(f"{form}-form tokenize answer count {got.get('count')} does not match its tokens", transcript=t)
    return tokens


def _detokenized(hc: Session, prefix: str, tokens: list[int]) -> tuple[Any, Transcript]:
    """The answer's `prompt` (whatever JSON value it is: the caller judges it) and the exchange."""
    back = hc.post("chat", f"{prefix}/detokenize", {"model": hc.endpoint.model, "tokens": tokens},
                   label=f"detokenize ({prefix or 'no /v1'})")
    ok_response(back, "detokenize")
    return (back.json_body() or {}).get("prompt"), back


@pytest.mark.check("CH-TOKENIZE-001")
def test_tokenize_round_trip(hc: Session) -> None:
    offered, other = [], []  # routes that speak the prompt form; routes that answered it with no ids
    for prefix in PREFIXES:
        where = f"{prefix}/tokenize"
        prompt: dict[str, Any] = {"model": hc.endpoint.model, "prompt": TEXT, "add_special_tokens": False}
        t = hc.post("chat", where, prompt, label=f"tokenize, prompt form ({where})")
        if t.status in ABSENT:
            continue
        ok_response(t, f"{where} (prompt form)")
        if not _spoken(t):
            other.append(f"{where} answered {t.text_body()[:80]}")
            continue
        offered.append(where)
        text, back = _detokenized(hc, prefix, _counted(t, "prompt"))
        if text != TEXT:
            fail(f"{prefix}/detokenize gave {text!r}, expected {TEXT!r}", transcript=back)
        chat = {"model": hc.endpoint.model, "messages": [{"role": "user", "content": TEXT}],
                "add_generation_prompt": True}
        c = hc.post("chat", where, chat, label=f"tokenize, chat form ({where})")
        if c.status in ABSENT or c.status in (400, 422):
            continue  # the chat form is optional: a route may take prompts only
        ok_response(c, f"{where} (chat form)")
        if not _spoken(c):
            hc.note(f"{where} answered the chat form with no token ids: it takes prompts only")
            continue
        rendered, back = _detokenized(hc, prefix, _counted(c, "chat"))
        if not isinstance(rendered, str) or TEXT not in rendered:
            fail(f"the chat-form {where} rendering, detokenized, does not hold the user message {TEXT!r}: "
                 f"{str(rendered or '')[:200]!r}", transcript=back)
    if not offered:
        dialect = (f"; a route in another dialect: {'; '.join(other)} to the prompt form "
                   "{model, prompt, add_special_tokens}, so it does not speak that form") if other else ""
        if "tokenize" in hc.endpoint.expect:
            fail(f"no /v1/tokenize or /tokenize route in the vLLM/Dynamo form, though the endpoint is declared "
                 f"to offer it{dialect}", transcript=t)
        skip(f"the endpoint offers no /tokenize route in the vLLM/Dynamo form{dialect}")
