"""`bench history`: next-turn TTFT with the history kept versus rewritten (article 1: 167 vs 322 ms).

Each session (Chat Completions): a shared system prompt (warmed once per server), then a unique user
message that has the model call a ``Note`` tool with a long quoted text, so the assistant turn is
short reasoning followed by a long tool call (``--turn-tokens``). The measured request is the next
turn: that history, sent back exactly as streamed, plus the tool result. A server that keeps the
history as generated reuses the cached turn and prefills only the tool result; one that rewrites
past reasoning before templating (the reference server's ``--fault rewrite-history-reasoning``)
misses the cache from that reasoning on, so it prefills the whole previous turn again.

Arms: ``kept`` (default server) and ``rewritten`` (the fault); the ratio rewritten/kept. Against an
external endpoint only one arm runs, ``endpoint``, and the cached-token counts it reports say which
case it is.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from typing import Any

from harnesscheck.replay.benchmarks import common

NOTE_TOOL = {"type": "function", "function": {
    "name": "Note", "description": "Save a note.",
    "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}}


@dataclass(kw_only=True)
class HistoryOptions(common.RoundsOptions):
    sessions: int = 8
    system_tokens: int = 2000
    turn_tokens: int = 1500  # the previous assistant turn after its reasoning (the Note call's text)
    decode_ms: float = 0.2


def _cached(usage: dict[str, Any]) -> int | None:
    details = usage.get("prompt_tokens_details") or {}
    v = details.get("cached_tokens", usage.get("cache_read_input_tokens"))
    return v if isinstance(v, int) else None


async def _session(client: Any, url: str, model: str, system: str, note: str, hdrs: dict[str, str]) -> dict[str, Any]:
    user = f"Session {uuid.uuid4().hex}. Use the Note tool with `{note}`"
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    body = {"model": model, "stream": True, "stream_options": {"include_usage": True}, "messages": messages,
            "tools": [NOTE_TOOL], "max_tokens": 2 * len(note) + 256}
    first = await client.post(url + common.PATHS["chat"], body, api="chat", headers=hdrs)
    if not first.ok or not first.answer:
        raise RuntimeError(f"history turn 1 failed: {first.error}")
    answer = first.answer[0]
    calls = answer.get("tool_calls") or []
    if not calls:
        raise RuntimeError("history turn 1: the model made no tool call")
    follow = messages + [answer] + [{"role": "tool", "tool_call_id": c.get("id", ""), "content": "saved"}
                                    for c in calls]
    second = await client.post(url + common.PATHS["chat"], {**body, "messages": follow}, api="chat", headers=hdrs)
    if not second.ok or second.ttft_ns is None:
        raise RuntimeError(f"history turn 2 failed: {second.error or 'no content event'}")
    return {"ttft_ms": second.ttft_ns / 1e6, "prompt_tokens": second.usage.get("prompt_tokens"),
            "cached_tokens": _cached(second.usage), "turn1_output_tokens": first.usage.get("completion_tokens")}


async def _measure(urls: dict[str, str], model: str, system: str, note: str,
                   opts: HistoryOptions) -> dict[str, list[dict[str, Any]]]:
    from harnesscheck.replay.client import StreamClient

    hdrs = common.headers(opts.api_key)
    out: dict[str, list[dict[str, Any]]] = {name: [] for name in urls}
    names = list(urls)
    async with StreamClient(limit=4) as client:
        for measured, order in opts.rounds(names):  # the first round also warms the shared system prompt
            for name in order:
                try:
                    m = await _session(client, urls[name], model, system, note, hdrs)
                except asyncio.CancelledError:  # stopped: the sessions measured so far (none: the stop as it came)
                    if any(out.values()):
                        return out
                    raise
                if measured:
                    out[name].append(m)
    return out


def run_history(opts: HistoryOptions) -> dict[str, Any]:
    from harnesscheck.reports.schema import now_iso

    started = now_iso()
    system = common.filler_text(opts.system_tokens, seed=1)
    note = common.filler_text(opts.turn_tokens, seed=2).replace("`", "'")
    with common.target(opts, [], ["--fault", "rewrite-history-reasoning"]) as target:
        names = ("kept", "rewritten") if target.embedded else ("endpoint",)
        urls = dict(zip(names, target.urls, strict=True))
        found, stop = common.run_stoppable(_measure(urls, target.model, system, note, opts))
        server = target.server_info()
    arms = {name: common.arm(name, [m["ttft_ms"] for m in ms], seed=n) for n, (name, ms) in enumerate(found.items())}
    ratios = [common.ratio("rewritten/kept", arms["rewritten"], arms["kept"], seed=21)] if "rewritten" in arms else []
    usage = {name: {k: ms[0][k] for k in ("prompt_tokens", "cached_tokens", "turn1_output_tokens")}
             for name, ms in found.items() if ms}
    summary = [f"{name}: next-turn prompt {u['prompt_tokens']} tokens, {u['cached_tokens']} from the cache"
               for name, u in usage.items()]
    settings: dict[str, Any] = {"api": "chat", "system_tokens": opts.system_tokens, "turn_tokens": opts.turn_tokens,
                                "sessions": opts.sessions, "warmup_rounds": opts.warmup, "concurrency": 1,
                                "arms": {"kept": "default server", "rewritten": "--fault rewrite-history-reasoning"}
                                if not opts.endpoint else {"endpoint": "the endpoint's own behaviour"},
                                "usage_first_sample": usage, "summary": summary}
    return common.stopped(common.one_benchmark_document(
        opts, target, server, name="history-ttft",
        title="Next-turn TTFT: history kept vs past reasoning rewritten", api="chat", settings=settings,
        arms=list(arms.values()), ratios=ratios, started_at=started), stop)
