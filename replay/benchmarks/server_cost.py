"""`bench server`: a server's CPU per streamed token, measured the same way on each side in one run:
the reference server (engine delays zero) and, with ``dynamo_python``, Dynamo's frontend with its
CPU mocker replaying the very same outputs (or any server of this machine: ``endpoint`` + ``pid``).

Per side and concurrency (1, 8, 32): ``c`` workers of the kit's client (``harnesscheck.replay.client``) stream
back to back (a closed loop) for a warm-up, then for ``windows`` consecutive windows of
``window_s`` seconds each (15 by default; sustained, not bursts); the APIs and scenarios rotate.
At each window boundary the side's server processes' CPU time is read (``/proc/PID/stat`` utime +
stime: the reference server's process; the Dynamo frontend's process and its children, not the
mocker's, which plays the engine). After the last window the workers stop and their streams end.

Tokens are counted from what was streamed, never from ``usage``: each stream's reasoning, text,
tool names and arguments, as the client folded them, counted with the reference tokenizer (the
mocker replays the reference server's own token ids, so both sides stream the same text), and
spread over the windows by the arrival times of its content-bearing frames. ``usage`` output tokens
are reported beside them as a cross-check. A stream that failed (transport error, HTTP error,
error event, no end event) or ended valid but empty taints every window it overlaps: those windows
are reported and left out of both numerator and denominator. ``response.incomplete`` is a valid
Responses end (so is ``finish_reason: length``).

Writes: with zero engine delays every token is due at once, so the reference server writes the
frames of up to 16 tokens per socket write (``reference_server.service.Turn.steps``: one frame per
token still), about as many as Dynamo's frontend does (hyper's ``writev``; both ~12 content frames
per write, measured with strace, docs/benchmarks.md).

APIs: Chat and Messages by default. Dynamo 1.6.1's Responses streams carry no reasoning text
(measured here: 5 content frames for an output of 1,444 tokens, ``usage`` counting all of them),
so per streamed token they would not compare like with like; ``apis`` may add ``responses``.

Dynamo's output: the reference server's non-streamed Chat answer per scenario is written back in
raw model form (``harnesscheck.reference_server.parsers.stream.render_parts``, the nemotron_deci reasoning and
qwen3_coder tool formats the reference server's default parsers use), tokenized, and put in the
mocker's replay trace; each request names its output with ``"nvext": {"annotations":
["output_replay_id:NAME"]}`` and Dynamo runs the same two parsers (``dynamo_peer``).

Reference figure (not measured by this command): issue 24, this machine (2 cores, shared),
2026-12 with Dynamo 1.6.1 frontend + mocker, 15 s windows: 44.3k tokens per frontend CPU-second
(Chat, c=8), 56.4k (Chat, c=32). It is printed only as that, labelled.

``--profile`` runs the reference server under cProfile (slower: for where, not how much).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
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

from harnesscheck.replay.benchmarks import common
from harnesscheck.replay.fold import view

REFERENCE_FIGURE: dict[str, Any] = {
    "source": "issue 24 (docs/benchmarks.md), this 2-core shared machine, 2026-12, Dynamo 1.6.1 "
              "frontend + CPU mocker, 15 s windows, Chat API",
    "tokens_per_frontend_cpu_s": {"8": 44300, "32": 56400}}


@dataclass
class ServerCostOptions:
    """Everything `bench server` takes (the CLI maps its options one to one)."""

    concurrency: list[int] = field(default_factory=lambda: [1, 8, 32])
    windows: int = 3  # per side and level
    window_s: float = 15.0
    warmup_s: float = 3.0
    apis: list[str] = field(default_factory=lambda: ["chat", "anthropic"])  # see the module doc on responses
    scenarios: list[str] = field(default_factory=lambda: ["long_reasoning", "long_agent_turn"])
    server_args: list[str] = field(default_factory=list)
    profile: bool = False
    profile_top: int = 25
    dynamo_python: str | None = None  # also measure Dynamo's frontend + mocker from this environment
    dynamo_model_dir: str | None = None  # HF folder with tokenizer, chat template, config (no weights needed)
    endpoint: str | None = None  # measure this server instead (with pid: its process on this machine)
    pid: int | None = None
    model: str | None = None
    api_key: str | None = None


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all its threads, not its children), seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _cpu(pids: list[int]) -> float:
    return sum(cpu_seconds(p) for p in pids)


class _Server:
    """The reference server in a subprocess, optionally under cProfile; ``pid`` is the server's."""

    def __init__(self, args: list[str], profile_path: str | None) -> None:
        self.args = args
        self.profile_path = profile_path
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""
        self.output: list[str] = []

    def __enter__(self) -> _Server:
        from harnesscheck.reference_server.launch import wait_healthy

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
        # the rest of its output, line by line as it comes (extend appends each line it reads)
        threading.Thread(target=self.output.extend, args=(self.proc.stdout,), daemon=True).start()
        if wait_healthy(self.url, deadline):
            return self
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


# -- one stream, as counted ----------------------------------------------------------------------

@dataclass
class Stream:
    """One request as the window accounting sees it (times: perf_counter_ns, shared clock)."""

    api: str
    side: str
    concurrency: int
    start_ns: int
    end_ns: int
    frame_ns: list[int]  # arrival of each content-bearing frame
    tokens: int  # streamed content, tokenized
    usage_tokens: int | None
    error: str | None  # None: a valid end

    @property
    def empty(self) -> bool:
        return self.error is None and not self.frame_ns


def streamed_text(api: str, answer: list[Any] | None) -> str:
    """The content a stream carried, from the client's fold (``StreamResult.answer``): reasoning,
    text, tool names and arguments, in order (``replay.fold``)."""
    return view(api).text(answer)


def stream_error(r: Any) -> str | None:
    """None when the stream ended validly: the API's end event (the client counts Responses'
    ``response.incomplete`` as one)."""
    return None if r.ok else r.error or f"HTTP {r.status}"


def to_stream(r: Any, count: Any, side: str = "", concurrency: int = 0) -> Stream:
    """A ``replay.client.StreamResult`` as counted; ``count(text)`` is the tokenizer's count."""
    err = stream_error(r)
    usage = r.usage.get("output_tokens", r.usage.get("completion_tokens"))
    tokens = count(streamed_text(r.api, r.answer)) if err is None and r.token_ns else 0
    return Stream(r.api, side, concurrency, r.start_ns, r.start_ns + (r.end_ns or 0), [r.start_ns + t for t in r.token_ns], tokens,
                  None if usage is None else int(usage), err)


# -- windows ------------------------------------------------------------------------------------

@dataclass
class Window:
    """One fixed-duration window: server and client CPU, the streams' share of tokens and frames."""

    side: str
    concurrency: int
    start_ns: int
    end_ns: int
    server_cpu_s: float
    client_cpu_s: float
    tokens: float = 0.0
    frames: int = 0
    streams: int = 0  # overlapping the window
    tainted_by: list[str] = field(default_factory=list)  # failed or empty streams overlapping it

    @property
    def wall_s(self) -> float:
        return (self.end_ns - self.start_ns) / 1e9


def account(windows: list[Window], streams: list[Stream]) -> None:
    """Spread each stream's tokens over the windows by its content frames' arrival times; mark the
    windows a failed or empty stream overlaps."""
    for s in streams:
        for w in windows:
            if s.end_ns < w.start_ns or s.start_ns >= w.end_ns:
                continue
            w.streams += 1
            if s.error is not None or s.empty:
                w.tainted_by.append(s.error or "empty stream")
                continue
            inside = sum(1 for t in s.frame_ns if w.start_ns <= t < w.end_ns)
            w.frames += inside
            w.tokens += s.tokens * inside / len(s.frame_ns)


async def _level(client: Any, side: str, url: str, bodies: list[tuple[str, dict[str, Any]]], c: int,
                 pids: list[int], opts: ServerCostOptions, headers: dict[str, str], count: Any,
                 ) -> tuple[list[Window], list[Stream]]:
    clock = time.perf_counter_ns
    results: list[Any] = []
    stop = False
    turn = 0

    async def worker() -> None:
        nonlocal turn
        while not stop:
            api, body = bodies[turn % len(bodies)]
            turn += 1
            results.append(await client.post(url + common.PATHS[api], body, api=api, headers=headers))

    tasks = [asyncio.create_task(worker()) for _ in range(c)]
    await asyncio.sleep(opts.warmup_s)
    marks = [(clock(), _cpu(pids), time.process_time())]
    for _ in range(opts.windows):
        await asyncio.sleep(max(0.0, (marks[0][0] + len(marks) * opts.window_s * 1e9 - clock()) / 1e9))
        marks.append((clock(), _cpu(pids), time.process_time()))
    stop = True
    await asyncio.gather(*tasks)
    windows = [Window(side, c, a[0], b[0], b[1] - a[1], b[2] - a[2]) for a, b in itertools.pairwise(marks)]
    streams = [to_stream(r, count, side, c) for r in results]
    account(windows, streams)
    return windows, streams


# -- the sides ---------------------------------------------------------------------------------

@dataclass
class Side:
    name: str
    url: str
    pids: list[int]
    bodies: list[tuple[str, dict[str, Any]]]
    cpu_of: str


def _bodies(opts: ServerCostOptions, model: str) -> list[tuple[str, str, dict[str, Any]]]:
    """(scenario, api, first-turn body) in rotation order."""
    from harnesscheck.protocol.apis import get as get_api
    from harnesscheck.scenarios.loader import get

    return [(s, api, get_api(api).first(get(s), model)) for s in opts.scenarios for api in opts.apis]


def raw_outputs(url: str, opts: ServerCostOptions, model: str) -> dict[str, list[int]]:
    """Per scenario, the reference server's answer (non-streamed Chat) in raw model form, as the
    reference tokenizer's ids (+ end of turn): what the mocker replays."""
    import httpx

    from harnesscheck.protocol.apis import chat
    from harnesscheck.reference_server.conversation import ToolSpec
    from harnesscheck.reference_server.events import Part, ToolCall
    from harnesscheck.reference_server.parsers import get_reasoning_parser, get_tool_parser
    from harnesscheck.reference_server.parsers.stream import render_parts
    from harnesscheck.reference_server.tokenizer import load
    from harnesscheck.scenarios.loader import get

    tok = load()
    out: dict[str, list[int]] = {}
    for s in opts.scenarios:
        body = chat.first(get(s), model, stream=False)
        r = httpx.post(url + common.PATHS["chat"], json=body, headers=common.headers(opts.api_key), timeout=120)
        r.raise_for_status()
        msg = r.json()["choices"][0]["message"]
        parts = []
        if msg.get("reasoning_content"):
            parts.append(Part("reasoning", msg["reasoning_content"]))
        if msg.get("content"):
            parts.append(Part("text", msg["content"]))
        for i, call in enumerate(msg.get("tool_calls") or ()):
            fn = call["function"]
            parts.append(Part("tool_call", call=ToolCall(i, call["id"], fn["name"], fn["arguments"])))
        tools = [ToolSpec(t["function"]["name"], parameters=t["function"].get("parameters") or {})
                 for t in body.get("tools") or ()]
        raw = render_parts(parts, get_reasoning_parser("nemotron_deci")(),
                           get_tool_parser("qwen3_coder")(tools=tools, id_factory=lambda i: f"call_{i}"))
        out[s] = tok.encode(raw) + [tok.token_id("<|im_end|>")]
    return out


def _measure(sides: list[Side], opts: ServerCostOptions) -> tuple[list[Window], list[Stream]]:
    """Levels in order; at each level every side in turn (so a load change on this shared machine
    falls on both sides of a level rather than on one side)."""
    from harnesscheck.reference_server.tokenizer import load
    from harnesscheck.replay.client import StreamClient, run_async

    tok = load()
    hdrs = common.headers(opts.api_key)

    async def go() -> tuple[list[Window], list[Stream]]:
        windows: list[Window] = []
        streams: list[Stream] = []
        async with StreamClient(limit=0) as client:
            for side in sides:  # warm-up: imports, caches, connections
                await asyncio.gather(*(client.post(side.url + common.PATHS[a], b, api=a, headers=hdrs)
                                       for a, b in side.bodies))
            for c in opts.concurrency:
                for side in sides:
                    w, s = await _level(client, side.name, side.url, side.bodies, c, side.pids, opts, hdrs, tok.count)
                    windows += w
                    streams += s
        return windows, streams

    return run_async(go())


def run_server_cost(opts: ServerCostOptions) -> dict[str, Any]:
    from harnesscheck.reports.schema import now_iso
    from harnesscheck.reference_server.config import DEFAULT_MODEL_IDS

    started = now_iso()
    load_before = os.getloadavg()
    if opts.endpoint:
        if not opts.pid:
            raise ValueError("bench server --endpoint needs --pid: the server's process on this machine")
        url = opts.endpoint.rstrip("/")
        model = common.resolve_model(url, opts.model, opts.api_key)
        side = Side("endpoint", url, [opts.pid], [(a, b) for _, a, b in _bodies(opts, model)],
                    f"/proc/{opts.pid}/stat")
        windows, streams = _measure([side], opts)
        return _document(windows, streams, [side], opts, model, [], started, load_before, None)
    model = opts.model or DEFAULT_MODEL_IDS[0]
    args = [*common.timing_args(0, 0, 0), *opts.server_args]
    prof = os.path.join(tempfile.mkdtemp(prefix="hc-server-prof-"), "server.prof") if opts.profile else None
    with contextlib.ExitStack() as stack:
        srv = stack.enter_context(_Server(args, prof))
        sides = [Side("reference", srv.url, [srv.pid], [(a, b) for _, a, b in _bodies(opts, model)],
                      "the reference server's process")]
        if opts.dynamo_python:
            from harnesscheck.replay.benchmarks.dynamo_peer import DynamoProcess, annotate

            model_dir = opts.dynamo_model_dir or _weightless_model(stack)
            replay = raw_outputs(srv.url, opts, model)
            dyn = stack.enter_context(DynamoProcess(opts.dynamo_python, model_dir, replay=replay))
            bodies = [(a, annotate(b, s)) for s, a, b in _bodies(opts, dyn.model)]
            sides.append(Side("dynamo", dyn.url, dyn.pids, bodies,
                              "the Dynamo frontend's process and its children (not the mocker's)"))
        windows, streams = _measure(sides, opts)
    profile = _profile_top(prof, opts.profile_top) if prof and os.path.exists(prof) else None
    return _document(windows, streams, sides, opts, model, args, started, load_before, profile)


def _weightless_model(stack: contextlib.ExitStack) -> str:
    """A Hugging Face folder the mocker serves (tokenizer, Qwen3 chat template, config; no weights, no torch):
    the reference server's own tokenizer, so both sides stream the same token ids. Removed with ``stack``."""
    import shutil

    from harnesscheck.replay.benchmarks.dynamo_peer import weightless_model

    folder = tempfile.mkdtemp(prefix="hc-dynamo-model-")
    stack.callback(shutil.rmtree, folder, True)
    return str(weightless_model(Path(folder)))


def _profile_top(path: str, top: int) -> list[dict[str, Any]]:
    import pstats

    st = pstats.Stats(path)
    total = st.total_tt or 1.0  # type: ignore[attr-defined]  # set by Stats.load_stats, not in typeshed
    rows = []
    stats = st.stats  # type: ignore[attr-defined]  # the same: {(file, line, fn): (cc, nc, tt, ct, callers)}
    by_own_time = sorted(stats.items(), key=lambda kv: -kv[1][2])
    for (file, line, fn), (_cc, nc, tt, ct, _callers) in by_own_time[:top]:
        short = file.split("/site-packages/")[-1].split("/work/main/")[-1]
        rows.append({"function": f"{short}:{line}({fn})", "calls": nc, "own_s": round(tt, 3),
                     "own_share": round(tt / total, 4), "cumulative_s": round(ct, 3)})
    return rows


def _row(side: str, c: int, ws: list[Window], streams: list[Stream]) -> dict[str, Any]:
    """The figures of one side at one level, from its windows (tainted ones left out) and streams."""
    good = [w for w in ws if not w.tainted_by and w.tokens]
    valid = [s for s in streams if s.error is None and not s.empty]
    tok = sum(w.tokens for w in good)
    cpu = sum(w.server_cpu_s for w in good)
    wall = sum(w.wall_s for w in good)
    frames = sum(w.frames for w in good)
    return {"side": side, "concurrency": c, "windows": len(ws), "windows_used": len(good),
            "windows_excluded": [{"streams": w.streams, "tainted_by": sorted(set(w.tainted_by))[:3]}
                                 for w in ws if w.tainted_by],
            "streams": len(streams), "failed_streams": sum(1 for s in streams if s.error is not None),
            "empty_streams": sum(1 for s in streams if s.empty),
            "failures": sorted({s.error for s in streams if s.error})[:3],
            "median_tokens_per_stream": _median([s.tokens for s in valid]),
            "median_usage_tokens_per_stream": _median([s.usage_tokens for s in valid if s.usage_tokens is not None]),
            "tokens": round(tok), "content_frames": frames, "wall_s": round(wall, 3), "server_cpu_s": round(cpu, 3),
            "client_cpu_s": round(sum(w.client_cpu_s for w in good), 3),
            "tokens_per_s": round(tok / wall, 1) if wall else None,
            "tokens_per_server_cpu_s": round(tok / cpu, 1) if cpu else None,
            "server_cpu_us_per_token": round(cpu / tok * 1e6, 2) if tok else None,
            "server_cpu_us_per_content_frame": round(cpu / frames * 1e6, 2) if frames else None,
            "server_cpu_utilisation": round(cpu / wall, 3) if wall else None}


def _median(xs: list[int]) -> float | None:
    import numpy as np

    return float(np.median(xs)) if xs else None


def _document(windows: list[Window], streams: list[Stream], sides: list[Side], opts: ServerCostOptions, model: str,
              args: list[str], started: str, load_before: tuple[float, float, float],
              profile: list[dict[str, Any]] | None) -> dict[str, Any]:
    per_token: list[dict[str, Any]] = []
    per_frame: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    ratios: list[dict[str, Any]] = []
    for c in opts.concurrency:
        by_side = {}
        for side in sides:
            ws = [w for w in windows if w.side == side.name and w.concurrency == c]
            rows.append(_row(side.name, c, ws, [s for s in streams if s.side == side.name and s.concurrency == c]))
            good = [w for w in ws if not w.tainted_by and w.tokens]
            name = f"{side.name} c={c}" if len(sides) > 1 else f"c={c}"
            by_side[side.name] = common.arm(name, [w.server_cpu_s / w.tokens * 1e6 for w in good])
            per_token.append(by_side[side.name])
            per_frame.append(common.arm(name, [w.server_cpu_s / w.frames * 1e6 for w in good if w.frames]))
        if "dynamo" in by_side:
            ratios.append(common.ratio(f"reference/dynamo c={c}", by_side["reference"], by_side["dynamo"]))
    summary = [_row_text(r) for r in rows]
    summary += [f"ratio of µs per token {r['name']}: " + ("-" if r["value"] is None else
                f"{r['value']:.2f} (95% CI {r['ci95'][0]:.2f}-{r['ci95'][1]:.2f}; above 1: the reference costs more)")
                for r in ratios]
    if not any(s.name == "dynamo" for s in sides):
        figs = ", ".join(f"c={k} {v / 1000:.1f}k" for k, v in REFERENCE_FIGURE["tokens_per_frontend_cpu_s"].items())
        summary.append(f"reference figure, not measured now: Dynamo frontend {figs} tokens per CPU-s "
                       f"({REFERENCE_FIGURE['source']})")
    if profile:
        summary.append("server profile (cProfile, own time): " + "; ".join(
            f"{p['function']} {p['own_share'] * 100:.1f}%" for p in profile[:8]))
    settings: dict[str, Any] = {"concurrency": opts.concurrency, "windows": opts.windows, "window_s": opts.window_s,
                                "warmup_s": opts.warmup_s, "apis": opts.apis, "scenarios": opts.scenarios,
                                "server_args": args, "rows": rows, "sides": {s.name: s.cpu_of for s in sides},
                                "reference_figure": REFERENCE_FIGURE,
                                "loadavg_before": [round(x, 2) for x in load_before],
                                "loadavg_after": [round(x, 2) for x in os.getloadavg()],
                                "profiled": opts.profile, "summary": summary}
    if profile:
        settings["profile"] = profile
    timing = "real-compute"  # the servers' CPU time is real; the engines' delays are zero / sped up
    base = {"timing": timing, "better": "lower"}
    benchmarks = [
        {**base, "name": "server-cpu-per-token", "title": "Server CPU per streamed token (µs, one sample per window)",
         "unit": "µs", "settings": settings, "arms": per_token, "ratios": ratios},
        {**base, "name": "server-cpu-per-frame", "title": "Server CPU per content frame (µs, one sample per window)",
         "unit": "µs", "settings": {k: v for k, v in settings.items() if k not in ("rows", "summary", "profile")},
         "arms": per_frame, "ratios": []}]
    server: dict[str, Any] = {"kind": "embedded", "engine": "scripted", "faults": [], "timing": timing}
    if opts.endpoint:
        server = {"kind": "external", "engine": None, "faults": [], "timing": "unknown", "pid": opts.pid}
    run_settings = {"concurrency": opts.concurrency, "engine_delays": "reference: zero (--ttft-base-ms 0 "
                    "--prefill-us-per-token 0 --decode-ms 0); dynamo mocker: --speedup-ratio 1000",
                    "client": "replay.client.StreamClient (aiohttp + uvloop), one process",
                    "tokens": "streamed reasoning/text/tool names+arguments, counted with the reference tokenizer",
                    "cpu_source": "/proc/PID/stat utime+stime at each window boundary", "profiled": opts.profile}
    return common.results_document(benchmarks=benchmarks, endpoint=opts.endpoint or "embedded", model=model,
                                   apis=opts.apis, server=server, settings=run_settings, started_at=started)


def _row_text(r: dict[str, Any]) -> str:
    head = f"{r['side']:<9} c={r['concurrency']:<3}"
    if not r["windows_used"]:
        return (f"{head} no usable window ({len(r['windows_excluded'])} of {r['windows']} excluded; "
                f"{r['failed_streams']} failed, {r['empty_streams']} empty streams)")
    excluded = len(r["windows_excluded"])
    return (f"{head} {r['tokens_per_server_cpu_s'] or 0:>8.0f} tokens per server CPU-s, "
            f"{r['server_cpu_us_per_token'] or 0:.1f} µs/token, {r['server_cpu_us_per_content_frame'] or 0:.1f} µs/frame, "
            f"{r['tokens_per_s'] or 0:.0f} tokens/s, CPU {r['server_cpu_utilisation'] or 0:.2f} cores; "
            f"{r['windows_used']} windows of {r['wall_s'] / r['windows_used']:.0f} s"
            + (f"; {excluded} windows excluded" if excluded else "")
            + (f"; {r['failed_streams']} failed" if r["failed_streams"] else "")
            + (f"; {r['empty_streams']} empty" if r["empty_streams"] else ""))
