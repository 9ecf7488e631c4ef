"""The reference server's context window (reference_server/context.py): an over-long prompt refused in
each API's own form, and in the planted bad forms under the overflow faults; the window announced in
/v1/models; the output limit cut to the room left; usage that counts only the new turn under
usage-current-turn-only; the scripted model repeating a named tool "N times" (the client measurements).

Expected bodies are written out from the references and from Claude Code's own test (not from the code)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

MODEL = "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4"
WINDOW = 2000
LONG = "hello world " * 1000  # ~6000 tokens with the server's tokenizer: past the window
AN_HEADERS = {"anthropic-version": "2023-06-01"}


def _body(api: str, text: str, **extra: Any) -> tuple[str, dict[str, Any], dict[str, str]]:
    if api == "anthropic":
        return "/v1/messages", {"model": MODEL, "max_tokens": 64, "messages": [{"role": "user", "content": text}],
                                **extra}, AN_HEADERS
    if api == "chat":
        return "/v1/chat/completions", {"model": MODEL, "messages": [{"role": "user", "content": text}], **extra}, {}
    return "/v1/responses", {"model": MODEL, "input": text, **extra}, {}


def _post(url: str, api: str, text: str, **extra: Any) -> httpx.Response:
    path, body, headers = _body(api, text, **extra)
    return httpx.post(url + path, json=body, headers=headers, timeout=60)


@pytest.fixture(scope="module")
def servers(server_factory) -> dict[str, str]:  # noqa: ANN001
    faults = ("overflow-detail-shape", "overflow-500", "overflow-bare-400", "overflow-stream-error",
              "usage-current-turn-only")
    out = {"clean": server_factory("--context-window", str(WINDOW))}
    out.update({f: server_factory("--context-window", str(WINDOW), f"--fault={f}") for f in faults})
    out["none"] = server_factory("--context-window", "0")
    return out


@pytest.mark.parametrize("stream", [False, True])
def test_over_long_prompts_are_refused_in_each_apis_form(servers: dict[str, str], stream: bool) -> None:
    url = servers["clean"]
    an = _post(url, "anthropic", LONG, stream=stream)
    assert an.status_code == 400
    error = an.json()
    assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
    # Claude Code 2.1.197's own test: /prompt is too long[^0-9]*(\d+)\s*tokens?\s*>\s*(\d+)/i
    message = error["error"]["message"]
    assert message.startswith("prompt is too long: ") and message.endswith(f" tokens > {WINDOW} maximum")
    assert int(message.split(": ")[1].split(" ")[0]) > WINDOW
    chat = _post(url, "chat", LONG, stream=stream)
    assert chat.status_code == 400
    assert chat.json()["error"]["code"] == "context_length_exceeded"
    assert chat.json()["error"]["type"] == "invalid_request_error" and chat.json()["error"]["param"] == "messages"
    assert chat.json()["error"]["message"].startswith(f"This model's maximum context length is {WINDOW} tokens.")
    rs = _post(url, "responses", LONG, stream=stream)
    assert rs.status_code == 400
    assert rs.json()["error"] == {"message": "Your input exceeds the context window of this model. Please adjust "
                                             "your input and try again.", "type": "invalid_request_error",
                                  "param": "input", "code": "context_length_exceeded"}


@pytest.mark.parametrize("api", ["anthropic", "chat", "responses"])
def test_the_overflow_faults_plant_the_bad_forms(servers: dict[str, str], api: str) -> None:
    detail = _post(servers["overflow-detail-shape"], api, LONG)
    assert detail.status_code == 400 and list(detail.json()) == ["detail"]
    assert detail.json()["detail"].startswith("Prompt too long: ")
    five = _post(servers["overflow-500"], api, LONG)
    assert five.status_code == 500
    assert "prompt is too long" not in five.text and "context_length_exceeded" not in five.text
    bare = _post(servers["overflow-bare-400"], api, LONG)
    assert bare.status_code == 400 and "prompt is too long" not in bare.text
    if api == "anthropic":
        assert bare.json() == {"type": "error", "error": {"type": "invalid_request_error", "message": "Bad Request"}}
    else:
        assert bare.json()["error"]["code"] is None and bare.json()["error"]["message"] == "Bad Request"


def _events(response: httpx.Response) -> list[tuple[str | None, Any]]:
    """(event name, data) of each SSE frame of a streamed answer ([DONE] as its text)."""
    out: list[tuple[str | None, Any]] = []
    for block in response.text.split("\n\n"):
        lines = block.splitlines()
        name = next((line[7:] for line in lines if line.startswith("event: ")), None)
        data = "".join(line[6:] for line in lines if line.startswith("data: "))
        if data:
            out.append((name, data if data == "[DONE]" else json.loads(data)))
    return out


def test_overflow_stream_error_answers_200_then_the_apis_in_stream_error(servers: dict[str, str]) -> None:
    """Dynamo 1.6.1's form (its hand verification, a 4 MiB prompt): the stream opens with HTTP 200 and the
    API's own in-stream error ends it, with no overflow marker; not streamed, the engine's 500."""
    url = servers["overflow-stream-error"]
    an = _events(_post(url, "anthropic", LONG, stream=True))
    assert an[0][0] == "message_start" and an[-1][0] == "error"
    assert an[-1][1]["error"]["type"] == "api_error" and "prompt is too long" not in an[-1][1]["error"]["message"]
    chat = _events(_post(url, "chat", LONG, stream=True))
    assert chat[-1] == (None, "[DONE]") and set(chat[-2][1]) == {"error"}
    assert chat[-2][1]["error"]["code"] != "context_length_exceeded"
    rs = _events(_post(url, "responses", LONG, stream=True))
    assert rs[0][0] == "response.created" and rs[-1][0] == "response.failed"
    assert rs[-1][1]["response"]["error"]["code"] == "server_error"
    for api in ("anthropic", "chat", "responses"):
        flat = _post(url, api, LONG)
        assert flat.status_code == 500 and "prompt is too long" not in flat.text, (api, flat.text)
        assert "context_length_exceeded" not in flat.text
    assert _post(url, "chat", "hello", stream=True).status_code == 200  # a prompt that fits is answered
    assert _events(_post(url, "chat", "hello", stream=True))[-1] == (None, "[DONE]")


def test_the_window_is_announced_and_zero_means_none(servers: dict[str, str]) -> None:
    entries = httpx.get(servers["clean"] + "/v1/models").json()["data"]
    assert {e["max_model_len"] for e in entries} == {WINDOW}
    an = httpx.get(servers["clean"] + "/v1/models", headers=AN_HEADERS).json()["data"]
    assert {e["max_model_len"] for e in an} == {WINDOW}
    assert all("max_model_len" not in e for e in httpx.get(servers["none"] + "/v1/models").json()["data"])
    assert _post(servers["none"], "chat", LONG).status_code == 200


def test_a_fitting_prompt_gets_the_room_left_as_its_output_limit(servers: dict[str, str]) -> None:
    """A prompt just under the window asks for more output than fits: the answer stops at the window."""
    text = "hello world " * 320  # ~1900 tokens
    answer = _post(servers["clean"], "anthropic", text, max_tokens=4000).json()
    usage = answer["usage"]
    total = usage["input_tokens"] + usage["cache_read_input_tokens"] + usage["output_tokens"]
    assert usage["input_tokens"] + usage["cache_read_input_tokens"] < WINDOW
    assert total <= WINDOW + 1


def _prompt_total(api: str, answer: dict[str, Any]) -> int:
    u = answer["usage"]
    if api == "anthropic":
        return u["input_tokens"] + u["cache_read_input_tokens"] + u["cache_creation_input_tokens"]
    return u["prompt_tokens"] if api == "chat" else u["input_tokens"]


def test_usage_current_turn_only_counts_the_new_turn(servers: dict[str, str]) -> None:
    """One turn: the whole prompt (the bug hides there); a follow-up: only the tool result and what follows."""
    tools = [{"type": "function", "function": {"name": "bash", "description": "run",
                                                "parameters": {"type": "object", "properties": {
                                                    "command": {"type": "string"}}}}}]
    first = [{"role": "system", "content": "You are an agent. " * 50}, {"role": "user", "content": "Use bash."}]
    follow = [*first, {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": "{\"command\": \"ls\"}"}}]},
              {"role": "tool", "tool_call_id": "call_1", "content": "a.txt"}]
    totals = {}
    for name in ("clean", "usage-current-turn-only"):
        for label, messages in (("first", first), ("follow", follow)):
            answer = httpx.post(servers[name] + "/v1/chat/completions", timeout=60,
                                json={"model": MODEL, "messages": messages, "tools": tools}).json()
            totals[name, label] = _prompt_total("chat", answer)
    assert totals["usage-current-turn-only", "first"] == totals["clean", "first"]
    assert totals["clean", "follow"] > totals["clean", "first"]
    assert totals["usage-current-turn-only", "follow"] < 10 < totals["clean", "first"]  # "a.txt" alone


def test_the_scripted_model_repeats_a_named_tool_n_times(servers: dict[str, str]) -> None:
    tools = [{"name": "Bash", "description": "run", "input_schema": {
        "type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}]
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Use the Bash tool to run `seq 1 3` 3 times."}]
    calls = []
    for _ in range(5):
        answer = httpx.post(servers["none"] + "/v1/messages", headers=AN_HEADERS, timeout=60, json={
            "model": MODEL, "max_tokens": 256, "tools": tools, "messages": messages}).json()
        uses = [b for b in answer["content"] if b["type"] == "tool_use"]
        if not uses:
            assert answer["stop_reason"] == "end_turn"
            break
        calls.append(uses[0]["input"])
        messages += [{"role": "assistant", "content": answer["content"]},
                     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": uses[0]["id"],
                                                   "content": "1\n2\n3"}]}]
    assert calls == [{"command": "seq 1 3"}] * 3
