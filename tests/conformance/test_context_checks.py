"""The pure parts of the context checks (conformance/window.py): the window a /v1/models entry announces,
and the verdict on an answer to an over-long prompt, for each form the clients recognise and each bad
one (bodies written out by hand from the references). That the checks pass on the clean reference server
and fail under each overflow and usage fault is the fault matrix's proof (test_self_conformance.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from harnesscheck.conformance import window
from harnesscheck.protocol.wire.sse import SSEFrame
from harnesscheck.protocol.wire.transcript import Transcript


def _answer(api: str, status: int, body: Any) -> Transcript:
    return Transcript(api=api, method="POST", url="/v1/x", status=status, body=json.dumps(body).encode(),
                      response_headers={"content-type": "application/json"})


def _stream(events: list[dict[str, Any]]) -> Transcript:
    frames = [SSEFrame(index=n, event=e["type"], data=json.dumps(e), json=e) for n, e in enumerate(events)]
    return Transcript(api="responses", method="POST", url="/v1/responses", status=200, frames=frames,
                      response_headers={"content-type": "text/event-stream"})


AN_OK = {"type": "error", "error": {"type": "invalid_request_error",
                                    "message": "prompt is too long: 208310 tokens > 200000 maximum"}}
OA_OK = {"error": {"message": "Your input exceeds the context window of this model. Please adjust your input and "
                              "try again.", "type": "invalid_request_error", "param": "input",
                   "code": "context_length_exceeded"}}


def test_the_recognised_refusals_pass() -> None:
    assert window.refusal_problems("anthropic", _answer("anthropic", 400, AN_OK)) == []
    assert window.refusal_problems("chat", _answer("chat", 400, OA_OK)) == []
    assert window.refusal_problems("responses", _answer("responses", 400, OA_OK)) == []
    failed = {"type": "response.failed", "response": {"id": "resp_1", "status": "failed", "error": {
        "code": "context_length_exceeded", "message": "Your input exceeds the context window of this model."}}}
    assert window.refusal_problems("responses", _stream([{"type": "response.created", "response": {}}, failed])) == []


@pytest.mark.parametrize("api", ["anthropic", "chat", "responses"])
def test_the_bad_forms_fail_their_part(api: str) -> None:
    detail = window.refusal_problems(api, _answer(api, 400, {"detail": "Prompt too long: 9 tokens"}))
    assert [p for p, _ in detail] == ["", "marker"]
    five = window.refusal_problems(api, _answer(api, 500, AN_OK if api == "anthropic" else OA_OK))
    assert [p for p, _ in five] == [""]  # the marker is there, the status is not a refusal the client acts on
    bare_body = ({"type": "error", "error": {"type": "invalid_request_error", "message": "Bad Request"}}
                 if api == "anthropic" else {"error": {"message": "Bad Request", "type": "invalid_request_error",
                                                       "param": None, "code": None}})
    assert [p for p, _ in window.refusal_problems(api, _answer(api, 400, bare_body))] == ["marker"]
    taken = window.refusal_problems(api, _answer(api, 200, {"id": "x"}))
    assert [p for p, _ in taken] == [""] and "truncated silently" in taken[0][1]


def test_the_announced_window() -> None:
    assert window.window_of({"id": "m", "max_model_len": 32768}) == 32768  # vLLM, SGLang
    assert window.window_of({"id": "m", "context_length": 8192}) == 8192  # OpenRouter
    assert window.window_of({"id": "m", "metadata": {"context_window": 4096}}) == 4096
    assert window.window_of({"id": "m", "max_model_len": True}) is None
    assert window.window_of({"id": "m", "object": "model"}) is None


def test_the_filler_has_the_asked_size_and_no_long_repeats() -> None:
    text = window.filler(5000)
    assert len(text) == 5000
    lines = text.splitlines()
    assert len(set(lines)) == len(lines)
