"""`bench fidelity`: the kit's client clock checked against an independent ground truth, side by
side with what a user would run instead (AIPerf, vLLM's ``vllm bench serve``), in one run.

The ground-truth server (this module as a script, ``python -m harnesscheck.replay.benchmarks.fidelity --port
0``: a raw asyncio protocol on uvloop in its own process, no kit code in its path) answers any POST
with a Chat Completions stream: the response headers at once, the first chunk ``first_ms`` (50)
after the request's **first byte** arrived (the ``data_received`` call that delivers it, before
the headers or body are parsed), then ``chunks`` (64) content chunks ``gap_ms`` (5) apart, each
scheduled against that same start, then ``finish_reason`` and ``[DONE]``. It logs per request (by
its ``x-request-id`` header) its own TTFT (first byte in to first chunk out), the gaps between its
chunk writes, and when the request started and ended (``perf_counter_ns``: one clock for every
process of the machine). ``GET /log`` returns the log, ``GET /reset`` clears it.

The error per request is client TTFT minus the server's own TTFT, per chunk the client's gap
minus the server's gap, paired by request id. Arms, each against the same server, one after the
other at each concurrency (1, 16, 64, 256 by default):

- ``http1+uvloop``: the kit's timed client (``replay.client.StreamClient``), sharded over
  ``processes`` processes, one event loop per core (``harnesscheck.replay.shard``); percentiles are of the
  merged raw samples;
- ``httpx`` (optional): a plain ``httpx.AsyncClient`` with its pool sized to the concurrency, one
  stream per request, on asyncio's default loop in one process: what a user writes by hand;
- a peer (``--peer aiperf``, ``--peer vllm-bench``): the peer run as a subprocess from its own
  environment against the same server, its per-request records read back and paired with the
  ground truth by request id (``harnesscheck.replay.benchmarks.fidelity_peers``).

Load pattern: by default the user's (``all-at-once``): all ``c`` workers start together, each
sends its requests back to back (a closed loop), every request counted, connection set-up and the
initial burst included. ``staggered`` spreads the worker starts over one request's duration and
discards each worker's first request: it hides the connection set-up and the burst, which is what
a closed-loop benchmark's steady state looks like but not what a workload's first minute does.

Requests per level: by default ``max(500, 4c)`` at ``c >= 16`` (so the p99 is a percentile, not
the maximum) and 200 below; ``requests`` sets another count (for tests). In flight: the server's
time-weighted mean of streams open, over the steady part of the level (from one request duration
after the first arrival to the last arrival), against ``c``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import resource
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from harnesscheck.replay.benchmarks import fidelity_peers
from harnesscheck.replay.benchmarks.fidelity_records import Measured
from harnesscheck.replay.shard import Shard, default_processes, run_sharded

FIRST_MS = 50.0
CHUNKS = 64
GAP_MS = 5.0
PATTERNS = ("all-at-once", "staggered")
KIT = "http1+uvloop"

# -- the ground-truth server ------------------------------------------------------------------

_CHUNK = b'data: {"id":"gt","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"tok"}}]}\n\n'
_TAIL = (b'data: {"id":"gt","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},'
         b'"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n')
_STREAM_HEAD = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
                b"transfer-encoding: chunked\r\n\r\n")


def _chunked(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


_ONE = _chunked(_CHUNK)  # a content chunk, as written
_LAST = _ONE + _chunked(_TAIL) + b"0\r\n\r\n"  # the last one, the finish and [DONE], and the end


class GroundTruth:
    """The server's state: its timing script and its log (request id -> own times)."""

    def __init__(self, first_ms: float, chunks: int, gap_ms: float) -> None:
        self.first_ns = int(first_ms * 1e6)
        self.chunks = chunks
        self.gap_ns = int(gap_ms * 1e6)
        self.log: dict[str, dict[str, Any]] = {}
        self.in_flight = 0
        self.max_in_flight = 0
        self._due: dict[int, list[Callable[[], None]]] = {}  # whole ms -> what is due then

    def at(self, due_ns: int, fn: Callable[[], None]) -> None:
        """Call ``fn`` at ``due_ns`` (perf_counter_ns), rounded up to the next whole millisecond:
        one loop timer per millisecond for all streams instead of one per chunk (the loop's timers
        have a 1 ms grain anyway; the log holds the times the chunks were actually written)."""
        ms = -(-due_ns // 1_000_000)
        due = self._due.get(ms)
        if due is None:
            due = self._due[ms] = []
            delay = (ms * 1_000_000 - time.perf_counter_ns()) / 1e9
            asyncio.get_running_loop().call_later(max(0.0, delay), self._run, ms)
        due.append(fn)

    def _run(self, ms: int) -> None:
        for fn in self._due.pop(ms, ()):
            fn()


class _Connection(asyncio.Protocol):
    """One HTTP/1.1 keep-alive connection; its clock for a request starts at the request's first byte."""

    def __init__(self, gt: GroundTruth) -> None:
        self.gt = gt
        self.buf = bytearray()
        self.t0 = 0
        self.busy = False
        self.transport: Any = None  # an asyncio.Transport (uvloop's does not subclass it)
        self.writes: list[int] = []  # perf_counter_ns of each chunk written
        self.rid, self.t0_req, self.sent, self.writes = "", 0, 0, []  # the answer being sent

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if not self.buf:
            self.t0 = time.perf_counter_ns()  # the first byte of the next request
        self.buf += data
        if not self.busy:
            self._next()

    def _next(self) -> None:
        assert self.transport is not None
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            return
        lines = bytes(self.buf[:end]).decode("latin-1").split("\r\n")
        method, path = lines[0].split(" ")[:2]
        hdrs = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:] if x)}
        size = end + 4 + int(hdrs.get("content-length") or 0)
        if len(self.buf) < size:
            return
        t0 = self.t0
        del self.buf[:size]
        if self.buf:  # a pipelined request: its first byte is here by now
            self.t0 = time.perf_counter_ns()
        if method == "GET":
            self._control(path)
            self._next()
            return
        self.busy = True
        self._stream(hdrs.get("x-request-id") or uuid.uuid4().hex, t0)

    def _control(self, path: str) -> None:
        assert self.transport is not None
        gt = self.gt
        if path.startswith("/reset"):
            gt.log.clear()
            gt.max_in_flight = gt.in_flight
            body = b"{}"
        else:
            body = json.dumps({"requests": gt.log, "max_in_flight": gt.max_in_flight}).encode()
        self.transport.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
                             % (len(body), body))

    def _stream(self, rid: str, t0: int) -> None:
        """Start one answer: the headers now, each chunk from a timer callback at its time (no task
        and no future per chunk, one timer per millisecond: the server takes as little of the machine
        as it can, which on 2 cores is the client's share)."""
        gt = self.gt
        gt.in_flight += 1
        gt.max_in_flight = max(gt.max_in_flight, gt.in_flight)
        self.rid, self.t0_req, self.sent, self.writes = rid, t0, 0, []
        self.transport.write(_STREAM_HEAD)
        self._tick()

    def _tick(self) -> None:
        gt, tr, clock = self.gt, self.transport, time.perf_counter_ns
        while True:
            if tr.is_closing():
                self._done()
                return
            i = self.sent
            due = self.t0_req + gt.first_ns + i * gt.gap_ns
            if due > clock():
                gt.at(due, self._tick)
                return
            tr.write(_LAST if i == gt.chunks - 1 else _ONE)
            self.writes.append(clock())
            self.sent = i + 1
            if self.sent == gt.chunks:
                w = self.writes
                gt.log[self.rid] = {"ttft_ms": round((w[0] - self.t0_req) / 1e6, 4),
                                    "gaps_ms": [round((b - a) / 1e6, 4) for a, b in itertools.pairwise(w)],
                                    "t0_ns": self.t0_req, "end_ns": w[-1]}
                self._done()
                return

    def _done(self) -> None:
        self.gt.in_flight -= 1
        self.busy = False
        if self.buf and not self.transport.is_closing():
            self._next()


async def _serve(port: int, first_ms: float, chunks: int, gap_ms: float) -> None:
    gt = GroundTruth(first_ms, chunks, gap_ms)
    server = await asyncio.get_running_loop().create_server(lambda: _Connection(gt), "127.0.0.1", port, backlog=4096)
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
    from harnesscheck.replay.client import run_async

    run_async(_serve(a.port, a.first_ms, a.chunks, a.gap_ms))


class GroundTruthProcess:
    """``with GroundTruthProcess() as gt: gt.url``; ``gt.pid`` is the server's own process."""

    def __init__(self, first_ms: float = FIRST_MS, chunks: int = CHUNKS, gap_ms: float = GAP_MS) -> None:
        self.args = ["--first-ms", f"{first_ms:g}", "--chunks", str(chunks), "--gap-ms", f"{gap_ms:g}"]
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def __enter__(self) -> GroundTruthProcess:
        self.proc = subprocess.Popen([sys.executable, "-m", "harnesscheck.replay.benchmarks.fidelity", "--port", "0", *self.args],
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


def get_json(url: str) -> dict[str, Any]:
    import httpx

    r = httpx.get(url, timeout=60)
    r.raise_for_status()
    return r.json()


# -- the load -----------------------------------------------------------------------------------

@dataclass
class FidelityOptions:
    """Everything `bench fidelity` takes (the CLI maps its options one to one)."""

    concurrency: list[int] = field(default_factory=lambda: [1, 16, 64, 256])
    transports: list[str] = field(default_factory=lambda: [KIT])  # and/or "httpx"
    requests: int | None = None  # per level; None: max(500, 4c) at c >= 16, 200 below
    pattern: str = "all-at-once"  # or "staggered" (hides connection set-up and the initial burst)
    processes: int | None = None  # the kit's client processes; None: one per core
    peers: list[str] = field(default_factory=list)  # "aiperf", "vllm-bench"
    peer_python: dict[str, str] = field(default_factory=dict)  # peer -> its Python (else env var / PATH)
    tokenizer: str | None = None  # for the peers' synthetic prompts (default: the reference tokenizer's folder)
    first_ms: float = FIRST_MS
    chunks: int = CHUNKS
    gap_ms: float = GAP_MS


def requests_for(c: int, requests: int | None) -> int:
    """Requests measured at concurrency ``c``: a whole number of rounds of ``c`` workers."""
    n = requests if requests is not None else (max(500, 4 * c) if c >= 16 else 200)
    return -(-max(n, c) // c) * c


_BODY = {"model": "ground-truth", "stream": True, "messages": [{"role": "user", "content": "hi"}]}


async def closed_loop(one: Any, workers: range, c: int, per_worker: int, pattern: str,
                      stagger_s: float) -> list[Measured]:
    """Workers ``workers`` (global indices out of ``c``), each sending ``per_worker`` requests back
    to back. ``staggered``: worker ``i`` starts ``stagger_s * i / c`` late and sends one more
    request first, which is discarded."""
    if pattern not in PATTERNS:
        raise ValueError(f"pattern must be one of {', '.join(PATTERNS)}, not {pattern!r}")
    out: list[Measured] = []
    staggered = pattern == "staggered"

    async def worker(i: int) -> None:
        if staggered:
            await asyncio.sleep(stagger_s * i / c)
        for k in range(per_worker + staggered):
            m = await one(uuid.uuid4().hex)
            if k or not staggered:
                out.append(m)

    await asyncio.gather(*(worker(i) for i in workers))
    return out


async def kit_shard(shard: Shard) -> tuple[list[Measured], float]:
    """One process of the kit's arm (a ``harnesscheck.replay.shard`` target): its share of the workers, and the
    CPU time it spent from the common start on (its set-up is not counted)."""
    from harnesscheck.replay.client import StreamClient

    p = shard.payload
    async with StreamClient(limit=0) as client:
        async def one(rid: str) -> Measured:
            r = await client.post(p["url"] + "/v1/chat/completions", _BODY, api="chat", headers={"x-request-id": rid})
            return Measured(rid, None if r.ttft_ns is None else r.ttft_ns / 1e6, [t / 1e6 for t in r.token_ns],
                            r.error, r.start_ns)

        await shard.ready()
        cpu0 = time.process_time()
        workers = range(shard.first_worker, shard.first_worker + shard.workers)
        out = await closed_loop(one, workers, shard.total_workers, p["per_worker"], p["pattern"], p["stagger_s"])
        return out, time.process_time() - cpu0


async def _httpx_one(client: Any, url: str, rid: str) -> Measured:
    clock = time.perf_counter_ns
    start = clock()
    m = Measured(rid, start_ns=start)
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


async def _httpx_level(url: str, c: int, per_worker: int, pattern: str, stagger_s: float) -> list[Measured]:
    import httpx

    limits = httpx.Limits(max_connections=c, max_keepalive_connections=c)
    async with httpx.AsyncClient(limits=limits, timeout=httpx.Timeout(120.0)) as client:
        return await closed_loop(lambda rid: _httpx_one(client, url + "/v1/chat/completions", rid), range(c), c,
                                 per_worker, pattern, stagger_s)


def _children_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


@dataclass
class ArmRun:
    """One arm at one concurrency: what the clients saw, the server's log, client CPU, processes.
    The kit's and httpx's CPU is counted from the load's start; a peer's is its whole subprocess
    (``cpu_includes_startup``: start-up, dataset generation and export included)."""

    arm: str
    concurrency: int
    measured: list[Measured]
    log: dict[str, Any]
    client_cpu_s: float
    processes: int = 1
    skipped: str | None = None
    command: list[str] = field(default_factory=list)
    cpu_includes_startup: bool = False


def run_arm(url: str, arm: str, c: int, n: int, opts: FidelityOptions, workdir: str) -> ArmRun:
    """Reset the server, run one arm at concurrency ``c`` for ``n`` requests, read the server's log."""
    get_json(url + "/reset")
    stagger = (opts.first_ms + opts.chunks * opts.gap_ms) / 1000
    per_worker = n // c
    processes, command, skipped = 1, [], None
    if arm == KIT:
        procs = opts.processes or default_processes()
        payload = {"url": url, "per_worker": per_worker, "pattern": opts.pattern, "stagger_s": stagger}
        parts = run_sharded(kit_shard, c, procs, payload)
        processes = len(parts)
        measured = [m for part, _ in parts for m in part]
        cpu = sum(cpu for _, cpu in parts)
    elif arm == "httpx":
        own0 = time.process_time()
        measured = asyncio.run(_httpx_level(url, c, per_worker, opts.pattern, stagger))  # plain: default loop
        cpu = time.process_time() - own0
    else:
        cpu0 = _children_cpu_s()
        peer = fidelity_peers.run_peer(arm, url, c, n, opts.peer_python.get(arm), opts.tokenizer, workdir)
        measured, command, skipped = peer.measured, peer.command, peer.skipped
        cpu = _children_cpu_s() - cpu0
    return ArmRun(arm, c, measured, get_json(url + "/log"), cpu, processes, skipped, command,
                  cpu_includes_startup=arm not in (KIT, "httpx"))


# -- the analysis -------------------------------------------------------------------------------

@dataclass
class Paired:
    """Client-minus-server errors of one arm at one level, and what could not be paired."""

    ttft_error_ms: list[float]
    itl_error_ms: list[float]
    failed: int
    unpaired: int


def pair(measured: list[Measured], truth: dict[str, dict[str, Any]]) -> Paired:
    """Pair each client record with the server's log entry of the same request id.

    A record with an error, no first token or a different number of chunks than the server wrote
    is ``failed``; one whose id the server never logged is ``unpaired``; neither gives a sample.
    """
    ttft: list[float] = []
    itl: list[float] = []
    failed = unpaired = 0
    for m in measured:
        t = truth.get(m.rid)
        if t is None:
            unpaired += 1
            continue
        if m.error or m.ttft_ms is None or len(m.token_ms) != len(t["gaps_ms"]) + 1:
            failed += 1
            continue
        ttft.append(m.ttft_ms - t["ttft_ms"])
        gaps = [b - a for a, b in zip(m.token_ms, m.token_ms[1:], strict=False)]
        itl += [g - s for g, s in zip(gaps, t["gaps_ms"], strict=True)]
    return Paired(ttft, itl, failed, unpaired)


def in_flight(truth: dict[str, dict[str, Any]], request_s: float) -> float | None:
    """The server's time-weighted mean of open streams over the level's steady part: from one
    request duration after the first arrival to the last arrival (None if that span is empty).
    ``truth``: the log entries of the measured requests (a peer's own probe requests left out)."""
    spans = [(v["t0_ns"], v["end_ns"]) for v in truth.values()]
    if not spans:
        return None
    a = min(s for s, _ in spans) + int(request_s * 1e9)
    b = max(s for s, _ in spans)
    if b <= a:
        return None
    open_ns = sum(max(0, min(e, b) - max(s, a)) for s, e in spans)
    return open_ns / (b - a)


def _pct(xs: list[float], q: float) -> float | None:
    import numpy as np

    return None if not xs else round(float(np.percentile(xs, q)), 3)


def _label(run: ArmRun) -> str:
    return f"{run.arm} c={run.concurrency}"


def _row(run: ArmRun, p: Paired, request_s: float) -> dict[str, Any]:
    truth = run.log["requests"]
    mean_open = in_flight({m.rid: truth[m.rid] for m in run.measured if m.rid in truth}, request_s)
    row: dict[str, Any] = {
        "arm": run.arm, "concurrency": run.concurrency, "requests": len(run.measured), "failed": p.failed,
        "unpaired": p.unpaired, "processes": run.processes,
        "ttft_error_ms": {"median": _pct(p.ttft_error_ms, 50), "p99": _pct(p.ttft_error_ms, 99)},
        "itl_error_ms": {"median": _pct(p.itl_error_ms, 50), "p99": _pct(p.itl_error_ms, 99),
                         "p99_abs": _pct([abs(x) for x in p.itl_error_ms], 99)},
        "server_ttft_ms": {"median": _pct([v["ttft_ms"] for v in run.log["requests"].values()], 50)},
        "in_flight_mean": None if mean_open is None else round(mean_open, 1),
        "in_flight_share": None if mean_open is None else round(mean_open / run.concurrency, 4),
        "max_in_flight": run.log["max_in_flight"],
        "client_cpu_ms_per_request": round(run.client_cpu_s / len(run.measured) * 1000, 3) if run.measured else None,
        "client_cpu_includes_startup": run.cpu_includes_startup}
    if run.command:
        row["command"] = run.command
    if run.skipped:
        row["skipped"] = run.skipped
    return row


def run_fidelity(opts: FidelityOptions) -> dict[str, Any]:
    import random
    import tempfile

    from harnesscheck.replay.benchmarks import common
    from harnesscheck.reports.schema import now_iso

    if opts.pattern not in PATTERNS:
        raise ValueError(f"pattern must be one of {', '.join(PATTERNS)}, not {opts.pattern!r}")
    started = now_iso()
    load_before = os.getloadavg()
    arms_order = [*opts.transports, *opts.peers]
    request_s = (opts.first_ms + opts.chunks * opts.gap_ms) / 1000
    rows: list[dict[str, Any]] = []
    ttft_arms: list[dict[str, Any]] = []
    itl_arms: list[dict[str, Any]] = []
    ratios_med: list[dict[str, Any]] = []
    ratios_p99: list[dict[str, Any]] = []
    with GroundTruthProcess(opts.first_ms, opts.chunks, opts.gap_ms) as gt, \
            tempfile.TemporaryDirectory(prefix="hc-fidelity-") as work:
        run_arm(gt.url, opts.transports[0] if opts.transports else KIT, 4, 4, opts, work)  # warm-up
        for c in opts.concurrency:
            n = requests_for(c, opts.requests)
            by_arm: dict[str, dict[str, Any]] = {}
            for arm in arms_order:  # same server, back to back
                run = run_arm(gt.url, arm, c, n, opts, work)
                paired = pair(run.measured, run.log["requests"])
                rows.append(_row(run, paired, request_s))
                if run.skipped:
                    continue
                ttft_arms.append(by_arm.setdefault(arm, common.arm(_label(run), paired.ttft_error_ms)))
                sample = paired.itl_error_ms
                if len(sample) > 2000:
                    sample = random.Random(0).sample(sample, 2000)
                a = common.arm(_label(run), sample)
                a["median"], a["p90"] = _pct(paired.itl_error_ms, 50), _pct(paired.itl_error_ms, 90)  # all gaps
                itl_arms.append(a)
            kit = by_arm.get(KIT)
            for arm, a in by_arm.items():
                if kit is not None and arm != KIT:
                    ratios_med.append(common.ratio_at(f"{arm}/{KIT} median c={c}", a, kit, 50))
                    ratios_p99.append(common.ratio_at(f"{arm}/{KIT} p99 c={c}", a, kit, 99))
    summary = [_row_text(r) for r in rows] + [_ratio_text(r) for r in ratios_med + ratios_p99]
    settings = {"first_chunk_ms": opts.first_ms, "chunks": opts.chunks, "chunk_gap_ms": opts.gap_ms,
                "concurrency": opts.concurrency, "pattern": opts.pattern, "requests": opts.requests,
                "rows": rows, "summary": summary}
    base = {"unit": "ms", "timing": "scripted-model", "better": "lower"}
    benchmarks: list[dict[str, Any]] = [
        {**base, "name": "fidelity-ttft-error", "title": "TTFT error: client minus ground-truth server",
         "settings": settings, "arms": ttft_arms, "ratios": ratios_med + ratios_p99},
        {**base, "name": "fidelity-itl-error", "title": "Inter-token error: client gap minus server gap "
                                                        "(samples: up to 2000 per arm)",
         "settings": {k: v for k, v in settings.items() if k not in ("rows", "summary")},
         "arms": itl_arms, "ratios": []}]
    server = {"kind": "embedded", "engine": "ground-truth (replay/benchmarks/fidelity.py)", "faults": [],
              "timing": "scripted-model"}
    run_settings = {"arms": {KIT: "replay.client.StreamClient on uvloop, sharded (replay.shard), one loop per process",
                             "httpx": "httpx.AsyncClient aiter_lines, asyncio default loop, pool = concurrency",
                             "aiperf": "AIPerf `aiperf profile` subprocess, its profile_export.jsonl by x_request_id",
                             "vllm-bench": "`vllm bench serve` subprocess, its detailed result by request id"},
                    "arms_run": arms_order, "concurrency": opts.concurrency, "pattern": opts.pattern,
                    "requests_per_level": {str(c): requests_for(c, opts.requests) for c in opts.concurrency},
                    "loadavg_before": [round(x, 2) for x in load_before],
                    "loadavg_after": [round(x, 2) for x in os.getloadavg()],
                    "note": "clients and the ground-truth server share this machine's CPUs (see loadavg); the "
                            "server's clock starts at each request's first byte",
                    "ground_truth": {"first_chunk_ms": opts.first_ms, "chunks": opts.chunks,
                                     "chunk_gap_ms": opts.gap_ms}}
    return common.results_document(benchmarks=benchmarks, endpoint="embedded ground-truth server", model="ground-truth",
                                   apis=["chat"], server=server, settings=run_settings, started_at=started)


def _row_text(r: dict[str, Any]) -> str:
    def f(x: float | None) -> str:
        return "-" if x is None else f"{x:+.1f}"

    head = f"{r['arm']:<15} c={r['concurrency']:<4}"
    if r.get("skipped"):
        return f"{head} skipped: {r['skipped']}"
    share = r["in_flight_share"]
    flight = "-" if share is None else f"{r['in_flight_mean']:.1f}/{r['concurrency']} ({share * 100:.0f}%)"
    procs = f", {r['processes']} processes" if r["processes"] > 1 else ""
    return (f"{head} n={r['requests']:<5} TTFT error median {f(r['ttft_error_ms']['median'])} "
            f"p99 {f(r['ttft_error_ms']['p99'])} ms; ITL error median {f(r['itl_error_ms']['median'])} "
            f"p99 {f(r['itl_error_ms']['p99'])} ms; in flight {flight}, max {r['max_in_flight']}{procs}; "
            f"client CPU {r['client_cpu_ms_per_request'] or 0:.2f} ms/request"
            + (" (with its start-up)" if r["client_cpu_includes_startup"] else "")
            + (f"; {r['failed']} failed" if r["failed"] else "") + (f"; {r['unpaired']} unpaired" if r["unpaired"] else ""))


def _ratio_text(r: dict[str, Any]) -> str:
    if r["value"] is None:
        return f"ratio {r['name']}: -"
    lo, hi = r["ci95"]
    return f"ratio {r['name']}: {r['value']:.2f} (95% CI {lo:.2f}-{hi:.2f})"


if __name__ == "__main__":
    main()
