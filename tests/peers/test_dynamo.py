"""Dynamo 1.6.1's frontend + CPU mocker (opt-in: skips without a Dynamo environment): the mocker
replays the scripted output only for a request that names it, Dynamo's parsers turn it into
reasoning and a tool call on Chat and Messages, and `bench server` measures both sides."""

from __future__ import annotations

from harnesscheck.replay.benchmarks import server_cost as sc
from harnesscheck.replay.benchmarks.dynamo_peer import annotate
from harnesscheck.replay.client import StreamClient, run_async
from tests.peers import dynamo as dynamo_helper
from tests.peers.conftest import REPLAY_KEY

_TOOLS = [{"type": "function", "function": {"name": "Read", "parameters": {
    "type": "object", "properties": {"file_path": {"type": "string"}}}}}]


def _chat(model: str) -> dict:
    return {"model": model, "stream": True, "max_tokens": 400, "tools": _TOOLS,
            "messages": [{"role": "user", "content": "read src/app.py"}]}


def _messages(model: str) -> dict:
    return {"model": model, "stream": True, "max_tokens": 400,
            "tools": [{"name": "Read", "input_schema": _TOOLS[0]["function"]["parameters"]}],
            "messages": [{"role": "user", "content": "read src/app.py"}]}


def _post(url: str, requests: list[tuple[str, str, dict]]) -> list:
    async def go():
        async with StreamClient() as client:
            return [await client.post(url + path, body, api=api, headers={"anthropic-version": "2023-06-01"})
                    for api, path, body in requests]

    return run_async(go())


def test_the_replayed_output_comes_through_dynamos_parsers(dynamo):
    chat, msgs, plain = _post(dynamo.url, [
        ("chat", "/v1/chat/completions", annotate(_chat(dynamo.model), REPLAY_KEY)),
        ("anthropic", "/v1/messages", annotate(_messages(dynamo.model), REPLAY_KEY)),
        ("chat", "/v1/chat/completions", _chat(dynamo.model))])
    assert chat.ok and msgs.ok, (chat.error, msgs.error)
    answer = chat.answer[0]
    assert "read the file first" in (answer.get("reasoning_content") or "")
    assert [c["function"]["name"] for c in answer["tool_calls"]] == ["Read"]
    assert '"src/app.py"' in answer["tool_calls"][0]["function"]["arguments"]
    assert chat.stop_reason == "tool_calls"
    blocks = msgs.answer[0]["content"]
    assert blocks[0]["type"] == "thinking" and "read the file first" in blocks[0]["thinking"]
    assert [b["input"] for b in blocks if b["type"] == "tool_use"] == [{"file_path": "src/app.py"}]
    # without the annotation the mocker makes up tokens: no scripted tool call
    assert not (plain.answer[0].get("tool_calls") or [])


def test_bench_server_measures_the_reference_server_and_dynamo_the_same_way():
    opts = sc.ServerCostOptions(concurrency=[2], windows=1, window_s=2.0, warmup_s=1.0,
                                scenarios=["long_agent_turn"], dynamo_python=dynamo_helper.dynamo_python(),
                                dynamo_model_dir=dynamo_helper.model_dir())
    doc = sc.run_server_cost(opts)
    bench = next(b for b in doc["benchmarks"] if b["name"] == "server-cpu-per-token")
    rows = {r["side"]: r for r in bench["settings"]["rows"]}
    assert set(rows) == {"reference", "dynamo"}
    for row in rows.values():
        assert row["failed_streams"] == 0 and row["empty_streams"] == 0 and row["tokens"] > 200, row
    # the mocker replays the reference server's own output: the same streamed text, so the same tokens
    ref, dyn = rows["reference"]["median_tokens_per_stream"], rows["dynamo"]["median_tokens_per_stream"]
    assert abs(dyn / ref - 1) < 0.05, (ref, dyn)
    assert [r["name"] for r in bench["ratios"]] == ["reference/dynamo c=2"]
    assert not any("not measured now" in line for line in bench["settings"]["summary"])
