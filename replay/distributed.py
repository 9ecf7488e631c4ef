"""Replay one trace from several Ray actors at once: sessions sharded, raw samples merged.

``replay_on_ray(trace, options, workers=N) -> ReplayResult`` (Ray is an optional extra:
``pip install 'harnesscheck[ray]'``; connect first with ``harnesscheck.replay.cluster.ray_session``):

- the sessions are dealt round-robin to N actors (one CPU each, spread over the nodes) and the total
  ``options.concurrency`` C is split among them (C // N each, the first C % N one more), so N
  workers offer what one process with concurrency C offers;
- each actor runs the kit's own timed asyncio client (``harnesscheck.replay.replayer.replay``) on its share; every
  time is measured inside the actor against its own clock (``start_ms`` from its own start), and no
  time of one machine is compared with another's;
- every actor is created and ready before any starts, then all start together;
- merge: the turn records of every worker (each with its ``worker`` index) and a summary computed
  from those raw samples (``harnesscheck.replay.replayer.summarize``: percentiles of the merged samples, never
  averages of per-worker percentiles). ``summary["workers"]`` has, per worker, its host, sessions,
  offered concurrency, turns, wall time, and the requests it had in flight: peak and time average.
  ``offered_concurrency`` is the total offered; ``max_in_flight`` the sum of the workers' peaks (an
  upper bound: peaks on different machines need not coincide); ``mean_in_flight`` the sum of their
  time averages.
"""

from __future__ import annotations

import socket
import time
from dataclasses import replace
from typing import Any

from .replayer import ReplayOptions, ReplayResult, replay, summarize
from .trace import Trace

__all__ = ["replay_on_ray", "shard"]


def shard(trace: Trace, concurrency: int, workers: int) -> list[tuple[Trace, int]]:
    """(trace share, concurrency) per worker: sessions round-robin, concurrency split evenly; no more
    workers than sessions or than the concurrency allows (each needs at least one)."""
    n = max(1, min(workers, len(trace.sessions), concurrency))
    out = []
    for i in range(n):
        sessions = trace.sessions[i::n]
        share = Trace(sessions=sessions, source=trace.source, created=trace.created, meta=trace.meta)
        out.append((share, concurrency // n + (1 if i < concurrency % n else 0)))
    return out


class _ReplayWorker:
    """A Ray actor that replays its share of a trace with the kit's own client."""

    def ready(self) -> str:
        return socket.gethostname()

    def run(self, trace: Trace, options: ReplayOptions) -> dict[str, Any]:
        result = replay(trace, options)
        return {"records": result.records, "summary": result.summary}


def replay_on_ray(trace: Trace, options: ReplayOptions, *, workers: int | None = None) -> ReplayResult:
    """Replay ``trace`` from ``workers`` Ray actors (None: one per CPU of the cluster) with
    ``options.concurrency`` sessions in flight in total (see the module docstring). Needs a
    connected Ray (``harnesscheck.replay.cluster.ray_session``). ``options.on_request`` is not sent along."""
    from harnesscheck.replay.cluster import import_ray

    ray = import_ray()
    if workers is None:
        workers = max(1, int(ray.cluster_resources().get("CPU", 1)))
    if workers < 1:
        raise ValueError("workers must be >= 1")
    shares = shard(trace, options.concurrency, workers)
    actor = ray.remote(num_cpus=1, scheduling_strategy="SPREAD", max_restarts=0)(_ReplayWorker)
    actors = [actor.remote() for _ in shares]
    try:
        hosts = ray.get([a.ready.remote() for a in actors])
        wall0 = time.time()
        started = time.perf_counter()
        refs = [
            a.run.remote(share, replace(options, concurrency=c, progress=False, on_request=None))
            for a, (share, c) in zip(actors, shares, strict=True)
        ]
        parts = ray.get(refs)
        wall = time.perf_counter() - started
    finally:
        for a in actors:
            ray.kill(a)
    records: list[dict[str, Any]] = []
    per_worker = []
    for i, (part, host, (share, c)) in enumerate(zip(parts, hosts, shares, strict=True)):
        records += [{**rec, "worker": i} for rec in part["records"]]
        s = part["summary"]
        per_worker.append({
            "worker": i, "host": host, "sessions": len(share.sessions), "offered_concurrency": c,
            "turns": s["turns"], "turns_ok": s["turns_ok"], "wall_s": s["wall_s"],
            "max_in_flight": s["max_in_flight"], "mean_in_flight": s["mean_in_flight"],
        })
    order = {(s.id, t.turn): n for n, (s, t) in enumerate((s, t) for s in trace.sessions for t in s.turns)}
    records.sort(key=lambda r: order.get((r["session"], r["turn"]), 0))
    summary = summarize(records, options, trace, wall=wall, wall0=wall0,
                        max_in_flight=sum(w["max_in_flight"] for w in per_worker))
    summary.update(
        offered_concurrency=sum(w["offered_concurrency"] for w in per_worker),
        mean_in_flight=round(sum(w["mean_in_flight"] for w in per_worker), 2),
        workers=per_worker,
    )
    return ReplayResult(records, summary)
