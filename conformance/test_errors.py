"""Bad input gets the API's own error shape and a 4xx, never a 500 or a hang."""

from __future__ import annotations

from typing import Any

import pytest

from conformance.harness import PATHS, Harness
from conformance.verdict import fail

BAD_BODIES: dict[str, list[tuple[str, Any]]] = {
    "anthropic": [("missing model", {"max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}),
                  ("messages not an array", {"model": "{model}", "max_tokens": 10, "messages": "hi"}),
                  ("bad role", {"model": "{model}", "max_tokens": 10, "messages": [{"role": "robot", "content": "x"}]}),
                  ("max_tokens a string", {"model": "{model}", "max_tokens": "ten",
                                           "messages": [{"role": "user", "content": "hi"}]}),
                  ("body not JSON", b"{not json")],
    "chat": [("missing messages", {"model": "{model}"}),
             ("bad role", {"model": "{model}", "messages": [{"role": "robot", "content": "x"}]}),
             ("tools not an array", {"model": "{model}", "messages": [{"role": "user", "content": "x"}], "tools": 3}),
             ("body not JSON", b"[1, 2")],
    "responses": [("missing input", {"model": "{model}"}),
                  ("input item not an object", {"model": "{model}", "input": [3]}),
                  ("function_call_output without call_id", {"model": "{model}",
                                                            "input": [{"type": "function_call_output", "output": "x"}]}),
                  ("body not JSON", b"\x00\x01")],
}


def _shape_ok(api: str, body: Any) -> bool:
    if not isinstance(body, dict):
        return False
    if api == "anthropic":
        error = body.get("error")
        return body.get("type") == "error" and isinstance(error, dict) and isinstance(error.get("type"), str) \
            and isinstance(error.get("message"), str)
    error = body.get("error")
    return isinstance(error, dict) and isinstance(error.get("message"), str) and "type" in error


def _check_errors(hc: Harness, api: str) -> None:
    for label, bad in BAD_BODIES[api]:
        if isinstance(bad, bytes):
            t = hc.post(api, PATHS[api], content=bad, label=f"bad request: {label}")
        else:
            body = {k: (hc.endpoint.model if v == "{model}" else v) for k, v in bad.items()}
            t = hc.post(api, PATHS[api], body, label=f"bad request: {label}")
        if t.error:
            fail(f"{label}: no answer ({t.error_kind}: {t.error})", transcript=t)
        if t.status is None or not 400 <= t.status < 500:
            fail(f"{label}: answered HTTP {t.status}, expected a 4xx", transcript=t)
        if not _shape_ok(api, t.json_body()):
            fail(f"{label}: the error body is not in the {api} error shape: {t.text_body()[:200]}", transcript=t)


@pytest.mark.check("AN-ERR-001")
def test_anthropic_errors(hc: Harness) -> None:
    _check_errors(hc, "anthropic")


@pytest.mark.check("CH-ERR-001")
def test_chat_errors(hc: Harness) -> None:
    _check_errors(hc, "chat")


@pytest.mark.check("RS-ERR-001")
def test_responses_errors(hc: Harness) -> None:
    _check_errors(hc, "responses")
