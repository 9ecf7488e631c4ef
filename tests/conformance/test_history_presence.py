"""Issue 41: no history pass where the reasoning never reaches the model.

- A gateway that streams the model's reasoning and drops every piece of it sent back (the reasoning proxy's
  `drop-history` mode, no /tokenize): the cache witness alone sees a history rendered the same each time;
  the presence witness (turn 2 with and without turn 1's reasoning) sees it never reaches the prompt, and
  AN-HIST-001 / RS-HIST-001 fail at MUST, naming the drop.
- A model that never reasons behind the same gateway (no reasoning parser upstream): only the kit's
  reasoning is dropped, so whether the endpoint keeps reasoning it emits cannot be told: inconclusive,
  never a pass.
"""

from __future__ import annotations

from pathlib import Path

from tests.conformance.test_true_verdicts import REASONING_UPSTREAM, through_reasoning_proxy

DROP = ("--modes", "anthropic=drop-history,chat=drop-history,responses=drop-history", "--no-tokenize")
SELECT = "AN-HIST-001 or RS-HIST-001 or AN-HIST-002 or CH-HIST-002"


def _brief(doc: dict) -> dict[str, str]:
    return {c["id"]: f"{c['outcome']} {c['level']}: {c['message'][:300]}" for c in doc["checks"]}


def test_a_gateway_dropping_reasoning_sent_back_fails_history_at_must(tmp_path: Path) -> None:
    doc = through_reasoning_proxy(tmp_path, SELECT, *DROP)
    by_id = {c["id"]: c for c in doc["checks"]}
    for check_id in ("AN-HIST-001", "RS-HIST-001"):
        c = by_id[check_id]
        assert (c["outcome"], c["level"]) == ("fail", "MUST"), _brief(doc)
        assert "never reaches the model's prompt" in c["message"] and "emitted by this endpoint" in c["message"], \
            c["message"]
    for check_id in ("AN-HIST-002", "CH-HIST-002"):  # the agent turn's own reasoning, dropped too (SHOULD)
        assert by_id[check_id]["outcome"] == "fail", _brief(doc)
        assert "never reaches the model's prompt" in by_id[check_id]["message"], by_id[check_id]["message"]


def test_a_model_that_never_reasons_behind_the_gateway_is_inconclusive(tmp_path: Path) -> None:
    upstream = (*REASONING_UPSTREAM, "--reasoning-parser=none")
    doc = through_reasoning_proxy(tmp_path, "AN-HIST-001 or RS-HIST-001", *DROP, upstream=upstream)
    for c in doc["checks"]:
        assert c["outcome"] == "inconclusive", _brief(doc)
        assert "the model never reasoned" in c["message"] and "never reaches the model's prompt" in c["message"], \
            c["message"]


def test_reasoning_trimmed_before_the_last_user_query_fails_the_plain_turn_case_at_should(tmp_path: Path) -> None:
    """Qwen3's template trims reasoning before the last user query (fault trim-reasoning-before-last-query):
    within the agent loop it survives (the check's own rule holds), across a later plain user turn it is lost:
    `<ID>:plain-turn`, SHOULD, and the message says why it is no MUST."""
    from harnesscheck.conformance.forked import run_forked
    from harnesscheck.conformance.runner import SuiteOptions

    doc = run_forked(SuiteOptions(select="AN-HIST-001 or RS-HIST-001", witness="cache",
                                  server_args=("--fault=trim-reasoning-before-last-query",)), tmp_path)
    for c in doc["checks"]:
        assert (c["outcome"], c["level"]) == ("fail", "SHOULD"), _brief(doc)
        assert c["rules_failed"] == [f"{c['id']}:plain-turn"], c
        assert "SHOULD: whether reasoning survives a plain user turn depends on the model" in c["message"], c["message"]
        assert any("cache witness spoke; presence witness" in n for n in c["notes"]), c["notes"]
