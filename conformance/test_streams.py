"""Event grammar of streamed answers, in all three APIs: every catalog check that names grammar
rules is judged here, over the built-in scenarios' streams (text, thinking, one tool call,
parallel tool calls, interleaved reasoning and tool calls, and a text turn after a tool result).

A rule that needs a path (catalog.RULE_PATHS: a tool call, parallel calls, thinking) passes only
when a stream took it: the scenario that asks for the path is sampled again up to --tries times,
every sample judged, and a path never taken leaves the check inconclusive (not-exercised)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import pytest

from harnesscheck.protocol import apis
from harnesscheck.conformance import catalog
from harnesscheck.conformance.session import Session
from harnesscheck.conformance.grammar import module_for
from harnesscheck.conformance.grammar.findings import Finding
from harnesscheck.conformance.verdict import Inconclusive, fail, no_findings, timed_out
from harnesscheck.protocol.wire.transcript import Transcript

# (scenario, turn): turn 1 of calculator answers after a tool result.
STREAMS = [("plain_text", 0), ("calculator", 0), ("calculator", 1), ("interleaved", 0), ("parallel_tools", 0)]
# Informational findings that mean the endpoint itself reported an error in the stream: each API's
# <P>-GRAMMAR-ERROR... rule.
ENDPOINT_ERRORS = frozenset(r for r in catalog.INFORMATIONAL if r.split("-", 1)[1].startswith("GRAMMAR-ERROR"))
# The scenario whose prompt asks plainly for each path.
ASKS = {catalog.TOOL_USE: "calculator", catalog.PARALLEL: "parallel_tools", catalog.THINKING: "interleaved"}


def _grammar_checks() -> list[object]:
    return [pytest.param(c.id, marks=pytest.mark.check(c.id), id=c.id) for c in catalog.CHECKS
            if c.rules and c.api in apis.APIS]


@pytest.mark.parametrize("check_id", _grammar_checks())
def test_stream_grammar(hc: Session, check_id: str) -> None:
    check = catalog.get(check_id)
    validate = module_for(check.api).validate
    unjudged: list[tuple[str, str]] = []  # (cause, what): streams that could not be judged
    streams = ((f"{scenario} turn {turn}", turn, hc.stream(check.api, scenario, turn=turn))  # lazily: a timeout
               for scenario, turn in STREAMS)  # stops the requests
    if _judge(check, validate, streams, unjudged):
        for path in dict.fromkeys(p for r in catalog.unexercised(check, hc.exercised) for p in catalog.RULE_PATHS[r]):
            if path in hc.exercised or path not in ASKS:
                continue
            tried = hc.streams_taking(check.api, ASKS[path], (path,))[1:]  # the first was judged above
            samples = [(f"{ASKS[path]} turn 0 (try {n + 2})", 0, t) for n, t in enumerate(tried)]
            if not _judge(check, validate, samples, unjudged):
                break
    if unjudged:
        raise Inconclusive("; ".join(what for _, what in unjudged), cause=unjudged[0][0])
    hc.require_exercised(check.id)


def _judge(check: catalog.Check, validate: Callable[..., list[Finding]], streams: Iterable[tuple[str, int, Transcript]],
           unjudged: list[tuple[str, str]]) -> bool:
    """Judge each stream for the check's rules (fail on a finding); streams that could not be judged
    go to `unjudged`. False when a stream timed out (the next ones would wait out the same deadline)."""
    for where, turn, transcript in streams:
        if timed_out(transcript):  # the next streams would wait out the same deadline: judge what came
            unjudged.append(("timeout", f"{where}: timed out: {transcript.error}"))
            return False
        if turn > 0 and transcript.status is not None and not 200 <= transcript.status < 300:
            continue  # a later turn's HTTP error is its own finding (<P>-TURN-001), not these rules' failure
        if transcript.status is None or not 200 <= transcript.status < 300:
            fail(f"{where}: the stream request failed: HTTP {transcript.status} "
                 f"{transcript.error or transcript.text_body()[:200]}", transcript=transcript)
        findings = validate(transcript, transcript.request_body)
        error = next((f for f in findings if f.informational and f.rule in ENDPOINT_ERRORS), None)
        if error is not None:  # the endpoint ended the stream with its own error: report it as such
            unjudged.append(("endpoint-error", f"{where}: the endpoint reported an error mid-stream at frame "
                                               f"#{error.frame_index}: {error.observed or error.message}"))
            continue
        no_findings(findings, transcript, check.rules, where)
        if transcript.error and any(r.endswith(("STOP-MISSING", "COMPLETED", "DONE")) for r in check.rules):
            fail(f"{where}: the stream did not end cleanly: {transcript.error}", transcript=transcript)
    return True
