"""How a check says what it found: raise `CheckFailed` (with the finding and the transcript) or
`Inconclusive`, or call `pytest.skip` for a feature the endpoint does not offer."""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from conformance.grammar.findings import Finding
from conformance.wire.transcript import Transcript

INCONCLUSIVE_PREFIX = "INCONCLUSIVE: "


class CheckFailed(AssertionError):
    def __init__(self, message: str, *, finding: Finding | None = None, transcript: Transcript | None = None):
        self.finding = finding
        self.transcript = transcript
        text = message
        if finding is not None:
            text += f"\n  rule {finding.rule}: {finding.message}"
            if finding.observed is not None:
                text += f"\n  observed: {finding.observed}"
            if finding.expected is not None:
                text += f"\n  expected: {finding.expected}"
        if transcript is not None:
            text += "\n" + transcript.excerpt(finding.frame_index if finding else None)
        super().__init__(text)
        self.summary = message


def fail(message: str, *, finding: Finding | None = None, transcript: Transcript | None = None) -> None:
    raise CheckFailed(message, finding=finding, transcript=transcript)


def inconclusive(reason: str) -> None:
    pytest.skip(INCONCLUSIVE_PREFIX + reason)


def skip(reason: str) -> None:
    pytest.skip(reason)


def require(condition: bool, message: str, *, transcript: Transcript | None = None) -> None:
    if not condition:
        fail(message, transcript=transcript)


def no_findings(findings: Iterable[Finding], transcript: Transcript, rules: Iterable[str], label: str) -> None:
    wanted = set(rules)
    for finding in findings:
        if finding.rule in wanted:
            fail(f"{label}: {finding.message}", finding=finding, transcript=transcript)


def ok_response(transcript: Transcript, what: str) -> None:
    """The exchange completed with a 2xx; otherwise fail with the status and the body."""
    if transcript.error:
        fail(f"{what}: {transcript.error_kind or 'error'}: {transcript.error}", transcript=transcript)
    if not transcript.ok:
        fail(f"{what}: HTTP {transcript.status}: {transcript.text_body()[:300]}", transcript=transcript)
