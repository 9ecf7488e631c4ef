"""Bad input gets the API's own error shape and a 4xx, never a 500 or a hang; and a request the
reference allows is not refused as bad input.

Every bad body here breaks a rule the API references state (docs/API_FACTS.md, "Request
validation"): a required field missing, a field of the wrong type, a role or item that is not one
of the API's. Bounds that only the vendor enforces (temperature ranges, Responses'
`max_output_tokens` >= 16) are left out: a server that accepts them breaks no client.

Levels follow what breaks a client (docs/API_FACTS.md, "Request validation"): a refusal outside the
API's error shape, or a 5xx for the client's mistake (the official SDKs retry every 5xx and raise a
server error), is a MUST failure (rule ``ID``); accepting a malformed request (a 2xx) is leniency that
breaks no client, a SHOULD failure (rule ``ID:lenient``). Every bad body is sent and judged, so a
lenient answer to one never hides a 5xx to another; the failure leads with its weightiest rule."""

from __future__ import annotations

from typing import Any

import pytest

from harnesscheck.protocol import apis
from harnesscheck.conformance import catalog
from harnesscheck.conformance.grammar.findings import Finding
from harnesscheck.conformance.session import Session
from harnesscheck.conformance.verdict import CheckFailed, also_words
from harnesscheck.protocol.wire.transcript import Transcript

# The bodies each API module lists: BAD_REQUESTS (refused by the reference) and ALLOWED_REQUESTS (requests
# the references allow that a strict-looking server might refuse: each should get a 2xx, rule ``ID:allowed``,
# SHOULD: no measured client sends them).


def check_of(api: str) -> str:
    """The API's error check (``<PREFIX>-ERR-001``)."""
    return f"{apis.get(api).PREFIX}-ERR-001"


def _with_model(hc: Session, api: str, body: dict[str, Any]) -> dict[str, Any]:
    """The body with the endpoint's model, asking for the API's smallest answer (unless the body sets its own
    limit): a bad request an endpoint accepts answers at once, even on a slow model, and is judged."""
    module = apis.get(api)
    return {module.MAX_TOKENS_FIELD: module.MIN_OUTPUT_TOKENS,
            **{k: (hc.endpoint.model if v == "{model}" else v) for k, v in body.items()}}


def _problem(api: str, label: str, t: Transcript) -> tuple[str, str] | None:
    """(rule, what was wrong) for one bad body's answer, or None when it was refused as the API refuses."""
    check_id = check_of(api)
    status = t.status or 0
    if t.error and 200 <= status < 300:  # it began answering, then ran out of time or broke: accepted all the same
        return f"{check_id}:lenient", f"{label}: accepted (HTTP {status}, then {t.error_kind}); the API refuses it " \
                                      "with a 400"
    if t.error:
        return check_id, f"{label}: no answer ({t.error_kind}: {t.error})"
    if 200 <= status < 300:  # lenient: the request was answered, and no client sends it
        return f"{check_id}:lenient", f"{label}: accepted (HTTP {status}); the API refuses it with a 400"
    if status >= 500:
        return check_id, f"{label}: answered HTTP {status}, a server error for the client's mistake; expected a 4xx"
    if not 400 <= status < 500:
        return check_id, f"{label}: answered HTTP {t.status}, expected a 4xx"
    if not apis.get(api).is_error_body(t.json_body()):
        return check_id, f"{label}: the error body is not in the {api} error shape: {t.text_body()[:200]}"
    return None


def _check_errors(hc: Session, api: str) -> None:
    problems: list[tuple[str, str, Transcript]] = []
    for label, bad in apis.get(api).BAD_REQUESTS:
        if isinstance(bad, bytes):
            t = hc.post(api, apis.get(api).PATH, content=bad, label=f"bad request: {label}")
        else:
            t = hc.post(api, apis.get(api).PATH, _with_model(hc, api, bad), label=f"bad request: {label}")
        problem = _problem(api, label, t)
        if problem is not None:
            problems.append((*problem, t))
    for label, good in apis.get(api).ALLOWED_REQUESTS:
        t = hc.post(api, apis.get(api).PATH, _with_model(hc, api, good), label=f"valid request: {label}")
        if t.error:
            problems.append((check_of(api), f"{label}: no answer ({t.error_kind}: {t.error})", t))
        elif t.status is None or not 200 <= t.status < 300:
            problems.append((f"{check_of(api)}:allowed", f"{label}: a request the API reference allows was answered "
                             f"HTTP {t.status}, expected a 2xx: {t.text_body()[:200]}", t))
    if problems:
        check = catalog.get(check_of(api))
        problems.sort(key=lambda p: check.level_of(p[0]) is not catalog.MUST)  # the weightiest rule leads
        rule, message, transcript = problems[0]
        findings = [Finding(r, None, m) for r, m, _ in problems]
        raise CheckFailed(message + also_words([m for _, m, _ in problems[1:]]), findings=findings, transcript=transcript)


@pytest.mark.check("AN-ERR-001")
def test_anthropic_errors(hc: Session) -> None:
    _check_errors(hc, "anthropic")


@pytest.mark.check("CH-ERR-001")
def test_chat_errors(hc: Session) -> None:
    _check_errors(hc, "chat")


@pytest.mark.check("RS-ERR-001")
def test_responses_errors(hc: Session) -> None:
    _check_errors(hc, "responses")
