"""An engine's own stop (timeout, cancelled) ends each API's turn in that API's error form.

Real server processes with the scripted engine's test switch (`--engine-option stop=REASON`,
`stop_after=N`: every generation ends after N output tokens as `EngineStopped`, the way TensorRT-LLM
reports a "timeout" or "cancelled" finish); the official SDKs must raise their own error types, and
the raw bytes must end with the API's error frame (no cut stream, no 500 from a crash):

- Anthropic: mid-stream an `event: error` with {"type": "error", "error": {"type": ...}} (streaming
  docs, "Error events"); not streamed, 529 overloaded_error for a timeout, 500 api_error otherwise.
- Chat: a chunk holding only {"error": {...}}, then [DONE] (what vLLM sends); not streamed, 503 / 500.
- Responses: `response.failed` with status "failed" and an error object; not streamed, 503 / 500.
The expected statuses and types below are written from the API docs, not read from the server.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import anthropic
import httpx
import openai
import pytest

from harnesscheck.reference_server.launch import ServerProcess

ASK = [{"role": "user", "content": "Say hello."}]


@pytest.fixture(scope="module", params=["timeout", "cancelled"])
def stopping(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    """A server whose every generation the engine stops after 3 tokens: (url, reason)."""
    reason = request.param
    with ServerProcess(["--engine-option", f"stop={reason}", "--engine-option", "stop_after=3"]) as server:
        yield server.url, reason


def _frames(body: str) -> list[tuple[str | None, str]]:
    """(event name, data) of each SSE frame of a whole body."""
    out = []
    for block in body.strip().split("\n\n"):
        event = None
        data = []
        for line in block.split("\n"):
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].strip())
        out.append((event, "\n".join(data)))
    return out


def test_anthropic_stream_ends_with_an_error_event(stopping: tuple[str, str]) -> None:
    url, reason = stopping
    kind = "overloaded_error" if reason == "timeout" else "api_error"
    client = anthropic.Anthropic(base_url=url, api_key="x", max_retries=0)
    with pytest.raises(anthropic.APIStatusError) as caught:
        for _ in client.messages.create(model="nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4", max_tokens=64,
                                        messages=ASK, stream=True):
            pass
    assert caught.value.body["error"]["type"] == kind  # type: ignore[index]
    raw = httpx.post(f"{url}/v1/messages", json={"model": "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4",
                                                  "max_tokens": 64, "messages": ASK, "stream": True}, timeout=30)
    assert raw.status_code == 200
    frames = _frames(raw.text)
    assert frames[0][0] == "message_start"
    assert frames[-1][0] == "error" and "message_stop" not in [name for name, _ in frames]
    error = json.loads(frames[-1][1])
    assert error["type"] == "error" and error["error"]["type"] == kind and error["error"]["message"]


def test_anthropic_not_streamed_answers_its_5xx(stopping: tuple[str, str]) -> None:
    url, reason = stopping
    client = anthropic.Anthropic(base_url=url, api_key="x", max_retries=0)
    expected = anthropic.OverloadedError if reason == "timeout" else anthropic.InternalServerError
    with pytest.raises(expected) as caught:
        client.messages.create(model="nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4", max_tokens=64, messages=ASK)
    assert caught.value.status_code == (529 if reason == "timeout" else 500)
    assert caught.value.body["error"]["type"] == ("overloaded_error" if reason == "timeout" else "api_error")  # type: ignore[index]


def test_chat_stream_ends_with_an_error_chunk_then_done(stopping: tuple[str, str]) -> None:
    url, reason = stopping
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0)
    with pytest.raises(openai.APIError) as caught:
        for _ in client.chat.completions.create(model="nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4",
                                                messages=ASK, stream=True):
            pass
    assert not isinstance(caught.value, openai.APIConnectionError)  # the error chunk, not a cut stream
    assert caught.value.body["type"] == "server_error"  # type: ignore[index]
    raw = httpx.post(f"{url}/v1/chat/completions", json={"model": "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4",
                                                         "messages": ASK, "stream": True}, timeout=30)
    frames = _frames(raw.text)
    assert raw.status_code == 200 and frames[-1] == (None, "[DONE]")
    last = json.loads(frames[-2][1])
    assert set(last) == {"error"} and last["error"]["type"] == "server_error" and last["error"]["message"]
    assert all(json.loads(data).get("choices", [{}])[0].get("finish_reason") is None for _, data in frames[:-2])


def test_chat_not_streamed_answers_its_5xx(stopping: tuple[str, str]) -> None:
    url, reason = stopping
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0)
    with pytest.raises(openai.InternalServerError) as caught:
        client.chat.completions.create(model="nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4", messages=ASK)
    assert caught.value.status_code == (503 if reason == "timeout" else 500)
    assert caught.value.body["type"] == "server_error"  # type: ignore[index]


def test_responses_stream_ends_with_response_failed(stopping: tuple[str, str]) -> None:
    url, _ = stopping
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0)
    events = list(client.responses.create(model="nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4", input="Say hello.",
                                          stream=True))
    last = events[-1]
    assert isinstance(last, openai.types.responses.ResponseFailedEvent)
    assert last.response.status == "failed"
    assert last.response.error is not None and last.response.error.code == "server_error"
    assert not any(e.type == "response.completed" for e in events)
    numbers = [e.sequence_number for e in events]
    assert numbers == list(range(len(numbers)))


def test_responses_not_streamed_answers_its_5xx(stopping: tuple[str, str]) -> None:
    url, reason = stopping
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0)
    with pytest.raises(openai.InternalServerError) as caught:
        client.responses.create(model="nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4", input="Say hello.")
    assert caught.value.status_code == (503 if reason == "timeout" else 500)


def test_a_failed_response_is_not_stored(stopping: tuple[str, str]) -> None:
    url, _ = stopping
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0)
    events = list(client.responses.create(model="nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4", input="Hi.",
                                          stream=True))
    failed_id = events[-1].response.id  # type: ignore[union-attr]
    with pytest.raises(openai.BadRequestError):  # an unknown previous_response_id is the client's error
        client.responses.create(model="nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4", input="Again.",
                                previous_response_id=failed_id, stream=True)


def test_a_bad_switch_refuses_to_start() -> None:
    with pytest.raises(RuntimeError, match="stop=.sometimes."), \
            ServerProcess(["--engine-option", "stop=sometimes"], startup_timeout=30):
        pass
