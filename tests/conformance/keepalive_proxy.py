"""A TCP relay in front of an HTTP server that closes a kept-alive connection which sat idle, without an
answer, when the client sends its next request on it (issue 41: llama-server; a client that does not retry
sees "Server disconnected without sending a response", the official SDKs' default clients retry it).

A connection's first request always goes through; a later one on the same connection, sent when the
connection was idle (no byte either way) for at least `--idle` seconds, gets the connection closed instead.
`--idle 0` closes every kept-alive connection at its next request: the race a 1 s idle timeout loses now and
then, every time. `--cut-bodies N`: the first N non-streamed answers to a POST (no `"stream": true` in the
request) are cut a few bytes after their status line and headers (a connection dropped mid-answer).

    python -m tests.conformance.keepalive_proxy --upstream http://127.0.0.1:PORT --port P [--idle 1.0]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from urllib.parse import urlsplit

CHUNK = 65536


CUTS = {"left": 0}  # non-streamed answers still to cut (--cut-bodies)


def _cut_now(state: dict, data: bytes) -> bytes | None:
    """The bytes to send before dropping the connection, where this answer is one to cut; else None."""
    request, state["request"] = state["request"], b""
    if CUTS["left"] <= 0 or not request.startswith(b"POST") or b'"stream": true' in request or \
            b'"stream":true' in request or b"\r\n\r\n" not in data:
        return None
    CUTS["left"] -= 1
    return data[:data.index(b"\r\n\r\n") + 4 + 8]


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, state: dict,
                *, from_client: bool, idle: float, other: asyncio.StreamWriter) -> None:
    try:
        while True:
            data = await reader.read(CHUNK)
            if not data:
                break
            now = time.monotonic()
            if from_client and state["answered"] and now - state["last"] >= idle:
                other.transport.abort()  # the client's side: closed without an answer
                writer.transport.abort()
                return
            state["last"] = now
            if from_client:
                state["request"] += data
            elif state["request"]:  # the first bytes of an answer
                cut = _cut_now(state, data)
                if cut is not None:
                    writer.write(cut)
                    await writer.drain()
                    writer.transport.abort()
                    other.transport.abort()
                    return
            if not from_client:
                state["answered"] = 1.0
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        writer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--idle", type=float, default=1.0)
    parser.add_argument("--cut-bodies", type=int, default=0)
    args = parser.parse_args()
    CUTS["left"] = args.cut_bodies
    target = urlsplit(args.upstream)

    async def serve() -> None:
        async def handle(c_reader: asyncio.StreamReader, c_writer: asyncio.StreamWriter) -> None:
            u_reader, u_writer = await asyncio.open_connection(target.hostname, target.port)
            state: dict = {"last": time.monotonic(), "answered": 0.0, "request": b""}
            await asyncio.gather(
                _pump(c_reader, u_writer, state, from_client=True, idle=args.idle, other=c_writer),
                _pump(u_reader, c_writer, state, from_client=False, idle=args.idle, other=u_writer))

        server = await asyncio.start_server(handle, "127.0.0.1", args.port)
        async with server:
            await server.serve_forever()

    asyncio.run(serve())


if __name__ == "__main__":
    main()
