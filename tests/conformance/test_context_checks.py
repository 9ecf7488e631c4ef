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


def _stream(events: list[dict[str, Any]], api: str = "responses") -> Transcript:
    """A 200 stream of ``events`` (a dict with a "type" goes out under that SSE event name; Chat's chunks
    under none)."""
    frames = [SSEFrame(index=n, event=e.get("type") if api != "chat" else None, data=json.dumps(e), json=e)
              for n, e in enumerate(events)]
    return Transcript(api=api, method="POST", url="/v1/x", status=200, frames=frames,
                      response_headers={"content-type": "text/event-stream"})


def _completed(api: str) -> list[dict[str, Any]]:
    """A stream that answered the prompt and ended normally, in ``api``'s form."""
    if api == "anthropic":
        return [{"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant",
                                                      "content": [], "usage": {"input_tokens": 9}}},
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ok"}},
                {"type": "content_block_stop", "index": 0},
                {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 1}},
                {"type": "message_stop"}]
    if api == "chat":
        return [{"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": "ok"}}]},
                {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}]
    return [{"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}},
            {"type": "response.output_text.delta", "output_index": 0, "content_index": 0, "delta": "ok"},
            {"type": "response.completed", "response": {"id": "resp_1", "status": "completed", "output": []}}]


# Dynamo 1.6.1's answers to a 4 MiB prompt (no window announced), from its hand verification: HTTP 200, then
# the API's in-stream error (Anthropic an api_error "Internal server error", Chat an error chunk with code
# 500, Responses response.failed with code server_error).
DYNAMO_ERRORS = {
    "anthropic": [{"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant",
                                                        "content": [], "usage": {"input_tokens": 9}}},
                  {"type": "error", "error": {"type": "api_error", "message": "Internal server error"}}],
    "chat": [{"error": {"message": "Internal server error", "type": "internal_server_error", "code": 500}}],
    "responses": [{"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}},
                  {"type": "response.failed", "response": {"id": "resp_1", "status": "failed", "error": {
                      "code": "server_error", "message": "Internal server error"}}}],
}


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


@pytest.mark.parametrize("api", ["anthropic", "chat", "responses"])
def test_a_stream_that_completed_is_an_answer_in_every_api(api: str) -> None:
    """A 200 stream that ended normally is no refusal form (streamed_refusal None) in each API alike: the
    caller judges it as an answer, and with no window known the far prompt goes on to its next step
    (Responses said 'answered, no response.failed' as a refusal's problem and stopped at 256 KiB)."""
    from harnesscheck.protocol import apis

    taken = _stream(_completed(api), api)
    assert apis.get(api).streamed_refusal(taken.frames) is None
    problems = window.refusal_problems(api, taken)
    assert [p for p, _ in problems] == [""] and "truncated silently" in problems[0][1]


class _Endpoint:
    def __init__(self, answers: dict[int, Transcript]) -> None:
        self.answers, self.sent = answers, []

    def post(self, api: str, path: str, body: dict[str, Any], *, stream: bool, label: str) -> Transcript:
        chars = len(body["filler"])
        self.sent.append(chars)
        return self.answers[chars]


@pytest.mark.parametrize("api", ["anthropic", "chat", "responses"])
def test_with_no_window_a_stream_taken_at_256k_goes_on_to_4m(api: str) -> None:
    steps = _Endpoint({window.FAR_STEPS[0]: _stream(_completed(api), api),
                       window.FAR_CHARS: _stream(DYNAMO_ERRORS[api], api)})
    transcript, chars = window.far(steps, api, lambda n: {"filler": "x" * n}, label="far")
    assert steps.sent == list(window.FAR_STEPS) and chars == window.FAR_CHARS
    assert transcript is steps.answers[window.FAR_CHARS]


@pytest.mark.parametrize("api", ["anthropic", "chat", "responses"])
def test_an_error_inside_a_200_stream_is_a_refusal_judged_as_an_http_error(api: str) -> None:
    """Dynamo answers the over-long prompt with HTTP 200 and then the API's in-stream error: the endpoint
    refusing it, in no form the clients act on (Claude Code compacts only on the 400 saying 'prompt is too
    long' and retries an api_error; Codex retries a response.failed whose code is not
    context_length_exceeded, as it retries a 500): both the status-and-shape rule and the marker fail."""
    from harnesscheck.protocol import apis

    refused = _stream(DYNAMO_ERRORS[api], api)
    assert apis.get(api).streamed_refusal(refused.frames) is not None
    problems = window.refusal_problems(api, refused)
    assert [p for p, _ in problems] == ["", "marker"], problems
    assert "inside a 200 stream" in problems[0][1] and "Internal server error" in problems[0][1]
    # the marker read from the error the stream carries, as from an HTTP error's body: the status and shape
    # alone fail when the in-stream error says what the clients match
    marked = {"anthropic": [{"type": "error", "error": {"type": "invalid_request_error",
                                                         "message": "prompt is too long: 9 tokens > 8 maximum"}}],
              "chat": [{"error": OA_OK["error"]}],
              "responses": [{"type": "error", "code": "context_length_exceeded", "message": "too long",
                             "param": None}]}[api]
    assert [p for p, _ in window.refusal_problems(api, _stream(marked, api))] == [""]


def test_a_cache_miss_is_confirmed_alone_before_it_fails(tmp_path) -> None:
    """CTX-004 fetches the three APIs' 30-turn sessions at once; on a server of few cache slots (llama-server
    with two: the sessions' identical turn 0 took the slot of another's history) a turn can miss because of
    the kit's own other sessions. Before it fails, the check sends the turn before and the turn again, one
    after the other, and judges that. Here the cache (256 blocks of 16 tokens) cannot hold one session's
    prompt past turn 21 even alone: the miss is confirmed and the failure says so; cache-static-prefix-only
    still fails. (The other direction, a miss the confirmation clears, was seen on llama-server: its page.)"""
    from harnesscheck.conformance.runner import SuiteOptions, run_suite

    def run(out: str, *args: str) -> dict:
        doc = run_suite(SuiteOptions(select="AN-CTX-004", apis="anthropic", tries=1, server_args=args),
                        tmp_path / out, subprocess_run=True, quiet=True)
        return doc["checks"][0]

    small = run("small", "--prefix-cache-bytes=131072")
    assert small["outcome"] == "fail" and "sent again alone right after the turn before" in small["message"], \
        small["message"]
    assert run("broken", "--fault=cache-static-prefix-only")["outcome"] == "fail"
