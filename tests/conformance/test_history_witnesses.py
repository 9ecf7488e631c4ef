"""Issue 5's proof: the history checks pass on the clean reference server with each witness forced
in turn, and fail under each history fault with each witness that can see it.

Each case is the history suite forked from a warm process (conformance/forked.py) against its own
server. The timing witness reads modelled time: its cases keep a steep prefill cost (what reuse
saves) and a fixed first-token cost, with no decode time (its requests ask for one token; the long
turn-1 answers would only add wall time); the tokenize and cache witnesses read no clock."""

from __future__ import annotations

from pathlib import Path

import pytest

from harnesscheck.conformance.forked import run_forked
from harnesscheck.conformance.runner import SuiteOptions

# The embedded server has no modelled time (options.EMBEDDED_SERVER_ARGS); the timing witness's cases
# give it some. A steep prefill cost makes reuse stand out from scheduling noise on a busy 2-core machine.
TIMED = ("--decode-ms", "0", "--ttft-base-ms", "1", "--prefill-us-per-token", "200")

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
SELECT = " or ".join(sorted(HIST | ALWAYS_PASS))  # the checks by id (-k): other history checks have their own tests


@pytest.mark.parametrize(("witness", "fault"), CASES, ids=[f"{w}-{f or 'clean'}" for w, f in CASES])
def test_history_checks_by_witness(witness: str, fault: str | None, tmp_path: Path) -> None:
    server_args = (TIMED if witness == "timing" else ()) + ((f"--fault={fault}",) if fault else ())
    doc = run_forked(SuiteOptions(select=SELECT, witness=witness, server_args=server_args, timeout=30.0), tmp_path)
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
    doc = run_forked(SuiteOptions(select=SELECT, model=DEEPSEEK, server_args=server_args), tmp_path)
    outcomes = {c["id"]: c["outcome"] for c in doc["checks"]}
    if fault is None:
        assert all(v == "pass" for v in outcomes.values()), outcomes
    else:
        assert {k for k, v in outcomes.items() if v == "fail"} == HIST, outcomes


@pytest.mark.parametrize("fault", [None, "truncate-agent-reasoning"])
def test_the_cache_witness_reads_whole_cache_blocks(fault: str | None, tmp_path: Path) -> None:
    """vLLM 0.32 on CPU caches whole blocks of 128 tokens: a verbatim 254-token prefix reads 128, which is
    no proof of a history rendered differently (AN-HIST-001 failed so, docs/peers/vllm-0.32.md). With the
    server's blocks at 128 the clean history passes on the cache witness; dropped agent reasoning fails."""
    server_args = ("--block-size=128",) + ((f"--fault={fault}",) if fault else ())
    options = SuiteOptions(select=SELECT, witness="cache", server_args=server_args, timeout=30.0)
    outcomes = {c["id"]: c["outcome"] for c in run_forked(options, tmp_path)["checks"]}
    expected = EXPECTED_FAIL[("cache", fault)] if fault else set()
    assert {k for k, v in outcomes.items() if v == "fail"} == expected, outcomes
    assert all(outcomes[k] == "pass" for k in (HIST | ALWAYS_PASS) - expected), outcomes


def test_cache_slack_is_the_coarser_of_slack_and_the_endpoints_block() -> None:
    from harnesscheck.conformance.witnesses import SLACK, cache_slack

    assert SLACK == 64
    assert cache_slack(128, 256) == 128  # vLLM CPU: whole blocks of 128
    assert cache_slack(1152, 128) == 128
    assert cache_slack(48, 96) == 64  # blocks of 16 or 48: the slack holds
    assert cache_slack(100, 290) == 64  # no common block above the slack
    assert cache_slack(0, 256) == 64  # nothing read: no block to infer
    assert cache_slack(1024, 1024) == 64  # a count repeated is no block size (more than any stack's, 256)
