"""The reference server against hostile input, beyond tests/reference_server/test_errors.py (which
posts random JSON shapes): every field of a *valid* request of every route replaced by a wrong
type, a huge or a deeply nested value, or deleted (hypothesis, field by field); invalid UTF-8;
deep nesting; huge strings; 413 on every body-taking route; and hung-up streams free their
engine slots and cache pins. Never a 5xx, always the API's own error shape.
"""

from __future__ import annotations

import copy
import json
import threading
import time
from collections import Counter
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.reference_server.test_errors import check_shape

NEMOTRON = "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4"
DEEPSEEK = "deepseek-ai/DeepSeek-R1"
CALC = {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}
TRIED: Counter[str] = Counter()

AN_VALID: dict[str, Any] = {
    "model": NEMOTRON, "max_tokens": 2048, "temperature": 1, "metadata": {"user_id": "u-1"},
    "system": [{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}],
    "tools": [{"name": "calculator", "description": "evaluates", "input_schema": CALC}],
    "tool_choice": {"type": "auto"}, "thinking": {"type": "enabled", "budget_tokens": 1024},
    "stop_sequences": ["\n\nHuman:"],
    "messages": [
        {"role": "user", "content": [{"type": "text", "text": "use the calculator tool with `1+1`"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "calling"},
                                          {"type": "tool_use", "id": "toolu_1", "name": "calculator",
                                           "input": {"expression": "1+1"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "2"},
                                     {"type": "text", "text": "thanks"}]},
    ],
}
CHAT_VALID: dict[str, Any] = {
    "model": NEMOTRON, "max_tokens": 64, "temperature": 0.2, "stop": ["END"],
    "tools": [{"type": "function", "function": {"name": "calculator", "description": "evaluates", "parameters": CALC}}],
    "tool_choice": "auto", "chat_template_kwargs": {"enable_thinking": True},
    "messages": [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "use the calculator tool with `1+1`"}]},
        {"role": "assistant", "content": None, "reasoning_content": "I should calculate.",
         "tool_calls": [{"id": "call_1", "type": "function",
                         "function": {"name": "calculator", "arguments": "{\"expression\": \"1+1\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "2"},
    ],
}
RS_VALID: dict[str, Any] = {
    "model": NEMOTRON, "instructions": "be brief", "max_output_tokens": 64, "store": False,
    "reasoning": {"effort": "low", "summary": "auto"}, "include": ["reasoning.encrypted_content"],
    "tools": [{"type": "function", "name": "calculator", "description": "evaluates", "parameters": CALC}],
    "input": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "use the calculator tool with `1+1`"}]},
        {"type": "function_call", "call_id": "call_1", "name": "calculator", "arguments": "{\"expression\": \"1+1\"}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "2"},
    ],
}
TOKENIZE_VALID: dict[str, Any] = {"model": NEMOTRON, "messages": CHAT_VALID["messages"], "tools": CHAT_VALID["tools"],
                                  "add_generation_prompt": True, "return_token_strs": True}
VALID: dict[str, dict[str, Any]] = {
    "/v1/messages": AN_VALID,
    "/v1/messages/count_tokens": {k: v for k, v in AN_VALID.items() if k not in ("max_tokens", "stop_sequences",
                                                                               "temperature", "metadata")},
    "/v1/chat/completions": CHAT_VALID,
    "/v1/responses": RS_VALID,
    "/v1/tokenize": TOKENIZE_VALID,
    "/tokenize": {"model": DEEPSEEK, "prompt": "hello world"},
    "/v1/detokenize": {"model": NEMOTRON, "tokens": [1, 2, 3, 40, 500]},
}
STREAMING = {"/v1/messages", "/v1/chat/completions", "/v1/responses"}
END_MARKERS = {"/v1/messages": b"event: message_stop", "/v1/chat/completions": b"data: [DONE]",
               "/v1/responses": b"response.completed"}


def api_of(path: str) -> str:
    return "anthropic" if path.startswith("/v1/messages") else "openai"


def paths_of(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every field and element of a JSON value, as key/index paths."""
    out = []
    if isinstance(value, dict):
        for k, v in value.items():
            out.append((*prefix, k))
            out += paths_of(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out.append((*prefix, i))
            out += paths_of(v, (*prefix, i))
    return out


def nested(depth: int) -> Any:
    value: Any = "x"
    for i in range(depth):
        value = [value] if i % 2 else {"a": value}
    return value


DELETE = object()
hostile_values = st.one_of(
    st.sampled_from([None, True, False, 0, -1, 1.5, -1e308, 2**64, 10**30, "", "\x00", "\ud800", "[]", "{}",
                     [], {}, [None], {"type": None}, [[]], {"": ""}, "x" * 200_000, nested(300), DELETE]),
    st.integers(), st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=40),
    st.lists(st.integers() | st.text(max_size=5), max_size=4),
    st.dictionaries(st.text(max_size=8), st.integers() | st.text(max_size=8) | st.none(), max_size=4),
)


def mutate(body: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(body)
    parent = out
    for key in path[:-1]:
        parent = parent[key]
    if value is DELETE:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return out


def judge(http: httpx.Client, path: str, content: bytes, label: Any) -> int:
    with http.stream("POST", path, content=content, headers={"content-type": "application/json"}) as response:
        body = response.read()
    TRIED[path] += 1
    assert response.status_code < 500, (label, response.status_code, body[:500])
    if response.status_code >= 400:
        check_shape(httpx.Response(response.status_code, content=body, headers=response.headers), api_of(path),
                    response.status_code)
    elif response.headers.get("content-type", "").startswith("text/event-stream"):
        # A stream that started must end properly: no error half way.
        assert END_MARKERS[path] in body, (label, body[-500:])
    else:
        assert isinstance(json.loads(body), dict)
    return response.status_code


@pytest.fixture(scope="module")
def http(reference_server: str) -> Any:
    with httpx.Client(base_url=reference_server, timeout=60) as client:
        yield client


@pytest.mark.parametrize("path", sorted(VALID))
def test_valid_baseline(http: httpx.Client, path: str) -> None:
    """The bodies mutated below are valid as they stand (streamed too, where the route streams)."""
    assert judge(http, path, json.dumps(VALID[path]).encode(), "valid") == 200
    if path in STREAMING:
        assert judge(http, path, json.dumps({**VALID[path], "stream": True}).encode(), "valid stream") == 200


@pytest.mark.parametrize("path", sorted(VALID))
def test_every_field_mutated_never_5xx(http: httpx.Client, path: str) -> None:
    base = VALID[path]
    fields = paths_of(base)
    stream = st.just(False) if path not in STREAMING else st.booleans()

    @settings(max_examples=60, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(field=st.sampled_from(fields), value=hostile_values, streamed=stream)
    def post(field: tuple[Any, ...], value: Any, streamed: bool) -> None:
        body = mutate(base, field, value)
        if streamed:
            body["stream"] = True
        judge(http, path, json.dumps(body).encode(), (field, repr(value)[:80], streamed))

    post()
    # And each field once with each of the plain wrong types, deterministically.
    for field in fields:
        for value in (None, 7, "s", {}, DELETE):
            judge(http, path, json.dumps(mutate(base, field, value)).encode(), (field, value))
    print(f"\nfuzz {path}: {TRIED[path]} cases ({len(fields)} fields)")


@pytest.mark.parametrize("path", sorted(VALID))
def test_bytes_and_shapes_never_5xx(http: httpx.Client, path: str) -> None:
    raw = json.dumps(VALID[path]).encode()
    model = json.dumps(VALID[path]["model"]).encode()
    cases: list[tuple[str, bytes]] = [
        ("invalid utf-8 in a string", raw.replace(model, model[:-1] + b"\xff\xfe\"", 1)),
        ("invalid utf-8 everywhere", raw.replace(b"e", b"\xe9")),
        ("lone continuation bytes", b"\x80\x80" + raw),
        ("utf-16 body", json.dumps(VALID[path]).encode("utf-16")),
        ("NUL bytes", raw.replace(b",", b",\x00", 1)),
        ("lone surrogate escape", raw.replace(model, b'"\\ud800"', 1)),
        ("deep arrays", b"[" * 100_000 + b"]" * 100_000),
        ("deep objects", b'{"a":' * 50_000 + b"1" + b"}" * 50_000),
        ("deep in a field", json.dumps({**VALID[path], "metadata": nested(900)}).encode()),
        ("truncated", raw[: len(raw) // 2]),
        ("trailing garbage", raw + b"}}"),
        ("NaN", raw[:-1] + b', "temperature": NaN}'),
        ("Infinity", raw[:-1] + b', "max_tokens": Infinity}'),
        ("duplicate keys", raw[:-1] + b', "model": 5}'),
        ("huge number", raw[:-1] + b', "max_tokens": 1' + b"0" * 5000 + b"}"),
        ("huge string", json.dumps({**VALID[path], "model": "m" * 2_000_000}).encode()),
        ("many keys", json.dumps({**VALID[path], **{f"k{i}": i for i in range(50_000)}}).encode()),
    ]
    for label, content in cases:
        judge(http, path, content, label)


# -- 413 on every body-taking route ----------------------------------------------------------

@pytest.fixture(scope="module")
def small_body_server(server_factory: Any) -> str:
    return server_factory("--max-body-bytes", "65536")


@pytest.mark.parametrize("path", ["/v1/messages/count_tokens", "/v1/tokenize", "/tokenize", "/v1/detokenize",
                                  "/detokenize"])
def test_oversized_body_413(small_body_server: str, path: str) -> None:
    """test_errors.py covers the three generation routes; these are the others."""
    body = {**VALID.get(path, VALID["/v1/detokenize" if "detok" in path else "/tokenize"]), "padding": "x" * 100_000}
    with httpx.Client(base_url=small_body_server, timeout=30) as http:
        response = http.post(path, content=json.dumps(body).encode(), headers={"content-type": "application/json"})
        check_shape(response, api_of(path), 413)


# -- hung-up streams free engine slots and cache pins ------------------------------------------

@pytest.fixture(scope="module")
def slow_server(server_factory: Any) -> str:
    return server_factory("--decode-ms", "20", "--max-concurrency", "64")


def _health(url: str) -> dict[str, Any]:
    return httpx.get(url + "/health", timeout=10).json()


def _settled(url: str, timeout: float = 10.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    health = _health(url)
    while (health["active_requests"] or health["cache"].get("pinned_blocks")) and time.monotonic() < deadline:
        time.sleep(0.05)
        health = _health(url)
    return health


def test_many_hangups_free_slots_and_pins(slow_server: str) -> None:
    """24 streams at once (8 per API, long prompts so they pin cache blocks), every one dropped
    after a few frames, some before the first byte: slots and pins all come back."""
    long_text = "use the calculator tool with `2*3` " + "filler words " * 400
    bodies = {"/v1/messages": {**AN_VALID, "max_tokens": 2000, "stream": True,
                               "messages": [{"role": "user", "content": long_text}]},
              "/v1/chat/completions": {**CHAT_VALID, "stream": True, "messages": [{"role": "user", "content": long_text}]},
              "/v1/responses": {**RS_VALID, "stream": True, "input": long_text}}
    peak: list[int] = []
    errors: list[BaseException] = []

    def hang_up(path: str, after: int) -> None:
        try:
            with httpx.Client(timeout=30) as http, \
                    http.stream("POST", slow_server + path, json=bodies[path]) as response:
                assert response.status_code == 200
                for n, _ in enumerate(response.iter_lines()):
                    if n == 2:
                        peak.append(_health(slow_server)["cache"].get("pinned_blocks", 0))
                    if n >= after:
                        break
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=hang_up, args=(path, after)) for path in bodies for after in (0, 3, 6, 9, 12,
                                                                                                     20, 30, 40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert max(peak) > 0  # the streams did pin blocks while they ran
    health = _settled(slow_server)
    assert health["active_requests"] == 0, health
    assert health["cache"]["pinned_blocks"] == 0, health
    print(f"\nhang-ups: {len(threads)} streams dropped mid-stream, peak pinned blocks {max(peak)}, after: "
          f"active_requests {health['active_requests']}, pinned_blocks {health['cache']['pinned_blocks']}")


def test_hangup_before_headers_frees_the_slot(slow_server: str) -> None:
    """A client that sends its request and closes before the answer starts."""
    import socket

    body = json.dumps({**CHAT_VALID, "stream": True}).encode()
    host, port = slow_server.removeprefix("http://").split(":")
    for _ in range(10):
        with socket.create_connection((host, int(port)), timeout=5) as sock:
            sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                         b"content-length: %d\r\n\r\n%s" % (len(body), body))
    # And one that sends half its body and goes away.
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(b"POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                     b"content-length: 100000\r\n\r\n{\"model\":")
    health = _settled(slow_server)
    assert health["active_requests"] == 0 and health["cache"]["pinned_blocks"] == 0, health


def test_fuzz_totals(http: httpx.Client) -> None:
    """Runs last in this module. Every route, sent its valid body and then that body with each top-level
    field deleted in turn, answers every request (no 5xx, the API's error shape: `judge`), accepts the
    valid body and rejects at least one deletion (a required field), so the fuzzing above reaches both
    the accepting and the rejecting paths. Then prints the module's totals (xdist may run the other
    tests in another process, so the floor counts only this test's own requests)."""
    answered: dict[str, Counter[int]] = {}
    for path, body in sorted(VALID.items()):
        fields = [f for f in paths_of(body) if len(f) == 1]
        codes = Counter([judge(http, path, json.dumps(body).encode(), "valid")])
        for field in fields:
            codes[judge(http, path, json.dumps(mutate(body, field, DELETE)).encode(), (field, "deleted"))] += 1
        answered[path] = codes
        assert codes[200] >= 1 and any(400 <= c < 500 for c in codes), (path, codes)
    # a floor on the requests: 7 routes, 7 valid bodies and 41 top-level fields today (48)
    assert set(answered) == set(VALID) and sum(c.total() for c in answered.values()) >= 40, answered
    total = sum(TRIED.values())
    print(f"\nfuzz total: {total} requests over {len(TRIED)} routes: " + ", ".join(f"{k} {v}" for k, v in sorted(TRIED.items())))
