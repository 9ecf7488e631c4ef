"""One statement per real client per run: "Claude Code / Codex / OpenClaw works, or breaks here, because
of this frame" — computed once, here, from a results document; the CLI's lines and last line, the HTML
report's banner, JUnit's properties and results.json's ``clients`` all read it (issue 39, issue 44).

What it reads of the document: each check's ``clients`` and ``client_evidence`` (per failing check, the
verdict of each client of its API from measurements of the same violation: conformance/impact.py), each
recorded session's check (``client_session``: the client whose own session it replays) and, when the
run verified the clients, ``client_verification``. Per client, the strongest evidence speaks:

1. its own recorded session failed (an X-CLIENT-00N check) on its own request refused or not carried back,
   or on an answer breaking a stream rule measured breaking this client (the same rule, in the same form:
   conformance/impact.py): **would break**, with the frame it names; a stream rule it was measured coping
   with is said beside the frame instead, and one never measured with it reads as 3. below (the kit's
   grammar read that answer, not the client);
2. a failing check's violation was measured breaking it (the same rule, in the same form): **would break**;
3. a failing check's violation was never measured with it in that form: **not measured for this
   violation** (what was seen) — neither a break nor a pass;
4. every failing check that concerns it was measured in that form and it coped (its own session's
   answers included, as above): **unaffected**;
5. no failing check concerns it: **no failure concerns it** (and which of its own sessions passed).

A measurement against the endpoint itself (``--verify-clients``) is said beside it, a disagreement as
such. Readers: ``client_verdicts`` (the records), ``client_lines`` (the text), ``summary`` (results.json
``clients``), ``inferred`` (label -> verdict, for the comparison with the measured one). ``reconcile``
(applied when results.json is written) makes each failing check's column say what the client's own
failed session says of the same rule, so the columns and the lines agree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["NOT_MEASURED", "NO_FAILURE", "RANK_OF", "UNAFFECTED", "WOULD_BREAK", "ClientVerdict", "client_lines",
           "client_verdicts", "frame_line", "inferred", "junit_properties", "reconcile", "summary"]

WOULD_BREAK, NOT_MEASURED, UNAFFECTED, NO_FAILURE = "would break", "not measured", "unaffected", "no failure"
# a per-check verdict of an older document ("no measured impact") reads as "not measured"
_PER_CHECK = {"would break": WOULD_BREAK, "not measured": NOT_MEASURED, "no measured impact": NOT_MEASURED,
              "unaffected": UNAFFECTED}
_MEASURED_PREFIX = "not measured for this violation: "
#: How strongly a verdict speaks (the run's line is the strongest of what its checks say of a client).
RANK_OF = {WOULD_BREAK: 3, NOT_MEASURED: 2, "no measured impact": 2, UNAFFECTED: 1, NO_FAILURE: 0}


@dataclass(frozen=True, slots=True)
class ClientVerdict:
    """What one run says of one real client: ``verdict`` (one of the four words above), ``reason`` (the
    check, the frame or the measurement behind it), the checks that speak for it, the frame a failed
    session of its own names (and that frame's line of the transcript excerpt), and the measurement
    against the endpoint itself when the run verified the clients."""

    client: str
    verdict: str
    reason: str
    checks: tuple[str, ...] = ()
    frame: int | None = None
    frame_text: str = ""
    measured: dict[str, Any] = field(default_factory=dict)

    @property
    def line(self) -> str:
        """'OpenClaw 2026.9.6: would break: its own recorded session (AN-CLIENT-002) failed at frame #3: ...'."""
        if self.verdict == NOT_MEASURED:
            text = f"{self.client}: not measured for this violation: {self.reason}"
        else:
            text = f"{self.client}: {'no failing check concerns it' if self.verdict == NO_FAILURE else self.verdict}" \
                   + (f": {self.reason}" if self.reason else "")
        m = self.measured
        if m.get("measured"):
            apis = ", ".join(f"{api} {v}" for api, v in (m.get("by_api") or {}).items())
            text += f"; measured against this endpoint: {m['measured']}" + (f" ({apis})" if apis else "")
            if m.get("agrees") is False:
                text += " (DISAGREES with the inference: the measurement is what happened)"
            elif m.get("agrees") is None:
                text += " (inconclusive: a turn ran out of time; try a longer --client-timeout)"
        text += "".join(f"; {turn} turn over {api} failed: {why}" for api, turn, why in m.get("failed_turns") or [])
        if m.get("not_run"):
            text += f"; not run ({m['not_run']})"
        return text


def reconcile(doc: dict[str, Any]) -> dict[str, Any]:
    """Make each failing check say what a client's own failed session says of the same rule: where the
    recorded session of client L failed on rule R (its ``rules_failed`` beside its own), every other failing
    check that failed on R says L "would break", citing the session and its frame (so that a check's
    column and the run's line never disagree). Changes ``doc`` in place and returns it."""
    broken: dict[str, dict[str, tuple[str, Any]]] = {}  # rule -> client -> (session id, frame)
    for c in doc.get("checks") or []:
        label = c.get("client_session")
        if label and c.get("outcome") == "fail" and (c.get("clients") or {}).get(label, WOULD_BREAK) == WOULD_BREAK:
            for rule in c.get("rules_failed") or []:
                if not rule.startswith(c["id"]):
                    frame = (c.get("finding") or {}).get("frame_index")
                    broken.setdefault(rule, {}).setdefault(label, (c["id"], frame))
    for c in doc.get("checks") or []:
        if c.get("client_session") or c.get("outcome") != "fail":
            continue
        for rule in c.get("rules_failed") or []:
            for label, (session, frame) in broken.get(rule, {}).items():
                said = c.get("clients") or {}
                if label not in said or said[label] == WOULD_BREAK:
                    continue  # a client of another API (the check never spoke for it), or said already
                where = f" at frame #{frame}" if frame is not None else ""
                c["clients"][label] = WOULD_BREAK
                c.setdefault("client_evidence", {})[label] = f"{rule}: its own recorded session ({session}) failed " \
                                                             f"on this rule{where}"
    return doc


def _sessions(doc: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Per client, its own recorded sessions' checks that reached a verdict."""
    out: dict[str, list[dict[str, Any]]] = {}
    for c in doc.get("checks") or []:
        if c.get("client_session") and c.get("outcome") in ("pass", "fail"):
            out.setdefault(c["client_session"], []).append(c)
    return out


def _per_check(doc: dict[str, Any]) -> dict[str, list[tuple[str, dict[str, Any]]]]:
    """Per client, (its verdict, the check) for every check that speaks for it: a failing check, or one
    that found a client's own request refused for the endpoint's limits."""
    out: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for c in doc.get("checks") or []:
        speaks = c.get("outcome") == "fail" or c.get("cause") == "endpoint-config"
        if c.get("client_session") or not speaks:
            continue  # a session speaks for its own client, above
        for label, verdict in (c.get("clients") or {}).items():
            if verdict in _PER_CHECK:
                out.setdefault(label, []).append((_PER_CHECK[verdict], c))
    return out


def _evidence(c: dict[str, Any], label: str) -> str:
    return str((c.get("client_evidence") or {}).get(label, ""))


def frame_line(check: dict[str, Any]) -> str:
    """The line of a failed check's transcript excerpt that marks the frame it names ('>> ...'), or ''."""
    excerpt = (check.get("finding") or {}).get("excerpt") or ""
    return next((line.strip() for line in excerpt.splitlines() if line.startswith(">>")), "")


def _verdict(label: str, sessions: list[dict[str, Any]], said: list[tuple[str, dict[str, Any]]]) -> ClientVerdict:
    # a failed session of its own: would break, unless the run found it measured coping with what it saw
    def session_says(c: dict[str, Any]) -> str:
        return _PER_CHECK.get((c.get("clients") or {}).get(label, WOULD_BREAK), WOULD_BREAK)

    failed = [c for c in sessions if c["outcome"] == "fail" and session_says(c) == WOULD_BREAK]
    coped = [c for c in sessions if c["outcome"] == "fail" and session_says(c) == UNAFFECTED]
    # its own session's answer broke a stream rule never measured with it: it speaks first among "not measured"
    unmeasured = [c for c in sessions if c["outcome"] == "fail" and session_says(c) == NOT_MEASURED]
    if failed:
        c = failed[0]
        frame = (c.get("finding") or {}).get("frame_index")
        where = f" at frame #{frame}" if frame is not None else ""
        message = " ".join(str(c.get("message") or "").split())
        message = message.split(") ", 1)[1] if message.startswith(f"{label} (") else message  # "<label> (<session>) "
        message = message[:240]
        more = f" (and {', '.join(x['id'] for x in failed[1:])})" if len(failed) > 1 else ""
        return ClientVerdict(label, WOULD_BREAK, f"its own recorded session ({c['id']}) failed{where}: {message}{more}",
                             tuple(x["id"] for x in failed), frame, frame_line(c))
    # its own session's answers broke a rule it was measured to cope with: the line names that frame too
    frame = (coped[0].get("finding") or {}).get("frame_index") if coped else None
    frame_text = frame_line(coped[0]) if coped else ""
    also = f"; its own recorded session ({coped[0]['id']}) failed at frame #{frame} on a violation it was " \
           "measured to cope with" if coped and frame is not None else ""
    for verdict in (WOULD_BREAK, NOT_MEASURED):
        ids = [*(unmeasured if verdict == NOT_MEASURED else []), *(c for v, c in said if v == verdict)]
        if ids:
            c = ids[0]
            if c in unmeasured:
                frame = (c.get("finding") or {}).get("frame_index")
                frame_text = frame_line(c)
            evidence = _evidence(c, label).removeprefix(_MEASURED_PREFIX)
            more = f" (and {len(ids) - 1} more: {', '.join(x['id'] for x in ids[1:])})" if len(ids) > 1 else ""
            named = evidence if evidence.startswith(c["id"]) else f"{c['id']}: {evidence}"  # the rule is the check's
            return ClientVerdict(label, verdict, f"{named}{more}{also}", tuple(x["id"] for x in ids), frame, frame_text)
    unaffected = [c["id"] for v, c in said if v == UNAFFECTED]
    if coped:
        return ClientVerdict(label, UNAFFECTED, _evidence(coped[0], label),
                             tuple([x["id"] for x in coped] + unaffected), frame, frame_text)
    if unaffected:
        return ClientVerdict(label, UNAFFECTED, f"each failure was measured with it and it coped "
                             f"({', '.join(unaffected)})", tuple(unaffected))
    passed = [c["id"] for c in sessions]
    return ClientVerdict(label, NO_FAILURE, f"its own recorded session{'s' if len(passed) > 1 else ''} "
                         f"({', '.join(passed)}) passed" if passed else "", tuple(passed))


def _inferred(doc: dict[str, Any]) -> list[ClientVerdict]:
    sessions, said = _sessions(doc), _per_check(doc)
    labels = list(dict.fromkeys([*sessions, *said]))
    return [_verdict(label, sessions.get(label, []), said.get(label, [])) for label in labels]


def _failed_turns(verification: dict[str, Any], label: str) -> list[tuple[str, str, str]]:
    """(api, turn, its first failed check or the client's error) of a client's failed turns in a verification
    (each of the client's real tool kinds is a turn of its own: agents/clients/kinds.py)."""
    out = []
    for entry in (verification.get("clients") or {}).values():
        if entry.get("label") != label:
            continue
        for name, turn in (entry.get("turns") or {}).items():
            if not turn.get("ok"):
                why = (turn.get("failed") or [""])[0] or turn.get("error", "")
                out.append((str(entry.get("api")), str(name), str(why)[:200]))
    return out


def client_verdicts(doc: dict[str, Any]) -> list[ClientVerdict]:
    """One record per real client the run speaks of, in a stable order (by name)."""
    verdicts = {v.client: v for v in _inferred(doc)}
    verification = doc.get("client_verification") or {}
    for row in verification.get("comparison") or []:
        label = row["client"]
        base = verdicts.get(label) or ClientVerdict(label, NO_FAILURE, "")
        verdicts[label] = ClientVerdict(base.client, base.verdict, base.reason, base.checks, base.frame,
                                        base.frame_text, {**{k: row.get(k) for k in ("measured", "by_api", "agrees")},
                                                          "failed_turns": _failed_turns(verification, label)})
    for entry in (verification.get("clients") or {}).values():
        if entry.get("skipped"):
            label = entry["label"]
            base = verdicts.get(label) or ClientVerdict(label, NO_FAILURE, "")
            why = f"{entry['skipped']}, over {entry.get('api')}"
            not_run = "; ".join(x for x in (base.measured.get("not_run"), why) if x)
            verdicts[label] = ClientVerdict(base.client, base.verdict, base.reason, base.checks, base.frame,
                                            base.frame_text, {**base.measured, "not_run": not_run})
    return [verdicts[label] for label in sorted(verdicts)]


def client_lines(doc: dict[str, Any]) -> list[str]:
    """The text of ``client_verdicts``, one line per client."""
    return [v.line for v in client_verdicts(doc)]


def inferred(doc: dict[str, Any]) -> dict[str, str]:
    """Per client label, what the results infer (no measurement against the endpoint): the verdict word,
    "no failure" read as "unaffected" by the comparison with a measurement."""
    return {v.client: UNAFFECTED if v.verdict == NO_FAILURE else v.verdict for v in _inferred(doc)}


def summary(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """results.json ``clients``: per client, its verdict, the line, the checks behind it and the frame."""
    return {v.client: {"verdict": v.verdict, "line": v.line, "checks": list(v.checks), "frame": v.frame,
                       **({"measured": v.measured["measured"]} if v.measured.get("measured") else {})}
            for v in client_verdicts(doc)}


def junit_properties(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """JUnit's run-level properties: ('client Claude Code 2.1.197', its line) per client."""
    return [(f"client {v.client}", v.line) for v in client_verdicts(doc)]
