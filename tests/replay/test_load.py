"""`bench load`: the seeded Poisson schedule, vLLM's figures on known samples, and short sweeps
against the reference server (structure, and relations that must hold: goodput <= throughput,
an SLO of 0 ms leaves no goodput, an SLO of 1e9 ms leaves all of it)."""

from __future__ import annotations

import argparse
import math
import random
import subprocess
import sys

import pytest

from harnesscheck.cli.main import build_parser, main
from harnesscheck.replay.benchmarks.load import (
    Sample, level_figures, parse_slo, poisson_schedule, run_level, sweep_benchmarks, window_rates, workload_requests,
)
from harnesscheck.replay.client import StreamClient, run_async
from harnesscheck.reference_server.config import DEFAULT_MODEL_IDS
from harnesscheck.reports.schema import load_results
from tests.terminal import on_a_terminal

MODEL = DEFAULT_MODEL_IDS[0]


def _hand_count(rate: float, duration_s: float, seed: int) -> int:
    """Arrivals in [0, T): exponential gaps by inversion, -ln(1 - U) / rate, from the seeded uniforms."""
    rng = random.Random(seed)
    t, n = -math.log(1.0 - rng.random()) / rate, 0
    while t < duration_s:
        n += 1
        t += -math.log(1.0 - rng.random()) / rate
    return n


@pytest.mark.parametrize(("rate", "duration", "seed"), [(4.0, 1.5, 2), (5.0, 4.0, 7), (50.0, 2.0, 0)])
def test_poisson_schedule_count_from_the_seeded_draws(rate: float, duration: float, seed: int) -> None:
    arrivals = poisson_schedule(rate, duration, seed)
    assert len(arrivals) == _hand_count(rate, duration, seed)
    assert arrivals == sorted(arrivals) and all(0 < t < duration for t in arrivals)
    assert poisson_schedule(rate, duration, seed) == arrivals  # seeded: the same schedule every time
    assert len(poisson_schedule(rate, duration, seed, max_requests=3)) == min(3, len(arrivals))


def test_poisson_schedule_mean_count_is_rate_times_duration() -> None:
    counts = [len(poisson_schedule(5.0, 4.0, seed)) for seed in range(400)]
    assert abs(sum(counts) / len(counts) - 20.0) < 0.7  # 20 expected; the mean of 400 has sd ~0.22


def test_parse_slo() -> None:
    assert parse_slo("ttft_ms=500,itl_ms=50,e2e_ms=4000") == {"ttft": 500.0, "tpot": 50.0, "e2el": 4000.0}
    vllm_spelling = parse_slo("ttft:200 tpot:20 e2el:1e9")
    assert vllm_spelling == {"ttft": 200.0, "tpot": 20.0, "e2el": 1e9}
    assert parse_slo("") == {}
    for bad in ("ttft_ms", "queue_ms=3", "ttft_ms=-1", "e2e_ms=inf"):
        with pytest.raises(ValueError):
            parse_slo(bad)


def _samples() -> list[Sample]:
    return [
        Sample(start_s=0.0, ok=True, ttft_ms=10.0, e2el_ms=100.0, itl_ms=[30.0, 30.0, 30.0], input_tokens=5,
               output_tokens=4),
        Sample(start_s=0.5, ok=True, ttft_ms=20.0, e2el_ms=200.0, itl_ms=[90.0, 90.0], input_tokens=5,
               output_tokens=3),
        Sample(start_s=1.0, ok=True, ttft_ms=30.0, e2el_ms=30.0, itl_ms=[], input_tokens=5, output_tokens=1),
        Sample(start_s=1.2, ok=False, error="HTTP 500: boom", e2el_ms=3.0),
    ]


def test_level_figures_known_answers() -> None:
    fig = level_figures(_samples(), 2.0, {"ttft": 25.0, "tpot": 40.0})
    assert (fig["completed"], fig["failed"], fig["duration"]) == (3, 1, 2.0)
    assert (fig["total_input_tokens"], fig["total_output_tokens"]) == (15, 8)
    assert fig["request_throughput"] == 1.5 and fig["output_throughput"] == 4.0
    assert fig["total_token_throughput"] == 11.5
    # TPOT: (100 - 10) / 3 = 30 and (200 - 20) / 2 = 90; a one-token answer has none (0 for goodput)
    assert fig["mean_tpot_ms"] == 60.0 and fig["median_tpot_ms"] == 60.0
    # good: #1 (ttft 10, tpot 30) and #3 (ttft 30 > 25: no); #2 tpot 90 > 40: no -> 1 good in 2 s
    assert fig["request_goodput"] == 0.5
    assert fig["median_ttft_ms"] == 20.0 and fig["mean_ttft_ms"] == 20.0
    assert fig["p99_ttft_ms"] == pytest.approx(29.8)  # linear between 20 and 30 at 0.99 * 2
    assert fig["p50_itl_ms"] == 30.0 and fig["p90_itl_ms"] == pytest.approx(90.0)
    assert fig["mean_e2el_ms"] == pytest.approx(110.0)
    # one-second buckets from the first start: #1 runs in [0, 0.1], #2 in [0.5, 0.7], #3 in [1.0, 1.03]
    assert fig["max_concurrent_requests"] == 2 and fig["max_in_flight"] == 1  # #1 ends before #2 starts
    assert fig["max_output_tokens_per_s"] == 7.0  # 4 events of #1 and 3 of #2 fall in second 0
    assert fig["errors"] == ["HTTP 500: boom"]
    assert level_figures(_samples(), 2.0, {})["request_goodput"] is None


def test_peak_output_rate_counts_tokens_not_events() -> None:
    """An endpoint that sends 4 tokens per event: the busiest second's tokens, not its events, so the
    peak is never below the mean output rate."""
    chunky = [Sample(start_s=0.1 * i, ok=True, ttft_ms=5.0, e2el_ms=50.0, itl_ms=[15.0, 15.0, 15.0],
                     output_tokens=16) for i in range(10)]
    fig = level_figures(chunky, 1.0, {})
    assert fig["output_throughput"] == 160.0 and fig["max_output_tokens_per_s"] == 160.0


def test_window_rates_known_answers() -> None:
    # 8 answers in 2 s (4 windows of 0.5 s): two end in each window; one failure counts nowhere
    samples = [Sample(start_s=0.25 * i, ok=True, ttft_ms=10.0, e2el_ms=100.0, itl_ms=[90.0], output_tokens=2)
               for i in range(8)] + [Sample(start_s=0.3, ok=False, e2el_ms=1.0)]
    rates = window_rates(samples, 2.0, {"e2el": 100.0})
    assert rates["throughput"] == [4.0] * 4 and rates["goodput"] == [4.0] * 4
    assert rates["output_throughput"] == [8.0] * 4
    assert window_rates(samples, 2.0, {"e2el": 50.0})["goodput"] == [0.0] * 4
    assert len(window_rates(samples, 12.5)["throughput"]) == 12  # a window a second beyond 4 s
    assert "goodput" not in window_rates(samples, 2.0)


def _level(n: int, fail_every: int = 0, seed: int = 0) -> list[Sample]:
    """A closed-loop level of n requests over 10 s with the same latencies whatever fails."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        start = 10.0 * i / n
        ok = not (fail_every and i % fail_every == 0)
        out.append(Sample(start_s=start, ok=ok, error=None if ok else "HTTP 503", ttft_ms=20 + rng.random(),
                          e2el_ms=60 + rng.random(), itl_ms=[8.0] * 4, output_tokens=5))
    return out


def test_a_quarter_fewer_requests_per_second_fails_the_gate_with_latency_unchanged() -> None:
    """Issue 33: the gate judges throughput as it judges latency. A level whose every fourth request
    fails serves 25% fewer requests per second with every latency as before."""
    from harnesscheck.reports.gate import gate
    from harnesscheck.replay.benchmarks import common

    def doc(samples: list[Sample]) -> dict:
        benches = sweep_benchmarks({"concurrency": [(4.0, samples, 10.0)]}, {"workload": "synthetic"},
                                   timing="real", slo_ms={"ttft": 50.0}, duration_s=10.0)
        return common.results_document(benchmarks=benches, endpoint="http://x", model="m", apis=["chat"],
                                       server={"kind": "external", "timing": "real"}, settings={},
                                       started_at="2026-01-01T00:00:00+00:00")

    base, cur = doc(_level(400, seed=1)), doc(_level(400, fail_every=4, seed=1))
    report = gate(base, cur, threshold=0.10)
    verdicts = {b.benchmark: b for b in report.benchmarks}
    for latency in ("ttft", "tpot", "e2el"):
        assert not verdicts[f"load-concurrency-{latency}"].gating
    assert {b.benchmark for b in report.regressions} == {
        "load-concurrency-throughput", "load-concurrency-output-throughput", "load-concurrency-goodput"}
    drop = verdicts["load-concurrency-throughput"]
    assert drop.better == "higher" and drop.ratio == pytest.approx(4 / 3, rel=0.02)
    assert not report.passed
    assert gate(base, doc(_level(400, seed=2))).passed  # the same throughput, other noise: no regression


def test_goodput_relations_against_the_reference_server(server_factory) -> None:
    url = server_factory("--decode-ms", "2", "--ttft-base-ms", "5", "--prefill-us-per-token", "0", fast=False)
    pool = workload_requests("scenario:long_reasoning", apis=["anthropic"], model=MODEL, max_tokens=12)

    async def go() -> tuple[list[Sample], float]:
        async with StreamClient() as client:
            return await run_level(client, url, pool, {"anthropic-version": "2023-06-01"}, kind="concurrency",
                                   level=2, duration_s=1.0, seed=0)

    samples, duration = run_async(go())
    assert samples and all(s.ok for s in samples), [s.error for s in samples if not s.ok]
    assert all(s.output_tokens == 12 for s in samples)
    everything = level_figures(samples, duration, {"ttft": 1e9, "tpot": 1e9, "e2el": 1e9})
    assert everything["request_goodput"] == everything["request_throughput"] == len(samples) / duration
    assert level_figures(samples, duration, {"ttft": 0.0})["request_goodput"] == 0.0
    assert level_figures(samples, duration, {"e2el": 0.0})["request_goodput"] == 0.0
    cut = sorted(s.ttft_ms for s in samples)[len(samples) // 2]
    half = level_figures(samples, duration, {"ttft": cut})
    assert half["request_goodput"] == sum(s.ttft_ms <= cut for s in samples) / duration
    assert half["request_goodput"] <= half["request_throughput"]
    assert everything["max_in_flight"] == 2  # two workers, each one request at a time
    assert everything["max_concurrent_requests"] >= 2  # vLLM's: requests touching the busiest second


def test_bench_load_sweeps(tmp_path, capsys) -> None:
    rc = main(["bench", "load", "--concurrency", "1,2", "--request-rate", "4", "--duration", "1.5",
               "--max-tokens", "8", "--slo", "ttft_ms=1e9,itl_ms=1e9,e2e_ms=1e9", "--decode-ms", "2",
               "--out", str(tmp_path)])
    assert rc == 0
    out = capsys.readouterr().out
    for line in ("Serving Benchmark Result", "Maximum request concurrency:", "Request rate configured (RPS):",
                 "Request throughput (req/s):", "Request goodput (req/s):",
                 "Output token throughput (tok/s):",
                 "Mean TTFT (ms):", "P99 TPOT (ms):", "P90 ITL (ms):", "P50 E2EL (ms):"):
        assert line in out
    doc = load_results(tmp_path / "bench-load.json")  # validates
    names = [b["name"] for b in doc["benchmarks"]]
    assert names == [f"load-{k}-{m}" for k in ("concurrency", "rate")
                     for m in ("ttft", "tpot", "e2el", "throughput", "output-throughput", "goodput")]
    by = {b["name"]: b for b in doc["benchmarks"]}
    assert [a["name"] for a in by["load-concurrency-ttft"]["arms"]] == ["c=1", "c=2"]
    assert [a["name"] for a in by["load-rate-e2el"]["arms"]] == ["rate=4"]
    conc = by["load-concurrency-ttft"]["settings"]["figures"]
    (rate,) = by["load-rate-ttft"]["settings"]["figures"]
    assert rate["completed"] + rate["failed"] == _hand_count(4.0, 1.5, 2)  # level 2 of the run: seed 0 + 2
    for f in [*conc, rate]:
        assert f["failed"] == 0
        assert f["request_goodput"] == f["request_throughput"] == f["completed"] / f["duration"]
        assert f["total_output_tokens"] == 8 * f["completed"]
        assert f["p50_ttft_ms"] <= f["p90_ttft_ms"] <= f["p99_ttft_ms"]
        assert f["p50_e2el_ms"] >= f["p50_ttft_ms"]
    assert [f["max_in_flight"] for f in conc] == [1, 2]
    assert len(by["load-concurrency-e2el"]["arms"][1]["samples"]) == conc[1]["completed"]
    for kind in ("concurrency", "rate"):  # rates: higher is better, a sample per window of the level
        for m in ("throughput", "output-throughput", "goodput"):
            bench = by[f"load-{kind}-{m}"]
            assert bench["better"] == "higher" and bench["unit"] in ("req/s", "tok/s")
            assert all(len(a["samples"]) == 4 for a in bench["arms"])  # 1.5 s: the minimum of 4 windows
    assert "Peak requests in flight:" in out and "Peak concurrent requests:" in out
    for kind in ("concurrency", "rate"):
        assert (tmp_path / f"bench-load-{kind}-sweep.png").read_bytes()[:4] == b"\x89PNG"


def test_bench_load_refuses_bad_settings(tmp_path) -> None:
    assert main(["bench", "load", "--request-rate", "0", "--out", str(tmp_path)]) == 2
    assert main(["bench", "load", "--slo", "latency=3", "--out", str(tmp_path)]) == 2


def test_live_progress_on_a_terminal_only(reference_server, tmp_path) -> None:
    cmd = [sys.executable, "-m", "harnesscheck", "bench", "load", "--endpoint", reference_server, "--model",
           MODEL, "--concurrency", "1", "--duration", "1.5", "--max-tokens", "4", "--out", str(tmp_path)]
    rc, seen = on_a_terminal(cmd, columns=120, deadline_s=120)
    assert rc == 0
    assert b"bench load" in seen and b"answered" in seen  # the live line: level, answers so far
    piped = subprocess.run(cmd, capture_output=True, timeout=120)
    assert piped.returncode == 0 and b"answered" not in piped.stderr + piped.stdout


def _actions(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.Action]]:
    return [(parser.prog, a) for a in parser._actions if not isinstance(a, argparse._HelpAction)]


def test_every_bench_and_trace_option_has_a_help_line() -> None:
    root = build_parser()
    sub = next(a for a in root._actions if isinstance(a, argparse._SubParsersAction))
    missing = []
    for command in ("bench", "trace"):
        parser = sub.choices[command]
        inner = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        helped = {c.dest for c in inner._choices_actions if c.help}
        missing += [f"{command} {name} (no help line)" for name in inner.choices if name not in helped]
        for name, child in inner.choices.items():
            missing += [f"{prog}: {a.option_strings or a.dest}" for prog, a in _actions(child)
                        if not a.help and a.help != argparse.SUPPRESS]
    assert missing == []
