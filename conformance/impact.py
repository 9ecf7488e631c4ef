"""Client impact as data: which reference-server faults broke which real client (``impact.json``
beside this module), and what that means for a rule that fails on an endpoint.

``impact.json`` is written by ``harnesscheck clients --faults`` (``harnesscheck.agents.clients.fault_runs``:
each client's text and tool turns against the reference server once clean and once per fault, a
verdict per (fault, client): ``breaks`` when a turn that passes clean fails under the fault, else
``unaffected``), with the client versions. This module only reads it.

Each fault plants known rule violations (``catalog.PLANTED``). ``verdicts_for(check, rules)``
speaks only of the clients that use the check's API, and only from measurements: a client "would
break" when a fault planting one of the failing rules broke it, is "unaffected" when every failing
rule was measured and none broke it, and otherwise there is "no measured impact" — never a guess.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

IMPACT_PATH = Path(__file__).with_name("impact.json")
BREAKS, OK = "breaks", "unaffected"
WOULD_BREAK, UNAFFECTED, NO_MEASURE = "would break", "unaffected", "no measured impact"


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


def verdicts_for(check: Any, rules: list[str], data: dict[str, Any] | None = None) -> dict[str, dict[str, str]]:
    """Per client of the check's API: {"verdict": would break | unaffected | no measured impact,
    "evidence": the rule, the fault and the client's own error behind it}, from measurements only."""
    from harnesscheck.conformance.catalog import faults_planting

    data = load() if data is None else data
    clients = data.get("clients") or {}
    per_fault = data.get("faults") or {}
    out: dict[str, dict[str, str]] = {}
    for key, entry in clients.items():
        if check.api not in ("any", entry.get("api")):
            continue  # a client of another wire API never meets this check's traffic
        label = label_of(entry)
        broke, fine, unmeasured = [], [], []
        for rule in rules:
            cells = [(f, per_fault[f][key]) for f in faults_planting(rule) if key in (per_fault.get(f) or {})]
            broken = [(f, c) for f, c in cells if c.get("verdict") == BREAKS]
            if broken:
                f, cell = broken[0]
                turn = (cell.get("broken_turns") or ["?"])[0]
                error = ((cell.get("turns") or {}).get(turn) or {}).get("error", "")[:160]
                broke.append(f"{rule}: measured with fault {f}, {turn} turn failed" + (f" ({error})" if error else ""))
            elif cells:
                fine.append(f"{rule}: measured with fault {', '.join(f for f, _ in cells)}, turns completed")
            else:
                unmeasured.append(rule)
        if broke:
            verdict, evidence = WOULD_BREAK, "; ".join(broke)
        elif fine and not unmeasured:
            verdict, evidence = UNAFFECTED, "; ".join(fine)
        else:
            verdict = NO_MEASURE
            evidence = "no fault that plants " + ", ".join(unmeasured) + f" was run with {label}" + (
                "; " + "; ".join(fine) if fine else "")
        previous = out.get(label)
        rank = {WOULD_BREAK: 2, NO_MEASURE: 1, UNAFFECTED: 0}
        if previous is None or rank[verdict] > rank[previous["verdict"]]:
            out[label] = {"verdict": verdict, "evidence": evidence}
    return out


def refused_shape_verdict(check: Any, message: str, data: dict[str, Any] | None = None) -> dict[str, dict[str, str]]:
    """The endpoint refused, for its own limits, the very request a real client sends (catalog.CLIENT_SHAPES):
    that client would break on this deployment, whatever the contract says."""
    from harnesscheck.conformance.catalog import CLIENT_SHAPES

    key = CLIENT_SHAPES.get(check.id)
    entry = ((load() if data is None else data).get("clients") or {}).get(key or "")
    if not entry:
        return {}
    words = message.split("): ", 1)[-1]  # the endpoint's own words, after "(HTTP 400): "
    return {label_of(entry): {"verdict": WOULD_BREAK, "evidence": f"the endpoint refused this client's own request "
                              f"shape for its limits: {words[:200]}"}}


def verdict_line(check: Any, rules: list[str], data: dict[str, Any] | None = None) -> str:
    """'Claude Code 2.1.197: would break (AN-GRAMMAR-BLOCK-UNKNOWN: measured with fault ...)'."""
    return "; ".join(f"{name}: {v['verdict']} ({v['evidence']})" for name, v in verdicts_for(check, rules, data).items())
