"""The capture proxy forwards untouched: body bytes (compressed stays compressed), path and query,
headers minus hop-by-hop; streams pass chunk by chunk; records are redacted."""

from __future__ import annotations

import asyncio
import gzip
import json
import threading
import time

import httpx
import pytest
from aiohttp import web

from harnesscheck.replay.capture import ProxyThread, load_capture


class Upstream:
    """An aiohttp echo server: /echo returns what it received; /slow streams 5 frames 40 ms apart."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.url = ""

    async def _echo(self, request: web.Request) -> web.Response:
        raw = await request.read()
        return web.json_response({"method": request.method, "path_qs": request.raw_path,
                                  "headers": {k.lower(): v for k, v in request.headers.items()},
                                  "body_hex": raw.hex()}, headers={"set-cookie": "upstream=SETCOOKIESECRET1"})

    async def _slow(self, request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await resp.prepare(request)
        for i in range(5):
            await resp.write(f"data: {{\"i\": {i}}}\n\n".encode())
            await asyncio.sleep(0.04)
        await resp.write_eof()
        return resp

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/echo", self._echo)
        app.router.add_get("/slow", self._slow)
        self.runner = web.AppRunner(app, auto_decompress=False, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"  # type: ignore[union-attr]

    def __enter__(self) -> Upstream:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(10)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)


@pytest.fixture(scope="module")
def upstream():
    with Upstream() as up:
        yield up


def test_forwards_untouched_and_records_redacted(upstream, tmp_path) -> None:
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "key is sk-BODYSECRET-123456"}]}).encode()
    wire = gzip.compress(body)
    cap = tmp_path / "c.jsonl"
    with ProxyThread(upstream=upstream.url, out=cap, redact_headers=["x-mine"]) as proxy:
        r = httpx.post(proxy.url + "/echo?beta=true&x=1", content=wire, headers={
            "content-encoding": "gzip", "content-type": "application/json", "authorization": "Bearer sk-BODYSECRET-123456",
            "x-mine": "MINESECRET99", "connection": "keep-alive, x-drop", "x-drop": "1", "te": "trailers",
            "x-keep": "yes"})
    got = r.json()
    assert bytes.fromhex(got["body_hex"]) == wire  # compressed bytes forwarded as received
    assert got["path_qs"] == "/echo?beta=true&x=1"
    h = got["headers"]
    assert h["content-encoding"] == "gzip" and h["x-keep"] == "yes" and h["x-mine"] == "MINESECRET99"
    assert h["authorization"] == "Bearer sk-BODYSECRET-123456"
    assert "te" not in h and "x-drop" not in h
    assert r.headers["set-cookie"] == "upstream=SETCOOKIESECRET1"  # the client still gets it
    text = cap.read_text()
    for secret in ("sk-BODYSECRET-123456", "MINESECRET99", "SETCOOKIESECRET1"):
        assert secret not in text
    _, recs = load_capture(cap)
    t = recs[0]["transcript"]
    assert recs[0]["request"] == {"wire_bytes": len(wire), "encoding": "gzip", "bytes": len(body)}
    assert t["request_body"]["messages"][0]["content"] == "key is [REDACTED]"
    rh = {k.lower(): v for k, v in t["request_headers"].items()}
    assert rh["authorization"] == "Bearer [REDACTED]"
    assert rh["x-mine"] == "[REDACTED]"
    assert {k.lower(): v for k, v in t["response_headers"].items()}["set-cookie"] == "[REDACTED]"


def test_streams_chunk_by_chunk(upstream, tmp_path) -> None:
    cap = tmp_path / "s.jsonl"
    with ProxyThread(upstream=upstream.url, out=cap) as proxy:
        arrivals = []
        t0 = time.perf_counter()
        with httpx.stream("GET", proxy.url + "/slow") as r:
            for _ in r.iter_raw():
                arrivals.append(time.perf_counter() - t0)
    assert len(arrivals) >= 4
    assert arrivals[-1] - arrivals[0] > 0.12  # 5 frames 40 ms apart arrived spread, not at the end
    _, recs = load_capture(cap)
    frames = recs[0]["transcript"]["frames"]
    assert [json.loads(f["data"])["i"] for f in frames] == [0, 1, 2, 3, 4]
    assert frames[-1]["t_ns"] - frames[0]["t_ns"] > 120e6
