"""harnesscheck.replay.shard: workers split over spawned processes that start together, raw samples merged (a
percentile of the merge, never an average of the shards' percentiles), a failing shard reported."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

from harnesscheck.replay.shard import Shard, merge, run_sharded, split


def test_split_spreads_workers_evenly_and_never_leaves_a_shard_empty():
    assert split(256, 2) == [128, 128]
    assert split(5, 2) == [3, 2]
    assert split(1, 4) == [1]
    assert split(3, 8) == [1, 1, 1]
    with pytest.raises(ValueError):
        split(0, 2)


async def _samples(shard: Shard) -> dict:
    """Shard 0 reports fast samples, shard 1 slow ones; both say when they started."""
    await shard.ready()
    started = time.perf_counter_ns()
    base = 1.0 if shard.index == 0 else 100.0
    return {"ms": [base + i for i in range(shard.workers * 10)], "started_ns": [started],
            "workers": list(range(shard.first_worker, shard.first_worker + shard.workers))}


async def _fails(shard: Shard) -> None:
    await shard.ready()
    if shard.index == 1:
        raise ValueError("shard one breaks")


def test_shards_start_together_and_merge_raw_samples():
    parts = run_sharded(_samples, 3, 2, None)
    assert len(parts) == 2
    merged = merge(parts)
    assert merged["workers"] == [0, 1, 2]  # global worker indices, in shard order
    # shard 0 (2 workers): 1..20, shard 1 (1 worker): 100..109; 30 samples, the 15th and 16th are 15, 16
    assert np.median(merged["ms"]) == pytest.approx(15.5)
    assert np.mean([np.median(p["ms"]) for p in parts]) == pytest.approx(57.5)  # what averaging would say
    spread_ms = (max(merged["started_ns"]) - min(merged["started_ns"])) / 1e6
    assert spread_ms < 250, spread_ms  # the common start (a loaded 2-core machine: generous)


def test_a_failing_shard_raises_with_its_traceback():
    with pytest.raises(RuntimeError, match="(?s)shard 1 failed.*shard one breaks"):
        run_sharded(_fails, 2, 2, None)


async def _dies(shard: Shard) -> None:
    await shard.ready()
    if shard.index == 0:
        os._exit(3)  # no result, no traceback: the parent must not wait for one


def test_a_shard_that_dies_without_a_result_is_reported_not_waited_for():
    started = time.monotonic()
    with pytest.raises(RuntimeError, match=r"shard 0 \(3\) exited without a result"):
        run_sharded(_dies, 2, 2, None, timeout_s=120)
    assert time.monotonic() - started < 60
