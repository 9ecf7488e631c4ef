"""Load: the reference server holds 256 concurrent streams (`--max-concurrency 512 --decode-ms 5`)
with no dropped or mixed-up stream, keeps its memory flat over a bounded soak, and a
benchmark-style figure of streams/s and server CPU per streamed token.

Mix-ups are detectable: each request carries its own nonce in backticks ("use the calculator tool
with `n0042-...`"), which the scripted model's default director copies into the tool call's
`expression` argument (reference_server/director.py `example_arguments`); every stream must come
back with its own nonce, and nobody else's. The client is replay.client.StreamClient (aiohttp).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest

from harnesscheck.reference_server.launch import ServerProcess
from harnesscheck.replay.client import StreamClient, StreamResult, run_async

STREAMS = 256
ROUNDS = 4  # soak: ROUNDS x STREAMS streams, each round with fresh nonces (new prompts, new cache blocks)
RSS_GROWTH_LIMIT_MB = 64
NEMOTRON = "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4"
CALC = {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}
APIS = ("anthropic", "chat", "responses")
PATHS = {"anthropic": "/v1/messages", "chat": "/v1/chat/completions", "responses": "/v1/responses"}


def body(api: str, nonce: str) -> dict[str, Any]:
    text = f"use the calculator tool with `{nonce}`"
    if api == "anthropic":
        return {"model": NEMOTRON, "max_tokens": 512, "stream": True, "tools": [{"name": "calculator", "input_schema": CALC}],
                "messages": [{"role": "user", "content": text}]}
    if api == "chat":
        return {"model": NEMOTRON, "stream": True, "stream_options": {"include_usage": True},
                "tools": [{"type": "function", "function": {"name": "calculator", "parameters": CALC}}],
                "messages": [{"role": "user", "content": text}]}
    return {"model": NEMOTRON, "stream": True, "input": text,
            "tools": [{"type": "function", "name": "calculator", "parameters": CALC}]}


def expression_of(api: str, r: StreamResult) -> str | None:
    import json

    for message in r.answer or []:
        if api == "anthropic":
            for block in message.get("content") or []:
                if block.get("type") == "tool_use":
                    return block["input"].get("expression")
        elif api == "chat":
            for call in message.get("tool_calls") or []:
                return json.loads(call["function"]["arguments"]).get("expression")
        elif message.get("type") == "function_call":
            return json.loads(message["arguments"]).get("expression")
    return None


def output_tokens(r: StreamResult) -> int:
    u = r.usage or {}
    return int(u.get("output_tokens") or u.get("completion_tokens") or 0)


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    with ServerProcess(["--max-concurrency", "512", "--decode-ms", "5", "--ttft-base-ms", "0",
                        "--prefill-us-per-token", "0"]) as proc:
        yield proc


async def one_round(url: str, client: StreamClient, round_no: int) -> tuple[list[tuple[str, str, StreamResult]], int]:
    """STREAMS streams at once; returns them and the most the server had in flight at one time."""
    peak = 0
    done = asyncio.Event()

    async def poll() -> None:
        nonlocal peak
        async with aiohttp.ClientSession() as s:
            while not done.is_set():
                try:
                    async with s.get(url + "/health") as r:
                        peak = max(peak, (await r.json())["active_requests"])
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(0.02)

    async def go(i: int) -> tuple[str, str, StreamResult]:
        api = APIS[i % 3]
        nonce = f"n{round_no}-{i:04d}-{os.urandom(4).hex()}"
        return api, nonce, await client.post(url + PATHS[api], body(api, nonce), api=api)

    poller = asyncio.create_task(poll())
    results = await asyncio.gather(*(go(i) for i in range(STREAMS)))
    done.set()
    await poller
    return list(results), peak


def check_round(results: list[tuple[str, str, StreamResult]]) -> int:
    ids = set()
    for api, nonce, r in results:
        assert r.ok and r.finished, (api, nonce, r.status, r.error_kind, r.error, (r.body or b"")[:200])
        assert expression_of(api, r) == nonce, (api, nonce, r.answer)  # its own nonce: no mix-up
        ids.add(repr(r.answer))
    assert len(ids) == len(results)  # no two streams got the same answer
    return sum(output_tokens(r) for _, _, r in results)


def test_256_concurrent_streams_and_soak(server: ServerProcess) -> None:
    assert server.proc is not None
    pid = server.proc.pid
    figures: dict[str, Any] = {}

    async def main() -> None:
        async with StreamClient(timeout=120, read_timeout=60) as client:
            rss0 = rss_mb(pid)
            results, peak = await one_round(server.url, client, 0)
            tokens = check_round(results)
            figures.update(rss_start=rss0, rss_after_first=rss_mb(pid), peak=peak)
            cpu0, t0, streamed = cpu_seconds(pid), time.perf_counter(), 0
            peaks = [peak]
            for n in range(1, ROUNDS):
                results, peak = await one_round(server.url, client, n)
                streamed += check_round(results)
                peaks.append(peak)
            wall = time.perf_counter() - t0
            figures.update(rss_end=rss_mb(pid), wall=wall, cpu=cpu_seconds(pid) - cpu0, tokens=streamed,
                           first_tokens=tokens, peaks=peaks)

    run_async(main())
    f = figures
    streams = STREAMS * (ROUNDS - 1)
    print(f"\nload: {STREAMS} concurrent streams x {ROUNDS} rounds, all {STREAMS * ROUNDS} checked (own nonce, "
          f"finished); server in flight at once (peak per round): {f['peaks']}")
    print(f"load: server RSS {f['rss_start']:.1f} MB at start, {f['rss_after_first']:.1f} MB after round 1, "
          f"{f['rss_end']:.1f} MB after round {ROUNDS}")
    print(f"bench: {streams / f['wall']:.1f} streams/s over rounds 2-{ROUNDS} ({streams} streams, {f['wall']:.2f} s, "
          f"{f['tokens']} output tokens); server CPU {f['cpu']:.2f} s = {1e6 * f['cpu'] / max(f['tokens'], 1):.0f} us "
          f"per streamed token (decode interval 5 ms, 2 shared cores)")
    # Held: the server had every stream of a round in flight at one time.
    assert max(f["peaks"]) >= STREAMS, f["peaks"]
    assert f["rss_end"] - f["rss_after_first"] < RSS_GROWTH_LIMIT_MB, f
    health = __import__("httpx").get(server.url + "/health", timeout=10).json()
    assert health["active_requests"] == 0 and health["cache"]["pinned_blocks"] == 0, health
