"""`bench server`: the reference server's own CPU cost per streamed token, end to end (engine,
parsers, adapters, SSE framing, HTTP), with the engine's delays at zero.

An embedded reference server (scripted engine, ``--ttft-base-ms 0 --prefill-us-per-token 0
--decode-ms 0``, default parsers: nemotron_deci reasoning + qwen3_coder tools) is driven by the
kit's client (``replay.client.StreamClient``) at concurrency 1, 8 and 32 (closed loop, ``c``
workers back to back) with the long scenarios' first turns (``long_reasoning``,
``long_agent_turn``: ~1100-1450 output tokens each) over the three APIs in rotation. Per
measurement window, the server process's CPU time (``/proc/PID/stat`` utime + stime) before and
after, the wall time, the output tokens (usage) and the SSE frames the client received. Per
concurrency: µs of server CPU per token and per SSE frame (arms, one sample per window), tokens
per second (wall), server CPU-seconds per million tokens and tokens per server CPU-second.

Reference (issue 8): Dynamo 1.6.1's Rust frontend (mocker engine, reasoning and tool parsers on)
spends about 20 µs of CPU per SSE frame: 43-49k tokens per frontend CPU-second at concurrency 8-32,
23-30k at concurrency 1.

``--endpoint URL --pid PID`` measures another server running on this machine instead (e.g. a
Dynamo frontend; PID is its process; its engine's delays are its own business).

``--profile`` runs the server under cProfile (slower: use it for where, not how much) and adds the
top functions by own time to the document (``settings.profile``).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from replay.benchmarks import common

DYNAMO_US_PER_FRAME = 20.0
DYNAMO_TOKENS_PER_CPU_S = {"1": "23-30k", "8": "43-49k", "32": "43-49k"}


@dataclass
class ServerCostOptions:
    concurrency: list[int] = field(default_factory=lambda: [1, 8, 32])
    windows: int = 4
    requests_per_window: int = 8  # at least; a window has max(this, c) requests
    apis: list[str] = field(default_factory=lambda: ["chat", "anthropic", "responses"])
    scenarios: list[str] = field(default_factory=lambda: ["long_reasoning", "long_agent_turn"])
    server_args: list[str] = field(default_factory=list)
    profile: bool = False
    profile_top: int = 25
    endpoint: str | None = None  # measure this server instead (with pid: its process on this machine)
    pid: int | None = None
    model: str | None = None
    api_key: str | None = None


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (not its children), seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class _Server:
    """The reference server in a subprocess, optionally under cProfile; ``pid`` is the server's."""

    def __init__(self, args: list[str], profile_path: str | None) -> None:
        self.args = args
        self.profile_path = profile_path
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""
        self.output: list[str] = []

    def __enter__(self) -> _Server:
        import httpx

        pre = ["-m", "cProfile", "-o", self.profile_path] if self.profile_path else []
        cmd = [sys.executable, *pre, "-m", "harnesscheck", "serve", "--port", "0", *self.args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     env={**os.environ, "PYTHONUNBUFFERED": "1"})
        assert self.proc.stdout is not None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not self.url:
            line = self.proc.stdout.readline()
            if not line:
                break
            self.output.append(line)
            if "listening on " in line:
                self.url = line.split("listening on ", 1)[1].strip()
        if not self.url:
            self.__exit__()
            raise RuntimeError("reference server did not start:\n" + "".join(self.output))
        threading.Thread(target=lambda: [self.output.append(x) for x in self.proc.stdout], daemon=True).start()
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + "/health", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                time.sleep(0.05)
        self.__exit__()
        raise RuntimeError("reference server did not answer /health")

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def __exit__(self, *exc: object) -> None:
        if self.proc is None:
            return
        if self.profile_path:  # uvicorn re-raises the signal it caught; SIGINT lets cProfile write its file
            self.proc.send_signal(signal.SIGINT)
        else:
            self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)


@dataclass
class Window:
    concurrency: int
    requests: int
    failed: int
    tokens: int
    frames: int
    wall_s: float
    server_cpu_s: float
    client_cpu_s: float


async def _window(client: Any, url: str, bodies: list[tuple[str, dict[str, Any]]], c: int, n: int,
                  pid: int, headers: dict[str, str] | None = None) -> Window:
    queue = list(range(n))
    tokens = frames = failed = 0

    async def worker() -> None:
        nonlocal tokens, frames, failed
        while queue:
            k = queue.pop()
            api, body = bodies[k % len(bodies)]
            r = await client.post(url + common.PATHS[api], body, api=api, headers=headers)
            if not r.ok:
                failed += 1
                continue
            u = r.usage
            tokens += int(u.get("output_tokens") or u.get("completion_tokens") or 0)
            frames += r.events

    cpu0, t0, own0 = cpu_seconds(pid), time.perf_counter(), time.process_time()
    await asyncio.gather(*(worker() for _ in range(c)))
    wall, own = time.perf_counter() - t0, time.process_time() - own0
    return Window(c, n, failed, tokens, frames, wall, cpu_seconds(pid) - cpu0, own)


async def _measure(url: str, pid: int, model: str, opts: ServerCostOptions) -> list[Window]:
    from conformance.requests import first
    from replay.client import StreamClient
    from scenarios.loader import get

    bodies = [(api, first(api, get(s), model)) for s in opts.scenarios for api in opts.apis]
    hdrs = common.headers(opts.api_key)
    out: list[Window] = []
    async with StreamClient(limit=0) as client:
        await _window(client, url, bodies, 2, len(bodies), pid, hdrs)  # warm-up: imports, caches, connections
        for c in opts.concurrency:
            n = max(opts.requests_per_window, c)
            for _ in range(opts.windows):
                out.append(await _window(client, url, bodies, c, n, pid, hdrs))
    return out


def _profile_top(path: str, top: int) -> list[dict[str, Any]]:
    import pstats

    st = pstats.Stats(path)
    total = st.total_tt or 1.0
    rows = []
    for (file, line, fn), (_cc, nc, tt, ct, _callers) in sorted(st.stats.items(), key=lambda kv: -kv[1][2])[:top]:
        short = file.split("/site-packages/")[-1].split("/work/main/")[-1]
        rows.append({"function": f"{short}:{line}({fn})", "calls": nc, "own_s": round(tt, 3),
                     "own_share": round(tt / total, 4), "cumulative_s": round(ct, 3)})
    return rows


def run_server_cost(opts: ServerCostOptions) -> dict[str, Any]:
    from conformance.results import now_iso
    from reference_server.config import DEFAULT_MODEL_IDS
    from replay.client import run_async

    started = now_iso()
    load_before = os.getloadavg()
    if opts.endpoint:
        if not opts.pid:
            raise ValueError("bench server --endpoint needs --pid: the server's process on this machine")
        url = opts.endpoint.rstrip("/")
        model = common.resolve_model(url, opts.model, opts.api_key)
        windows = run_async(_measure(url, opts.pid, model, opts))
        return _document(windows, opts, model, [], started, load_before, None)
    model = opts.model or DEFAULT_MODEL_IDS[0]
    args = [*common.timing_args(0, 0, 0), *opts.server_args]
    prof = None
    if opts.profile:
        prof = os.path.join(tempfile.mkdtemp(prefix="hc-server-prof-"), "server.prof")
    with _Server(args, prof) as srv:
        windows = run_async(_measure(srv.url, srv.pid, model, opts))
    profile = _profile_top(prof, opts.profile_top) if prof and os.path.exists(prof) else None
    return _document(windows, opts, model, args, started, load_before, profile)


def _document(windows: list[Window], opts: ServerCostOptions, model: str, args: list[str], started: str,
              load_before: tuple[float, float, float], profile: list[dict[str, Any]] | None) -> dict[str, Any]:
    per_token: list[dict[str, Any]] = []
    per_frame: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    for c in opts.concurrency:
        ws = [w for w in windows if w.concurrency == c and w.tokens]
        tok = sum(w.tokens for w in ws)
        frames = sum(w.frames for w in ws)
        cpu = sum(w.server_cpu_s for w in ws)
        wall = sum(w.wall_s for w in ws)
        per_token.append(common.arm(f"c={c}", [w.server_cpu_s / w.tokens * 1e6 for w in ws]))
        per_frame.append(common.arm(f"c={c}", [w.server_cpu_s / w.frames * 1e6 for w in ws if w.frames]))
        row = {"concurrency": c, "windows": len(ws), "requests": sum(w.requests for w in ws),
               "failed": sum(w.failed for w in windows if w.concurrency == c), "tokens": tok, "sse_frames": frames,
               "wall_s": round(wall, 3), "server_cpu_s": round(cpu, 3),
               "client_cpu_s": round(sum(w.client_cpu_s for w in ws), 3),
               "tokens_per_s": round(tok / wall, 1) if wall else None,
               "server_cpu_s_per_million_tokens": round(cpu / tok * 1e6, 2) if tok else None,
               "tokens_per_server_cpu_s": round(tok / cpu, 1) if cpu else None,
               "server_cpu_us_per_token": round(cpu / tok * 1e6, 2) if tok else None,
               "server_cpu_us_per_sse_frame": round(cpu / frames * 1e6, 2) if frames else None,
               "server_cpu_utilisation": round(cpu / wall, 3) if wall else None,
               "dynamo_tokens_per_cpu_s": DYNAMO_TOKENS_PER_CPU_S.get(str(c))}
        if row["server_cpu_us_per_sse_frame"]:
            row["vs_dynamo_per_frame"] = round(row["server_cpu_us_per_sse_frame"] / DYNAMO_US_PER_FRAME, 2)
        rows.append(row)
    summary = [f"c={r['concurrency']:<3} {r['tokens_per_s'] or 0:>8.0f} tokens/s, "
               f"{r['server_cpu_s_per_million_tokens'] or 0:>7.1f} server CPU-s per million tokens "
               f"({r['tokens_per_server_cpu_s'] or 0:.0f} tokens per CPU-s; Dynamo {r['dynamo_tokens_per_cpu_s'] or '-'}), "
               f"{r['server_cpu_us_per_sse_frame'] or 0:.1f} µs per SSE frame "
               f"({r.get('vs_dynamo_per_frame', 0):.1f}x Dynamo's ~20)" for r in rows]
    if profile:
        summary.append("server profile (cProfile, own time): " + "; ".join(
            f"{p['function']} {p['own_share'] * 100:.1f}%" for p in profile[:8]))
    settings: dict[str, Any] = {"concurrency": opts.concurrency, "windows": opts.windows,
                                "requests_per_window": opts.requests_per_window, "apis": opts.apis,
                                "scenarios": opts.scenarios, "server_args": args, "rows": rows,
                                "dynamo_reference": {"us_per_sse_frame": DYNAMO_US_PER_FRAME,
                                                     "tokens_per_cpu_s": DYNAMO_TOKENS_PER_CPU_S,
                                                     "source": "issue 8: Dynamo 1.6.1 Rust frontend, mocker engine"},
                                "loadavg_before": [round(x, 2) for x in load_before],
                                "loadavg_after": [round(x, 2) for x in os.getloadavg()],
                                "profiled": opts.profile, "summary": summary}
    if profile:
        settings["profile"] = profile
    timing = "real-compute"  # the server's CPU time is real; the engine's delays are zero
    base = {"timing": timing, "better": "lower"}
    benchmarks = [
        {**base, "name": "server-cpu-per-token", "title": "Server CPU per output token (µs)", "unit": "µs",
         "settings": settings, "arms": per_token, "ratios": []},
        {**base, "name": "server-cpu-per-frame", "title": "Server CPU per SSE frame (µs; Dynamo ~20)",
         "unit": "µs", "settings": {k: v for k, v in settings.items() if k not in ("rows", "summary", "profile")},
         "arms": per_frame, "ratios": []}]
    server = {"kind": "embedded", "engine": "scripted", "faults": [], "timing": timing}
    if opts.endpoint:
        server = {"kind": "external", "engine": None, "faults": [], "timing": "unknown", "pid": opts.pid}
    run_settings = {"concurrency": opts.concurrency, "engine_delays": "zero (--ttft-base-ms 0 "
                    "--prefill-us-per-token 0 --decode-ms 0)", "client": "replay.client.StreamClient (aiohttp + uvloop)",
                    "cpu_source": "/proc/PID/stat utime+stime of the server process", "profiled": opts.profile}
    return common.results_document(benchmarks=benchmarks, endpoint=opts.endpoint or "embedded", model=model,
                                   apis=opts.apis,
                                   server=server, settings=run_settings, started_at=started)
