"""Issue 40: a check judges every rule and case and reports each failed rule (`rules_failed`), the
weightiest first, its level its worst failed rule's; and Dynamo-style dispatch frames sent after the
call's finish fail CH-DISPATCH-002 (the reference server's faults plant both, real loopback runs: the suite
forked from a warm process, conformance/forked.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harnesscheck.conformance.forked import run_forked
from harnesscheck.conformance.runner import SuiteOptions
from harnesscheck.conformance.verdict import CheckFailed, Problems


def _run(tmp_path: Path, select: str, *faults: str) -> dict[str, dict[str, Any]]:
    args = tuple(a for f in faults for a in ("--fault", f))
    doc = run_forked(SuiteOptions(apis="anthropic,chat,responses", tries=1, select=select, server_args=args), tmp_path)
    return {c["id"]: c for c in doc["checks"]}


def test_problems_lead_with_the_weightiest_rule() -> None:
    problems = Problems("AN-ERR-002")
    assert not problems
    problems.raise_if_any()  # nothing found: no failure
    problems.add("served any name", rule="AN-ERR-002:generation")
    problems.add("a 500 for an unknown model")  # the check's own rule: MUST
    with pytest.raises(CheckFailed) as failed:
        problems.raise_if_any()
    assert failed.value.rules == ["AN-ERR-002", "AN-ERR-002:generation"]
    assert failed.value.summary.startswith("a 500 for an unknown model (and 1 more: served any name)")


def test_the_count_of_the_other_problems_agrees_with_the_list() -> None:
    """'(and 4 more: ...)' listed three (Dynamo verification, RS-ERR-001): the count and the list agree."""
    problems = Problems("RS-ERR-001")
    for n in range(5):
        problems.add(f"problem {n}")
    with pytest.raises(CheckFailed) as failed:
        problems.raise_if_any()
    assert failed.value.summary.startswith(
        "problem 0 (and 4 more, the first three: problem 1; problem 2; problem 3)"), failed.value.summary
    three = Problems("RS-ERR-001")
    for n in range(4):
        three.add(f"problem {n}")
    with pytest.raises(CheckFailed) as failed:
        three.raise_if_any()
    assert failed.value.summary.startswith("problem 0 (and 3 more: problem 1; problem 2; problem 3)")


def test_the_error_check_counts_what_it_lists(tmp_path: Path) -> None:
    """RS-ERR-001 builds its own message (conformance/test_errors.py): every bad request answered in another
    shape is a problem; the message says how many more there are and lists as many as it says."""
    import re

    planted = _run(tmp_path, "RS-ERR-001", "wrong-error-shape", "rs-require-input")["RS-ERR-001"]
    assert planted["outcome"] == "fail", planted
    more = re.search(r"\(and (\d+) more, the first three: (.*)\)$", planted["message"], re.S)
    assert more is not None and int(more.group(1)) > 3, planted["message"]
    assert len(re.findall(r"the error body is not in the responses error shape|answered HTTP", more.group(2))) == 3, \
        planted["message"]


def test_a_second_failed_rule_is_reported_beside_the_first(tmp_path: Path) -> None:
    planted = _run(tmp_path / "planted", "AN-ERR-002", "unknown-model-openai-shape")["AN-ERR-002"]
    assert (planted["outcome"], planted["level"]) == ("fail", "SHOULD"), planted
    # the retrieve route's 404 in OpenAI's shape under anthropic-version, and a 200 for an unknown model
    # on the generation routes: both rules, though the generation rule alone would fail the check
    assert set(planted["rules_failed"]) == {"AN-ERR-002:shape", "AN-ERR-002:generation"}, planted
    assert "in OpenAI's error shape" in planted["message"], planted["message"]
    clean = _run(tmp_path / "clean", "AN-ERR-002")["AN-ERR-002"]
    assert (clean["outcome"], clean["rules_failed"]) == ("pass", []), clean


def test_dispatch_frames_after_the_finish_fail(tmp_path: Path) -> None:
    late = _run(tmp_path / "late", "CH-DISPATCH-002", "dispatch-late")["CH-DISPATCH-002"]
    assert (late["outcome"], late["level"]) == ("fail", "SHOULD"), late
    assert "after the chunk carrying finish_reason" in late["message"], late["message"]
    clean = _run(tmp_path / "clean", "CH-DISPATCH-002")["CH-DISPATCH-002"]
    assert clean["outcome"] == "pass", clean
