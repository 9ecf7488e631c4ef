"""Issue 40's proof: against an endpoint the kit's scripted model does not describe (the reference server
behind tests/conformance/reasoning_model_server.py: no window announced, a model that reasons ~300 tokens
before each call whatever the levers say, and calls other tools than the recorded client sessions), the
whole suite leaves at most 2 MUST checks inconclusive; and the same endpoint with each bug planted fails
the matching check (or, for a stall inside a client-session replay, exits 4 with the stall recorded)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from harnesscheck.conformance.runner import SuiteOptions, run_suite
from tests.processes import http_process

ROOT = Path(__file__).resolve().parents[2]
HARD = "always-reasons"  # the model reasons before each call even with thinking turned off


@contextmanager
def endpoint(*plants: str) -> Iterator[str]:
    with http_process(lambda port: [sys.executable, "-m", "tests.conformance.reasoning_model_server", "--port",
                                    str(port), "--plant", ",".join((HARD, *plants))], "/v1/models", cwd=ROOT,
                      startup_s=30, quiet=True) as url:
        yield url


def _run(url: str, out: Path, select: str | None = None, **options: Any) -> dict[str, Any]:
    return run_suite(SuiteOptions(endpoint=url, select=select, **options), out, subprocess_run=True, quiet=True)


def _brief(doc: dict[str, Any]) -> list[str]:
    return [f"{c['id']} {c['outcome']} {c.get('cause', '')}: {c['message'][:160]}" for c in doc["checks"]
            if c["outcome"] != "pass"]


def test_every_must_check_reaches_a_verdict_on_a_reasoning_model(tmp_path: Path) -> None:
    with endpoint() as url:
        doc = _run(url, tmp_path)
    musts = [c for c in doc["checks"] if c["check_level"] == "MUST"]
    open_musts = [c["id"] for c in musts if c["outcome"] not in ("pass", "fail")]
    assert len(open_musts) <= 2, _brief(doc)
    assert not [c for c in doc["checks"] if c["outcome"] in ("fail", "error")], _brief(doc)
    assert doc["run"]["verdicts"]["outcome"] == "enough", doc["run"]["verdicts"]
    # the budget grew where the model was still reasoning at the limit, and said so in the levers
    grown = [c["id"] for c in doc["checks"]
             if any(n.startswith("budget-x") for t in (c.get("levers") or {}).get("tried", []) for n in t["levers"])]
    assert any("TOOLS-003" in cid for cid in grown), grown


def test_each_planted_bug_fails_its_check(tmp_path: Path) -> None:
    select = "AN-CTX-001 or CH-CTX-001 or TOOLS-003 or AN-ERR-002 or CH-DISPATCH-002"
    with endpoint("overflow-bare-400", "parallel-calls-not-disabled", "unknown-model-openai-shape",
                  "dispatch-late") as url:
        checks = {c["id"]: c for c in _run(url, tmp_path / "planted", select, apis="anthropic,chat")["checks"]}
    assert (checks["AN-CTX-001"]["outcome"], checks["AN-CTX-001"]["rules_failed"]) == \
        ("fail", ["AN-CTX-001:marker"]), checks["AN-CTX-001"]  # overflow without the marker
    for check_id in ("AN-TOOLS-003", "CH-TOOLS-003"):  # parallel_tool_calls: false ignored
        assert (checks[check_id]["outcome"], checks[check_id]["level"]) == ("fail", "MUST"), checks[check_id]
    assert "AN-ERR-002:shape" in checks["AN-ERR-002"]["rules_failed"], checks["AN-ERR-002"]  # a 404 in OpenAI's shape
    assert checks["CH-DISPATCH-002"]["outcome"] == "fail", checks["CH-DISPATCH-002"]  # dispatch after the finish
    assert "finish_reason" in checks["CH-DISPATCH-002"]["message"]
    with endpoint("overflow-500") as url:  # overflow as a 500
        five = {c["id"]: c for c in _run(url, tmp_path / "500", "AN-CTX-001 or RS-CTX-001")["checks"]}
    for check_id in ("AN-CTX-001", "RS-CTX-001"):
        assert (five[check_id]["outcome"], five[check_id]["level"]) == ("fail", "MUST"), five[check_id]


def test_a_stall_inside_a_client_session_replay_is_no_verdict(tmp_path: Path) -> None:
    """Claude Code's first request gets three writes and then silence: a stall (exit 4), never 'timed out:
    try a longer --timeout'; the other sessions, and the run, go on."""
    from harnesscheck.cli.commands.check import NO_VERDICT, final_status

    with endpoint("stall-client-stream") as url:
        doc = _run(url, tmp_path, "CLIENT", timeout=4.0)
    stall, first = doc["run"].get("stall") or {}, next(c for c in doc["checks"] if c["id"] == "AN-CLIENT-001")
    assert (first["outcome"], first.get("cause")) == ("inconclusive", "stalled"), first
    assert "--timeout" not in first["message"], first["message"]
    assert stall.get("check") == "AN-CLIENT-001" and stall["request"].startswith("Claude Code"), stall
    assert stall["frames"] >= 3 and stall["silent_s"] >= 2.0, stall
    assert doc["run"]["verdicts"]["outcome"] == "stalled" and final_status(doc) == NO_VERDICT == 4
    others = [c for c in doc["checks"] if c["id"] != "AN-CLIENT-001"]
    assert others and all(c["outcome"] == "pass" for c in others), _brief(doc)


def test_a_stall_inside_an_sdk_oracle_is_no_verdict(tmp_path: Path) -> None:
    """The openai SDK's first answer stops after one write: the SDK's own timeout is read as the stall it is
    (its transport watched), recorded, and the run exits 4."""
    with endpoint("stall-sdk-stream") as url:
        doc = _run(url, tmp_path, "CH-SDK-001", apis="chat", timeout=4.0)
    check, stall = doc["checks"][0], doc["run"].get("stall") or {}
    assert (check["outcome"], check.get("cause")) == ("inconclusive", "stalled"), check
    assert "(the openai SDK)" in stall.get("request", "") and stall["path"] == "/v1/chat/completions", stall
    assert doc["run"]["verdicts"]["outcome"] == "stalled", doc["run"]["verdicts"]
