"""replay.http1 against real sockets on loopback: a small asyncio server that answers each request
with bytes the test writes by hand, so every framing, coding and failure is the exact one named."""

from __future__ import annotations

import asyncio
import gzip
import zlib
from collections.abc import Awaitable, Callable

import pytest
import zstandard

from harnesscheck.replay.client import StreamClient
from harnesscheck.replay.http1 import (MAX_DECODED_BYTES, BodyError, ConnectError, Pool, ReadTimeout,
                                       Response, TransportError)

Answer = Callable[[asyncio.StreamReader, asyncio.StreamWriter, int], Awaitable[bool]]  # -> keep the connection


class Server:
    """Counts connections and requests; ``answer`` writes the reply to request n (0-based)."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.connections = 0
        self.requests: list[bytes] = []
        self.open = 0
        self.most_open = 0

    async def __aenter__(self) -> str:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    async def __aexit__(self, *exc: object) -> None:
        self._server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.open += 1
        self.most_open = max(self.most_open, self.open)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                body = await reader.readexactly(length)
                self.requests.append(head + body)
                await writer.drain()
                if not await self.answer(reader, writer, len(self.requests) - 1):
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self.open -= 1
            writer.close()


def _reply(status: str, headers: dict[str, str], body: bytes) -> bytes:
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    return f"HTTP/1.1 {status}\r\n{head}\r\n".encode() + body


def fixed(body: bytes, status: str = "200 OK", **headers: str) -> Answer:
    async def answer(_r, w, _n) -> bool:
        w.write(_reply(status, {"content-length": str(len(body)), **headers}, body))
        return True
    return answer


async def _get(pool: Pool, url: str, **kw) -> tuple[Response, bytes]:
    got: list[Response] = []
    parts: list[bytes] = []
    await pool.request("POST", url + "/x", {"content-type": "application/json"}, b"{}",
                       on_headers=lambda r, t: got.append(r), on_body=lambda b, t: parts.append(b), **kw)
    return got[0], b"".join(parts)


def run(coro):
    return asyncio.run(coro)


def test_keep_alive_connection_is_reused_and_the_request_is_well_formed() -> None:
    async def go():
        server = Server(fixed(b"hello"))
        async with server as url, Pool() as pool:
            for _ in range(3):
                resp, body = await _get(pool, url)
                assert (resp.status, body) == (200, b"hello")
        return server
    server = run(go())
    assert server.connections == 1 and len(server.requests) == 3
    head = server.requests[0].decode()
    assert head.startswith("POST /x HTTP/1.1\r\n")
    assert "host: 127.0.0.1:" in head and "content-length: 2\r\n" in head and head.endswith("\r\n\r\n{}")


@pytest.mark.parametrize("framing", ["chunked", "close"])
def test_chunked_and_close_delimited_bodies(framing: str) -> None:
    async def answer(_r, w, _n) -> bool:
        if framing == "chunked":
            w.write(_reply("200 OK", {"transfer-encoding": "chunked"}, b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"))
            return True
        w.write(_reply("200 OK", {"connection": "close"}, b"abcde"))
        await w.drain()
        return False

    async def go():
        server = Server(answer)
        async with server as url, Pool() as pool:
            a = await _get(pool, url)
            b = await _get(pool, url)
        return server, a, b
    server, (ra, a), (_, b) = run(go())
    assert ra.status == 200 and a == b == b"abcde"
    assert server.connections == (1 if framing == "chunked" else 2)


@pytest.mark.parametrize("coding", ["gzip", "deflate", "deflate-raw", "zstd"])
def test_content_codings_are_decoded(coding: str) -> None:
    text = b'{"error": {"message": "no"}}' * 50
    if coding == "gzip":
        data = gzip.compress(text)
    elif coding == "deflate":
        data = zlib.compress(text)
    elif coding == "deflate-raw":
        c = zlib.compressobj(wbits=-zlib.MAX_WBITS)
        data = c.compress(text) + c.flush()
    else:
        data = zstandard.ZstdCompressor().compress(text)

    async def go():
        async with Server(fixed(data, "400 Bad Request", **{"content-encoding": coding.split("-")[0]})) as url, \
                Pool() as pool:
            return await _get(pool, url)
    resp, body = run(go())
    assert resp.status == 400 and body == text


def test_a_kept_connection_the_server_closed_is_retried_once_on_a_new_one() -> None:
    async def answer(_r, w, n) -> bool:
        if n == 1:
            return False  # the keep-alive race: the request arrived as the server closed the connection
        w.write(_reply("200 OK", {"content-length": "2"}, b"ok"))
        return True

    async def go():
        server = Server(answer)
        async with server as url, Pool() as pool:
            first = await _get(pool, url)
            second = await _get(pool, url)
        return server, first, second
    server, first, second = run(go())
    assert first[1] == second[1] == b"ok"
    assert server.connections == 2 and len(server.requests) == 3


def test_a_close_mid_answer_is_a_transport_error_not_a_retry() -> None:
    async def answer(_r, w, _n) -> bool:
        w.write(_reply("200 OK", {"content-length": "100"}, b"partial"))
        await w.drain()
        return False

    async def go():
        server = Server(answer)
        async with server as url, Pool() as pool:
            with pytest.raises(TransportError, match="after the response began"):
                await _get(pool, url)
        return server
    assert len(run(go()).requests) == 1


def test_read_deadline_and_refused_connection() -> None:
    async def silent(_r, w, _n) -> bool:
        w.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
        await asyncio.sleep(1.0)
        return False

    async def go():
        async with Server(silent) as url, Pool() as pool:
            with pytest.raises(ReadTimeout, match="no data for 0.2 s"):
                await _get(pool, url, read_timeout=0.2)
        with pytest.raises(ConnectError, match="cannot connect"):
            async with Pool() as pool:
                await _get(pool, "http://127.0.0.1:9")
    run(go())


def test_interim_answers_are_skipped_and_header_injection_refused() -> None:
    async def answer(_r, w, _n) -> bool:
        w.write(b"HTTP/1.1 100 Continue\r\n\r\n" + _reply("200 OK", {"content-length": "1"}, b"x"))
        return True

    async def go():
        async with Server(answer) as url, Pool() as pool:
            resp, body = await _get(pool, url)
            assert (resp.status, body) == (200, b"x")
            with pytest.raises(ValueError, match="line break"):
                await pool.request("POST", url, {"x-a": "1\r\nx-b: 2"}, b"", on_headers=lambda r, t: None,
                                   on_body=lambda b, t: None)
    run(go())


def test_limit_caps_open_connections() -> None:
    async def slow(_r, w, _n) -> bool:
        await asyncio.sleep(0.05)
        w.write(_reply("200 OK", {"content-length": "1"}, b"x"))
        return True

    async def go():
        server = Server(slow)
        async with server as url, Pool(limit=2) as pool:
            await asyncio.gather(*(_get(pool, url) for _ in range(8)))
        return server
    server = run(go())
    assert server.most_open == 2 and len(server.requests) == 8


def test_stream_client_folds_an_sse_answer_and_reports_errors_by_kind() -> None:
    sse = (b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,'
           b'"delta":{"role":"assistant","content":"hi"},"finish_reason":null}]}\n\n'
           b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,'
           b'"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n')

    async def answer(_r, w, n) -> bool:
        if n == 0:
            w.write(_reply("200 OK", {"content-type": "text/event-stream", "transfer-encoding": "chunked"},
                           f"{len(sse):x}\r\n".encode() + sse + b"\r\n0\r\n\r\n"))
        elif n == 1:
            w.write(_reply("401 Unauthorized", {"content-type": "application/json", "content-length": "14"},
                           b'{"error":"no"}'))
        else:
            w.write(_reply("200 OK", {"content-type": "application/json", "content-length": "2"}, b"{}"))
        return True

    async def go():
        async with Server(answer) as url, StreamClient() as client:
            ok = await client.post(url + "/v1/chat/completions", {}, api="chat")
            denied = await client.post(url + "/v1/chat/completions", {}, api="chat")
            plain = await client.post(url + "/v1/chat/completions", {}, api="chat")
        async with StreamClient() as client:
            refused = await client.post("http://127.0.0.1:9/v1/chat/completions", {}, api="chat")
        return ok, denied, plain, refused
    ok, denied, plain, refused = run(go())
    assert ok.error is None and ok.finished and ok.stop_reason == "stop" and len(ok.token_ns) == 1
    assert ok.answer == [{"role": "assistant", "content": "hi"}]
    assert 0 < ok.headers_ns <= ok.ttft_ns <= ok.end_ns
    assert (denied.status, denied.error_kind, denied.body) == (401, "status", b'{"error":"no"}')
    assert plain.error_kind == "content_type" and "application/json" in plain.error
    assert refused.error_kind == "connect" and refused.status is None


# -- byte bounds ---------------------------------------------------------------------------------

def _bomb(layers: int, size: int) -> bytes:
    data = b"\0" * size
    for _ in range(layers):
        data = gzip.compress(data, 9)
    return data


@pytest.mark.parametrize("layers,size,limit", [(2, 1 << 30, MAX_DECODED_BYTES), (1, 10 << 20, 1 << 20)],
                         ids=["gzip,gzip of 1 GiB at the default limit", "gzip of 10 MiB at a 1 MiB limit"])
def test_a_gzip_bomb_stops_at_the_stated_limit(layers: int, size: int, limit: int) -> None:
    """A body of at most 10 KB on the wire that decodes to 10 MiB or 1 GiB of zeros: the transport
    decodes it in bounded steps and stops once the decoded bytes pass the limit, with an error that
    names it; the stream client reports it as the request's error (kind "body")."""
    bomb = _bomb(layers, size)
    assert len(bomb) <= 10_240
    coding = ", ".join(["gzip"] * layers)
    sse = {"content-type": "text/event-stream", "content-encoding": coding}

    async def go():
        async with Server(fixed(bomb, **sse)) as url, Pool(max_body_bytes=limit) as pool:
            with pytest.raises(BodyError, match=f"decodes to more than {limit} bytes"):
                await _get(pool, url)
        async with Server(fixed(bomb, **sse)) as url, StreamClient(max_body_bytes=limit) as client:
            return await client.post(url + "/v1/chat/completions", {}, api="chat")
    r = run(go())
    assert r.error_kind == "body" and f"more than {limit} bytes" in (r.error or "")
    print(f"\nhttp1: a {len(bomb)}-byte {coding} bomb ({size >> 20} MiB of zeros) stopped at the "
          f"{limit}-byte limit")


@pytest.mark.parametrize("coding", ["gzip", "zstd"])
def test_a_truncated_coded_body_is_refused(coding: str) -> None:
    text = b'{"error": {"message": "no"}}' * 50
    data = gzip.compress(text) if coding == "gzip" else zstandard.ZstdCompressor().compress(text)

    async def go():
        async with Server(fixed(data[:-6], **{"content-encoding": coding})) as url, Pool() as pool:
            with pytest.raises(BodyError, match="truncated"):
                await _get(pool, url)
    run(go())


def test_limit_counts_idle_connections_to_other_hosts() -> None:
    """Pool(limit=2): connections kept idle for one server count; a request to another closes one."""
    async def go():
        a, b = Server(fixed(b"a")), Server(fixed(b"b"))
        async with a as url_a, b as url_b, Pool(limit=2) as pool:
            await asyncio.gather(_get(pool, url_a), _get(pool, url_a))
            assert pool.open_connections == 2
            for _ in range(3):
                await asyncio.gather(_get(pool, url_b), _get(pool, url_b))
                assert pool.open_connections <= 2
            await _get(pool, url_a)
            assert pool.open_connections <= 2
        return a, b
    a, b = run(go())
    assert a.connections == 3 and b.connections == 2


def test_an_sse_event_that_never_ends_stops_at_the_frame_limit() -> None:
    """A `data:` line with no end: the fast SSE path holds at most its frame limit (as the spec
    decoder does) and the request ends with the error."""
    async def endless(_r, w, _n) -> bool:
        w.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
        piece = b"data: " + b"x" * 65530
        for _ in range(200):  # ~13 MB, past the 8 MiB limit
            w.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            await w.drain()
            piece = b"x" * 65536
        return False

    async def go():
        async with Server(endless) as url, StreamClient() as client:
            return await client.post(url + "/v1/chat/completions", {}, api="chat")
    r = run(go())
    assert r.error_kind == "body" and "exceeds 8388608 bytes" in (r.error or ""), r.error
