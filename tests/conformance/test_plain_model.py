"""Issue 23's proofs against an independent endpoint whose model takes a path only when asked plainly
(tests/conformance/plain_model_server.py), through the real suite (run_suite in a subprocess):

- its clean mode passes the history, stream, tokenize and dispatch checks;
- a flattened history, a flattened /tokenize rendering, reasoning dropped from tool-call turns and
  two parallel calls under one index are each a MUST failure;
- with `--one-in 3` (the path taken on every third ask only), `--tries 3` gives pass, and a path no
  try and no lever reaches leaves the parallel-call rules inconclusive (not exercised), never pass.
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
    with plain_server(one_in=1000) as url:  # a path no try and no lever reaches
        never = _run(url, tmp_path / "never", "CH-STREAM-001", tries=1)
    assert {k: c["outcome"] for k, c in retried.items()} == dict.fromkeys(
        ("CH-STREAM-001", "AN-STREAM-006", "AN-HIST-001"), "pass"), _brief(retried)
    # The contrast: every lever pulled (conformance/levers.py) and the path still not taken: a rule never
    # exercised is not a pass, and its message says what was tried.
    single = never["CH-STREAM-001"]
    assert (single["outcome"], single.get("cause")) == ("inconclusive", "not-exercised"), _brief(never)
    assert "not exercised: the model made one call" in single["message"], single["message"]
    assert "tried" in single["message"], single["message"]


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


# -- issue 36: true verdicts on a small, verbose model behind an independent server --------------------

ALL = "anthropic,chat,responses"


def _run_all(url: str, tmp_path: Path, select: str, *, tries: int = 1) -> dict[str, dict]:
    doc = run_suite(SuiteOptions(endpoint=url, apis=ALL, tries=tries, select=select, timeout=20.0), tmp_path,
                    subprocess_run=True, quiet=True)
    checks = {c["id"]: c for c in doc["checks"]}
    # no per-client "would break" line stands on a measurement of other circumstances: none of these
    # cases is a planted fault a client run measured
    breaks = {k: v for k, c in checks.items() for v in (c.get("clients") or {}).values() if "would break" in v}
    assert not breaks, breaks
    return checks


def test_calls_cut_by_the_limit_after_complete_ones_fail_no_tools_rule(tmp_path: Path) -> None:
    """A verbose model: every answer with calls ends in a call the output limit cut, after complete ones.
    The strict-arguments rule judges the complete calls only; no TOOLS rule fails, in any API, and the
    stream grammar's arguments rules (AN-STREAM-006, CH-STREAM-002, RS-STREAM-006) leave the cut call
    to the cut-call rules (issue 36: "arguments of tool call 9 do not join" was a false MUST failure)."""
    with plain_server("clean,verbose") as url:
        checks = _run_all(url, tmp_path, "TOOLS-001 or TOOLS-003 or TOOLS-004 or TOOLS-005 or AN-STREAM-006 "
                                         "or CH-STREAM-002 or RS-STREAM-006")
    assert len(checks) == 15, sorted(checks)
    for check in ("AN-STREAM-006", "CH-STREAM-002", "RS-STREAM-006"):
        assert checks[check]["outcome"] == "pass", _brief(checks)
    assert not [k for k, c in checks.items() if c["outcome"] == "fail"], _brief(checks)
    for prefix in ("AN", "CH", "RS"):  # judged on the complete calls, the cut one left to TOOLS-005
        assert checks[f"{prefix}-TOOLS-004"]["outcome"] == "pass", _brief(checks)


def test_forced_choice_answered_with_text_is_the_forced_rules_failure_in_every_api(tmp_path: Path) -> None:
    with plain_server("clean,forced-text") as url:
        checks = _run_all(url, tmp_path, "TOOLS-001")
    for prefix in ("AN", "CH", "RS"):
        check = checks[f"{prefix}-TOOLS-001"]
        assert (check["outcome"], check["level"], check["rules_failed"][0]) == ("fail", "MUST", f"{prefix}-TOOLS-001:forced"), \
            _brief(checks)
        assert "without a tool call: text 'The weather" in check["message"], check["message"]
    with plain_server("clean") as url:  # the same server obeying the forced choice
        checks = _run_all(url, tmp_path / "obeyed", "TOOLS-001")
    assert {k: c["outcome"] for k, c in checks.items()} == dict.fromkeys(
        ("AN-TOOLS-001", "CH-TOOLS-001", "RS-TOOLS-001"), "pass"), _brief(checks)


def test_a_tokenize_route_in_another_dialect_is_no_witness(tmp_path: Path) -> None:
    """/tokenize takes {"content"} and answers the chat form with no tokens: the history checks use the
    next witness (cache usage) and say so; the tokenize check says the route speaks another dialect."""
    with plain_server("clean,tokenize-content") as url:
        checks = _run_all(url, tmp_path, "AN-HIST-001 or RS-HIST-001 or CH-TOKENIZE-001", tries=3)
    for check_id in ("AN-HIST-001", "RS-HIST-001"):
        assert checks[check_id]["outcome"] == "pass", _brief(checks)
        notes = " ".join(checks[check_id].get("notes", []))
        assert "the cache witness spoke" in notes and "does not speak that form" in notes, notes
    tokenize = checks["CH-TOKENIZE-001"]
    assert tokenize["outcome"] == "skip" and "another dialect" in tokenize["message"], _brief(checks)


def test_a_tokenize_route_that_drops_one_reasoning_name_defers_to_the_generation_route(tmp_path: Path) -> None:
    """/tokenize renders reasoning_content as absent while the chat route keeps the reasoning under either
    name (vLLM 0.32, docs/peers/vllm-0.32.md): CH-HIST-003 passes on the generation route's prompt counts
    and says so; a server whose chat route loses a name still fails (fault chat-history-reasoning-one-name)."""
    with plain_server("clean,tokenize-drops-reasoning-content") as url:
        check = _run_all(url, tmp_path, "CH-HIST-003")["CH-HIST-003"]
    assert check["outcome"] == "pass", check
    assert "judged by the generation route's usage" in " ".join(check.get("notes", [])), check


def test_a_second_turn_500_is_its_own_finding(tmp_path: Path) -> None:
    """Turn 1 replays turn 0's cut call (arguments not JSON) and the server answers 500: the TURN check
    fails (MUST) with it; the stream checks of turn 0 are not charged with it."""
    select = "CH-STREAM-001 or CH-STREAM-003 or CH-STREAM-004 or CH-STREAM-005 or TURN-001"
    with plain_server("clean,verbose,history-500") as url:
        checks = _run_all(url, tmp_path, select)
    for prefix in ("AN", "CH", "RS"):
        turn = checks[f"{prefix}-TURN-001"]
        assert (turn["outcome"], turn["level"]) == ("fail", "MUST"), _brief(checks)
        assert "HTTP 500" in turn["message"], turn["message"]
    assert "cut by the output limit" in checks["CH-TURN-001"]["message"], checks["CH-TURN-001"]["message"]
    for check_id in ("CH-STREAM-001", "CH-STREAM-003", "CH-STREAM-004", "CH-STREAM-005"):
        assert "HTTP 500" not in checks[check_id]["message"], _brief(checks)


def test_a_server_that_normalises_only_the_real_billing_header(tmp_path: Path) -> None:
    """Claude Code 2.1.197's header is reused from the cache; the older cch= form is not: the failure
    is the second rule's (SHOULD) and says the endpoint handles only the current form."""
    with plain_server("clean,real-header-cache") as url:
        checks = _run_all(url, tmp_path, "PREAMBLE")
    for check_id in ("AN-PREAMBLE-001", "AN-PREAMBLE-002"):
        check = checks[check_id]
        assert (check["outcome"], check["level"], check["rules_failed"]) == ("fail", "SHOULD", [f"{check_id}:cch"]), \
            _brief(checks)
        assert "handles only the current form" in check["message"], check["message"]
    with plain_server("clean") as url:  # no normalisation: the real form defeats reuse, and is named first
        checks = _run_all(url, tmp_path / "none", "AN-PREAMBLE-001")
    check = checks["AN-PREAMBLE-001"]
    assert (check["outcome"], check["rules_failed"]) == ("fail", ["AN-PREAMBLE-001"]), _brief(checks)
    assert "Claude Code 2.1.197's header" in check["message"], check["message"]


@pytest.mark.parametrize("mode", ["clean", "clean,openai-404"])
def test_no_retrieve_route_and_any_model_name_served(mode: str, tmp_path: Path) -> None:
    """No GET /v1/models/{id} (a bare 404, or llama.cpp's OpenAI-shaped one) and any model name served
    with 200: the missing route is reported (AN-ROUTE-004), the slash rules skip with that reason, and
    the unknown-model rule does not pass on a route-not-found 404."""
    with plain_server(mode) as url:
        checks = _run_all(url, tmp_path, "AN-ROUTE or AN-ERR-002")
    route = checks["AN-ROUTE-004"]
    assert (route["outcome"], route["level"]) == ("fail", "SHOULD"), _brief(checks)
    assert "no GET /v1/models/{id} route" in route["message"], route["message"]
    for check_id in ("AN-ROUTE-002", "AN-ROUTE-003"):
        assert checks[check_id]["outcome"] == "skip" and "AN-ROUTE-004 reports it" in checks[check_id]["message"]
    unknown = checks["AN-ERR-002"]
    assert (unknown["outcome"], unknown["level"], unknown["rules_failed"]) == ("fail", "SHOULD", ["AN-ERR-002:generation"]), \
        _brief(checks)
    assert "the endpoint serves any model name" in unknown["message"], unknown["message"]
