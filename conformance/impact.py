"""Client impact as data: which reference-server faults broke which real client (``impact.json``
beside this module), and what that means for a rule that fails on an endpoint.

``impact.json`` is written by ``harnesscheck clients --faults`` (``harnesscheck.agents.clients.fault_runs``:
each client's text and tool turns against the reference server once clean and once per fault, a
verdict per (fault, client): ``breaks`` when a turn that passes clean fails under the fault, else
``unaffected``), with the client versions. This module only reads it.

Each fault plants known rule violations (``catalog.PLANTED``) in known forms (``conformance.forms``:
a 400 refusal, malformed tool JSON, a missing event, ...). ``verdicts_for(check, rules, forms=...)``
speaks only of the clients that use the check's API, and only from measurements of the same
violation: a client "would break" when a fault planting one of the failing rules, in the form seen,
broke it; is "unaffected" when every failing rule was measured in that form and none broke it; and
is otherwise "not measured" (for this violation: what was seen) — never a guess. A client's own
recorded session failing (``session_verdict``) makes that client "would break", with the frame.
"""

from __future__ import annotations

import json
from pathlib import Path
from collections.abc import Mapping
from typing import Any

IMPACT_PATH = Path(__file__).with_name("impact.json")
BREAKS, OK = "breaks", "unaffected"
WOULD_BREAK, UNAFFECTED, NOT_MEASURED = "would break", "unaffected", "not measured"
NO_MEASURE = NOT_MEASURED  # the name older readers import
RANK = {WOULD_BREAK: 2, NOT_MEASURED: 1, UNAFFECTED: 0}


def load(path: Path = IMPACT_PATH) -> dict[str, Any]:
    """The recorded measurement; {} when there is none (or it cannot be read)."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def label_of(entry: dict[str, Any]) -> str:
    """'Claude Code 2.1.197' (the same spelling as the catalog's static dicts); one label for all of
    a client's wire APIs, so OpenClaw over Chat and over Messages give one verdict per check."""
    return f"{entry['label'].split(' (')[0]} {entry['version']}".strip()


def verdicts_for(check: Any, rules: list[str], data: dict[str, Any] | None = None,
                 forms: Mapping[str, tuple[str, str]] | None = None) -> dict[str, dict[str, str]]:
    """Per client of the check's API: {"verdict": would break | unaffected | not measured, "evidence":
    the rule, the fault and the client's own error behind it}, from measurements of the same violation
    only. ``forms`` maps a failing rule to (its form, what was seen) (conformance.forms; a rule not in it
    has the form of an answer with no words: ``answered``, or for a rule of several violations none):
    a fault's measurement speaks for the rule only when the fault plants the rule in that form
    (forms.PLANTED_FORMS)."""
    data = load() if data is None else data
    out: dict[str, dict[str, str]] = {}
    for key, entry in (data.get("clients") or {}).items():
        if check.api not in ("any", entry.get("api")):
            continue  # a client of another wire API never meets this check's traffic
        label = label_of(entry)
        verdict, evidence = _measured(key, rules, forms, data)
        previous = out.get(label)
        if previous is None or RANK[verdict] > RANK[previous["verdict"]]:
            out[label] = {"verdict": verdict, "evidence": evidence}
    return out


def _measured(key: str, rules: list[str], forms: Mapping[str, tuple[str, str]] | None,
              data: dict[str, Any]) -> tuple[str, str]:
    """One client's (``key``) verdict and evidence for these failing rules, in these forms."""
    from harnesscheck.conformance.catalog import faults_planting
    from harnesscheck.conformance.forms import form_of, planted_forms, seen

    per_fault = data.get("faults") or {}
    broke, fine, unmeasured = [], [], []
    for rule in rules:
        form, words = (forms or {}).get(rule) or (form_of(rule, ""), "")
        cells = [(f, per_fault[f][key]) for f in faults_planting(rule)
                 if form in planted_forms(f) and key in (per_fault.get(f) or {})]
        broken = [(f, c) for f, c in cells if c.get("verdict") == BREAKS]
        if broken:
            f, cell = broken[0]
            turn = (cell.get("broken_turns") or ["?"])[0]
            error = ((cell.get("turns") or {}).get(turn) or {}).get("error", "")[:160]
            broke.append(f"{rule}: measured with fault {f}, {turn} turn failed" + (f" ({error})" if error else ""))
        elif cells:
            fine.append(f"{rule}: measured with fault {', '.join(f for f, _ in cells)}, turns completed")
        else:
            unmeasured.append(seen(rule, form, words))
    if broke:
        return WOULD_BREAK, "; ".join(broke)
    if fine and not unmeasured:
        return UNAFFECTED, "; ".join(fine)
    return NOT_MEASURED, _NOT_MEASURED + "; ".join(unmeasured) + ("; " + "; ".join(fine) if fine else "")


_NOT_MEASURED = "not measured for this violation: "


def session_verdict(check: Any, message: str, frame: int | None, rules: list[str],
                    forms: Mapping[str, tuple[str, str]] | None = None,
                    data: dict[str, Any] | None = None) -> dict[str, dict[str, str]]:
    """A real client's own recorded session (an X-CLIENT-00N check) failed, at the frame the failure names
    (None: a request refused or not carried back). Its own request refused, or the endpoint's answer not
    carried back in its form: that client would break. An answer to its own request that breaks a stream
    rule (``rules`` beside the session's own ``ID:part``): it would break only where that client was measured
    breaking on that very violation (the rule, in the form seen), it is unaffected where it was measured coping
    (the evidence says so beside the frame), and otherwise not measured: the kit's grammar read the answer, not
    the client (on llama-server, a Responses stream without output_index failed Codex's session while a real
    Codex completed its turn on it)."""
    data = load() if data is None else data
    label = session_label(check, data)
    if not label:
        return {}
    where = f" at frame #{frame}" if frame is not None else ""
    words = message.split(") ", 1)[1] if message.startswith(f"{label} (") else message  # "<label> (<session>) "
    failed = f"its own recorded session ({check.id}) failed{where}: {words[:300]}"
    seen_rules = [r for r in rules if not r.startswith(check.id)]
    if seen_rules and all(r == f"{check.id}:grammar" or not r.startswith(check.id) for r in rules):
        verdict, evidence = _measured(check.client_shape, seen_rules, forms, data)
        if verdict == UNAFFECTED:
            return {label: {"verdict": UNAFFECTED, "evidence": f"{failed}; a violation it was measured to cope "
                                                               f"with ({evidence})"}}
        if verdict == WOULD_BREAK:
            return {label: {"verdict": WOULD_BREAK, "evidence": f"{failed}; {evidence}"}}
        # the kit's grammar judged the answer, not the client: what the client does on it was never measured
        return {label: {"verdict": NOT_MEASURED, "evidence": f"{failed}; {evidence}"}}
    return {label: {"verdict": WOULD_BREAK, "evidence": failed}}


def session_label(check: Any, data: dict[str, Any] | None = None) -> str:
    """The client whose own recorded session ``check`` replays (the catalog entry's ``replays_client`` and
    ``client_shape``), as its verdicts name it ('OpenClaw 2026.9.6'); '' for any other check."""
    key = check.client_shape if check.replays_client else None
    entry = ((load() if data is None else data).get("clients") or {}).get(key or "")
    return label_of(entry) if entry else ""


def refused_shape_verdict(check: Any, message: str, data: dict[str, Any] | None = None) -> dict[str, dict[str, str]]:
    """The endpoint refused, for its own limits, the very request a real client sends (the catalog entry's
    ``client_shape``): that client would break on this deployment, whatever the contract says."""
    key = check.client_shape
    entry = ((load() if data is None else data).get("clients") or {}).get(key or "")
    if not entry:
        return {}
    words = message.split("): ", 1)[-1]  # the endpoint's own words, after "(HTTP 400): "
    return {label_of(entry): {"verdict": WOULD_BREAK, "evidence": f"the endpoint refused this client's own request "
                              f"shape for its limits: {words[:200]}"}}


def verdict_line(check: Any, rules: list[str], data: dict[str, Any] | None = None,
                 forms: Mapping[str, tuple[str, str]] | None = None) -> str:
    """'Claude Code 2.1.197: would break (AN-GRAMMAR-BLOCK-UNKNOWN: measured with fault ...)'."""
    return "; ".join(f"{name}: {v['verdict']} ({v['evidence']})"
                     for name, v in verdicts_for(check, rules, data, forms).items())
