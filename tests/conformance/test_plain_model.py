"""Issue 23's proofs against an independent endpoint whose model takes a path only when asked plainly
(tests/conformance/plain_model_server.py), through the real suite (run_suite in a subprocess):

- its clean mode passes the history, stream, tokenize and dispatch checks;
- a flattened history, a flattened /tokenize rendering, reasoning dropped from tool-call turns and
  two parallel calls under one index are each a MUST failure;
- with `--one-in 3` (the path taken on every third ask only), `--tries 3` gives pass, and
  `--tries 1` leaves the parallel-call rules inconclusive (not exercised), never pass.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from harnesscheck.conformance.runner import SuiteOptions, run_suite
from tests.processes import http_process

ROOT = Path(__file__).resolve().parents[2]
CHECKS = ("AN-HIST-001 or AN-HIST-002 or CH-HIST-002 or AN-STREAM or CH-STREAM or CH-TOKENIZE-001 or AN-DISPATCH-001 "
          "or CH-DISPATCH-001")


@contextmanager
def plain_server(mode: str = "clean", one_in: int = 1) -> Iterator[str]:
    with http_process(lambda port: [sys.executable, "-m", "tests.conformance.plain_model_server", "--port", str(port),
                                    "--mode", mode, "--one-in", str(one_in)], "/v1/models", cwd=ROOT,
                      startup_s=30) as url:
        yield url


def _run(url: str, tmp_path: Path, select: str, *, tries: int = 3) -> dict[str, dict]:
    doc = run_suite(SuiteOptions(endpoint=url, apis="anthropic,chat", tries=tries, select=select, timeout=20.0,
                                 expect=("tokenize",)), tmp_path, subprocess_run=True, quiet=True)
    return {c["id"]: c for c in doc["checks"]}


def _brief(checks: dict[str, dict]) -> dict[str, str]:
    return {k: f"{c['outcome']} {c['level']} {c.get('cause', '')}: {c['message'][:200]}" for k, c in checks.items()}


def test_clean_mode_passes(tmp_path: Path) -> None:
    with plain_server() as url:
        checks = _run(url, tmp_path, CHECKS)
    assert len(checks) == 20, sorted(checks)  # 9 AN-STREAM, 5 CH-STREAM, 3 history, 1 tokenize, 2 dispatch
    assert all(c["outcome"] == "pass" for c in checks.values()), _brief(checks)


@pytest.mark.parametrize(("mode", "check"), [("flatten-history", "AN-HIST-001"), ("flatten-tokenize", "AN-HIST-001"),
                                             ("drop-agent-reasoning", "AN-HIST-001"),
                                             ("parallel-same-index", "CH-STREAM-001")])
def test_planted_bug_is_a_must_failure(mode: str, check: str, tmp_path: Path) -> None:
    with plain_server(mode) as url:
        checks = _run(url, tmp_path, check)
    assert (checks[check]["outcome"], checks[check]["level"]) == ("fail", "MUST"), _brief(checks)


def test_tries_find_a_path_taken_one_time_in_three(tmp_path: Path) -> None:
    select = "CH-STREAM-001 or AN-STREAM-006 or AN-HIST-001"
    with plain_server(one_in=3) as url:
        retried = _run(url, tmp_path / "tries3", select, tries=3)
        once = _run(url, tmp_path / "tries1", "CH-STREAM-001", tries=1)
    assert {k: c["outcome"] for k, c in retried.items()} == dict.fromkeys(
        ("CH-STREAM-001", "AN-STREAM-006", "AN-HIST-001"), "pass"), _brief(retried)
    # The contrast: one try does not reach the third ask, and a rule never exercised is not a pass.
    single = once["CH-STREAM-001"]
    assert (single["outcome"], single.get("cause")) == ("inconclusive", "not-exercised"), _brief(once)
    assert "not exercised: the model made one call" in single["message"]


def test_a_sampling_endpoint_leaves_the_stream_vs_nonstream_rule_unjudged(tmp_path: Path) -> None:
    """Two answers of a sampling model differ: the SDK oracles still judge their MUST rule (the
    helper folds every stream), and their `:nonstream` comparison is not exercised, never a
    failure; against the same model without sampling it is judged."""
    with plain_server("sampling") as url:
        checks = _run(url, tmp_path / "sampling", "AN-SDK-001 or CH-SDK-001")
    assert {k: c["outcome"] for k, c in checks.items()} == {"AN-SDK-001": "pass", "CH-SDK-001": "pass"}, \
        _brief(checks)
    assert checks["AN-SDK-001"]["exercised"] == {"AN-SDK-001:nonstream": []}
    assert checks["CH-SDK-001"]["exercised"] == {"CH-SDK-001:nonstream": []}
    with plain_server() as url:
        checks = _run(url, tmp_path / "clean", "AN-SDK-001 or CH-SDK-001")
    assert checks["AN-SDK-001"]["exercised"] == {"AN-SDK-001:nonstream": ["deterministic"]}, _brief(checks)
