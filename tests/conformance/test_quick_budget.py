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


def test_quick_bounds_every_kit_request_at_its_budget(reference_server: str) -> None:
    """--quick sends no generation request asking for more than QUICK_BUDGET tokens (long_reasoning's script
    asks for 2,012; on llama-server with Gemma 3 270M, a model that never ends, that was 40 s a sample), or the
    least the request takes where that is more (Anthropic: above a thinking budget); the full run keeps the
    scenario's own limit."""
    from harnesscheck.conformance.options import QUICK_BUDGET
    from harnesscheck.conformance.session import Endpoint, Session
    from harnesscheck.protocol import apis

    for quick in (True, False):
        hc = Session(Endpoint(url=reference_server, model="ref/model", tries=1, timeout=30.0, quick=quick))
        for api in apis.names():
            sent = hc.stream(api, "long_reasoning").request_body
            assert isinstance(sent, dict)
            assert sent[apis.get(api).MAX_TOKENS_FIELD] == (QUICK_BUDGET if quick else 2012), (api, quick)
    hc = Session(Endpoint(url=reference_server, model="ref/model", tries=1, timeout=30.0, quick=True))
    body = apis.get("anthropic").thinking_on(hc.body("anthropic", "long_reasoning"))
    sent = hc.post("anthropic", "/v1/messages", body, stream=True).request_body
    assert sent["thinking"]["budget_tokens"] == 1024 and sent["max_tokens"] == 1025, sent
