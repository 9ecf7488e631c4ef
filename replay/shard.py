"""Run one asynchronous load across several processes (one event loop per core) and merge the raw
samples, so a client that runs out of CPU in one loop does not become the thing measured.

``run_sharded(target, workers, processes, payload)`` splits ``workers`` concurrent workers over
``processes`` spawned processes as evenly as it can, and starts them together: each process runs
``target(shard)`` on uvloop (``harnesscheck.replay.client.run_async``), where ``shard`` is a :class:`Shard`;
the target does its set-up (imports, clients, connections), then ``await shard.ready()``, which
returns once every process is set up, so the load starts in all processes at the same moment.
Whatever each target returns (it must pickle) comes back in shard order.

Statistics are never averaged across shards: :func:`merge` concatenates the shards' raw sample
lists, and percentiles are taken of the merged samples (a p99 of per-shard p99s is not a p99).
Times taken with ``time.perf_counter_ns`` are comparable across the processes on Linux (it reads
CLOCK_MONOTONIC, one clock for the whole machine).
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import os
import queue as queue_mod
import time
import traceback
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Shard", "default_processes", "merge", "run_sharded", "split"]


def split(workers: int, processes: int) -> list[int]:
    """``workers`` spread over at most ``processes`` shares (none empty), the larger shares first."""
    if workers < 1:
        raise ValueError("workers must be at least 1")
    n = max(1, min(processes, workers))
    base, extra = divmod(workers, n)
    return [base + (1 if i < extra else 0) for i in range(n)]


@dataclass
class Shard:
    """What one process is given: its index, its workers, the global index of its first worker
    (so per-worker schedules stay the same however the load is split), the total and the payload."""

    index: int
    workers: int
    first_worker: int
    total_workers: int
    payload: Any
    _ready: Any = None  # multiprocessing queue: "set up" goes to the parent
    _go: Any = None  # multiprocessing event: set by the parent once every shard is set up

    async def ready(self) -> None:
        """Say this shard is set up; return when every shard is (the common start)."""
        if self._ready is None:
            return
        self._ready.put(self.index)
        await asyncio.to_thread(self._go.wait)


def _shard_main(target: Callable[[Shard], Coroutine[Any, Any, Any]], shard: Shard, results: Any) -> None:
    from harnesscheck.replay.client import run_async

    try:
        results.put((shard.index, True, run_async(target(shard))))
    except BaseException:  # noqa: BLE001 - reported to the parent with its traceback
        results.put((shard.index, False, traceback.format_exc()))


def run_sharded(target: Callable[[Shard], Coroutine[Any, Any, Any]], workers: int, processes: int,
                payload: Any, *, timeout_s: float = 900.0) -> list[Any]:
    """Run ``target`` in ``len(split(workers, processes))`` processes; their results in shard order.

    ``target`` must be a module-level coroutine function (the processes are spawned, so it is
    imported by name). A shard that raises makes this raise RuntimeError with its traceback.
    """
    shares = split(workers, processes)
    ctx = mp.get_context("spawn")
    ready, results, go = ctx.Queue(), ctx.Queue(), ctx.Event()
    procs = []
    first = 0
    for i, n in enumerate(shares):
        shard = Shard(i, n, first, workers, payload, ready, go)
        first += n
        procs.append(ctx.Process(target=_shard_main, args=(target, shard, results), daemon=True))
    for p in procs:
        p.start()
    out: dict[int, Any] = {}
    try:
        pending = len(procs)
        while pending:  # every shard set up (or one failed while setting up)
            try:
                ready.get(timeout=5)
                pending -= 1
            except queue_mod.Empty:
                _collect_failures(results, out)
                if not all(p.is_alive() for p in procs):
                    break
        go.set()
        deadline = time.monotonic() + timeout_s
        while len(out) < len(procs):
            try:
                index, ok, value = results.get(timeout=1)
            except queue_mod.Empty:
                dead = [i for i, p in enumerate(procs) if i not in out and not p.is_alive()]
                if dead and results.empty():
                    time.sleep(1)  # a result put just before the exit may still be in the pipe
                    if results.empty():
                        codes = ", ".join(f"{i} ({procs[i].exitcode})" for i in dead)
                        raise RuntimeError(f"shard {codes} exited without a result (exit code in brackets)") from None
                if time.monotonic() > deadline:
                    raise RuntimeError(f"shards did not finish within {timeout_s:g} s") from None
                continue
            if not ok:
                raise RuntimeError(f"shard {index} failed:\n{value}")
            out[index] = value
    finally:
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
    return [out[i] for i in range(len(procs))]


def _collect_failures(results: Any, out: dict[int, Any]) -> None:
    try:
        index, ok, value = results.get_nowait()
    except queue_mod.Empty:
        return
    if not ok:
        raise RuntimeError(f"shard {index} failed while setting up:\n{value}")
    out[index] = value


def merge(parts: Sequence[dict[str, list[Any]]]) -> dict[str, list[Any]]:
    """Concatenate the shards' raw sample lists key by key (percentiles are then of the merge)."""
    merged: dict[str, list[Any]] = {}
    for part in parts:
        for key, values in part.items():
            merged.setdefault(key, []).extend(values)
    return merged


def default_processes() -> int:
    """One process per core this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1
