"""Tokenizer routes (Dynamo PR #7699 shape), when offered: tokenize then detokenize gives the text back."""

from __future__ import annotations

import pytest

from conformance.harness import Harness
from conformance.verdict import fail, ok_response, skip

TEXT = "Tokenize me: 15 * 23 = 345, 世界, <think>"


@pytest.mark.check("CH-TOKENIZE-001")
def test_tokenize_round_trip(hc: Harness) -> None:
    t = hc.post("chat", "/v1/tokenize", {"model": hc.endpoint.model, "prompt": TEXT, "add_special_tokens": False},
                label="tokenize")
    if t.status == 404:
        t = hc.post("chat", "/tokenize", {"model": hc.endpoint.model, "prompt": TEXT, "add_special_tokens": False},
                    label="tokenize (no /v1)")
    if t.status == 404:
        if "tokenize" in hc.endpoint.expect:
            fail("no /v1/tokenize or /tokenize route, though the endpoint is declared to offer it", transcript=t)
        skip("the endpoint offers no /tokenize route")
    ok_response(t, "tokenize")
    got = t.json_body() or {}
    tokens = got.get("tokens")
    if not isinstance(tokens, list) or got.get("count") != len(tokens):
        fail(f"tokenize answer count {got.get('count')} does not match its tokens", transcript=t)
    path = "/v1/detokenize" if "/v1/tokenize" in t.url else "/detokenize"
    back = hc.post("chat", path, {"model": hc.endpoint.model, "tokens": tokens}, label="detokenize")
    ok_response(back, "detokenize")
    if (back.json_body() or {}).get("prompt") != TEXT:
        fail(f"detokenize gave {(back.json_body() or {}).get('prompt')!r}, expected {TEXT!r}", transcript=back)
