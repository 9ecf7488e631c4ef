"""How a check says what it found, as types the plugin maps by type (never by a message prefix):

- ``CheckFailed`` (an AssertionError): a rule was broken; it carries every finding of the rules the
  check enforces (the first one leads the message) or the contract ``rule`` it broke, and the
  transcript. The result weighs what the failing rule weighs (catalog.RULES).
- ``Inconclusive`` (a pytest skip): the check could not judge; ``cause`` says why — ``not-exercised``
  (the model never took the path), ``timeout`` (a request ran out of time: slowness, not a contract
  verdict), ``stalled`` (the endpoint stopped sending), ``endpoint-error`` (the endpoint reported an
  error event mid-stream), ``endpoint-config`` (the endpoint refused a request for its own limits).
- ``pytest.skip``: the endpoint lacks an optional feature.

``run_verdicts`` says of a whole run whether it judged the endpoint at all: a run in which the
endpoint stalled, or in which fewer than ``MIN_VERDICT_SHARE`` of the selected checks or fewer than
``MIN_MUST_VERDICT_SHARE`` of the selected MUST checks reached a verdict (pass or fail), is no pass whatever its failures (results.json ``run.verdicts``; `check`
and `run` exit 4).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, NoReturn

import pytest

from harnesscheck.conformance.grammar.findings import Finding
from harnesscheck.protocol.wire.transcript import Transcript

MIN_VERDICT_SHARE = 0.5  # a run needs a verdict (pass or fail) on at least this share of its checks
MIN_MUST_VERDICT_SHARE = 0.8  # ... and on at least this share of its MUST checks
ENOUGH, STALLED, TOO_FEW = "enough", "stalled", "too-few-verdicts"  # run.verdicts.outcome
CAUSES = ("not-exercised", "timeout", "stalled", "endpoint-error", "endpoint-config")
TIMEOUT_KINDS = frozenset({"deadline", "read_timeout", "connect_timeout", "timeout"})
# Words an endpoint uses when it refuses a request for its own limits, not for its shape.
_CONFIG_WORDS = ("context length", "context_length", "context window", "maximum context", "max_model_len",
                 "too many tokens", "exceeds the model", "maximum allowed",
                 "available context size",  # llama.cpp's llama-server: "request (N tokens) exceeds the available ..."
                 "prompt is too long",  # Anthropic's refusal of an over-long prompt (test_context.py judges it)
                 # a text-only model refusing an image (vLLM 0.32: "<model> is not a multimodal model"): the
                 # deployment's limit, not the request shape's refusal (AN-REQ-005)
                 "not a multimodal model", "does not support image")


class CheckFailed(AssertionError):
    def __init__(self, message: str, *, finding: Finding | None = None, transcript: Transcript | None = None,
                 findings: Iterable[Finding] = (), rule: str | None = None):
        self.findings = [finding] if finding is not None else []
        self.findings += [f for f in findings if f is not finding]
        self.finding = self.findings[0] if self.findings else None
        self.rule = rule  # a contract rule (the check id, or ID:part); None: the check's own rule
        self.transcript = transcript
        text = message
        lead = self.finding
        if lead is not None:
            text += f"\n  rule {lead.rule}: {lead.message}"
            if lead.observed is not None:
                text += f"\n  observed: {lead.observed}"
            if lead.expected is not None:
                text += f"\n  expected: {lead.expected}"
            if len(self.findings) > 1:
                text += "\n  also: " + "; ".join(f"{f.rule} at frame #{f.frame_index}" for f in self.findings[1:5])
        if transcript is not None:
            text += "\n" + transcript.excerpt(lead.frame_index if lead else None)
        super().__init__(text)
        self.summary = message

    @property
    def rules(self) -> list[str]:
        """Every rule this failure broke, the leading one first."""
        rules = [f.rule for f in self.findings]
        if self.rule:
            rules.insert(0, self.rule)
        return list(dict.fromkeys(rules))


if TYPE_CHECKING:  # pytest.skip.Exception is set on the function at run time; mypy sees the class
    from _pytest.outcomes import Skipped as _Skip
else:
    _Skip = pytest.skip.Exception


class Inconclusive(_Skip):
    """The check could not judge the endpoint (see the module docstring for the causes). A skip to
    pytest (terminal, JUnit); the plugin maps it by type to the inconclusive outcome, with its cause."""

    def __init__(self, reason: str, *, cause: str = "not-exercised") -> None:
        assert cause in CAUSES, cause
        super().__init__(reason, allow_module_level=False)
        self.reason = reason
        self.cause = cause


class Problems:
    """Every failed rule of one check, gathered while the check judges all its rules and cases (a second
    violation is never hidden behind the first); ``raise_if_any()`` fails with all of them, the
    weightiest rule (the catalog's level of each) first, so the result weighs its worst failed rule."""

    def __init__(self, check_id: str) -> None:
        self.check_id = check_id
        self.found: list[tuple[str, str, Transcript | None]] = []  # (rule, message, transcript)

    def add(self, message: str, *, rule: str | None = None, transcript: Transcript | None = None) -> None:
        self.found.append((rule or self.check_id, message, transcript))

    def __bool__(self) -> bool:
        return bool(self.found)

    def raise_if_any(self) -> None:
        if not self.found:
            return
        from harnesscheck.conformance import catalog

        check = catalog.get(self.check_id)
        ranked = sorted(self.found, key=lambda p: check.level_of(p[0]) is not catalog.MUST)
        rule, message, transcript = ranked[0]
        also = also_words([m for _, m, _ in ranked[1:]])
        raise CheckFailed(message + also, findings=[Finding(r, None, m) for r, m, _ in ranked],
                          transcript=transcript or next((t for _, _, t in ranked if t is not None), None))


def also_words(others: list[str]) -> str:
    """' (and 2 more: a; b)' after a failure's first message: the count of the other problems and their
    messages, the first three of them when there are more (' (and 5 more, the first three: a; b; c)'); ''
    for none. The count always says how many there are, the list how many it shows."""
    if not others:
        return ""
    if len(others) <= 3:
        return f" (and {len(others)} more: {'; '.join(others)})"
    return f" (and {len(others)} more, the first three: {'; '.join(others[:3])})"


def fail(message: str, *, finding: Finding | None = None, transcript: Transcript | None = None,
         rule: str | None = None) -> NoReturn:
    raise CheckFailed(message, finding=finding, transcript=transcript, rule=rule)


def inconclusive(reason: str, *, cause: str = "not-exercised") -> NoReturn:
    raise Inconclusive(reason, cause=cause)


def skip(reason: str) -> NoReturn:
    pytest.skip(reason)


def no_findings(findings: Iterable[Finding], transcript: Transcript, rules: Iterable[str], label: str) -> None:
    """Fail with every finding of the given rules (informational findings never fail)."""
    wanted = set(rules)
    broken = [f for f in findings if f.rule in wanted and not getattr(f, "informational", False)]
    if broken:
        raise CheckFailed(f"{label}: {broken[0].message}", findings=broken, transcript=transcript)


def explain(check_id: str, level: str, message: str, *, findings: Iterable[Finding] = (), rule: str | None = None,
            title: str = "", remedy: str = "", excerpt: str | None = None) -> str:
    """A failed check, said once, as the terminal, a CI log and JUnit show it (the plugin puts it in
    pytest's report in place of a traceback): the check, its level and message, the rule that broke
    and the frame where, what was observed and expected, the other rules that broke, the remedy,
    then the wire excerpt around the frame.

        RS-TOOLKIND-002 MUST failed: a request with a custom tool forced: HTTP 400: {...}
          rule RS-TOOLKIND-002: A custom tool reaches the model and its call comes back as a ...
          fix: offer custom tools to the model; answer their calls as custom_tool_call items
          POST http://127.0.0.1:8000/v1/responses -> 400
            (no frames)
    """
    findings = list(findings)
    lines = [f"{check_id} {level} failed: {message}"]
    lead = findings[0] if findings else None
    if lead is not None:
        where = "end of stream" if lead.frame_index is None else f"frame #{lead.frame_index}"
        line = f"  rule {lead.rule} at {where}"
        if lead.message not in message:
            line += f": {lead.message}"
        lines.append(line)
        seen = "; ".join(f"{name} {value}" for name, value in (("observed", lead.observed),
                                                              ("expected", lead.expected)) if value is not None)
        if seen:
            lines.append(f"  {seen}")
        if len(findings) > 1:
            lines.append("  also: " + "; ".join(f"{f.rule} at frame #{f.frame_index}" for f in findings[1:5])
                         + (f"; {len(findings) - 5} more" if len(findings) > 5 else ""))
    own = f": {title}" if title else ""  # the check's own rule reads as its title
    if rule and (lead is None or rule != lead.rule):
        lines.insert(1, f"  rule {rule}{own if rule == check_id else ''}")
    elif lead is None:
        lines.append(f"  rule {check_id}{own}")
    if remedy:
        lines.append(f"  fix: {remedy}")
    if excerpt:
        lines += ["  " + line for line in excerpt.splitlines()]
    return "\n".join(lines)


def timed_out(transcript: Transcript) -> bool:
    return transcript.error_kind in TIMEOUT_KINDS


def refused_for_config(transcript: Transcript) -> str | None:
    """The endpoint's own words when it refused a request for its limits (context length, ...)."""
    if transcript.status not in (400, 413, 422):
        return None
    text = transcript.text_body()[:600]
    return text if any(w in text.lower() for w in _CONFIG_WORDS) else None


def ok_response(transcript: Transcript, what: str) -> None:
    """The exchange completed with a 2xx; otherwise fail with the status and the body (a timeout
    or a refusal for the endpoint's own limits is inconclusive, never a failure of ``what``)."""
    if transcript.error:
        if timed_out(transcript):
            raise Inconclusive(f"{what}: timed out: {transcript.error}", cause="timeout")
        fail(f"{what}: {transcript.error_kind or 'error'}: {transcript.error}", transcript=transcript)
    if not transcript.ok:
        config = refused_for_config(transcript)
        if config:
            raise Inconclusive(f"{what}: the endpoint refused it for its own limits (HTTP {transcript.status}): "
                               f"{config[:300]}", cause="endpoint-config")
        fail(f"{what}: HTTP {transcript.status}: {transcript.text_body()[:300]}", transcript=transcript)


def run_verdicts(checks: list[dict[str, Any]], *, min_share: float = MIN_VERDICT_SHARE,
                 min_must_share: float = MIN_MUST_VERDICT_SHARE,
                 stall: dict[str, Any] | None = None) -> dict[str, Any]:
    """results.json ``run.verdicts``: how many of the selected checks reached a verdict (pass or fail;
    a skip, an inconclusive result and a kit error are none), that share, the share asked for, the same
    for the selected MUST checks (``must``: a check's catalog level, ``check_level``), and the outcome:
    ``stalled`` (the endpoint stopped sending: ``stall`` is the run header's record of it),
    ``too-few-verdicts`` (a share is below what was asked: ``min_share`` of all checks, ``min_must_share``
    of the MUST checks) or ``enough``; ``reason`` says it in words, with both shares."""
    selected = len(checks)
    judged = sum(1 for c in checks if c.get("outcome") in ("pass", "fail"))
    share = judged / selected if selected else 0.0
    musts = [c for c in checks if c.get("check_level", c.get("level")) == "MUST"]
    must_judged = sum(1 for c in musts if c.get("outcome") in ("pass", "fail"))
    must_share = must_judged / len(musts) if musts else 1.0
    summary: dict[str, Any] = {"selected": selected, "judged": judged, "share": round(share, 3),
                               "min_share": min_share,
                               "must": {"selected": len(musts), "judged": must_judged, "share": round(must_share, 3),
                                        "min_share": min_must_share}}
    shares = (f"{judged} of {selected} checks ({share:.0%}) and {must_judged} of {len(musts)} MUST checks "
              f"({must_share:.0%}) reached a verdict")
    if stall:
        summary["outcome"] = STALLED
        where = f"{stall.get('request')} ({stall.get('method')} {stall.get('path')})"
        summary["reason"] = (f"the endpoint stalled: {where} sent {stall.get('frames')} frames in "
                             f"{stall.get('after_s'):g} s, then nothing until the {stall.get('deadline_s'):g} s "
                             f"deadline; {shares}")
    elif share < min_share:
        summary["outcome"] = TOO_FEW
        summary["reason"] = (f"only {judged} of {selected} checks reached a verdict (pass or fail), "
                             f"below the {min_share:.0%} asked for (--min-verdicts); {must_judged} of {len(musts)} "
                             f"MUST checks ({must_share:.0%})")
    elif must_share < min_must_share:
        summary["outcome"] = TOO_FEW
        left = sorted(c["id"] for c in musts if c.get("outcome") not in ("pass", "fail"))
        summary["reason"] = (f"only {must_judged} of {len(musts)} MUST checks reached a verdict (pass or fail), "
                             f"below the {min_must_share:.0%} asked for (--min-must-verdicts); {judged} of "
                             f"{selected} checks ({share:.0%}) in all; no verdict: {', '.join(left[:12])}"
                             + (f" and {len(left) - 12} more" if len(left) > 12 else ""))
    else:
        summary["outcome"] = ENOUGH
        summary["reason"] = shares
    return summary
