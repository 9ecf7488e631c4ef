"""--quick grows a cut answer's budget one step only (issue 40/42: on llama-server with Gemma 3 270M the
growth up to the scenario's cap made single checks take minutes): against a model that reasons ~1,500
tokens before its calls, the default run grows the budget until the call comes; --quick stops after one
step (four times the first limit) and says the check was not exercised, naming the cut."""

from __future__ import annotations

from pathlib import Path

from harnesscheck.conformance.levers import GROWTH, budget_of
from tests.conformance.test_every_must_verdict import _run, endpoint


def _budgets(check: dict) -> list[int]:
    return [budget_of(t["levers"]) for t in (check.get("levers") or {}).get("tried", [])]


def test_quick_grows_a_cut_answer_once_and_the_default_run_until_the_call(tmp_path: Path) -> None:
    with endpoint("reasons-long") as url:
        quick = _run(url, tmp_path / "quick", "CH-TOOLS-003", apis="chat", quick=True)["checks"][0]
        full = _run(url, tmp_path / "full", "CH-TOOLS-003", apis="chat")["checks"][0]
    assert max(_budgets(quick)) == GROWTH, quick.get("levers")
    assert quick["outcome"] == "inconclusive" and "cut at" in quick["message"], quick["message"]
    assert max(_budgets(full)) > GROWTH, full.get("levers")
    assert full["outcome"] == "pass", full["message"]
