"""Dynamo 1.6.1's frontend + CPU mocker (opt-in: skips without a Dynamo environment): the mocker
replays the scripted output only for a request that names it, Dynamo's parsers turn it into
reasoning and a tool call on Chat and Messages, `bench server` measures both sides, and the suite's
peer profile (`--peer dynamo-mocker`) drives the tool-call rules down their paths and keeps the
findings docs/peers/dynamo-1.6.1.md verified by hand."""

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


# The findings of docs/peers/dynamo-1.6.1.md that only the scripted outputs reach, each verified by hand:
# check id -> (outcome, level, the rule that leads the failure).
PROFILE_FINDINGS = {
    "AN-STREAM-003": ("fail", "MUST", "AN-GRAMMAR-BLOCK-CLOSED"),  # a second reasoning after a call, at index 0
    "RS-STREAM-002": ("fail", "MUST", "RS-GRAMMAR-ITEM-ORDER"),  # the message item stays open over the call
    "AN-SDK-001": ("fail", "SHOULD", "AN-SDK-001:nonstream"),  # text after the call when not streamed
    "RS-SDK-001": ("fail", "SHOULD", "RS-SDK-001:nonstream"),
    "AN-DISPATCH-001": ("fail", "SHOULD", "AN-DISPATCH-001"),
    "RS-STATE-001": ("fail", "MUST", "RS-STATE-001"),  # 501: previous_response_id is not supported
    "AN-STREAM-006": ("pass", "MUST", ""), "CH-STREAM-002": ("pass", "MUST", ""), "RS-STREAM-006": ("pass", "MUST", ""),
    "CH-STREAM-003": ("pass", "MUST", ""), "CH-SDK-001": ("pass", "MUST", ""),
}


def test_the_peer_profile_drives_the_tool_rules_and_keeps_the_verified_findings(dynamo_scripted, tmp_path):
    from harnesscheck.conformance.runner import SuiteOptions, run_suite

    select = " or ".join(PROFILE_FINDINGS)
    doc = run_suite(SuiteOptions(endpoint=dynamo_scripted.url, model=dynamo_scripted.model, peer="dynamo-mocker",
                                 select=select), tmp_path, subprocess_run=True, quiet=True)
    got = {c["id"]: (c["outcome"], c["level"], (c.get("rules_failed") or [""])[0]) for c in doc["checks"]}
    assert got == PROFILE_FINDINGS, {k: (got.get(k), v) for k, v in PROFILE_FINDINGS.items() if got.get(k) != v}
    replayed = [names for c in doc["checks"] for names in (c.get("levers") or {}).get("judged", {}).values()]
    assert any(n.startswith("replay:hc-calculator-0") for names in replayed for n in names), replayed
