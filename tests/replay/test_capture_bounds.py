"""The capture proxy's byte bounds, and the capture reader.

- a gzip bomb (a 1.8 KB `gzip, gzip` body of 1 GiB; a 10 KB gzip of 10 MiB against a 1 MiB limit)
  sent as a request body, or answered as a response body, is forwarded as it came and decoded for
  the record only up to the stated limit: the record says so (`decode_error`) and the proxy warns;
- a response larger than the record's limit is forwarded whole and recorded up to the limit, the
  record saying what it left out (`response.cut`); a request body over the proxy's limit is a 413;
- the twelve trimmed client captures shipped under tests/clients/fixtures convert into traces; a
  capture of another format version is refused naming the version; broken lines are named.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import httpx
import pytest
from aiohttp import web

from harnesscheck.cli.main import main
from harnesscheck.replay.capture import CAPTURE_SCHEMA, Limits, ProxyThread, capture_to_trace, load_capture
from harnesscheck.replay.codings import MAX_DECODED_BYTES
from tests.replay.test_proxy import Upstream

FIXTURES = Path(__file__).parents[1] / "clients" / "fixtures"


def _bomb(layers: int, size: int) -> bytes:
    data = b"\0" * size
    for _ in range(layers):
        data = gzip.compress(data, 9)
    return data


BOMBS = {"gzip, gzip": (_bomb(2, 1 << 30), MAX_DECODED_BYTES), "gzip": (_bomb(1, 10 << 20), 1 << 20)}


class BoundsUpstream(Upstream):
    """/echo (Upstream's); /bomb/<coding>: a JSON answer that is a gzip bomb; /big: 2 MB of SSE."""

    async def _bomb(self, request: web.Request) -> web.Response:
        coding = request.match_info["coding"]
        return web.Response(body=BOMBS[coding][0], headers={"content-type": "application/json",
                                                            "content-encoding": coding})

    async def _big(self, request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await resp.prepare(request)
        frame = b"data: " + json.dumps({"x": "y" * 1000}).encode() + b"\n\n"
        for _ in range(2000):
            await resp.write(frame)
        await resp.write_eof()
        return resp

    async def _body(self, request: web.Request) -> web.Response:
        """1 MiB of JSON text (plain, or gzip-coded with ?gzip)."""
        data = json.dumps({"text": "é" + "z" * (1 << 20)}).encode()
        if "gzip" in request.query:
            return web.Response(body=gzip.compress(data), headers={"content-type": "application/json",
                                                                   "content-encoding": "gzip"})
        return web.Response(body=data, headers={"content-type": "application/json"})

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/echo", self._echo)
        app.router.add_get("/bomb/{coding}", self._bomb)
        app.router.add_get("/big", self._big)
        app.router.add_get("/body", self._body)
        self.runner = web.AppRunner(app, auto_decompress=False, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"  # type: ignore[union-attr]


@pytest.fixture(scope="module")
def upstream():
    with BoundsUpstream() as up:
        yield up


@pytest.mark.parametrize("coding", list(BOMBS))
def test_a_gzip_bomb_request_is_forwarded_and_recorded_only_up_to_the_limit(upstream, tmp_path,
                                                                             coding) -> None:
    bomb, limit = BOMBS[coding]
    assert len(bomb) <= 10_240
    warned: list[str] = []
    cap = tmp_path / "c.jsonl"
    with ProxyThread(upstream=upstream.url, out=cap, limits=Limits(max_decoded_bytes=limit),
                     warn=warned.append) as proxy:
        r = httpx.post(proxy.url + "/echo", content=bomb, headers={"content-encoding": coding,
                                                                   "content-type": "application/json"})
    assert r.status_code == 200 and bytes.fromhex(r.json()["body_hex"]) == bomb  # forwarded as it came
    _, (rec,) = load_capture(cap)
    error = rec["request"]["decode_error"]
    assert f"decodes to more than {limit} bytes" in error and "--max-decoded-bytes" in error
    assert rec["transcript"]["request_body"] is None and rec["request"]["wire_bytes"] == len(bomb)
    assert len(warned) == 1 and "request" in warned[0] and str(limit) in warned[0]
    print(f"\ncapture: a {len(bomb)}-byte {coding} request bomb recorded up to the {limit}-byte limit: "
          f"{error}")


@pytest.mark.parametrize("coding", list(BOMBS))
def test_a_gzip_bomb_response_is_forwarded_and_recorded_only_up_to_the_limit(upstream, tmp_path,
                                                                              coding) -> None:
    bomb, limit = BOMBS[coding]
    warned: list[str] = []
    cap = tmp_path / "c.jsonl"
    with ProxyThread(upstream=upstream.url, out=cap, limits=Limits(max_decoded_bytes=limit),
                     warn=warned.append) as proxy:
        with httpx.Client() as client:
            with client.stream("GET", proxy.url + f"/bomb/{coding}") as r:
                raw = b"".join(r.iter_raw())
    assert r.status_code == 200 and raw == bomb  # the client gets the coded bytes, as sent
    _, (rec,) = load_capture(cap)
    assert f"decodes to more than {limit} bytes" in rec["response"]["decode_error"]
    assert len(warned) == 1 and "response" in warned[0]


def test_a_response_past_the_record_limit_is_forwarded_whole_and_recorded_up_to_it(upstream,
                                                                                    tmp_path) -> None:
    warned: list[str] = []
    cap = tmp_path / "c.jsonl"
    limit = 256 * 1024
    with ProxyThread(upstream=upstream.url, out=cap, limits=Limits(max_record_bytes=limit),
                     warn=warned.append) as proxy:
        r = httpx.get(proxy.url + "/big", timeout=60)
    assert r.status_code == 200 and r.text.count("data: ") == 2000  # forwarded whole
    _, (rec,) = load_capture(cap)
    frames = rec["transcript"]["frames"]
    kept = sum(len(f["raw"].encode("latin-1")) for f in frames)
    assert 0 < kept <= limit and len(frames) < 2000
    assert rec["response"]["cut"]["frames"] == 2000 - len(frames)
    assert "--max-record-bytes" in rec["response"]["cut"]["reason"] and len(warned) == 1


@pytest.mark.parametrize("path", ["/body", "/body?gzip", "/big"])
def test_the_record_as_a_whole_holds_at_most_its_limit(upstream, tmp_path, path) -> None:
    """Issue 43: the limit counted the body once, the record kept it twice (base64 and text), and a
    coded body decoded whole (up to --max-decoded-bytes): a record ~2.3 times its limit, or more. Now
    what the record holds of the response, as written, is within the limit."""
    cap = tmp_path / "c.jsonl"
    limit = 256 * 1024
    with ProxyThread(upstream=upstream.url, out=cap, limits=Limits(max_record_bytes=limit),
                     warn=lambda line: None) as proxy:
        r = httpx.get(proxy.url + path, timeout=60)
    assert r.status_code == 200 and len(r.content) > 4 * limit  # forwarded whole
    line = cap.read_text().splitlines()[-1]
    rec = json.loads(line)
    kept = rec["transcript"]["body"] if path != "/big" else rec["transcript"]["frames"]
    recorded = len(json.dumps(kept, ensure_ascii=False).encode())
    print(f"\ncapture {path}: {len(r.content)} bytes forwarded, the record holds {recorded} bytes of it "
          f"(limit {limit}), line {len(line.encode())} bytes")
    assert limit // 2 < recorded <= limit + 64 * 1024 and len(line.encode()) <= 2 * limit
    assert rec["response"]["cut"] and "--max-record-bytes" in rec["response"]["cut"]["reason"]


def test_a_request_body_over_the_limit_is_a_413_naming_it(upstream, tmp_path) -> None:
    warned: list[str] = []
    with ProxyThread(upstream=upstream.url, out=tmp_path / "c.jsonl", limits=Limits(max_body_bytes=1024),
                     warn=warned.append) as proxy:
        r = httpx.post(proxy.url + "/echo", content=b"x" * 4096)
    assert r.status_code == 413 and "1024 bytes" in r.json()["error"]["message"] and len(warned) == 1


# -- reading captures ------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.glob("*.capture.jsonl")))
def test_the_shipped_client_captures_convert(name, tmp_path, capsys) -> None:
    """Trimmed captures (no transcript api, frames without index) convert: the record's api and the
    frame's place stand in (they failed with `'api'` while declaring version 1)."""
    trace = capture_to_trace(FIXTURES / name)
    assert trace.turns and all(t.api in ("anthropic", "chat", "responses") for t in trace.turns)
    assert main(["trace", "from-capture", str(FIXTURES / name), "--out", str(tmp_path / "t.jsonl")]) == 0
    assert main(["trace", "check", str(tmp_path / "t.jsonl")]) == 0


def test_twelve_client_captures_ship() -> None:
    assert len(list(FIXTURES.glob("*.capture.jsonl"))) == 12


@pytest.mark.parametrize("head,lines,says", [
    ({"schema": CAPTURE_SCHEMA, "version": 2}, [], "capture format version 2; this kit reads version 1"),
    ({"schema": CAPTURE_SCHEMA}, [], "capture format version None"),
    ({"schema": "other"}, [], "not a capture file"),
    ({"schema": CAPTURE_SCHEMA, "version": 1}, ["{not json"], "line 2 is not JSON"),
    ({"schema": CAPTURE_SCHEMA, "version": 1}, ["[1, 2]"], "line 2 is not an exchange record"),
    ({"schema": CAPTURE_SCHEMA, "version": 1}, ['{"transcript": {"method": "POST"}}'], "not a transcript"),
])
def test_a_capture_it_cannot_read_is_refused_in_one_line(tmp_path, capsys, head, lines, says) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text("\n".join([json.dumps(head), *lines]) + "\n")
    assert main(["trace", "from-capture", str(path), "--out", str(tmp_path / "t.jsonl")]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and says in err[0], err


def test_the_proxy_never_buffers_more_than_asked_for_a_huge_frame(upstream, tmp_path) -> None:
    """A `data:` line that never ends: past the SSE decoder's frame limit the proxy stops recording
    the stream (forwarding goes on) and says why; the exchange is still recorded."""
    async def endless(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(b"data: ")
        for _ in range(160):  # 10 MiB, past the 8 MiB frame limit
            await resp.write(b"x" * 65536)
        await resp.write_eof()
        return resp

    class Endless(BoundsUpstream):
        async def _start(self) -> None:
            app = web.Application()
            app.router.add_get("/endless", endless)
            self.runner = web.AppRunner(app, access_log=None)
            await self.runner.setup()
            site = web.TCPSite(self.runner, "127.0.0.1", 0)
            await site.start()
            port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
            self.url = f"http://127.0.0.1:{port}"

    warned: list[str] = []
    with Endless() as up, ProxyThread(upstream=up.url, out=tmp_path / "c.jsonl", warn=warned.append) as proxy:
        r = httpx.get(proxy.url + "/endless", timeout=60)
    assert r.status_code == 200 and len(r.content) == 6 + 160 * 65536
    _, (rec,) = load_capture(tmp_path / "c.jsonl")
    assert "exceeds 8388608 bytes" in rec["response"]["cut"]["reason"] and len(warned) == 1


def test_a_request_with_a_lone_surrogate_is_recorded(upstream, tmp_path) -> None:
    """JSON may escape a lone surrogate (`"\\ud800"`); the record keeps it as that escape (writing it
    as UTF-8 failed, and the exchange went unrecorded), and the capture converts or is refused in one
    line."""
    cap = tmp_path / "c.jsonl"
    body = b'{"model": "m", "messages": [{"role": "user", "content": "x\\ud800y"}]}'
    with ProxyThread(upstream=upstream.url, out=cap) as proxy:
        r = httpx.post(proxy.url + "/echo", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 200
    _, (rec,) = load_capture(cap)
    assert rec["transcript"]["request_body"]["messages"][0]["content"] == "x\ud800y"
    assert main(["trace", "from-capture", str(cap), "--out", str(tmp_path / "t.jsonl")]) in (0, 2)
