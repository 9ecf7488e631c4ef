"""`bench server`: what counts as a valid stream (``response.incomplete`` is; a cut or empty stream
is not), tokens from the streamed text, windows tainted by a failed or empty stream left out of
numerator and denominator, and one small run against the reference server."""

from __future__ import annotations

import asyncio
import json
import os
import threading

import pytest

from harnesscheck.replay.benchmarks import server_cost as sc
from harnesscheck.replay.client import StreamClient, run_async


def _sse(*events: tuple[str | None, dict | str]) -> bytes:
    out = b""
    for name, data in events:
        text = data if isinstance(data, str) else json.dumps(data)
        out += (f"event: {name}\n" if name else "").encode() + f"data: {text}\n\n".encode()
    return out


def _chat(*contents: str) -> bytes:
    chunks = [(None, {"choices": [{"index": 0, "delta": {"content": c}}]}) for c in contents]
    return _sse(*chunks, (None, {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}), (None, "[DONE]"))


_INCOMPLETE = _sse(("response.created", {"type": "response.created", "response": {"status": "in_progress"}}),
                   *[("response.output_text.delta", {"type": "response.output_text.delta", "output_index": 0,
                                                     "delta": w}) for w in ("alpha ", "beta ", "gamma")],
                   ("response.incomplete", {"type": "response.incomplete", "response": {
                       "status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"},
                       "usage": {"output_tokens": 3},
                       "output": [{"type": "message", "content": [{"type": "output_text",
                                                                   "text": "alpha beta gamma"}]}]}}))


class _Canned:
    """A loopback HTTP/1.1 server (its own thread and loop) streaming the SSE body the request's
    ``mode`` names: ok, cut (the connection drops mid-stream), empty; /v1/responses: incomplete."""

    def __init__(self) -> None:
        self.url = ""
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        threading.Thread(target=self._run, daemon=True).start()
        self._ready.wait(10)

    def _run(self) -> None:
        self._loop = asyncio.new_event_loop()
        server = self._loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        self._ready.set()
        self._loop.run_forever()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
                path = head[0].split(" ")[1]
                n = next(int(x.split(":")[1]) for x in head if x.lower().startswith("content-length"))
                mode = json.loads(await reader.readexactly(n)).get("mode", "ok")
                body = _INCOMPLETE if path == "/v1/responses" else {
                    "ok": _chat("one ", "two ", "three"), "empty": _chat(), "cut": _chat("one ", "two ")[:60]}[mode]
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n")
                if mode == "cut":
                    writer.write(b"content-length: 1000\r\n\r\n" + body)
                    await writer.drain()
                    writer.close()
                    return
                writer.write(b"content-length: %d\r\n\r\n%s" % (len(body), body))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    def close(self) -> None:
        assert self._loop is not None
        self._loop.call_soon_threadsafe(self._loop.stop)


@pytest.fixture(scope="module")
def canned():
    server = _Canned()
    yield server
    server.close()


def _words(text: str) -> int:
    return len(text.split())


def _post_all(url: str, requests: list[tuple[str, str, dict]]) -> list:
    async def go():
        async with StreamClient() as client:
            return [await client.post(url + path, body, api=api) for api, path, body in requests]

    return run_async(go())


def test_response_incomplete_is_a_valid_end_and_cut_or_empty_streams_are_not(canned):
    inc, ok, cut, empty = _post_all(canned.url, [
        ("responses", "/v1/responses", {}), ("chat", "/v1/chat/completions", {"mode": "ok"}),
        ("chat", "/v1/chat/completions", {"mode": "cut"}), ("chat", "/v1/chat/completions", {"mode": "empty"})])
    s = sc.to_stream(inc, _words)
    assert s.error is None and not s.empty and len(s.frame_ns) == 3 and s.tokens == 3 and s.usage_tokens == 3
    s = sc.to_stream(ok, _words)
    assert s.error is None and s.tokens == 3  # from the streamed text, not usage (there is none)
    s = sc.to_stream(cut, _words)
    assert s.error is not None and s.tokens == 0
    s = sc.to_stream(empty, _words)
    assert s.error is None and s.empty


def _stream(start: int, end: int, frames: list[int], tokens: int, error: str | None = None) -> sc.Stream:
    return sc.Stream("chat", "x", 1, start, end, frames, tokens, None, error)


def test_windows_spread_tokens_by_frame_arrival_and_drop_tainted_windows():
    w1 = sc.Window("x", 1, 0, 100, server_cpu_s=1.0, client_cpu_s=0.1)
    w2 = sc.Window("x", 1, 100, 200, server_cpu_s=3.0, client_cpu_s=0.1)
    streams = [_stream(10, 190, [20, 40, 120, 180], 100),  # half its frames in each window
               _stream(150, 170, [], 0, "transport: reset"),  # fails inside w2
               _stream(20, 60, [30], 10)]
    sc.account([w1, w2], streams)
    assert (w1.tokens, w1.frames, w1.tainted_by) == (60.0, 3, [])
    assert w2.tainted_by == ["transport: reset"] and w2.streams == 2
    row = sc._row("x", 1, [w1, w2], streams)
    # only w1 counts: 60 tokens over its 1.0 CPU-s (w2's CPU and tokens are both left out)
    assert row["windows_used"] == 1 and row["tokens"] == 60 and row["server_cpu_s"] == 1.0
    assert row["tokens_per_server_cpu_s"] == 60.0 and row["failed_streams"] == 1
    empty = _stream(5, 50, [], 0)
    w3 = sc.Window("x", 1, 0, 100, server_cpu_s=1.0, client_cpu_s=0.0)
    sc.account([w3], [empty])
    assert w3.tainted_by == ["empty stream"]


def test_a_failing_stream_takes_its_windows_out_of_a_live_level(canned):
    from harnesscheck.reference_server.tokenizer import load

    opts = sc.ServerCostOptions(windows=2, window_s=0.4, warmup_s=0.1)
    count = load().count
    ok = [("chat", {"mode": "ok"})]

    async def level(bodies):
        async with StreamClient() as client:
            return await sc._level(client, "canned", canned.url, bodies, 2, [os.getpid()], opts, {}, count)

    windows, streams = run_async(level(ok))
    row = sc._row("canned", 2, windows, streams)
    assert row["windows_used"] == 2 and row["tokens"] > 0 and row["failed_streams"] == 0, row
    windows, streams = run_async(level(ok + [("chat", {"mode": "cut"})]))
    row = sc._row("canned", 2, windows, streams)
    assert row["windows_used"] == 0 and row["failed_streams"] > 0 and row["tokens"] == 0, row
    assert "no usable window" in sc._row_text(row)


def test_a_small_run_against_the_reference_server(tmp_path):
    from harnesscheck.replay.benchmarks.common import write_outputs

    doc = sc.run_server_cost(sc.ServerCostOptions(concurrency=[1, 2], windows=2, window_s=1.5, warmup_s=0.5,
                                                  scenarios=["long_reasoning"]))
    write_outputs(doc, tmp_path, "bench-server")  # validates the document
    bench = next(b for b in doc["benchmarks"] if b["name"] == "server-cpu-per-token")
    assert bench["timing"] == "real-compute" and bench["unit"] == "µs"
    assert [a["name"] for a in bench["arms"]] == ["c=1", "c=2"]
    for row in bench["settings"]["rows"]:
        assert row["side"] == "reference" and row["failed_streams"] == 0 and row["empty_streams"] == 0, row
        assert row["tokens"] > 500 and row["server_cpu_s"] > 0 and 1 < row["server_cpu_us_per_token"] < 5000, row
        # tokens come from the streamed text; usage (the server's own count) agrees within 10%
        assert abs(row["median_tokens_per_stream"] / row["median_usage_tokens_per_stream"] - 1) < 0.1, row
    summary = "\n".join(bench["settings"]["summary"])
    assert "reference figure, not measured now" in summary and "dynamo " not in summary
