"""Replay a trace against an endpoint: sessions concurrently (bounded), turns in order.

Modes:

- ``fixed``: every request is the trace's own (deltas expanded with the recorded answers), so the
  prompts are identical run to run whatever the endpoint answers. A ``$answer`` whose turn has no
  recorded ``response`` (e.g. an AIPerf import) takes the endpoint's answer (``history: "live"``).
- ``live``: the endpoint's answers (folded from the stream) become the history: each ``$answer``
  is the previous turn's live answer; tool results and user messages come from the trace, with the
  recorded tool-call ids mapped, in order, onto the live ones. A turn given whole is sent as
  recorded in both modes. When a live answer is missing (the turn failed), the recorded one is
  used if there is one; otherwise the session's remaining turns are skipped.

Timing: a turn starts ``(think_ms + tool_ms) * time_scale`` after the previous turn ended, and no
earlier than ``at_ms * time_scale`` after the run start; ``time_scale=0`` never waits.

``replay(trace, options) -> ReplayResult``; ``ReplayResult.write(out_dir)`` writes
``results.json`` (turn records + summary) and ``turns.csv`` (one row per turn, plain columns).
"""

from __future__ import annotations

import asyncio
import csv
import hashlib
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harnesscheck.protocol.wire.redact import redact_text

from .client import StreamClient, StreamResult, run_async
from .fold import view
from .forms import FORMS
from .trace import Session, Trace, TraceTurn, expand_turn, is_answer_marker

__all__ = ["ReplayOptions", "ReplayResult", "areplay", "replay", "percentile", "summarize", "CSV_COLUMNS"]

MODES = ("fixed", "live")
CSV_COLUMNS = [
    "session", "turn", "api", "path", "mode", "history", "status", "ok", "error_kind", "error",
    "start_ms", "headers_ms", "ttft_ms", "end_ms", "tokens", "itl_median_ms", "itl_p90_ms", "itl_max_ms",
    "first_tool_ready_ms", "tool_calls", "stop_reason", "structure_match", "input_tokens",
    "cached_tokens", "output_tokens", "request_bytes", "request_sha256",
]


@dataclass(slots=True, kw_only=True)
class ReplayOptions:
    endpoint: str
    model: str | None = None
    mode: str = "fixed"
    concurrency: int = 16
    time_scale: float = 1.0
    api_key: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    timeout: float = 600.0
    read_timeout: float | None = 300.0
    progress: bool = True
    # Called with (session, turn, body) just before each request is sent (tests, logging).
    on_request: Callable[[str, int, dict[str, Any]], None] | None = None


def percentile(values: list[float], q: float) -> float | None:
    """Linear-interpolated percentile (q in 0..100), None for no values."""
    if not values:
        return None
    v = sorted(values)
    pos = (len(v) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def _stats(values: list[float]) -> dict[str, Any]:
    if not values:
        return {"n": 0}
    return {"n": len(values), "mean": round(sum(values) / len(values), 3),
            **{f"p{q}": round(percentile(values, q) or 0.0, 3) for q in (50, 90, 99)},
            "max": round(max(values), 3)}


@dataclass(slots=True)
class ReplayResult:
    records: list[dict[str, Any]]
    summary: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"schema": "harnesscheck.replay", "version": 1, "summary": self.summary, "turns": self.records}

    def write(self, out_dir: str | Path) -> dict[str, Path]:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        jpath = out / "results.json"
        jpath.write_text(json.dumps(self.to_dict(), indent=1, ensure_ascii=False), encoding="utf-8")
        cpath = out / "turns.csv"
        with cpath.open("w", newline="", encoding="utf-8") as fh:
            w = csv.DictWriter(fh, fieldnames=CSV_COLUMNS, extrasaction="ignore")
            w.writeheader()
            for rec in self.records:
                w.writerow({k: ("" if rec.get(k) is None else rec.get(k)) for k in CSV_COLUMNS})
        return {"json": jpath, "csv": cpath}


# -- history helpers --------------------------------------------------------------------------

_ID_KEYS = ("tool_use_id", "tool_call_id", "call_id")


def _remap_ids(obj: Any, mapping: Mapping[str, str]) -> Any:
    if isinstance(obj, dict):
        return {k: (mapping.get(v, v) if k in _ID_KEYS and isinstance(v, str) else _remap_ids(v, mapping))
                for k, v in obj.items()}
    if isinstance(obj, list):
        return [_remap_ids(v, mapping) for v in obj]
    return obj


# What a trace's headers never set: the connection's and the message's framing are the client's own
# (the endpoint's host, the body sent), whatever the recorded exchange had.
NOT_FROM_TRACE = frozenset({"host", "content-length", "transfer-encoding", "connection", "keep-alive",
                            "proxy-connection", "te", "trailer", "upgrade", "expect"})


def _headers_for(turn: TraceTurn, opts: ReplayOptions) -> dict[str, str]:
    hdrs = {k: v for k, v in turn.headers.items() if "[REDACTED]" not in v and k.lower() not in NOT_FROM_TRACE}
    f = FORMS.get(turn.api)
    for k, v in (f.version_headers if f else {}).items():
        hdrs.setdefault(k, v)
    if opts.api_key:
        name, value = f.key_header if f else ("authorization", "Bearer {key}")
        hdrs[name] = value.format(key=opts.api_key)
    hdrs.update(opts.headers)
    return hdrs


def _structure_match(expect: dict[str, Any] | None, got: dict[str, Any]) -> bool | None:
    if not expect or not got:
        return None
    for key in ("blocks", "tool_calls"):
        if key in expect and expect[key] != got.get(key):
            return False
    return True


def _record(turn: TraceTurn, r: StreamResult | None, *, mode: str, history: str, run_start_ns: int,
            body_bytes: bytes, secrets: list[str], error: str | None = None) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "session": turn.session, "turn": turn.turn, "api": turn.api, "path": turn.path, "mode": mode,
        "history": history, "request_bytes": len(body_bytes),
        "request_sha256": hashlib.sha256(body_bytes).hexdigest() if body_bytes else None,
    }
    if r is None:
        rec.update(status=None, ok=False, error_kind="skipped", error=error)
        return rec
    ms = lambda ns: None if ns is None else round(ns / 1e6, 3)  # noqa: E731
    itl = [round(x, 3) for x in r.itl_ms()]
    usage = r.usage or {}
    cached = usage.get("cache_read_input_tokens")
    if cached is None:
        details = usage.get("prompt_tokens_details") or usage.get("input_tokens_details") or {}
        cached = details.get("cached_tokens") if isinstance(details, dict) else None
    rec.update(
        status=r.status, ok=r.ok, error_kind=r.error_kind,
        error=redact_text(r.error, secrets) if r.error else None,
        start_ms=round((r.start_ns - run_start_ns) / 1e6, 3), headers_ms=ms(r.headers_ns), ttft_ms=ms(r.ttft_ns),
        end_ms=ms(r.end_ns), tokens=len(r.token_ns), itl_ms=itl,
        itl_median_ms=None if not itl else round(percentile(itl, 50) or 0, 3),
        itl_p90_ms=None if not itl else round(percentile(itl, 90) or 0, 3),
        itl_max_ms=max(itl) if itl else None,
        tool_ready=[t.to_dict() for t in r.tool_ready],
        first_tool_ready_ms=ms(min(t.t_ns for t in r.tool_ready)) if r.tool_ready else None,
        tool_calls=";".join(str(n) for n in r.structure.get("tool_calls") or []),
        stop_reason=r.stop_reason, structure=r.structure, expect=turn.expect,
        structure_match=_structure_match(turn.expect, r.structure),
        input_tokens=usage.get("input_tokens", usage.get("prompt_tokens")),
        cached_tokens=cached, output_tokens=usage.get("output_tokens", usage.get("completion_tokens")),
    )
    return rec


# -- the run -----------------------------------------------------------------------------------

class _Run:
    def __init__(self, trace: Trace, opts: ReplayOptions) -> None:
        if opts.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {opts.mode!r}")
        if opts.concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        self.trace = trace
        self.opts = opts
        self.base = opts.endpoint.rstrip("/")
        self.records: list[dict[str, Any]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.secrets = [s for s in [opts.api_key, *opts.headers.values()] if s]
        self.on_turn_done: Callable[[dict[str, Any]], None] | None = None

    async def _wait_until(self, t_ns: int) -> None:
        delay = (t_ns - time.perf_counter_ns()) / 1e9
        if delay > 0:
            await asyncio.sleep(delay)

    async def session(self, s: Session, client: StreamClient, sem: asyncio.Semaphore, start_ns: int) -> None:
        async with sem:
            await self._session(s, client, start_ns)

    async def _session(self, s: Session, client: StreamClient, start_ns: int) -> None:
        opts = self.opts
        scale = max(0.0, opts.time_scale)
        prev_body: dict[str, Any] | None = None
        prev_result: StreamResult | None = None
        prev_end = time.perf_counter_ns()
        skip_reason: str | None = None
        for i, turn in enumerate(s.turns):
            if skip_reason:
                self._done(_record(turn, None, mode=opts.mode, history="skipped", run_start_ns=start_ns,
                                   body_bytes=b"", secrets=self.secrets, error=skip_reason))
                continue
            target = prev_end + int((turn.timing.think_ms + turn.timing.tool_ms) * scale * 1e6)
            if turn.timing.at_ms is not None:
                target = max(target, start_ns + int(turn.timing.at_ms * scale * 1e6))
            if i > 0 or turn.timing.at_ms:
                await self._wait_until(target)
            history = "whole"
            remap = None
            answer: list[Any] | None = None
            if turn.request is None:
                prev_turn = s.turns[i - 1]
                uses_answer = any(is_answer_marker(e) for e in (turn.delta or {}).get("append") or ())
                live_answer = prev_result.answer if prev_result is not None and prev_result.ok else None
                if not uses_answer:
                    history = "delta"
                elif opts.mode == "fixed" and prev_turn.response is not None:
                    answer, history = prev_turn.response, "recorded"
                elif live_answer is not None:
                    answer, history = live_answer, "live"
                    ids = view(turn.api).call_ids
                    mapping = dict(zip(ids(prev_turn.response), ids(live_answer), strict=False))
                    mapping = {k: v for k, v in mapping.items() if k and v and k != v}
                    if mapping:
                        remap = lambda entries, m=mapping: _remap_ids(entries, m)  # noqa: E731
                elif prev_turn.response is not None:
                    answer, history = prev_turn.response, "recorded"
                else:
                    skip_reason = f"turn {prev_turn.turn} has no answer to build on (it failed and none was recorded)"
                    self._done(_record(turn, None, mode=opts.mode, history="skipped", run_start_ns=start_ns,
                                       body_bytes=b"", secrets=self.secrets, error=skip_reason))
                    continue
            body = expand_turn(prev_body, turn, answer, remap)
            if opts.model:
                body["model"] = opts.model
            if opts.on_request is not None:
                opts.on_request(s.id, turn.turn, body)
            data = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            try:
                result = await client.post(self.base + turn.path, body, api=turn.api,
                                           headers=_headers_for(turn, opts), data=data)
            finally:
                self.in_flight -= 1
            prev_end = time.perf_counter_ns()
            self._done(_record(turn, result, mode=opts.mode, history=history, run_start_ns=start_ns,
                               body_bytes=data, secrets=self.secrets))
            prev_body, prev_result = body, result

    def _done(self, rec: dict[str, Any]) -> None:
        self.records.append(rec)
        if self.on_turn_done is not None:
            self.on_turn_done(rec)

    async def run(self) -> ReplayResult:
        opts = self.opts
        total = sum(len(s.turns) for s in self.trace.sessions)
        progress = None
        if opts.progress:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            progress = Progress(TextColumn("[bold]replay[/bold] {task.description}"), BarColumn(),
                                MofNCompleteColumn(), TimeElapsedColumn(), console=Console(stderr=True),
                                transient=False)
            task = progress.add_task("", total=total)
            counts = {"ok": 0, "failed": 0}

            def tick(rec: dict[str, Any]) -> None:
                counts["ok" if rec.get("ok") else "failed"] += 1
                progress.update(task, advance=1, description=f"ok {counts['ok']}  failed {counts['failed']}  "
                                                             f"in flight {self.in_flight}")

            self.on_turn_done = tick
            progress.start()
        sem = asyncio.Semaphore(opts.concurrency)
        wall0 = time.time()
        start_ns = time.perf_counter_ns()
        interrupted = False
        try:
            async with StreamClient(limit=0, timeout=opts.timeout, read_timeout=opts.read_timeout) as client:
                await asyncio.gather(*(self.session(s, client, sem, start_ns) for s in self.trace.sessions))
        except asyncio.CancelledError:  # stopped (run_async: SIGINT/SIGTERM): the finished turns are the result;
            interrupted = True  # the turns cut off in flight were never measured and have no record
        finally:
            if progress is not None:
                progress.stop()
        wall = (time.perf_counter_ns() - start_ns) / 1e9
        order = {(s.id, t.turn): n for n, (s, t) in enumerate((s, t) for s in self.trace.sessions for t in s.turns)}
        self.records.sort(key=lambda r: order.get((r["session"], r["turn"]), 0))
        summary = summarize(self.records, self.opts, self.trace, wall=wall, wall0=wall0,
                            max_in_flight=self.max_in_flight)
        if interrupted:
            summary["interrupted"] = True
        return ReplayResult(self.records, summary)


def summarize(records: list[dict[str, Any]], opts: ReplayOptions, trace: Trace, *, wall: float, wall0: float,
              max_in_flight: int) -> dict[str, Any]:
    """The summary of a replay from its raw turn records: counts and the percentiles of every sample
    (``harnesscheck.replay.distributed`` calls it on the merged records of all its workers). ``mean_in_flight``:
    requests in flight on average over the wall time (their summed durations / wall)."""
    ok = [r for r in records if r.get("ok")]
    busy_ms = sum(r["end_ms"] for r in records if r.get("end_ms") is not None)

    def col(name: str) -> list[float]:
        return [r[name] for r in ok if r.get(name) is not None]

    itl = [x for r in ok for x in r.get("itl_ms") or ()]
    return {
        "endpoint": opts.endpoint, "mode": opts.mode, "concurrency": opts.concurrency,
        "time_scale": opts.time_scale, "model": opts.model, "trace_source": trace.source,
        "started_at": wall0, "wall_s": round(wall, 3), "sessions": len(trace.sessions),
        "turns": len(records), "turns_ok": len(ok), "turns_failed": len(records) - len(ok),
        "max_in_flight": max_in_flight, "mean_in_flight": round(busy_ms / (wall * 1000), 2) if wall > 0 else 0.0,
        "structure_mismatches": sum(1 for r in ok if r.get("structure_match") is False),
        "ttft_ms": _stats(col("ttft_ms")), "headers_ms": _stats(col("headers_ms")),
        "end_ms": _stats(col("end_ms")), "itl_ms": _stats(itl),
        "first_tool_ready_ms": _stats(col("first_tool_ready_ms")),
        "client": "http1" + ("+uvloop" if _has_uvloop() else ""),
    }


def _has_uvloop() -> bool:
    try:
        import uvloop  # noqa: F401
    except ImportError:  # pragma: no cover
        return False
    return True


async def areplay(trace: Trace, options: ReplayOptions) -> ReplayResult:
    return await _Run(trace, options).run()


def replay(trace: Trace, options: ReplayOptions) -> ReplayResult:
    """Replay on uvloop (when installed); see the module docstring for the modes."""
    return run_async(areplay(trace, options))


def first_model(endpoint: str, api_key: str | None = None) -> str | None:
    """The first model id the endpoint lists (GET /v1/models), or None."""
    import httpx

    headers = {"x-api-key": api_key, "authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        r = httpx.get(endpoint.rstrip("/") + "/v1/models", headers=headers, timeout=10)
        data = r.json().get("data") or []
        return str(data[0]["id"]) if data else None
    except (httpx.HTTPError, ValueError, KeyError, AttributeError, IndexError):
        return None

