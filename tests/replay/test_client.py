"""The timed client: the fast SSE path equals the spec decoder; replays of the built-in workload
succeed on every API in both modes with TTFT, ITL and tool-ready times recorded."""

from __future__ import annotations

import json
import random

import pytest

from harnesscheck.protocol.wire.sse import decode_all
from harnesscheck.reference_server.config import DEFAULT_MODEL_IDS
from harnesscheck.reference_server.launch import ServerProcess
from harnesscheck.replay.client import FastSSE, loads, parse_events
from harnesscheck.replay.replayer import CSV_COLUMNS, ReplayOptions, percentile, replay
from harnesscheck.replay.workloads import agent_coding


def _stream(eol: bytes = b"\n") -> bytes:
    frames = [b": keep-alive", b"event: message_start\ndata: {\"type\":\"message_start\"}",
              b"data: {\"a\": \"caf\xc3\xa9 \xe2\x9c\x93\"}", b"data: line1\ndata: line2",
              b"event: x\nid: 7\nretry: 10\ndata:nospace", b"data", b"event: only-event", b"data: [DONE]"]
    return b"".join(f.replace(b"\n", eol) + eol + eol for f in frames)


@pytest.mark.parametrize("data", [
    '{"a": [1, 2.5, -0.0, 1e300, true, null], "b": "\\u00e9\\n"}', '{"k": 1, "k": 2}',
    '[NaN, Infinity, -Infinity]', '18446744073709551615', '-9223372036854775808', '"\\ud800"', '"\\u0000"',
])
def test_loads_decodes_as_json_loads(data: str) -> None:
    """What orjson alone refuses (NaN, a lone surrogate) comes out as the standard library reads
    it, and so do the 64-bit integer limits."""
    got, want = loads(data), json.loads(data)
    assert repr(got) == repr(want)


def test_loads_reads_an_integer_past_64_bits_as_the_nearest_float() -> None:
    """The one documented difference from json.loads (orjson's)."""
    assert loads("123456789012345678901234567890") == float(123456789012345678901234567890)


@pytest.mark.parametrize("data", ["", "{", "[1,]", "{'a': 1}", "nul"])
def test_loads_refuses_what_json_loads_refuses(data: str) -> None:
    with pytest.raises(ValueError):
        json.loads(data)
    with pytest.raises(ValueError):
        loads(data)


def _reference(data: bytes) -> list[tuple[str | None, str]]:
    return [(f.event, f.data) for f in decode_all(data) if f.kind == "event"]


@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"])
def test_fast_path_equals_spec_decoder_on_any_split(eol: bytes) -> None:
    data = _stream(eol)
    want = _reference(data)
    assert len(want) == 6
    rng = random.Random(1)
    for _ in range(200):
        cuts = sorted(rng.sample(range(1, len(data)), rng.randint(0, 12)))
        chunks = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]
        assert parse_events(chunks) == want


def test_fast_path_handles_bom_and_truncation() -> None:
    data = b"\xef\xbb\xbfdata: 1\n\ndata: cut"
    assert parse_events([data[:2], data[2:]]) == _reference(data) == [(None, "1")]
    assert FastSSE().feed(b"data: x\n") == []


def test_percentile() -> None:
    assert percentile([], 50) is None
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([5], 99) == 5


@pytest.fixture(scope="module")
def server():
    with ServerProcess(["--decode-ms", "1", "--ttft-base-ms", "0", "--prefill-us-per-token", "0"]) as srv:
        yield srv


@pytest.mark.parametrize("api", ["anthropic", "chat", "responses"])
def test_workload_replays_on_every_api(server, api: str, tmp_path) -> None:
    trace = agent_coding(sessions=3, turns=6, prompt_tokens=1500, api=api)
    for mode in ("fixed", "live"):
        res = replay(trace, ReplayOptions(endpoint=server.url, model=DEFAULT_MODEL_IDS[0], mode=mode,
                                          concurrency=3, time_scale=0, progress=False))
        assert res.summary["turns_ok"] == 18, [r.get("error") for r in res.records if not r["ok"]]
        assert res.summary["structure_mismatches"] == 0
        assert res.summary["max_in_flight"] == 3
        first = res.records[0]
        assert first["ttft_ms"] is not None and first["ttft_ms"] <= first["end_ms"]
        assert first["tokens"] > 3 and len(first["itl_ms"]) == first["tokens"] - 1
        assert [t["name"] for t in first["tool_ready"]] == ["bash", "bash"]
        assert all(t["ms"] <= first["end_ms"] for t in first["tool_ready"])
        if api == "chat":
            assert {t["source"] for t in first["tool_ready"]} == {"dispatch"}
        if mode == "fixed":
            again = replay(trace, ReplayOptions(endpoint=server.url, model=DEFAULT_MODEL_IDS[0], mode=mode,
                                                concurrency=3, time_scale=0, progress=False))
            assert [r["request_sha256"] for r in again.records] == [r["request_sha256"] for r in res.records]
    paths = res.write(tmp_path)
    header = paths["csv"].read_text().splitlines()[0].split(",")
    assert header == CSV_COLUMNS
    assert json.loads(paths["json"].read_text())["summary"]["turns"] == 18


def test_think_time_is_honoured(server) -> None:
    trace = agent_coding(sessions=1, turns=2, prompt_tokens=500, api="chat", tool_ms=200)
    res = replay(trace, ReplayOptions(endpoint=server.url, model=DEFAULT_MODEL_IDS[0], time_scale=1,
                                      progress=False))
    a, b = res.records
    assert b["start_ms"] - (a["start_ms"] + a["end_ms"]) >= 195


def test_unreachable_endpoint_is_an_error_not_a_crash() -> None:
    trace = agent_coding(sessions=1, turns=2, prompt_tokens=200, api="anthropic")
    res = replay(trace, ReplayOptions(endpoint="http://127.0.0.1:9", model="m", mode="live", time_scale=0,
                                      progress=False, api_key="sk-secret-value-xyz"))
    assert res.summary["turns_failed"] == 2
    assert res.records[0]["error_kind"] == "connect"
    assert res.records[1]["history"] == "recorded"  # no live answer: the recorded one stands in


def test_a_responses_stream_ending_in_incomplete_is_whole(server) -> None:
    """`response.incomplete` (here: max_output_tokens reached) is the Responses stream's end event,
    with the reason in its status: the client counts the stream as whole, not truncated."""
    import asyncio

    from harnesscheck.replay.client import StreamClient

    body = {"model": DEFAULT_MODEL_IDS[0], "stream": True, "max_output_tokens": 16,
            "input": "Write a long story about a lighthouse keeper, at least five paragraphs."}

    async def go():
        async with StreamClient() as client:
            return await client.post(server.url + "/v1/responses", body, api="responses")

    r = asyncio.run(go())
    assert r.stop_reason == "incomplete", (r.stop_reason, r.error)
    assert r.finished and r.ok and r.error is None
