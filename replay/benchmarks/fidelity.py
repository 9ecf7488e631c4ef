"""`bench fidelity`: prove the benchmark clock against a server that logs its own times.

The ground-truth server (this module, ``python -m replay.benchmarks.fidelity --port 0``; raw
asyncio on uvloop, started in a subprocess) answers any POST with a Chat Completions stream: the
response headers at once, the first chunk 50 ms after the request was read, then 64 content chunks
5 ms apart (each scheduled against the request's own start, so its delays do not accumulate),
then ``finish_reason`` and ``[DONE]``. It logs per request (by its ``x-request-id`` header) the
time from reading the request to writing the first chunk (its TTFT) and the gaps between its
chunk writes; ``GET /log`` returns the log and the most streams it had in flight at once,
``GET /reset`` clears both.

The kit's client measures at concurrency 1, 16, 64 and 256: ``c`` workers, each sending requests
back to back (a closed loop, starts spread over one request's duration so the level is a steady
``c`` in flight; each worker's first request, which opens its connection, is discarded); the
error per request is client TTFT minus server TTFT, and per chunk the client's gap minus the
server's gap. Two transports in the same run, same server:

- ``aiohttp+uvloop``: ``replay.client.StreamClient`` (the kit's timed client) on uvloop;
- ``httpx``: a plain ``httpx.AsyncClient`` (``aiter_lines``) on asyncio's default loop, with no
  connection limit (httpx's default pool of 100 would cap concurrency by itself).

Issue 8 measured on this machine (2 cores), median TTFT error at concurrency 64: AIPerf 0.13
+206 ms, plain httpx +139 ms, aiohttp with uvloop +4.5 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

FIRST_MS = 50.0
CHUNKS = 64
GAP_MS = 5.0

# -- the ground-truth server ------------------------------------------------------------------

_CHUNK = b'data: {"id":"gt","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"tok"}}]}\n\n'
_TAIL = (b'data: {"id":"gt","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},'
         b'"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n')


def _chunked(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


class GroundTruth:
    def __init__(self, first_ms: float, chunks: int, gap_ms: float) -> None:
        self.first_ns = int(first_ms * 1e6)
        self.chunks = chunks
        self.gap_ns = int(gap_ms * 1e6)
        self.log: dict[str, dict[str, Any]] = {}
        self.in_flight = 0
        self.max_in_flight = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                t0 = time.perf_counter_ns()
                lines = head.decode("latin-1").split("\r\n")
                method, path = lines[0].split(" ")[:2]
                hdrs = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:] if x)}
                n = int(hdrs.get("content-length", "0") or 0)
                if n:
                    await reader.readexactly(n)
                    t0 = time.perf_counter_ns()  # the request is read
                if method == "GET":
                    if path.startswith("/reset"):
                        self.log.clear()
                        self.max_in_flight = self.in_flight
                        body = b"{}"
                    else:
                        body = json.dumps({"requests": self.log, "max_in_flight": self.max_in_flight}).encode()
                    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
                                 % (len(body), body))
                    await writer.drain()
                    continue
                await self._stream(writer, hdrs.get("x-request-id") or uuid.uuid4().hex, t0)
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()

    async def _stream(self, writer: asyncio.StreamWriter, rid: str, t0: int) -> None:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        clock = time.perf_counter_ns
        try:
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
                         b"transfer-encoding: chunked\r\n\r\n")
            writes: list[int] = []
            for i in range(self.chunks):
                target = t0 + self.first_ns + i * self.gap_ns
                delay = target - clock()
                if delay > 0:
                    await asyncio.sleep(delay / 1e9)
                data = _chunked(_CHUNK)
                if i == self.chunks - 1:
                    data += _chunked(_TAIL) + b"0\r\n\r\n"
                writer.write(data)
                writes.append(clock())
                if writer.transport.get_write_buffer_size() > 1 << 16:
                    await writer.drain()
            self.log[rid] = {"ttft_ms": round((writes[0] - t0) / 1e6, 4),
                             "gaps_ms": [round((b - a) / 1e6, 4) for a, b in zip(writes, writes[1:], strict=False)],
                             "in_flight_at_start": self.in_flight}
        finally:
            self.in_flight -= 1


async def _serve(port: int, first_ms: float, chunks: int, gap_ms: float) -> None:
    gt = GroundTruth(first_ms, chunks, gap_ms)
    server = await asyncio.start_server(gt.handle, "127.0.0.1", port, backlog=4096)
    print(f"listening on http://127.0.0.1:{server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description="ground-truth streaming server for `harnesscheck bench fidelity`")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--first-ms", type=float, default=FIRST_MS)
    p.add_argument("--chunks", type=int, default=CHUNKS)
    p.add_argument("--gap-ms", type=float, default=GAP_MS)
    a = p.parse_args(argv)
    from replay.client import run_async

    run_async(_serve(a.port, a.first_ms, a.chunks, a.gap_ms))


class GroundTruthProcess:
    """``with GroundTruthProcess() as gt: gt.url``; ``gt.pid`` is the server's own process."""

    def __init__(self, first_ms: float = FIRST_MS, chunks: int = CHUNKS, gap_ms: float = GAP_MS) -> None:
        self.args = ["--first-ms", f"{first_ms:g}", "--chunks", str(chunks), "--gap-ms", f"{gap_ms:g}"]
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""

    def __enter__(self) -> GroundTruthProcess:
        self.proc = subprocess.Popen([sys.executable, "-m", "replay.benchmarks.fidelity", "--port", "0", *self.args],
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if "listening on " not in line:
            self.__exit__()
            raise RuntimeError(f"ground-truth server did not start: {line!r}")
        self.url = line.split("listening on ", 1)[1].strip()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


# -- the measurement ----------------------------------------------------------------------------

@dataclass
class FidelityOptions:
    concurrency: list[int] = field(default_factory=lambda: [1, 16, 64, 256])
    transports: list[str] = field(default_factory=lambda: ["aiohttp+uvloop", "httpx"])
    requests: int = 32  # measured per level at least (each of `c` workers: ceil(requests / c), +1 discarded)
    first_ms: float = FIRST_MS
    chunks: int = CHUNKS
    gap_ms: float = GAP_MS


@dataclass
class Measured:
    rid: str
    ttft_ms: float | None = None
    token_ms: list[float] = field(default_factory=list)
    error: str | None = None


_BODY = {"model": "ground-truth", "stream": True, "messages": [{"role": "user", "content": "hi"}]}


async def _closed_loop(one: Any, c: int, per_worker: int, stagger_s: float) -> list[Measured]:
    """``c`` workers, each sending ``per_worker`` + 1 requests back to back (the first, which opens
    its connection, is discarded); worker starts spread over ``stagger_s`` so the level is a steady
    ``c`` in flight rather than one burst."""
    out: list[Measured] = []

    async def worker(i: int) -> None:
        await asyncio.sleep(stagger_s * i / c)
        for k in range(per_worker + 1):
            m = await one(uuid.uuid4().hex)
            if k:
                out.append(m)

    await asyncio.gather(*(worker(i) for i in range(c)))
    return out


async def _aiohttp_level(url: str, c: int, per_worker: int, stagger_s: float) -> list[Measured]:
    from replay.client import StreamClient

    async with StreamClient(limit=0) as client:
        async def one(rid: str) -> Measured:
            r = await client.post(url + "/v1/chat/completions", _BODY, api="chat", headers={"x-request-id": rid})
            return Measured(rid, None if r.ttft_ns is None else r.ttft_ns / 1e6, [t / 1e6 for t in r.token_ns],
                            r.error)

        return await _closed_loop(one, c, per_worker, stagger_s)


async def _httpx_one(client: Any, url: str, rid: str) -> Measured:
    m = Measured(rid)
    clock = time.perf_counter_ns
    start = clock()
    try:
        async with client.stream("POST", url, json=_BODY, headers={"x-request-id": rid,
                                                                   "accept": "text/event-stream"}) as resp:
            async for line in resp.aiter_lines():
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    continue
                d = json.loads(data)
                if ((d.get("choices") or [{}])[0].get("delta") or {}).get("content"):
                    m.token_ms.append((clock() - start) / 1e6)
    except Exception as exc:  # noqa: BLE001 - reported per request
        m.error = f"{type(exc).__name__}: {exc}"
    m.ttft_ms = m.token_ms[0] if m.token_ms else None
    return m


async def _httpx_level(url: str, c: int, per_worker: int, stagger_s: float) -> list[Measured]:
    import httpx

    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    async with httpx.AsyncClient(limits=limits, timeout=httpx.Timeout(120.0)) as client:
        return await _closed_loop(lambda rid: _httpx_one(client, url + "/v1/chat/completions", rid), c, per_worker,
                                  stagger_s)


def _get(url: str) -> dict[str, Any]:
    import httpx

    r = httpx.get(url, timeout=60)
    r.raise_for_status()
    return r.json()


def _level(url: str, transport: str, c: int, per_worker: int,
           stagger_s: float) -> tuple[list[Measured], dict[str, Any]]:
    from replay.client import run_async

    _get(url + "/reset")
    if transport == "httpx":
        measured = asyncio.run(_httpx_level(url, c, per_worker, stagger_s))  # plain: asyncio's default loop
    else:
        measured = run_async(_aiohttp_level(url, c, per_worker, stagger_s))
    return measured, _get(url + "/log")


def _pct(xs: list[float], q: float) -> float | None:
    import numpy as np

    return None if not xs else round(float(np.percentile(xs, q)), 3)


def run_fidelity(opts: FidelityOptions) -> dict[str, Any]:
    import random

    from conformance.results import now_iso
    from replay.benchmarks import common

    started = now_iso()
    load_before = os.getloadavg()
    rows: list[dict[str, Any]] = []
    ttft_arms: dict[str, list[dict[str, Any]]] = {t: [] for t in opts.transports}
    itl_arms: dict[str, list[dict[str, Any]]] = {t: [] for t in opts.transports}
    with GroundTruthProcess(opts.first_ms, opts.chunks, opts.gap_ms) as gt:
        stagger = (opts.first_ms + opts.chunks * opts.gap_ms) / 1000
        _level(gt.url, opts.transports[0], 4, 1, 0.0)  # warm-up (imports)
        for c in opts.concurrency:
            per_worker = max(1, -(-opts.requests // c))
            for transport in opts.transports:  # same server, back to back
                measured, log = _level(gt.url, transport, c, per_worker, stagger)
                truth = log["requests"]
                ttft_err: list[float] = []
                itl_err: list[float] = []
                failed = 0
                for m in measured:
                    t = truth.get(m.rid)
                    if m.error or t is None or m.ttft_ms is None or len(m.token_ms) != len(t["gaps_ms"]) + 1:
                        failed += 1
                        continue
                    ttft_err.append(m.ttft_ms - t["ttft_ms"])
                    gaps = [b - a for a, b in zip(m.token_ms, m.token_ms[1:], strict=False)]
                    itl_err += [g - s for g, s in zip(gaps, t["gaps_ms"], strict=True)]
                server_ttft = [v["ttft_ms"] for v in truth.values()]
                row = {"transport": transport, "concurrency": c, "requests": len(measured), "failed": failed,
                       "max_in_flight": log["max_in_flight"],
                       "ttft_error_ms": {"median": _pct(ttft_err, 50), "p99": _pct(ttft_err, 99)},
                       "itl_error_ms": {"median": _pct(itl_err, 50), "p99": _pct(itl_err, 99),
                                        "p99_abs": _pct([abs(x) for x in itl_err], 99)},
                       "server_ttft_ms": {"median": _pct(server_ttft, 50), "p99": _pct(server_ttft, 99)}}
                rows.append(row)
                name = f"{transport} c={c}"
                ttft_arms[transport].append(common.arm(name, ttft_err))
                sample = itl_err if len(itl_err) <= 2000 else random.Random(0).sample(itl_err, 2000)
                a = common.arm(name, sample)
                a["median"], a["p90"] = row["itl_error_ms"]["median"], _pct(itl_err, 90)  # over all gaps
                itl_arms[transport].append(a)
    summary = [_row_text(r) for r in rows]
    settings = {"first_chunk_ms": opts.first_ms, "chunks": opts.chunks, "chunk_gap_ms": opts.gap_ms,
                "concurrency": opts.concurrency, "min_requests_per_level": opts.requests, "rows": rows,
                "summary": summary}
    base = {"unit": "ms", "timing": "scripted-model", "better": "lower", "settings": settings}
    benchmarks: list[dict[str, Any]] = [
        {**base, "name": "fidelity-ttft-error", "title": "TTFT error: client minus ground-truth server",
         "arms": [a for t in opts.transports for a in ttft_arms[t]], "ratios": []},
        {**base, "name": "fidelity-itl-error", "title": "Inter-token error: client gap minus server gap "
                                                        "(samples: up to 2000 per arm)",
         "settings": {k: v for k, v in settings.items() if k not in ("rows", "summary")},
         "arms": [a for t in opts.transports for a in itl_arms[t]], "ratios": []}]
    server = {"kind": "embedded", "engine": "ground-truth (replay/benchmarks/fidelity.py)", "faults": [],
              "timing": "scripted-model"}
    run_settings = {"transports": {"aiohttp+uvloop": "replay.client.StreamClient on uvloop",
                                   "httpx": "httpx.AsyncClient aiter_lines, asyncio default loop, no pool limit"},
                    "concurrency": opts.concurrency, "min_requests_per_level": opts.requests,
                    "loadavg_before": [round(x, 2) for x in load_before],
                    "loadavg_after": [round(x, 2) for x in os.getloadavg()],
                    "note": "client and ground-truth server share this machine's CPUs; the error includes any "
                            "delay before the server reads the request (see loadavg)",
                    "ground_truth": {"first_chunk_ms": opts.first_ms, "chunks": opts.chunks,
                                     "chunk_gap_ms": opts.gap_ms}}
    return common.results_document(benchmarks=benchmarks, endpoint="embedded ground-truth server", model="ground-truth",
                                   apis=["chat"], server=server, settings=run_settings, started_at=started)


def _row_text(r: dict[str, Any]) -> str:
    def f(x: float | None) -> str:
        return "-" if x is None else f"{x:+.1f}"

    return (f"{r['transport']:<15} c={r['concurrency']:<4} TTFT error median {f(r['ttft_error_ms']['median'])} "
            f"p99 {f(r['ttft_error_ms']['p99'])} ms; ITL error median {f(r['itl_error_ms']['median'])} "
            f"p99 {f(r['itl_error_ms']['p99'])} ms; max in flight {r['max_in_flight']}/{r['concurrency']}"
            + (f"; {r['failed']} of {r['requests']} failed" if r["failed"] else ""))


if __name__ == "__main__":
    main()
