"""Rendering and tokenizing run off the event loop (reference_server.service.CpuPool).

A large count_tokens request must not stop a concurrent stream (it froze one for the whole count,
2.39 s for 1.7 MB, when tokenizing ran on the loop); the pool bounds its jobs and keeps a worker
for small ones; the GIL-releasing encode gives the library's own `encode` ids; /tokenize's
sliced JSON is what JSONResponse writes. Real server processes over loopback and real threads.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
import time

import httpx
import pytest
from starlette.responses import JSONResponse

from harnesscheck.protocol import apis
from harnesscheck.reference_server.frontends.http import json_bytes
from harnesscheck.reference_server.launch import ServerProcess
from harnesscheck.reference_server.service import LARGE_NICE, CpuPool, encode_text
from harnesscheck.reference_server.tokenizer import load
from harnesscheck.replay.benchmarks.mixed import large_text
from harnesscheck.scenarios.loader import get

MODEL = "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4"
HEADERS = {"anthropic-version": "2023-06-01"}


@pytest.fixture(scope="module")
def slow_stream_server():
    """Tokens every 20 ms, so a stream outlasts a multi-megabyte count_tokens."""
    with ServerProcess(["--decode-ms", "20", "--ttft-base-ms", "0", "--prefill-us-per-token", "0"]) as server:
        yield server.url


async def _stream_during_count(url: str, large: bytes) -> tuple[list[float], float, float, int, dict]:
    """Stream one chat turn; after its first frame, POST the large count_tokens. Returns the
    stream's frame times, the count's send and answer times, its status and body."""
    frames: list[float] = []
    counted = asyncio.Event()
    out: dict = {}
    body = {**apis.chat.first(get("long_reasoning"), MODEL), "stream": True}
    async with httpx.AsyncClient(timeout=120) as client:
        async def stream() -> None:
            async with client.stream("POST", url + "/v1/chat/completions", json=body) as r:
                assert r.status_code == 200
                async for line in r.aiter_lines():
                    if line.startswith("data:"):
                        frames.append(time.perf_counter())
                        if len(frames) == 1:
                            started.set()
                    if counted.is_set() and time.perf_counter() > out["done"] + 0.3:
                        break

        async def count() -> None:
            await started.wait()
            out["sent"] = time.perf_counter()
            r = await client.post(url + "/v1/messages/count_tokens", content=large,
                                  headers={**HEADERS, "content-type": "application/json"})
            out["done"] = time.perf_counter()
            out["status"], out["body"] = r.status_code, r.json()
            counted.set()

        started = asyncio.Event()
        await asyncio.gather(stream(), count())
    return frames, out["sent"], out["done"], out["status"], out["body"]


def test_large_count_tokens_does_not_stall_a_concurrent_stream(slow_stream_server: str) -> None:
    text = large_text(3 * 1024 * 1024)
    large = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": text}]}).encode()
    frames, sent, done, status, answer = asyncio.run(_stream_during_count(slow_stream_server, large))
    assert status == 200 and answer["input_tokens"] > len(text) // 8, answer
    took = done - sent
    assert took > 0.3, f"a 3 MB count took {took:.3f} s: too fast for this test to tell a stall from none"
    around = [t for t in frames if sent - 0.1 <= t <= done + 0.3]
    assert len(around) >= 5, f"the stream sent {len(around)} frames while the count ran ({took:.2f} s)"
    worst = max(b - a for a, b in zip(around, around[1:]))
    # On the loop, the stream stops for the whole count (worst gap ~ took); off it, ~20 ms plus noise.
    assert worst < 0.5 * took, f"worst inter-frame gap {worst:.3f} s during a {took:.2f} s count_tokens"


def test_tokenize_chat_form_gives_the_library_encode_ids(reference_server: str) -> None:
    text = "Ünïcode ✓ <think>kept</think>\n\n  spaced\ttabs " + large_text(200_000, seed=3)
    r = httpx.post(reference_server + "/tokenize", timeout=60,
                   json={"model": MODEL, "messages": [{"role": "user", "content": text}], "return_text": True})
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    got = r.json()
    expected = load().encode(got["text"])  # the library's plain encode, not the server's batch call
    assert len(expected) > 20_000  # several of the answer's JSON slices
    assert got["tokens"] == expected and got["count"] == len(expected)
    assert text in got["text"]


def test_count_tokens_agrees_with_tokenize(reference_server: str) -> None:
    text = large_text(300_000, seed=4)
    messages = [{"role": "user", "content": text}]
    counted = httpx.post(reference_server + "/v1/messages/count_tokens", headers=HEADERS, timeout=60,
                         json={"model": MODEL, "messages": messages}).json()["input_tokens"]
    tokenized = httpx.post(reference_server + "/tokenize", timeout=60,
                           json={"model": MODEL, "system": [], "messages": messages, "return_text": True}).json()
    assert counted == tokenized["count"] == len(load().encode(tokenized["text"]))


def test_health_shows_the_pool(reference_server: str) -> None:
    pool = httpx.get(reference_server + "/health", timeout=10).json()["cpu_pool"]
    assert pool["workers"] >= 2 and pool["large_slots"] == pool["workers"] - 1
    assert pool["running"] == 0 and pool["waiting"] == 0


def test_encode_text_same_ids_as_encode() -> None:
    tok = load()
    for text in ("", "a", "<|im_start|>user\nhi<|im_end|>\n", "  lead\n\n\ttrail  ", "日本語 🙂 e\u0301",
                 large_text(50_000, seed=5)):
        assert encode_text(tok, text).ids == tok.encode(text), text[:40]
    assert len(encode_text(tok, "x y z")) == len(tok.encode("x y z"))


def test_json_bytes_is_what_jsonresponse_writes() -> None:
    content = {"count": 20001, "tokens": list(range(20001)), "token_strs": ["ü", "\"", "\n"] * 3000,
               "text": "ünï \u2028 \\ \"q\"", "nested": {"a": [1.5, None, True]}, "short": [1, 2]}
    assert json_bytes(content) == JSONResponse(content).body


class _Jobs:
    """Blocking jobs on real threads that record how many ran at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = self.most = self.most_large = self.large_now = 0
        self.started: dict[str, float] = {}

    def job(self, name: str, seconds: float, large: bool) -> str:
        with self.lock:
            self.started[name] = time.perf_counter()
            self.now += 1
            self.large_now += large
            self.most = max(self.most, self.now)
            self.most_large = max(self.most_large, self.large_now)
        time.sleep(seconds)  # releases the GIL, as the tokenizer does
        with self.lock:
            self.now -= 1
            self.large_now -= large
        return name


def test_pool_bounds_jobs_and_keeps_a_worker_for_small_ones() -> None:
    async def main() -> None:
        pool, jobs = CpuPool(2), _Jobs()
        large = [asyncio.ensure_future(pool.run(jobs.job, f"L{i}", 0.3, True, large=True)) for i in range(3)]
        await asyncio.sleep(0.1)
        assert pool.stats() == {"workers": 2, "large_slots": 1, "running": 1, "waiting": 2}
        submitted = time.perf_counter()
        small = await pool.run(jobs.job, "S", 0.0, False)
        assert small == "S" and jobs.started["S"] - submitted < 0.15  # not behind the large ones
        assert [await f for f in large] == ["L0", "L1", "L2"]
        assert jobs.most_large == 1 and jobs.most <= 2
        burst = await asyncio.gather(*(pool.run(jobs.job, f"B{i}", 0.05, False) for i in range(8)))
        assert burst == [f"B{i}" for i in range(8)] and jobs.most == 2
        assert pool.stats()["running"] == 0 and pool.stats()["waiting"] == 0
        pool.close()

    asyncio.run(main())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice values are Linux's")
def test_large_jobs_run_at_a_lower_os_priority() -> None:
    def nice() -> int:
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    async def main() -> tuple[int, int]:
        pool = CpuPool(2)
        try:
            return await pool.run(nice), await pool.run(nice, large=True)
        finally:
            pool.close()

    small, large = asyncio.run(main())
    assert small == os.getpriority(os.PRIO_PROCESS, 0) and large == min(19, small + LARGE_NICE)


def test_pool_frees_slots_on_errors_and_cancelled_waits() -> None:
    def boom() -> None:
        raise ValueError("from the worker")

    async def main() -> None:
        pool, jobs = CpuPool(2), _Jobs()
        with pytest.raises(ValueError, match="from the worker"):
            await pool.run(boom)
        busy = [asyncio.ensure_future(pool.run(jobs.job, f"J{i}", 0.2, False)) for i in range(2)]
        await asyncio.sleep(0.05)
        waiter = asyncio.ensure_future(pool.run(jobs.job, "never", 0.0, False))
        await asyncio.sleep(0.05)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        await asyncio.gather(*busy)
        assert "never" not in jobs.started
        assert pool.stats()["running"] == 0 and pool.stats()["waiting"] == 0
        again = await asyncio.gather(*(pool.run(jobs.job, f"K{i}", 0.1, False) for i in range(2)))
        assert again == ["K0", "K1"] and jobs.most == 2  # both slots came back
        pool.close()

    asyncio.run(main())
