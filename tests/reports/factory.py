"""Synthetic results documents for the reports tests (and for trying the report by hand:
`python -m tests.reports.factory out.json`)."""

from __future__ import annotations

import copy
import json
import sys
from typing import Any

import numpy as np

HOSTILE = '<script>alert("x")</script>'


def run_meta(**over: Any) -> dict[str, Any]:
    run = {
        "id": "run-2024-06-01T02-00-00",
        "started_at": "2024-06-01T02:00:00+00:00",
        "finished_at": "2024-06-01T02:03:10+00:00",
        "kit_version": "0.1.0",
        "endpoint": "http://127.0.0.1:8123",
        "model": "scripted/qwen3-coder",
        "apis": ["anthropic", "chat", "responses"],
        "machine": {"hostname": "ci-runner-1", "platform": "Linux-6.1-x86_64", "python": "3.11.9", "cpus": 2},
        "settings": {"tries": 3, "timeout_s": 30},
        "server": {"kind": "embedded", "engine": "scripted", "faults": [], "timing": "scripted-model"},
    }
    run.update(over)
    return run


def check(cid: str, api: str, outcome: str = "pass", level: str = "MUST", **over: Any) -> dict[str, Any]:
    c = {
        "id": cid,
        "api": api,
        "title": f"{cid} title",
        "level": level,
        "outcome": outcome,
        "message": "ok" if outcome == "pass" else f"{cid} {outcome}",
        "source": "API_FACTS.md:42",
        "remedy": "emit the events in the documented order",
        "duration_s": 0.12,
        "transcript": f"transcripts/{cid}-{api}.json",
        "finding": None,
    }
    c.update(over)
    return c


def failing_finding(excerpt: str | None = None) -> dict[str, Any]:
    return {
        "rule": "content_block_delta index must equal the open block's index",
        "frame_index": 7,
        "observed": '{"type":"content_block_delta","index":2}',
        "expected": "index 1",
        "excerpt": excerpt
        or (
            "#5 event: content_block_start data: {\"index\":1}\n"
            "#6 event: content_block_delta data: {\"index\":1}\n"
            "#7 event: content_block_delta data: {\"index\":2}   <-- here\n"
            "#8 event: content_block_stop data: {\"index\":1}"
        ),
    }


def bench_arm(name: str, samples: list[float]) -> dict[str, Any]:
    arr = np.asarray(samples, dtype=float)
    med = float(np.median(arr))
    return {
        "name": name,
        "samples": [float(x) for x in arr],
        "median": med,
        "p90": float(np.percentile(arr, 90)),
        "ci95": [float(np.percentile(arr, 25)), float(np.percentile(arr, 75))],
    }


def samples(center: float, n: int = 30, spread: float = 0.03, seed: int = 0) -> list[float]:
    rng = np.random.default_rng(seed)
    return [float(x) for x in center * (1 + spread * rng.standard_normal(n))]


def benchmark(name: str = "preamble", scale: float = 1.0, seed: int = 0) -> dict[str, Any]:
    stable = bench_arm("stable", samples(120 * scale, seed=seed))
    header = bench_arm("header", samples(410 * scale, seed=seed + 1))
    stripped = bench_arm("stripped", samples(125 * scale, seed=seed + 2))
    return {
        "name": name,
        "title": "TTFT with a per-session billing header in the system prompt",
        "unit": "ms",
        "timing": "scripted-model",
        "settings": {"turns": 8, "sessions": 30},
        "arms": [stable, header, stripped],
        "ratios": [
            {"name": "header/stable", "numerator": "header", "denominator": "stable", "value": 3.4, "ci95": [3.2, 3.6]},
            {"name": "stripped/stable", "numerator": "stripped", "denominator": "stable", "value": 1.04, "ci95": [0.99, 1.09]},
        ],
    }


def comparison() -> dict[str, Any]:
    return {
        "name": "reasoning-kept-vs-dropped",
        "a": "kept",
        "b": "dropped",
        "n_tasks": 40,
        "totals": {"kept": 31, "dropped": 24},
        "means": {"kept": 0.775, "dropped": 0.6},
        "difference": 0.175,
        "wins": 9,
        "losses": 2,
        "ties": 29,
        "p_permutation": 0.033,
        "p_wilcoxon": 0.041,
        "ci95_mean_diff": [0.025, 0.325],
    }


def fault_matrix() -> dict[str, Any]:
    faults = [
        {"name": "block-index-skip", "description": "Anthropic block index skips a number", "source": "API_FACTS.md:88"},
        {"name": "usage-zero", "description": "message_start input_tokens is 0", "source": "article 2"},
    ]
    checks = ["AN-STREAM-001", "AN-USAGE-001", "CH-TOOL-001"]
    cells = []
    for f in faults:
        for c in checks:
            expected = (f["name"], c) in {("block-index-skip", "AN-STREAM-001"), ("usage-zero", "AN-USAGE-001")}
            outcome = "fail" if expected else "pass"
            if (f["name"], c) == ("usage-zero", "CH-TOOL-001"):
                outcome = "fail"  # unexpected
            cells.append({"fault": f["name"], "check": c, "api": "anthropic" if c.startswith("AN") else "chat",
                          "outcome": outcome, "expected_fail": expected})
    return {"faults": faults, "checks": checks, "cells": cells}


def results(**over: Any) -> dict[str, Any]:
    """A full, valid document: a failing MUST check with a finding, a SHOULD failure, a skip, an
    inconclusive, an error, a benchmark, a comparison and a fault matrix."""
    doc = {
        "schema": "harnesscheck.results",
        "schema_version": "1.0",
        "run": run_meta(),
        "checks": [
            check("AN-STREAM-001", "anthropic", "fail", finding=failing_finding(),
                  clients={"claude-code": "would break", "codex": "unaffected", "openclaw": "would break"}),
            check("AN-STREAM-002", "anthropic"),
            check("AN-USAGE-001", "anthropic", clients={"claude-code": "unaffected"}),
            check("CH-TOOL-001", "chat"),
            check("CH-TOOL-002", "chat", "fail", level="SHOULD",
                  finding={"rule": "id once per index", "frame_index": 3, "observed": "id repeated",
                           "expected": "id only in the first delta", "excerpt": None}),
            check("RS-SEQ-001", "responses", "skip", message="endpoint does not offer /v1/responses"),
            check("RS-ITEM-001", "responses", "inconclusive", level="SHOULD",
                  message="model never called a tool in 3 tries"),
            check("MD-ROUTE-001", "any", "error", message="kit bug: KeyError 'data'", transcript=None),
        ],
        "benchmarks": [benchmark()],
        "comparisons": [comparison()],
        "fault_matrix": fault_matrix(),
    }
    doc.update(over)
    return doc


def clean(doc: dict[str, Any]) -> dict[str, Any]:
    """A copy where every check passes."""
    doc = copy.deepcopy(doc)
    for c in doc["checks"]:
        c["outcome"] = "pass"
        c["finding"] = None
    return doc


def load_results() -> dict[str, Any]:
    """A `bench load` document as the benchmark writes it (replay.benchmarks.load.sweep_benchmarks on
    synthetic samples): two sweeps of three levels, an SLO."""
    import random

    from harnesscheck.replay.benchmarks import common
    from harnesscheck.replay.benchmarks.load import Sample, sweep_benchmarks

    rng = random.Random(0)

    def level(n: int) -> list[Sample]:
        return [Sample(start_s=3.0 * i / n, ok=True, ttft_ms=20 + rng.random() * 5, e2el_ms=80 + rng.random() * 9,
                       itl_ms=[7.0] * 8, input_tokens=50, output_tokens=9) for i in range(n)]

    runs = {kind: [(lvl, level(20 * (i + 1)), 3.1) for i, lvl in enumerate((1.0, 4.0, 16.0))]
            for kind in ("concurrency", "rate")}
    settings = {"workload": "scenario:long_reasoning", "apis": ["chat"], "duration_s": 3.0, "seed": 0,
                "slo_ms": {"ttft": 500.0}, "percentiles": [50, 90, 99]}
    benches = sweep_benchmarks(runs, settings, timing="scripted-model", slo_ms={"ttft": 500.0}, duration_s=3.0)
    return common.results_document(benchmarks=benches, endpoint="embedded", model="m", apis=["chat"],
                                   server={"kind": "embedded", "timing": "scripted-model"}, settings=settings,
                                   started_at="2026-01-01T00:00:00+00:00")


if __name__ == "__main__":
    json.dump(results(), open(sys.argv[1], "w") if len(sys.argv) > 1 else sys.stdout, indent=1)
