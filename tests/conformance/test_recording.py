"""conformance/recording.py on its own: what a check's test raised, mapped to the check's outcome and
level (the table in the module's docstring), without a pytest run."""

from __future__ import annotations

import pytest

from harnesscheck.conformance import catalog
from harnesscheck.conformance.outcome import Level, Outcome
from harnesscheck.conformance.recording import judge
from harnesscheck.conformance.verdict import CheckFailed, Inconclusive


def _judge(check_id: str, error: BaseException | None = None, *, passed: bool = False, skipped: bool = False):
    return judge(catalog.get(check_id), passed=passed, skipped=skipped, error=error, hc=None, attached=[],
                 duration=0.5, started=0.0)


def test_a_passed_test_is_a_pass_at_the_checks_level() -> None:
    result = _judge("AN-ROUTE-003", passed=True)
    assert (result.outcome, result.level, result.rules, result.message) == (Outcome.PASS, Level.MUST, [], "ok")


def test_inconclusive_and_skip_keep_their_reason() -> None:
    result = _judge("AN-ROUTE-003", Inconclusive("the endpoint may be slow", cause="timeout"), skipped=True)
    assert (result.outcome, result.cause) == (Outcome.INCONCLUSIVE, "timeout")
    assert "--timeout 120" in result.message  # the hint: four times the 30 s default
    skipped = _judge("AN-ROUTE-002", pytest.skip.Exception("no model id containing '/'"), skipped=True)
    assert (skipped.outcome, skipped.message) == (Outcome.SKIP, "no model id containing '/'")


def test_a_failure_weighs_its_weightiest_rule() -> None:
    """AN-CTX-001's own rule and its :marker are MUST, CH-CTX-001:marker a SHOULD: a CheckFailed on
    a SHOULD part weighs SHOULD, on both the MUST one leads."""
    should = _judge("CH-CTX-001", CheckFailed("no marker", rule="CH-CTX-001:marker"))
    assert (should.outcome, should.level, should.rules) == (Outcome.FAIL, Level.SHOULD, ["CH-CTX-001:marker"])
    plain = _judge("CH-ROUTE-001", AssertionError("not OpenAI's list shape\nmore"))
    assert (plain.outcome, plain.level, plain.rules, plain.message) == (
        Outcome.FAIL, Level.MUST, ["CH-ROUTE-001"], "not OpenAI's list shape")


def test_a_crash_in_the_kit_is_an_error_never_a_verdict() -> None:
    result = _judge("AN-ROUTE-003", KeyError("x"))
    assert result.outcome is Outcome.ERROR and result.message.startswith("kit error (not a verdict on the endpoint)")
