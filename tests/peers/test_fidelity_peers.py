"""`bench fidelity --peer`: the peers' per-request exports read back as client records (their
documented formats, written here by hand), a missing peer skipped with the reason, and (opt-in,
where AIPerf or vLLM is installed) one small level against the ground-truth server, paired by id."""

from __future__ import annotations

import json
import os

import pytest

from harnesscheck.replay.benchmarks import fidelity_peers as fp
from harnesscheck.replay.benchmarks.fidelity import FidelityOptions, GroundTruthProcess, pair, run_arm

_PYTHONS = {"aiperf": "/work/aiperf-venv/bin/python", "vllm-bench": "/work/vllm-venv/bin/python"}


def test_aiperf_records_become_client_times_by_request_id(tmp_path):
    path = tmp_path / "profile_export.jsonl"
    ok = {"metadata": {"x_request_id": "r1"}, "metrics": {"time_to_first_token": {"value": 52.5, "unit": "ms"},
                                                          "inter_chunk_latency": {"value": [5.0, 4.5], "unit": "ms"}}}
    bad = {"metadata": {"x_request_id": "r2"}, "metrics": {},
           "error": {"type": "ClientOSError", "message": "Connection reset by peer"}}
    path.write_text(json.dumps(ok) + "\n" + json.dumps(bad) + "\n")
    r1, r2 = fp.read_aiperf(path)
    assert (r1.rid, r1.ttft_ms, r1.token_ms, r1.error) == ("r1", 52.5, [52.5, 57.5, 62.0], None)
    assert r2.rid == "r2" and r2.error == "Connection reset by peer" and r2.token_ms == []


def test_vllm_results_are_in_prompt_order_and_drop_the_finish_chunk_gap(tmp_path):
    path = tmp_path / "result.json"
    path.write_text(json.dumps({"ttfts": [0.051, 0.0], "itls": [[0.005, 0.004, 0.0], []], "errors": ["", "boom"]}))
    a, b = fp.read_vllm(path, "hc-")
    assert a.rid == "hc-0" and a.ttft_ms == pytest.approx(51.0) and a.token_ms == pytest.approx([51.0, 56.0, 60.0])
    assert b.rid == "hc-1" and b.ttft_ms is None and b.error == "boom"


def test_a_peer_that_is_not_there_is_skipped_with_the_reason(tmp_path, monkeypatch):
    monkeypatch.delenv("HARNESSCHECK_AIPERF_PYTHON", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    run = fp.run_peer("aiperf", "http://127.0.0.1:9", 1, 1, None, None, str(tmp_path))
    assert run.measured == [] and "HARNESSCHECK_AIPERF_PYTHON" in run.skipped
    argv, why = fp.locate("vllm-bench", str(tmp_path / "nope"))
    assert argv is None and "not an executable" in why
    with pytest.raises(ValueError, match="unknown peer"):
        fp.locate("locust")


@pytest.mark.slow
@pytest.mark.parametrize("peer", fp.PEERS)
def test_a_peer_measures_the_same_ground_truth(peer, tmp_path):
    python = os.environ.get(fp._ENV[peer]) or (_PYTHONS[peer] if os.path.exists(_PYTHONS[peer]) else None)
    argv, why = fp.locate(peer, python)
    if argv is None:
        pytest.skip(f"{peer} not installed: {why}")
    with GroundTruthProcess(first_ms=50, chunks=8, gap_ms=5) as gt:
        run = run_arm(gt.url, peer, 2, 6, FidelityOptions(chunks=8, peer_python={peer: python} if python else {}),
                      str(tmp_path))
    paired = pair(run.measured, run.log["requests"])
    assert len(paired.ttft_error_ms) == 6 and paired.failed == 0 and paired.unpaired == 0, paired
    assert all(e > -1 for e in paired.ttft_error_ms)  # a client cannot see a token before it is written
    assert len(paired.itl_error_ms) == 6 * 7
