"""scripts/gpu_headline.sh at its CPU size, end to end, so the GPU command is proven before GPU time is spent.

One run of `bash scripts/gpu_headline.sh --cpu-small` in a subprocess (this checkout through the
script's own import path, nothing installed; the tiny model made by the script; two pairs of
`--engine transformers` servers): its folder holds both results documents (valid through the reports
loader, timing real-compute, every arm with the gate's minimum of samples, the prefix cache doing what
each arm says), both plots, and a summary with the three ratios and `timing: real-compute`. About a
minute on 2 busy cores (server starts and torch imports), hence `slow`; nothing about speed is asserted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from harnesscheck.reports.gate import MIN_SAMPLES  # noqa: E402
from harnesscheck.reports.schema import load_results  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "gpu_headline.sh"
SMALL_SYSTEM_TOKENS = 3000  # replay.benchmarks.headline.SIZES["small"]
BLOCK = 16


def script(*args: str, timeout: float = 840) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HC_PYTHON": sys.executable}
    for knob in [k for k in env if k.startswith("HC_") and k != "HC_PYTHON"]:
        del env[knob]  # the run's size comes from the script's defaults alone
    return subprocess.run(["bash", str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("headline")
    done = script("--cpu-small", "--out", str(out))
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    return out


def _bench(out: Path, stem: str) -> tuple[dict[str, Any], dict[str, Any]]:
    doc = load_results(out / f"{stem}.json")  # raises unless the document validates
    assert len(doc["benchmarks"]) == 1
    return doc, doc["benchmarks"][0]


def test_preamble_document_measures_three_arms_on_real_compute(run: Path) -> None:
    doc, bench = _bench(run, "bench-preamble")
    assert bench["timing"] == "real-compute"
    assert doc["run"]["server"]["engine"] == "transformers"
    assert doc["run"]["server"]["engine_settings"]["device"] == "cpu"
    assert {a["name"]: len(a["samples"]) >= MIN_SAMPLES for a in bench["arms"]} == {
        "stable": True, "header": True, "stripped": True}
    assert {r["name"] for r in bench["ratios"]} == {"header/stable", "stripped/stable"}
    assert "timing_model" not in bench["settings"]  # the scripted engine's model plays no part here
    usage = bench["settings"]["usage_first_sample"]
    # the KV store reused the whole shared system prompt for stable and stripped, almost none of it
    # behind a fresh header at position 0
    for arm in ("stable", "stripped"):
        assert usage[arm]["cache_read_input_tokens"] >= SMALL_SYSTEM_TOKENS - BLOCK, usage
    assert usage["header"]["cache_read_input_tokens"] < 4 * BLOCK, usage
    assert (run / "bench-preamble.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_history_document_measures_kept_and_rewritten(run: Path) -> None:
    doc, bench = _bench(run, "bench-history")
    assert bench["timing"] == "real-compute"
    assert doc["run"]["server"]["engine"] == "transformers"
    assert {a["name"]: len(a["samples"]) >= MIN_SAMPLES for a in bench["arms"]} == {"kept": True, "rewritten": True}
    assert [r["name"] for r in bench["ratios"]] == ["rewritten/kept"]
    usage = bench["settings"]["usage_first_sample"]
    # kept: all but the tool result comes from the cache; rewritten: the previous turn is prefilled again
    kept, rewritten = usage["kept"], usage["rewritten"]
    assert kept["prompt_tokens"] - kept["cached_tokens"] < 2 * BLOCK, usage
    assert rewritten["prompt_tokens"] - rewritten["cached_tokens"] > rewritten["turn1_output_tokens"], usage
    assert (run / "bench-history.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_summary_has_the_three_ratios_and_says_real_compute(run: Path) -> None:
    text = (run / "summary.md").read_text(encoding="utf-8")
    assert "timing: real-compute" in text.splitlines()
    summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
    assert summary["timing"] == "real-compute" and summary["device"] == "cpu" and summary["gpu"] is None
    docs = {"preamble": _bench(run, "bench-preamble")[1], "history": _bench(run, "bench-history")[1]}
    names = []
    for ratio in summary["ratios"]:
        names.append(ratio["name"])
        source = next(r for b in docs.values() for r in b["ratios"] if r["name"] == ratio["name"])
        assert (ratio["value"], ratio["ci95"]) == (source["value"], source["ci95"])  # copied, not recomputed
        assert ratio["value"] > 0 and ratio["ci95"][0] <= ratio["value"] <= ratio["ci95"][1]
        assert f"| {ratio['name']} | {ratio['value']:.3f} | [{ratio['ci95'][0]:.3f}, " in text
    assert names == ["header/stable", "stripped/stable", "rewritten/kept"]
    # the article's side: 912/168, 169/168, 322/167 ms
    assert [r["article"] for r in summary["ratios"]] == [5.429, 1.006, 1.928]
    shape = summary["model"]["shape"]
    assert (shape["layers"], shape["hidden"], shape["heads"], shape["kv_heads"]) == (2, 128, 4, 2)
    assert summary["model"]["params"] > 0 and summary["date"][:2] == "20"
    log = (run / "headline.log").read_text(encoding="utf-8")
    assert "gpu_headline: python" in log and "size: small" in log


def test_help_and_the_full_size_without_a_gpu() -> None:
    shown = script("--help", timeout=60)
    assert shown.returncode == 0 and "--cpu-small" in shown.stdout and "--wheels" in shown.stdout
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the full size would run")
    refused = script("--check", timeout=300)
    assert refused.returncode == 2
    assert "needs a CUDA GPU" in refused.stderr and "--cpu-small" in refused.stderr
