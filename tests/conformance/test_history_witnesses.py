"""Issue 5's proof: the history checks pass on the clean reference server with each witness forced
in turn, and fail under each history fault with each witness that can see it."""

from __future__ import annotations

from pathlib import Path

import pytest

from harnesscheck.conformance.runner import SuiteOptions, run_suite

HIST = {"AN-HIST-001", "RS-HIST-001", "AN-HIST-002", "CH-HIST-002", "RS-HIST-002"}
ALWAYS_PASS = {"AN-HIST-003"}  # thinking on by default: no witness involved
ORDER_CHECKS = {"AN-HIST-001", "RS-HIST-001"}  # interleaved scenarios: flattening shows there
# What each witness can see: a rewrite keeps the text (tokenize cannot tell); dropped reasoning
# makes turn N+1 shorter, not slower (timing cannot tell).
EXPECTED_FAIL = {
    ("tokenize", "flatten-interleaved-reasoning"): ORDER_CHECKS,
    ("tokenize", "truncate-agent-reasoning"): HIST,
    ("cache", "flatten-interleaved-reasoning"): ORDER_CHECKS,
    ("cache", "truncate-agent-reasoning"): HIST,
    ("cache", "rewrite-history-reasoning"): HIST,
    ("timing", "flatten-interleaved-reasoning"): ORDER_CHECKS,
    ("timing", "rewrite-history-reasoning"): HIST,
}
CASES = [(w, None) for w in ("tokenize", "cache", "timing")] + list(EXPECTED_FAIL)


@pytest.mark.parametrize(("witness", "fault"), CASES, ids=[f"{w}-{f or 'clean'}" for w, f in CASES])
def test_history_checks_by_witness(witness: str, fault: str | None, tmp_path: Path) -> None:
    # A steep prefill cost makes reuse stand out from scheduling noise on a busy 2-core machine.
    server_args = ("--prefill-us-per-token=200",) + ((f"--fault={fault}",) if fault else ())
    doc = run_suite(SuiteOptions(select="test_history", witness=witness, server_args=server_args, timeout=30.0),
                    tmp_path, subprocess_run=True, quiet=True)
    outcomes = {c["id"]: c["outcome"] for c in doc["checks"]}
    assert set(outcomes) == HIST | ALWAYS_PASS
    expected = EXPECTED_FAIL.get((witness, fault), set()) if fault else set()
    failing = {k for k, v in outcomes.items() if v == "fail"}
    assert failing == expected, {k: v for k, v in outcomes.items()}
    assert all(outcomes[k] == "pass" for k in (HIST | ALWAYS_PASS) - expected), outcomes


DEEPSEEK = "deepseek-ai/DeepSeek-R1"  # a family whose template drops plain-turn reasoning


@pytest.mark.parametrize("fault", [None, "truncate-agent-reasoning"])
def test_drop_plain_turn_family_keeps_agent_turn_reasoning(fault: str | None, tmp_path: Path) -> None:
    """Policy: a DeepSeek-R1-style family may drop reasoning on plain turns, never on agent turns."""
    server_args = (f"--fault={fault}",) if fault else ()
    doc = run_suite(SuiteOptions(select="test_history", model=DEEPSEEK, server_args=server_args), tmp_path,
                    subprocess_run=True, quiet=True)
    outcomes = {c["id"]: c["outcome"] for c in doc["checks"]}
    if fault is None:
        assert all(v == "pass" for v in outcomes.values()), outcomes
    else:
        assert {k for k, v in outcomes.items() if v == "fail"} == HIST, outcomes
