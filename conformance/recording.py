"""From a check's test as pytest ran it to the check's result (plugin.py's report hook calls these):
the outcome mapped by what the test raised (verdict.py's exception types), the rules and the level of
a failure, the notes of what the references allow, and pytest's report (terminal, JUnit) made to say
what the result says. Pure functions of the test's outcome and the session's record: no hook here.

    passed                          -> PASS
    Inconclusive(reason, cause)     -> INCONCLUSIVE (a timeout's hint; a not-exercised one's levers)
    pytest.skip                     -> SKIP (the endpoint lacks an optional feature)
    an AssertionError after a timed-out exchange -> INCONCLUSIVE (timeout: slowness, not the contract)
    an AssertionError on a refused history of the endpoint's own broken call -> INCONCLUSIVE
    CheckFailed(rules, findings)    -> FAIL, weighing what its weightiest rule weighs
    any other AssertionError        -> FAIL on the check's own rule
    anything else                   -> ERROR (a kit bug, never a verdict on the endpoint)
"""

from __future__ import annotations

from typing import Any

import pytest

from harnesscheck.conformance import catalog
from harnesscheck.conformance.levers import tried_words
from harnesscheck.conformance.outcome import Outcome
from harnesscheck.conformance.results import CheckResult
from harnesscheck.conformance.verdict import CheckFailed, Inconclusive, explain, refused_for_config, timed_out
from harnesscheck.protocol import apis
from harnesscheck.protocol.wire.redact import redact_text

__all__ = ["align_report", "carried_broken_call", "judge", "notes", "said_once"]


def judge(check: catalog.Check, *, passed: bool, skipped: bool, error: BaseException | None, hc: Any,
          attached: list[tuple[str, Any]], duration: float, started: float) -> CheckResult:
    """The check's result: `passed` / `skipped` are pytest's report of the test, `error` what it raised,
    `hc` the check's Session (None when the test never got one), `attached` the exchanges it recorded."""
    transcript = attached[-1][1] if attached else None
    finding = excerpt = None
    rules: list[str] = []
    findings: list[Any] = []
    cause = ""
    if passed:
        outcome, message = Outcome.PASS, "ok"
    elif isinstance(error, Inconclusive):
        outcome, message, cause = Outcome.INCONCLUSIVE, error.reason, error.cause
        if cause == "timeout" and "--timeout" not in message:
            message += f"; the endpoint may be slow: try --timeout {_longer(hc)}"
        if cause == "not-exercised" and hc is not None and any(t.levers for t in hc.attached.tried):
            message += f"; {tried_words(hc.attached.tried)}"  # which levers, and what came back
    elif skipped:
        outcome, message = Outcome.SKIP, str(getattr(error, "msg", error) if error else "skipped")
    elif isinstance(error, AssertionError) and (late := _timed_out_exchange(attached)) is not None:
        # A deadline is evidence of slowness, not of the contract the request carried.
        label, t = late
        outcome, cause = Outcome.INCONCLUSIVE, "timeout"
        message = f"timed out: {label}: {t.error}; the endpoint may be slow: try --timeout {_longer(hc)}"
        transcript = t
    elif isinstance(error, AssertionError) and (carried := carried_broken_call(
            getattr(error, "transcript", None) or transcript, error, check)):
        # A history holding the endpoint's own broken call, refused: the call is its own rules' finding
        # (the tool-JSON rules), the refusal the follow-up-turn check's; this check's rules were never reached.
        outcome, cause = Outcome.INCONCLUSIVE, "not-exercised"
        message = f"not exercised: the endpoint refused a history carrying its own broken call ({carried})"
    elif isinstance(error, CheckFailed):
        outcome, message = Outcome.FAIL, error.summary
        finding, findings, rules = error.finding, error.findings, error.rules or [check.id]
        rules = sorted(rules, key=lambda r: check.level_of(r) is not catalog.MUST)  # the weightiest rule first
        transcript = error.transcript or transcript
        excerpt = transcript.excerpt(finding.frame_index if finding else None) if transcript else None
    elif isinstance(error, AssertionError):
        outcome, message = Outcome.FAIL, str(error).splitlines()[0] if str(error) else "assertion failed"
        rules = [check.id]
        excerpt = transcript.excerpt(None) if transcript else None
    else:
        outcome = Outcome.ERROR
        message = f"kit error (not a verdict on the endpoint): {type(error).__name__}: {error}"
    level = check.weight_of(rules) if outcome is Outcome.FAIL else check.level
    return CheckResult(check=check, outcome=outcome, message=message, duration_s=duration, finding=finding,
                       transcript=transcript, excerpt=excerpt, rules=rules, level=level, cause=cause,
                       notes=[*(hc.attached.notes if hc else []), *notes(attached)], started=started,
                       exercised=catalog.coverage(check, hc.exercised) if hc else {},
                       paths_seen=sorted(hc.exercised) if hc else [],
                       levers=hc.lever_record() if hc else {}, findings=findings)


def align_report(report: pytest.TestReport, result: CheckResult) -> None:
    """pytest's report (terminal, JUnit) says what the result says: an inconclusive check is a skip
    with its reason, a SHOULD failure an xfail (reported, never a failure of the run)."""
    if result.outcome is Outcome.INCONCLUSIVE and report.outcome != "skipped":
        report.outcome = "skipped"
        # a skip's (path, line, reason); no line, as pytest's own skip of a whole item (typed int there)
        report.longrepr = (str(getattr(report, "fspath", "")), None,  # type: ignore[assignment]
                           f"INCONCLUSIVE: {result.message}")
    elif result.outcome is Outcome.FAIL and result.level is catalog.SHOULD:
        report.outcome = "skipped"
        report.wasxfail = f"SHOULD failed: {result.message}"


def said_once(location: tuple[str, int | None, str], secrets: Any, result: CheckResult,
              error: BaseException | None) -> Any:
    """A failed check's report as pytest shows it (the FAILURES section, a CI log, JUnit's failure
    text): verdict.explain's lines, with the key scrubbed, in place of the traceback through the check
    and verdict.py; the one-line message as the crash line (`FAILED ... - message`, JUnit's message).
    pytest's own representation types, so that xdist carries it to the controller as it is."""
    from _pytest._code.code import ReprEntryNative, ReprExceptionInfo, ReprFileLocation, ReprTraceback

    findings = list(getattr(error, "findings", None) or ([result.finding] if result.finding else []))
    contract = getattr(error, "rule", None)
    text = explain(result.check.id, str(result.weight), result.message, findings=findings, rule=contract,
                   title=result.check.title, remedy=result.check.remedy, excerpt=result.excerpt)
    text = redact_text(text, secrets)
    path, line, _ = location
    crash = ReprFileLocation(path=path, lineno=(line or 0) + 1,
                             message=redact_text(f"{result.check.id} {result.weight}: {result.message}", secrets))
    return ReprExceptionInfo(reprtraceback=ReprTraceback([ReprEntryNative([text + "\n"])], None, "native"),
                             reprcrash=crash)


def carried_broken_call(t: Any, error: BaseException, check: catalog.Check) -> str:
    """What broken call of the endpoint's own a refused request carried back, or '' (a finding of a
    stream's grammar stays a failure: only a refusal of the history is set aside; a check that judges
    that refusal itself, catalog's `judges_refused_history`, keeps its failure)."""
    if t is None or getattr(error, "findings", None) or t.api not in apis.APIS or t.ok or t.error \
            or check.judges_refused_history or refused_for_config(t):  # a refusal for its size is not
        return ""  # the call's (vLLM's 30-turn session reached its window: the window rules judge that refusal)
    return str(apis.get(t.api).malformed_history(t.request_body))


def _longer(hc: Any) -> str:
    return f"{max(4 * (hc.endpoint.timeout if hc else 30.0), 60.0):g}"


def _timed_out_exchange(attached: list[tuple[str, Any]]) -> tuple[str, Any] | None:
    return next(((label, t) for label, t in attached if timed_out(t)), None)


def notes(attached: list[tuple[str, Any]]) -> list[str]:
    """What the references allow and the run saw anyway (unknown events, error events): shown, not failed."""
    from harnesscheck.conformance.grammar import validate_for

    out: list[str] = []
    for label, t in attached:
        if not t.frames or t.api not in catalog.APIS:
            continue
        for f in validate_for(t.api, t):
            if getattr(f, "informational", False):
                out.append(f"{label}: {f}")
    return list(dict.fromkeys(out))[:20]
