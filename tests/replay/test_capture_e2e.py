"""Done-when of issue 6: a scripted client session captured through the proxy replays against the
reference server in both modes; fixed mode sends the captured requests again; no planted secret
reaches any file the kit writes."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import zstandard

from harnesscheck.protocol.wire.sse import SSEDecoder
from harnesscheck.reference_server.config import DEFAULT_MODEL_IDS
from harnesscheck.reference_server.launch import ServerProcess
from harnesscheck.replay.capture import ProxyThread, capture_to_trace, load_capture
from harnesscheck.replay.replayer import ReplayOptions, replay
from harnesscheck.replay.trace import is_answer_marker, load, save
from harnesscheck.scenarios.loader import get as get_scenario

KEY = "sk-ant-test-PLANTED-0123456789abcdef"
COOKIE = "sid=COOKIEPLANTED987654"
CUSTOM = "custom-PLANTED-secret-555"
MODEL = DEFAULT_MODEL_IDS[0]


@pytest.fixture(scope="module")
def server():
    with ServerProcess(["--decode-ms", "5", "--ttft-base-ms", "0", "--prefill-us-per-token", "0",
                        "--api-key", KEY]) as srv:
        yield srv


def _stream(client: httpx.Client, url: str, body: dict, headers: dict, *, compress: bool) -> tuple[list, list]:
    """POST and decode the SSE stream; (frames, read times in s)."""
    data = json.dumps(body).encode()
    hdrs = dict(headers)
    if compress:
        data = zstandard.ZstdCompressor().compress(data)
        hdrs["content-encoding"] = "zstd"
    dec = SSEDecoder()
    frames, reads = [], []
    with client.stream("POST", url, content=data, headers={**hdrs, "content-type": "application/json"}) as resp:
        assert resp.status_code == 200, resp.read()
        for chunk in resp.iter_raw():
            reads.append(time.perf_counter())
            frames += [(f, reads[-1]) for f in dec.feed(chunk) if f.kind == "event"]
    return frames, reads


def _fold(frames: list) -> tuple[list[dict], str | None]:
    blocks: list[dict] = []
    partial: dict[int, str] = {}
    stop = None
    for f, _ in frames:
        d = f.json
        if d["type"] == "content_block_start":
            blocks.append(dict(d["content_block"]))
        elif d["type"] == "content_block_delta":
            b, delta = blocks[d["index"]], d["delta"]
            if delta["type"] == "text_delta":
                b["text"] = b.get("text", "") + delta["text"]
            elif delta["type"] == "thinking_delta":
                b["thinking"] = b.get("thinking", "") + delta["thinking"]
            elif delta["type"] == "signature_delta":
                b["signature"] = delta["signature"]
            elif delta["type"] == "input_json_delta":
                partial[d["index"]] = partial.get(d["index"], "") + delta["partial_json"]
        elif d["type"] == "content_block_stop" and d["index"] in partial:
            blocks[d["index"]]["input"] = json.loads(partial.pop(d["index"]) or "{}")
        elif d["type"] == "message_delta":
            stop = d["delta"].get("stop_reason")
    return blocks, stop


def _agent_session(base: str) -> list[list[float]]:
    """A scripted Claude-Code-like agent loop: tools, tool results, a follow-up user turn."""
    sc = get_scenario("agent_session")
    tools = [{"name": t["name"], "description": t["description"], "input_schema": t["parameters"]} for t in sc.tools]
    headers = {"x-api-key": KEY, "cookie": COOKIE, "x-custom-secret": CUSTOM, "anthropic-version": "2023-06-01",
               "anthropic-beta": "interleaved-thinking-2025-05-14", "x-claude-code-session-id": "sess-e2e-1",
               "x-app": "cli"}
    messages: list[dict] = [{"role": "user", "content": [{"type": "text", "text": sc.trigger + " My cookie is " + COOKIE}]}]
    follow_ups = [t.user for t in sc.turns[1:] if t.user]
    read_times: list[list[float]] = []
    with httpx.Client(timeout=30) as client:
        client.head(base + "/")
        client.get(base + "/v1/models", headers=headers)
        for n in range(8):
            body = {"model": MODEL, "max_tokens": 2048, "system": [{"type": "text", "text": sc.system}],
                    "tools": tools, "messages": messages, "thinking": {"type": "enabled", "budget_tokens": 1024},
                    "metadata": {"user_id": "user_abc"}, "stream": True}
            frames, reads = _stream(client, base + "/v1/messages?beta=true", body, headers, compress=(n == 0))
            read_times.append([t for _, t in frames if _.json.get("type") == "content_block_delta"])
            blocks, stop = _fold(frames)
            messages.append({"role": "assistant", "content": blocks})
            if stop == "tool_use":
                messages.append({"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": b["id"],
                     "content": sc.result_for(b["name"], json.dumps(b["input"]))}
                    for b in blocks if b["type"] == "tool_use"]})
            elif follow_ups:
                messages.append({"role": "user", "content": follow_ups.pop(0)})
            else:
                break
    return read_times


def _start_cli_proxy(upstream: str, out: Path) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "harnesscheck", "capture", "--upstream", upstream, "--listen", "0",
                             "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert proc.stdout is not None
    line = proc.stdout.readline()
    m = re.search(r"listening on (http://\S+)", line)
    assert m, line
    return proc, m.group(1)


def _model_bodies(path: Path) -> list[dict]:
    _, recs = load_capture(path)
    return [r["transcript"]["request_body"] for r in recs if r.get("api")]


def test_capture_replay_secrets(server, tmp_path: Path) -> None:
    cap = tmp_path / "cap" / "capture.jsonl"
    with ProxyThread(upstream=server.url, out=cap, redact_headers=["x-custom-secret"]) as proxy:
        read_times = _agent_session(proxy.url)
    # SSE came through the proxy as it was produced: deltas spread in time, not one burst.
    longest = max(read_times, key=len)
    assert len(longest) >= 10
    assert longest[-1] - longest[0] > 0.03, "deltas arrived all at once: the proxy buffered the stream"
    assert len({round(t, 4) for t in longest}) >= 5

    head, recs = load_capture(cap)
    assert [r["transcript"]["method"] for r in recs[:2]] == ["HEAD", "GET"]
    model_recs = [r for r in recs if r.get("api") == "anthropic"]
    assert len(model_recs) == 5
    assert model_recs[0]["request"]["encoding"] == "zstd"
    assert model_recs[0]["request"]["bytes"] > model_recs[0]["request"]["wire_bytes"] > 0
    assert model_recs[0]["transcript"]["url"] == "/v1/messages?beta=true"
    assert all(r["transcript"]["status"] == 200 for r in model_recs)
    first_body = model_recs[0]["transcript"]["request_body"]
    assert first_body["messages"][0]["content"][0]["text"].endswith("[REDACTED]")  # cookie value scrubbed

    trace = capture_to_trace(cap)
    tpath = save(trace, tmp_path / "out" / "trace.jsonl")
    trace = load(tpath)
    assert trace.meta["skipped"] == 2
    assert len(trace.sessions) == 1 and len(trace.sessions[0].turns) == 5
    s = trace.sessions[0]
    assert all(t.delta is not None and any(is_answer_marker(e) for e in t.delta["append"]) for t in s.turns[1:])
    assert s.turns[0].expect["tool_calls"] == ["bash", "bash"]
    assert s.requests() == [r["transcript"]["request_body"] for r in model_recs]  # fixed expansion is exact

    # Fixed mode through a second capture proxy (the CLI, a real process) and the CLI replayer:
    cap2 = tmp_path / "cap" / "replay-capture.jsonl"
    proc, url2 = _start_cli_proxy(server.url, cap2)
    try:
        out = subprocess.run([sys.executable, "-m", "harnesscheck", "replay", str(tpath), "--endpoint", url2,
                              "--api-key", KEY, "--time-scale", "0", "--out", str(tmp_path / "out" / "fixed"),
                              "--no-progress"], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stdout + out.stderr
    finally:
        proc.terminate()
        proc.wait(10)
    assert _model_bodies(cap2) == _model_bodies(cap), "fixed replay did not send the captured requests"
    fixed = json.loads((tmp_path / "out" / "fixed" / "results.json").read_text())
    assert fixed["summary"]["turns_ok"] == 5
    assert all(r["history"] in ("whole", "recorded") for r in fixed["turns"])
    assert fixed["turns"][0]["first_tool_ready_ms"] is not None

    live = replay(trace, ReplayOptions(endpoint=server.url, mode="live", api_key=KEY, time_scale=0, progress=False))
    live.write(tmp_path / "out" / "live")
    assert live.summary["turns_ok"] == 5, [r.get("error") for r in live.records]
    assert [r["history"] for r in live.records] == ["whole"] + ["live"] * 4
    assert live.summary["structure_mismatches"] == 0

    # No planted secret (nor its base64) in any file the kit wrote.
    needles = [KEY, CUSTOM, COOKIE, COOKIE.split("=", 1)[1]]
    needles += [base64.b64encode(n.encode()).decode() for n in needles]
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(files) >= 6
    for p in files:
        text = p.read_bytes().decode("utf-8", "replace")
        for n in needles:
            assert n not in text, f"secret {n[:12]}... found in {p}"
