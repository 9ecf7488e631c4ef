"""`bench load` on its users' habits (issue 45) and with no false success (issue 43 items 2 and 9):
a random:ISL,OSL workload with a spread (vllm bench's random dataset, from the kit's own text and the
reference tokenizer), the peak at concurrency 1 explained, titled PNGs, --export-requests as JSON
lines, the timing defaults shown and explained; a level where fewer than --min-success of the
requests succeeded exits 1 with one line, and an endpoint that sends a frame or two and then nothing
ends within --timeout, recorded as a stall."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harnesscheck.reference_server.tokenizer import load as load_tokenizer
from harnesscheck.replay.benchmarks.common import write_outputs
from harnesscheck.replay.benchmarks.load import (
    LABELS_EXPLAINED, RANDOM_PROMPTS, Sample, format_level, level_figures, parse_random, random_workload,
    success_problem,
)
from harnesscheck.reports.schema import load_results


def _bench(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harnesscheck", "bench", "load", "--no-progress", *args],
                          capture_output=True, text=True, timeout=timeout)


def test_random_workload_runs_and_exports_every_request(tmp_path: Path) -> None:
    """The done-when line: `bench load --workload random:1000,200` runs; each request is one JSON line."""
    export = tmp_path / "requests.jsonl"
    ran = _bench("--workload", "random:1000,200", "--random-range-ratio", "0.1", "--concurrency", "1,2",
                 "--duration", "1", "--decode-ms", "0.5", "--export-requests", str(export), "--out", str(tmp_path))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    doc = load_results(tmp_path / "bench-load.json")
    settings = doc["benchmarks"][0]["settings"]
    assert settings["workload"] == "random:1000,200,0.1"
    rnd = settings["random"]
    assert (rnd["input_tokens"], rnd["output_tokens"], rnd["range_ratio"], rnd["prompts"]) == (1000, 200, 0.1,
                                                                                              RANDOM_PROMPTS)
    assert 900 <= rnd["input_tokens_counted"]["min"] <= rnd["input_tokens_counted"]["max"] <= 1101
    assert 180 <= rnd["output_tokens_asked"]["min"] <= rnd["output_tokens_asked"]["max"] <= 220
    figures = settings["figures"]
    lines = [json.loads(line) for line in export.read_text(encoding="utf-8").splitlines()]
    assert len(lines) == sum(f["completed"] + f["failed"] for f in figures) >= 2
    assert {line["level"] for line in lines} == {"c=1", "c=2"}
    for line in lines:
        assert line["ok"] and line["status"] == 200 and line["api"] == "chat" and not line["stalled"]
        assert line["ttft_ms"] > 0 and line["e2el_ms"] >= line["ttft_ms"] and line["itl_ms"]
        assert 180 <= line["output_tokens"] <= 220 and line["input_tokens"] > 900  # the endpoint's usage
    for f in figures:  # the level's figures are the exported requests'
        mine = [line for line in lines if line["level"] == f["label"]]
        assert sum(line["output_tokens"] for line in mine) == f["total_output_tokens"]


def test_random_prompts_are_distinct_counted_and_the_same_every_time() -> None:
    work = random_workload("random:300,50,0.2")
    tok = load_tokenizer()
    assert len(work.texts) == len(set(work.texts)) == RANDOM_PROMPTS
    starts = {tuple(tok.encode(text)[:8]) for text in work.texts}
    assert len(starts) == RANDOM_PROMPTS  # no two share a prefix-cache block
    assert all(240 <= n <= 361 for n in work.input_tokens) and min(work.input_tokens) < 280 < max(work.input_tokens)
    assert all(40 <= n <= 60 for n in work.output_tokens)
    random_workload.cache_clear()
    assert random_workload("random:300,50,0.2") == work
    same = random_workload("random:300,50")
    assert set(same.output_tokens) == {50} and max(same.input_tokens) - min(same.input_tokens) <= 3


@pytest.mark.parametrize("spec", ["random:1000", "random:a,b", "random:1000,200,1.5", "random:0,10",
                                  "random:10,10,nan", "random:10,10,0.1,3"])
def test_a_bad_random_spec_is_one_line_and_exit_2(spec: str) -> None:
    with pytest.raises(ValueError, match="random"):
        parse_random(spec)
    ran = _bench("--workload", spec, "--concurrency", "1", "--duration", "1", timeout=60)
    assert ran.returncode == 2 and len(ran.stderr.strip().splitlines()) == 1, ran.stderr
    assert "Traceback" not in ran.stderr


def _sample(start_s: float, e2el_ms: float) -> Sample:
    return Sample(start_s=start_s, ok=True, ttft_ms=5.0, e2el_ms=e2el_ms, itl_ms=[1.0], output_tokens=2)


def test_the_peak_at_concurrency_1_is_explained_under_it() -> None:
    """Four requests of 240 ms back to back: vLLM's bucketed peak is 4 (or 5), one in flight at once."""
    samples = [_sample(0.25 * i, 240.0) for i in range(8)]
    fig = {"level": 1, "label": "c=1", **level_figures(samples, 2.0, {})}
    assert fig["max_concurrent_requests"] >= 4 and fig["max_in_flight"] == 1
    text = format_level("concurrency", 1, fig)
    peak = text.index("Peak concurrent requests:")
    note = text[peak:].splitlines()[2]
    assert note.startswith("  (Peak concurrent requests is vLLM's figure") and "at most 1 was in flight" in note
    calm = {"level": 1, "label": "c=1", **level_figures([_sample(0.0, 240.0)], 1.0, {})}
    assert "vLLM's figure" not in format_level("concurrency", 1, calm)
    helped = subprocess.run([sys.executable, "-m", "harnesscheck", "bench", "load", "--help"], capture_output=True,
                            text=True, timeout=60).stdout
    assert all(line.split(":")[0] in helped for line in LABELS_EXPLAINED)


def test_each_benchmark_png_carries_its_title(tmp_path: Path) -> None:
    """A PNG read on its own names what it shows: the one write_outputs draws is the arms plot with
    the benchmark's title over it, so taller than the same plot untitled (the report's inline one)."""
    import base64

    from harnesscheck.replay.benchmarks import common
    from harnesscheck.reports.plots import arms_plot
    from harnesscheck.reports.schema import now_iso

    bench = common.benchmark("load-concurrency-ttft", "TTFT per concurrency level", timing="scripted-model",
                             settings={}, arms=[common.arm("c=1", [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0])], ratios=[])
    doc = common.results_document(benchmarks=[bench], endpoint="embedded", model="m", apis=["chat"],
                                  server={"kind": "embedded", "engine": None, "faults": [], "timing": "scripted-model"},
                                  settings={}, started_at=now_iso())
    (png,) = [p for p in write_outputs(doc, tmp_path, "bench-load") if p.suffix == ".png"]
    untitled = arms_plot(bench)
    assert untitled is not None
    plain = base64.b64decode(untitled.split(",", 1)[1])
    height = struct.unpack(">II", png.read_bytes()[16:24])[1]
    assert height >= struct.unpack(">II", plain[16:24])[1] + 25, height


def test_serve_help_shows_the_timing_defaults_and_bench_explains_its_own() -> None:
    def helped(*args: str) -> str:
        ran = subprocess.run([sys.executable, "-m", "harnesscheck", *args, "--help"], capture_output=True, text=True,
                             timeout=60)
        return " ".join(ran.stdout.split())

    serve = helped("serve")
    for words in ("fixed cost before token 1 (default: 10 ms", "cost per uncached prompt token (default: 40 µs)",
                  "interval between output tokens (default: 2 ms)"):
        assert words in serve, words
    assert "`serve` models 10 ms before the first token, 40 µs per uncached prompt token and 2 ms per output " \
           "token" in helped("bench")
    assert "(default: 5 ms; `serve`'s: 2, why they differ: `harnesscheck bench --help`)" in helped("bench", "load")


def test_a_level_below_min_success_exits_1_and_a_stall_ends_within_the_timeout(tmp_path: Path) -> None:
    """Every stream stalls (fault stall-stream: two writes, then nothing, never an end): with --timeout 2
    the level ends in seconds, the request is recorded as stalled, the results are written, and the
    command says in one line that 0 of 1 requests succeeded, exit 1 (exit 0 and minutes before)."""
    export = tmp_path / "requests.jsonl"
    began = time.monotonic()
    ran = _bench("--server-arg=--fault=stall-stream", "--timeout", "2", "--warmup", "0", "--concurrency", "1",
                 "--duration", "0.5", "--max-tokens", "8", "--export-requests", str(export), "--out", str(tmp_path))
    took = time.monotonic() - began
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert took < 60, took
    said = ran.stderr.strip().splitlines()
    assert len(said) == 1 and said[0].startswith("harnesscheck bench load: only 0 of 1 requests succeeded at c=1 "
                                                 "(0%), below --min-success 0.9; 1 stalled"), ran.stderr
    assert "Stalled requests:" in ran.stdout and "Traceback" not in ran.stdout + ran.stderr
    (fig,) = load_results(tmp_path / "bench-load.json")["benchmarks"][0]["settings"]["figures"]
    assert (fig["completed"], fig["failed"], fig["stalled"]) == (0, 1, 1)
    (line,) = [json.loads(x) for x in export.read_text(encoding="utf-8").splitlines()]
    assert line["stalled"] and line["error"].startswith("stalled: ") and 1.9 < line["e2el_ms"] / 1e3 < 10
    assert load_results(tmp_path / "bench-load.json")["run"]["server"]["faults"] == ["stall-stream"]
    # asked for less, the same run passes
    again = _bench("--server-arg=--fault=stall-stream", "--timeout", "1", "--warmup", "0", "--concurrency", "1",
                   "--duration", "0.2", "--max-tokens", "8", "--min-success", "0", "--out", str(tmp_path / "b"))
    assert again.returncode == 0, again.stdout + again.stderr


def test_success_problem_judges_the_worst_level() -> None:
    ok = {"label": "c=1", "completed": 95, "failed": 5, "errors": []}
    bad = {"label": "c=4", "completed": 10, "failed": 90, "stalled": 0, "errors": ["HTTP 500"]}
    assert success_problem({"concurrency": [ok]}, 0.9) is None
    assert success_problem({"concurrency": [ok, bad]}, 0.9) == (
        "only 10 of 100 requests succeeded at c=4 (10%), below --min-success 0.9; first error: HTTP 500")
    assert success_problem({"rate": [{"label": "rate=2", "completed": 0, "failed": 0, "errors": []}]}, 0.5)
    assert success_problem({"concurrency": [bad]}, 0.0) is None
