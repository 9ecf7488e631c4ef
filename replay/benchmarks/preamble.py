"""`bench preamble`: TTFT of a shared long system prompt with and without Claude Code's per-session
``x-anthropic-billing-header`` (article 1: 168 ms stable, 912 ms header, 169 ms stripped).

Arms (Anthropic Messages, one request per new session, a unique user message at the end so only the
shared system part can come from the prefix cache):

- ``stable``: the shared system prompt alone;
- ``header``: a fresh ``x-anthropic-billing-header: cc_version=...; cc_entrypoint=cli; cch=<random>;``
  system block before it, against a server that keeps the header (it lands at prompt position 0 and
  every session misses the cache);
- ``stripped``: the same header arm against a server that strips it before tokenizing.

With no endpoint the reference server is started twice (``--no-strip-anthropic-preamble`` for
``stable`` and ``header``, the default for ``stripped``) with a non-zero timing model. Against an
external endpoint only ``stable`` and ``header`` run; the endpoint's own setting decides what the
header arm measures. The shared prefix is warmed once per server, arms are interleaved (order rotated
per round), the first round is a discarded warm-up.
"""

from __future__ import annotations

import asyncio
import secrets
import uuid
from dataclasses import dataclass
from typing import Any

from harnesscheck.replay.benchmarks import common

HEADER_TEMPLATE = "x-anthropic-billing-header: cc_version=2.1.197; cc_entrypoint=cli; cch={cch};"


@dataclass(kw_only=True)
class PreambleOptions(common.RoundsOptions):
    system_tokens: int = 8000  # the shared system prompt
    sessions: int = 16
    max_tokens: int = 16  # output tokens per request
    decode_ms: float = 1.0


def billing_header() -> str:
    return HEADER_TEMPLATE.format(cch=secrets.token_hex(3))


def body(model: str, system: str, *, header: bool, max_tokens: int) -> dict[str, Any]:
    blocks = [{"type": "text", "text": billing_header()}] if header else []
    blocks.append({"type": "text", "text": system})
    user = f"Session {uuid.uuid4().hex}: reply with ok."
    return {"model": model, "max_tokens": max_tokens, "stream": True, "system": blocks,
            "messages": [{"role": "user", "content": user}]}


async def _measure(targets: dict[str, tuple[str, bool]], model: str, system: str, opts: PreambleOptions,
                   warm: list[tuple[str, bool]]) -> tuple[dict[str, list[float]], dict[str, Any]]:
    from harnesscheck.replay.client import StreamClient

    hdrs = common.headers(opts.api_key)
    samples: dict[str, list[float]] = {name: [] for name in targets}
    usage: dict[str, Any] = {}
    names = list(targets)
    async with StreamClient(limit=4) as client:
        for url, header in warm:  # the shared prefix, once per server
            r = await client.post(url + common.PATHS["anthropic"], body(model, system, header=header,
                                  max_tokens=opts.max_tokens), api="anthropic", headers=hdrs)
            if not r.ok:
                raise RuntimeError(f"warm-up request to {url} failed: {r.error}")
        for measured, order in opts.rounds(names):
            for name in order:
                url, header = targets[name]
                try:
                    r = await client.post(url + common.PATHS["anthropic"], body(model, system, header=header,
                                          max_tokens=opts.max_tokens), api="anthropic", headers=hdrs)
                except asyncio.CancelledError:  # stopped: the samples taken so far (none: the stop as it came)
                    if any(samples.values()):
                        return samples, usage
                    raise
                if not r.ok or r.ttft_ns is None:
                    raise RuntimeError(f"{name}: request failed: {r.error or 'no content event'}")
                if measured:
                    samples[name].append(r.ttft_ns / 1e6)
                    usage.setdefault(name, []).append(
                        {k2: r.usage.get(k2) for k2 in ("input_tokens", "cache_read_input_tokens")
                         if k2 in r.usage})
    return samples, usage


def run_preamble(opts: PreambleOptions) -> dict[str, Any]:
    """Run the benchmark; returns the results document (``common.write_outputs`` writes it)."""
    from harnesscheck.reports.schema import now_iso

    started = now_iso()
    system = common.filler_text(opts.system_tokens)
    keep, strip = ["--no-strip-anthropic-preamble"], ["--strip-anthropic-preamble"]
    with common.target(opts, keep, strip) as target:
        if target.embedded:
            a, b = target.urls
            targets = {"stable": (a, False), "header": (a, True), "stripped": (b, True)}
            warm = [(a, False), (b, True)]
        else:
            (url,) = target.urls
            targets, warm = {"stable": (url, False), "header": (url, True)}, [(url, False)]
        (samples, usage), stop = common.run_stoppable(_measure(targets, target.model, system, opts, warm))
        server = target.server_info()
    arms = {name: common.arm(name, xs, seed=n) for n, (name, xs) in enumerate(samples.items())}
    ratios = [common.ratio("header/stable", arms["header"], arms["stable"], seed=11)]
    if "stripped" in arms:
        ratios.append(common.ratio("stripped/stable", arms["stripped"], arms["stable"], seed=12))
    settings = {"api": "anthropic", "system_tokens": opts.system_tokens, "sessions": opts.sessions,
                "warmup_rounds": opts.warmup, "max_tokens": opts.max_tokens, "concurrency": 1,
                "header": HEADER_TEMPLATE.format(cch="<random per session>"),
                "arms": {"stable": "no header", "header": "fresh header per session, stripping off" if not
                         opts.endpoint else "fresh header per session, the endpoint's own setting",
                         "stripped": "fresh header per session, stripping on"},
                "usage_first_sample": {k: v[0] for k, v in usage.items() if v}}
    return common.stopped(common.one_benchmark_document(
        opts, target, server, name="preamble-ttft",
        title="TTFT: stable prefix vs per-session billing header vs stripped", api="anthropic",
        settings=settings, arms=list(arms.values()), ratios=ratios, started_at=started), stop)
