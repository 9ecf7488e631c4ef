"""`bench fidelity`: the ground-truth server's clock starts at a request's first byte; the pairing
by request id; the load patterns (all-at-once counts every request, staggered discards each
worker's first); the request counts that make p99 a percentile; the in-flight figure; one small
run of the kit's sharded client and the plain httpx baseline against the real server."""

from __future__ import annotations

import json
import socket
import time

import pytest

from harnesscheck.replay.benchmarks.fidelity import (
    KIT,
    FidelityOptions,
    GroundTruthProcess,
    Measured,
    get_json,
    in_flight,
    pair,
    requests_for,
    run_arm,
    run_fidelity,
)


@pytest.fixture(scope="module")
def gt():
    with GroundTruthProcess(first_ms=50, chunks=8, gap_ms=5) as server:
        yield server


def _post(gt, rid: str, *, body_delay_s: float) -> bytes:
    """One raw HTTP request whose body arrives ``body_delay_s`` after its first byte; the response."""
    host, port = gt.url.removeprefix("http://").split(":")
    body = json.dumps({"model": "m", "stream": True, "messages": []}).encode()
    head = (f"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nx-request-id: {rid}\r\n"
            f"content-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n").encode()
    with socket.create_connection((host, int(port))) as s:
        s.sendall(head)
        time.sleep(body_delay_s)
        s.sendall(body)
        s.settimeout(10)
        data = b""
        while not data.endswith(b"0\r\n\r\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    return data


def test_ground_truth_clock_starts_at_the_first_request_byte(gt):
    get_json(gt.url + "/reset")
    assert b"[DONE]" in _post(gt, "late-body", body_delay_s=0.3)
    assert b"[DONE]" in _post(gt, "at-once", body_delay_s=0)
    log = get_json(gt.url + "/log")["requests"]
    # the first chunk is due 50 ms after the first byte, but the body only came 300 ms later:
    # the server's own TTFT includes the wait (a clock started after reading the body would say ~50)
    assert log["late-body"]["ttft_ms"] >= 290, log["late-body"]
    assert 45 <= log["at-once"]["ttft_ms"] < 250, log["at-once"]
    assert len(log["at-once"]["gaps_ms"]) == 7


def test_pairing_by_request_id_counts_failures_and_strangers():
    truth = {"a": {"ttft_ms": 50.0, "gaps_ms": [5.0, 5.0]}, "b": {"ttft_ms": 50.0, "gaps_ms": [5.0, 5.0]},
             "c": {"ttft_ms": 50.0, "gaps_ms": [5.0, 5.0]}}
    measured = [Measured("a", 52.0, [52.0, 58.0, 63.5]),  # +2 ms; gaps 6 and 5.5 -> +1, +0.5
                Measured("b", 51.0, [51.0, 56.0]),  # one chunk short: failed
                Measured("c", None, [], "reset"),  # error: failed
                Measured("zzz", 40.0, [40.0, 45.0, 50.0])]  # the server never saw it: unpaired
    p = pair(measured, truth)
    assert p.ttft_error_ms == [2.0]
    assert p.itl_error_ms == pytest.approx([1.0, 0.5])
    assert (p.failed, p.unpaired) == (2, 1)


def test_requests_per_level_make_p99_a_percentile_unless_told_otherwise():
    assert requests_for(1, None) == 200
    assert requests_for(16, None) == 512  # >= 500, whole rounds of 16 workers
    assert requests_for(64, None) == 512
    assert requests_for(256, None) == 1024
    assert requests_for(8, 12) == 16  # an explicit count, rounded up to whole rounds
    assert requests_for(256, 8) == 256  # at least one request per worker


def test_in_flight_is_the_time_weighted_mean_over_the_steady_part():
    s = 1_000_000_000
    # two streams of 1 s from t=0 and t=0.5; steady part: from 0+1 s (one request) to the last arrival
    # (0.5 s): empty -> None; with a third arriving at 2 s, the span 1..2 s holds 0.5 s of stream b
    assert in_flight({"a": {"t0_ns": 0, "end_ns": s}, "b": {"t0_ns": s // 2, "end_ns": 3 * s // 2}}, 1.0) is None
    got = in_flight({"a": {"t0_ns": 0, "end_ns": s}, "b": {"t0_ns": s // 2, "end_ns": 3 * s // 2},
                     "c": {"t0_ns": 2 * s, "end_ns": 3 * s}}, 1.0)
    assert got == pytest.approx(0.5)


def test_all_at_once_counts_every_request_and_staggered_discards_each_workers_first(gt, tmp_path):
    opts = FidelityOptions(first_ms=50, chunks=8, gap_ms=5, processes=2)
    run = run_arm(gt.url, KIT, 4, 8, opts, str(tmp_path))
    assert len(run.measured) == 8 and len(run.log["requests"]) == 8 and run.processes == 2
    opts.pattern = "staggered"
    run = run_arm(gt.url, KIT, 4, 8, opts, str(tmp_path))
    assert len(run.measured) == 8 and len(run.log["requests"]) == 12  # + one discarded per worker
    assert {m.rid for m in run.measured} < set(run.log["requests"])


def test_a_small_run_measures_the_kit_and_httpx_against_the_servers_log():
    # 32 requests: 4 rounds per worker at c=8, so the in-flight window (one request duration after the
    # first arrival to the last one) is never empty, however quickly the client turns a request round
    doc = run_fidelity(FidelityOptions(concurrency=[1, 8], requests=32, chunks=16, processes=2,
                                       transports=[KIT, "httpx"]))
    bench = next(b for b in doc["benchmarks"] if b["name"] == "fidelity-ttft-error")
    rows = {(r["arm"], r["concurrency"]): r for r in bench["settings"]["rows"]}
    assert set(rows) == {(a, c) for a in (KIT, "httpx") for c in (1, 8)}
    for row in rows.values():
        assert row["failed"] == 0 and row["unpaired"] == 0 and row["requests"] == 32, row
        assert 45 <= row["server_ttft_ms"]["median"] <= 90, row  # the server's own 50 ms
        assert row["max_in_flight"] <= row["concurrency"]
    kit1, kit8 = rows[(KIT, 1)], rows[(KIT, 8)]
    assert -1 <= kit1["ttft_error_ms"]["median"] <= 30, kit1  # loopback, one request at a time
    assert kit8["processes"] == 2 and kit1["processes"] == 1
    assert kit8["in_flight_share"] is not None and kit8["max_in_flight"] >= 6
    assert [r["name"] for r in bench["ratios"]] == [f"httpx/{KIT} median c=1", f"httpx/{KIT} median c=8",
                                                   f"httpx/{KIT} p99 c=1", f"httpx/{KIT} p99 c=8"]
    itl = next(b for b in doc["benchmarks"] if b["name"] == "fidelity-itl-error")
    assert all(len(a["samples"]) == 32 * 15 for a in itl["arms"])
    assert any("in flight" in line for line in bench["settings"]["summary"])
