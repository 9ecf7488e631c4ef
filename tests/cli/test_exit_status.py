"""One definition of a MUST failure: the exit status, the summary table's column and the lists
under it agree. A check's level is the level of the rule that failed, so a SHOULD-level failure
of a check never fails the run; a kit error is no verdict (exit 3 only when nothing else failed)."""

from __future__ import annotations

from harnesscheck.reports.schema import validate_results
from harnesscheck.reports.summary import exit_status, format_summary, summarize
from tests.reports import factory


def _doc(*checks):
    return {"schema": "harnesscheck.results", "schema_version": "1.0", "run": factory.run_meta(),
            "checks": list(checks)}


def _must_failed_column(text: str) -> list[str]:
    rows = [line.split() for line in text.splitlines() if line.startswith(("anthropic", "chat", "total"))]
    return [row[-1] for row in rows]


def test_a_must_failure_fails_the_run():
    doc = _doc(factory.check("AN-STREAM-001", "anthropic", "fail", "MUST", message="index differs"),
               factory.check("CH-STREAM-004", "chat", "fail", "SHOULD", message="no usage chunk"))
    text = format_summary(doc)
    assert exit_status(doc) == 1
    assert summarize(doc)["total"]["must_fail"] == 1
    assert _must_failed_column(text) == ["1", "0", "1"]
    assert "MUST failures (1):\n  AN-STREAM-001 [anthropic]: index differs" in text
    assert "SHOULD failures (1):\n  CH-STREAM-004 [chat]: no usage chunk" in text


def test_should_failures_are_listed_and_never_fail_the_run():
    doc = _doc(factory.check("AN-STREAM-008", "anthropic", "fail", "SHOULD", message="[DONE] after message_stop"),
               factory.check("CH-STREAM-001", "chat", "pass", "MUST"))
    text = format_summary(doc)
    assert exit_status(doc) == 0
    assert _must_failed_column(text) == ["0", "0", "0"]
    assert "SHOULD failures (1):\n  AN-STREAM-008 [anthropic]: [DONE] after message_stop" in text
    assert "MUST failures" not in text


def test_a_kit_error_is_no_must_failure_but_is_not_a_pass_either():
    doc = _doc(factory.check("AN-USAGE-001", "anthropic", "error", "MUST", message="kit error: KeyError"),
               factory.check("CH-STREAM-001", "chat", "pass", "MUST"))
    text = format_summary(doc)
    assert exit_status(doc) == 3
    assert _must_failed_column(text) == ["0", "0", "0"]
    assert "kit errors (bugs of the kit, not verdicts on the endpoint) (1):" in text
    doc["checks"].append(factory.check("CH-REQ-001", "chat", "fail", "MUST"))
    assert exit_status(doc) == 1  # a MUST failure says more than a kit error


def test_inconclusive_and_skip_pass_the_run():
    doc = _doc(factory.check("AN-HIST-001", "anthropic", "inconclusive", "MUST"),
               factory.check("CH-DISPATCH-001", "chat", "skip", "SHOULD"))
    assert exit_status(doc) == 0 and "failures" not in format_summary(doc)


def test_results_schema_takes_interrupted_and_client_verification():
    doc = _doc(factory.check("AN-STREAM-001", "anthropic", "fail", "MUST"))
    doc["run"]["interrupted"] = True
    doc["client_verification"] = {
        "endpoint": "http://127.0.0.1:9", "model": "m", "apis": ["anthropic"],
        "clients": {"claude-code": {"label": "Claude Code 2.1.197", "api": "anthropic", "turns": {},
                                    "measured": "breaks", "skipped": ""}},
        "comparison": [{"client": "Claude Code 2.1.197", "inferred": "unaffected", "measured": "breaks",
                        "agrees": False, "by_api": {"anthropic": "breaks"}}]}
    assert validate_results(doc) is doc


def test_the_summary_counts_exercised_rules_and_the_schema_takes_them():
    exercised = factory.check("CH-STREAM-001", "chat", "pass", "MUST")
    exercised["exercised"] = {"CH-GRAMMAR-TOOL-INDEX": ["parallel-calls"], "CH-GRAMMAR-TOOL-FIRST": ["tool-use"]}
    exercised["paths_seen"] = ["parallel-calls", "tool-use"]
    unexercised = factory.check("AN-HIST-001", "anthropic", "inconclusive", "MUST", message="not exercised")
    unexercised["exercised"] = {"AN-HIST-001": []}
    doc = _doc(exercised, unexercised, factory.check("AN-ROUTE-001", "anthropic", "pass", "SHOULD"))
    validate_results(doc)
    assert "rules that need a model path (parallel calls, interleaving, ...): 2 of 3 exercised" in format_summary(doc)
    assert "need a model path" not in format_summary(_doc(factory.check("AN-ROUTE-001", "anthropic", "pass", "SHOULD")))


# -- no verdict is not a pass (issue 35): a stalled endpoint, too few verdicts -> exit 4 ------------

STALL = {"check": "AN-STREAM-001", "request": "plain_text turn 0", "method": "POST", "path": "/v1/messages",
         "frames": 2, "reads": 2, "after_s": 0.02, "silent_s": 3.0, "deadline_s": 3.0, "probe": "deadline"}


def _finished(*checks, stall=None, min_share=0.5, min_must_share=0.8):
    from harnesscheck.conformance.verdict import run_verdicts

    doc = _doc(*checks)
    if stall:
        doc["run"]["stall"] = stall
    doc["run"]["verdicts"] = run_verdicts(doc["checks"], min_share=min_share, min_must_share=min_must_share,
                                          stall=stall)
    return validate_results(doc)


def test_a_stalled_endpoint_is_no_pass_and_says_so_last():
    from harnesscheck.cli.commands.check import NO_VERDICT, final_status
    from harnesscheck.reports.summary import final_line

    doc = _finished(factory.check("AN-ROUTE-001", "anthropic", "pass", "SHOULD"),
                    factory.check("AN-STREAM-001", "anthropic", "inconclusive", "MUST", cause="stalled"),
                    stall=STALL)
    assert exit_status(doc) == 0  # what the checks alone say
    assert final_status(doc) == NO_VERDICT == 4
    verdicts = doc["run"]["verdicts"]
    assert (verdicts["outcome"], verdicts["judged"], verdicts["selected"]) == ("stalled", 1, 2)
    line = final_line(doc)
    assert line.startswith("NO VERDICT: the endpoint stalled: plain_text turn 0 (POST /v1/messages) sent 2 "
                           "frames")


def test_too_few_verdicts_is_no_pass_at_the_stated_share():
    from harnesscheck.cli.commands.check import final_status
    from harnesscheck.reports.summary import final_line

    checks = [factory.check("AN-ROUTE-001", "anthropic", "pass", "SHOULD"),
              factory.check("AN-HIST-001", "anthropic", "inconclusive", "MUST"),
              factory.check("CH-DISPATCH-002", "chat", "skip", "SHOULD")]
    few = _finished(*checks)
    assert few["run"]["verdicts"]["outcome"] == "too-few-verdicts" and final_status(few) == 4
    assert "only 1 of 3 checks reached a verdict" in final_line(few) and "50%" in final_line(few)
    enough = _finished(*checks, min_share=0.3, min_must_share=0)
    assert enough["run"]["verdicts"]["outcome"] == "enough" and final_status(enough) == 0
    assert final_line(enough).startswith("no MUST check failed (1 of 3 checks (33%) and 0 of 1 MUST checks (0%) "
                                         "reached a verdict")


def test_too_few_must_verdicts_is_no_pass_though_most_checks_were_judged():
    """Issue 40: the share of the selected MUST checks with a verdict (--min-must-verdicts, 0.8) counts
    apart from the share of all checks; the final line says both."""
    from harnesscheck.cli.commands.check import final_status
    from harnesscheck.reports.summary import final_line

    shoulds = [factory.check(f"AN-PREAMBLE-00{n}", "anthropic", "pass", "SHOULD") for n in (1, 2)] + \
        [factory.check("CH-DISPATCH-001", "chat", "pass", "SHOULD"), factory.check("CH-DISPATCH-002", "chat", "fail",
                                                                                  "SHOULD")]
    musts = [factory.check("AN-HIST-001", "anthropic", "pass", "MUST"),
             factory.check("AN-CTX-001", "anthropic", "inconclusive", "MUST"),
             factory.check("CH-CTX-001", "chat", "inconclusive", "MUST")]
    few = _finished(*shoulds, *musts)  # 5 of 7 checks judged (71% >= 50%), 1 of 3 MUST (33% < 80%)
    verdicts = few["run"]["verdicts"]
    assert verdicts["outcome"] == "too-few-verdicts" and final_status(few) == 4
    assert verdicts["must"] == {"selected": 3, "judged": 1, "share": 0.333, "min_share": 0.8}
    line = final_line(few)
    assert "only 1 of 3 MUST checks reached a verdict" in line and "--min-must-verdicts" in line, line
    assert "5 of 7 checks (71%)" in line and "AN-CTX-001, CH-CTX-001" in line, line
    judged = _finished(*shoulds, *musts[:1])
    assert judged["run"]["verdicts"]["outcome"] == "enough" and final_status(judged) == 0


def test_a_must_failure_outranks_no_verdict_and_both_are_said():
    from harnesscheck.cli.commands.check import final_status
    from harnesscheck.reports.summary import final_line

    doc = _finished(factory.check("AN-ERR-001", "anthropic", "fail", "MUST", message="500 for bad input"),
                    factory.check("AN-STREAM-001", "anthropic", "inconclusive", "MUST", cause="stalled"),
                    factory.check("AN-USAGE-001", "anthropic", "error", "SHOULD"), stall=STALL)
    assert final_status(doc) == 1
    assert final_line(doc).startswith("1 MUST check(s) failed: AN-ERR-001; NO VERDICT: the endpoint stalled")
    no_must = _finished(factory.check("AN-USAGE-001", "anthropic", "error", "SHOULD"),
                        factory.check("AN-STREAM-001", "anthropic", "inconclusive", "MUST", cause="stalled"),
                        stall=STALL)
    assert final_status(no_must) == 4  # no verdict says more than a kit error


def test_exit_status_4_is_documented_in_help_and_readme():
    from pathlib import Path

    from harnesscheck.cli.commands.check import EXIT_STATUS

    assert "\n  4    no verdict" in EXIT_STATUS
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    assert "**4** no verdict" in readme
