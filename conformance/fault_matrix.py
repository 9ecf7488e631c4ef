"""The fault matrix: for every reference-server fault, run the suite against a server with that
fault on, and require that the checks the catalog maps to it fail, that at least one of them fails
on a rule the fault plants (catalog.PLANTED: what its client measurements speak for), and that no
other check fails at MUST weight; the clean server must pass everything. A transport fault (a
stalled stream) plants no rule: no check may fail and the run must say the endpoint stalled.

One pass of the whole suite per fault, each against its own embedded server with that fault on,
which has no modelled time (options.EMBEDDED_SERVER_ARGS): no check of a default run measures the
clock (the history checks read /tokenize or the prefix cache, the preamble checks the cache reads,
the dispatch checks the order of frames), and every verdict is the same as with a timing model on
(measured fault by fault); the timing witnesses, which do need modelled time, are proven in
tests/conformance/test_history_witnesses.py.
The runs are forked from a warm process (conformance/forked.py: no interpreter, pytest or SDK
start-up per fault), two at a time; a transport fault (a stall) is given a short deadline, since
all it must show is the stall.

The kit's own tests (tests/conformance/test_self_conformance.py) run each row over the APIs its
fault bends only (`own_apis`: Fault.apis, every API when it names none, and the checks of any API
with them), and prove the other half of the claim once per API instead (`bystander_problems`):
that API's checks against one server with every fault that says it leaves the API alone turned on
at once must all pass. `harnesscheck faults --matrix` still runs the whole suite per fault."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harnesscheck.conformance import catalog
from harnesscheck.conformance.runner import SuiteOptions
from harnesscheck.reference_server.faults import FAULTS

CLEAN = "(clean)"
TIMEOUT_S = 15.0  # per request: far above what the unmodelled server takes, on a busy 2-core machine too
STALL_TIMEOUT_S = 5.0  # a transport fault's run: the stall is seen after one deadline, the rest skipped


@dataclass(slots=True)
class FaultRun:
    fault: str
    outcomes: dict[str, str]  # check id -> outcome
    levels: dict[str, str] = field(default_factory=dict)  # check id -> the weight of its result
    rules: dict[str, list[str]] = field(default_factory=dict)  # check id -> the rules it failed on
    causes: dict[str, str] = field(default_factory=dict)  # check id -> an inconclusive result's cause
    disagreements: list[str] = field(default_factory=list)  # JUnit vs results.json
    verdicts: list[str] = field(default_factory=list)  # per-client lines against the measurements (verdict_problems)

    def problems(self) -> list[str]:
        junit = [f"{self.fault}: {d}" for d in [*self.disagreements, *self.verdicts]]
        if self.fault != CLEAN and FAULTS[self.fault].transport:
            return junit + self._transport_problems()
        expected = {c.id for c in catalog.checks_for_fault(self.fault)} if self.fault != CLEAN else set()
        out = []
        for check_id in sorted(expected):
            if self.outcomes.get(check_id) != "fail":
                out.append(f"{self.fault}: {check_id} should fail, got {self.outcomes.get(check_id, 'not run')}")
        planted = set(catalog.PLANTED.get(self.fault, ()))
        if planted and expected and not any(planted & set(self.rules.get(c, ())) for c in expected):
            out.append(f"{self.fault}: no check failed on a rule it plants ({', '.join(sorted(planted))})")
        for check_id, outcome in sorted(self.outcomes.items()):
            if check_id in expected:
                continue
            level = self.levels.get(check_id, str(catalog.get(check_id).level))
            if outcome == "error" or (outcome == "fail" and level == "MUST"):
                out.append(f"{self.fault}: {check_id} ({level}) unexpectedly {outcome}")
            if self.fault == CLEAN and outcome != "pass":
                out.append(f"clean server: {check_id} is {outcome}")
        return junit + out

    def _transport_problems(self) -> list[str]:
        out = [f"{self.fault}: {cid} is {outcome} (a stalled endpoint breaks no contract)"
               for cid, outcome in sorted(self.outcomes.items()) if outcome in ("fail", "error")]
        if "stalled" not in self.causes.values():
            out.append(f"{self.fault}: no check said the endpoint stalled")
        return out


def own_apis(fault: str) -> str:
    """The APIs (`--apis`) a fault's row needs: those it bends (Fault.apis; every API when it names none)."""
    from harnesscheck.protocol.apis import NAMES

    return ",".join(NAMES if fault == CLEAN else FAULTS[fault].apis or NAMES)


def run_one(fault: str, out: Path, *, apis: str | None = None) -> FaultRun:
    """The suite against a server with `fault` on (CLEAN: none), its results in OUT/FAULT/; `apis`:
    only those APIs' checks (and the checks of any API), default every API's."""
    from harnesscheck.conformance.forked import run_forked

    server_args = () if fault == CLEAN else (f"--fault={fault}",)
    transport = fault != CLEAN and FAULTS[fault].transport
    folder = out / fault.strip("()")
    junit = folder / "junit.xml"
    options = SuiteOptions(server_args=server_args, timeout=STALL_TIMEOUT_S if transport else TIMEOUT_S,
                           junit=str(junit))
    if apis is not None:
        options.apis = apis
    doc = run_forked(options, folder)
    run = FaultRun(fault=fault, outcomes={c["id"]: c["outcome"] for c in doc["checks"]},
                   levels={c["id"]: c["level"] for c in doc["checks"]},
                   rules={c["id"]: c.get("rules_failed") or [] for c in doc["checks"]},
                   causes={c["id"]: c.get("cause", "") for c in doc["checks"]})
    run.disagreements = junit_disagreements(doc, junit)
    run.verdicts = verdict_problems(fault, doc)
    return run


def bystanders(api: str) -> list[str]:
    """The faults that say they leave `api`'s traffic alone (not in their Fault.apis), transport ones aside."""
    return [name for name, f in sorted(FAULTS.items()) if not f.bends(api) and not f.transport]


def bystander_problems(api: str, out: Path) -> list[str]:
    """`api`'s own checks (not those of any API) against one server with every one of `bystanders(api)`
    on at once, results in OUT/bystanders-API/: each check that does not pass is a fault that bends
    `api` though its Fault.apis says it does not (a row run over its own APIs would not see it). One
    wrongly declared fault is seen as its full-suite row would see it (the others leave `api` alone);
    two could in principle hide each other."""
    from harnesscheck.conformance.forked import run_forked

    faults = bystanders(api)
    ids = [c.id for c in catalog.CHECKS if c.api == api]
    folder = out / f"bystanders-{api}"
    doc = run_forked(SuiteOptions(server_args=tuple(f"--fault={f}" for f in faults), apis=api, timeout=TIMEOUT_S,
                                  select=" or ".join(ids), junit=str(folder / "junit.xml")), folder)
    outcomes = {c["id"]: c["outcome"] for c in doc["checks"]}
    problems = [f"{api}: {cid} did not run" for cid in ids if cid not in outcomes]
    problems += [f"{api}: {c['id']} ({c['level']}) is {c['outcome']} with {len(faults)} faults on that say they leave "
             f"{api} alone: {', '.join(c.get('rules_failed') or []) or c.get('cause', '')}"
             for c in doc["checks"] if c["outcome"] != "pass"]
    return problems + [f"{api}: a check of another API ran: {cid}" for cid in outcomes if cid not in ids]


def verdict_problems(fault: str, doc: dict[str, Any], data: dict[str, Any] | None = None) -> list[str]:
    """Where the run's per-client lines (reports.clients) and the measurements disagree, under ``fault``:

    - a check that fails on a rule the fault plants fails in a form the fault plants (forms.PLANTED_FORMS);
    - a client whose own recorded session failed is said to break, at the frame the failure names (or,
      measured coping with the violation its session saw, its line names that frame);
    - a client measured breaking under the fault (impact.json), when a check failed on a rule the fault
      plants in the client's API, is said to break (never "unaffected", "not measured" or no failure);
    - a client said to break stands on its own failed session or on a failing check whose measurement
      (the fault it cites) plants that rule in the form seen."""
    from harnesscheck.conformance import impact
    from harnesscheck.conformance.forms import planted_forms
    from harnesscheck.reports.clients import NO_FAILURE, NOT_MEASURED, WOULD_BREAK, client_verdicts

    data = impact.load() if data is None else data
    failing = [c for c in doc["checks"] if c["outcome"] == "fail"]
    planted = set(catalog.PLANTED.get(fault, ()))
    out = []
    for c in failing:
        for rule, form in (c.get("violations") or {}).items():
            if rule in planted and form not in planted_forms(fault):
                out.append(f"{c['id']} fails on {rule} as {form!r}, a form the fault does not plant "
                           f"({', '.join(planted_forms(fault))})")
    lines = {v.client: v for v in client_verdicts(doc)}
    for c in failing:
        label = c.get("client_session")
        if not label:
            continue
        line = lines.get(label)
        said = (c.get("clients") or {}).get(label)
        # measured coping with what its session saw, or a stream rule never measured with it (impact.session_verdict)
        spoken = said == "unaffected" or (said == NOT_MEASURED and line is not None and line.verdict != NO_FAILURE)
        if line is None or (line.verdict != WOULD_BREAK and not spoken):
            out.append(f"{label}'s own session {c['id']} failed, but its line is {line.line if line else 'missing'}")
        elif (c.get("finding") or {}).get("frame_index") is not None and line.verdict != WOULD_BREAK \
                and "frame #" not in line.line:
            out.append(f"{label}'s line does not name the frame its failed session {c['id']} names: {line.line}")
        elif line.verdict == WOULD_BREAK and line.frame is None and (c.get("finding") or {}).get("frame_index") \
                is not None and any(s.get("client_session") == label and (s.get("clients") or {}).get(label) ==
                                    WOULD_BREAK for s in failing):
            out.append(f"{label}'s line does not name the frame its failed session {c['id']} names: {line.line}")
    cells = (data.get("faults") or {}).get(fault) or {}
    for key, cell in cells.items():
        entry = (data.get("clients") or {}).get(key)
        if key.startswith("_") or not entry or cell.get("verdict") != impact.BREAKS:
            continue
        label = impact.label_of(entry)
        hit = [c["id"] for c in failing
               if c["api"] in (entry.get("api"), "any") and planted & set(c.get("rules_failed") or [])]
        if hit and (lines.get(label) is None or lines[label].verdict != WOULD_BREAK):
            out.append(f"{label} was measured breaking under this fault and {', '.join(hit)} failed on a rule it "
                       f"plants, but the line says: {lines[label].line if label in lines else 'nothing'}")
    for label, v in lines.items():
        if v.verdict != WOULD_BREAK or any(c.get("client_session") == label for c in failing):
            continue
        if not any(_stands(c, label, planted_forms) for c in failing):
            out.append(f"{label}: {v.line} stands on no measurement of the violation seen")
    return out


def _stands(check: dict[str, Any], label: str, planted_forms: Callable[[str], tuple[str, ...]]) -> bool:
    """A failing check's "would break" for ``label`` cites a fault that plants one of its failing rules in
    the form seen, or the client's own failed session."""
    if (check.get("clients") or {}).get(label) != "would break":
        return False
    evidence = (check.get("client_evidence") or {}).get(label, "")
    if "its own recorded session" in evidence:
        return True
    for rule, form in (check.get("violations") or {}).items():
        for fault in catalog.faults_planting(rule):
            if f"{rule}: measured with fault {fault}," in evidence and form in planted_forms(fault):
                return True
    return False


def junit_disagreements(doc: dict[str, Any], junit: Path) -> list[str]:
    """Where JUnit and results.json tell a check's outcome differently: a JUnit <failure> or <error>
    must be exactly a MUST failure or a kit error (reports.summary's one definition); a SHOULD failure
    is a JUnit skip (xfail), as is an inconclusive or skipped check."""
    import xml.etree.ElementTree as ET

    from harnesscheck.reports.summary import is_must_failure

    try:
        cases = ET.parse(junit).getroot().iter("testcase")
    except (OSError, ET.ParseError) as exc:
        return [f"no JUnit report: {exc}"]
    failed: dict[str, bool] = {}
    for case in cases:
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        check_id = props.get("check_id")
        if check_id is not None:
            bad = case.find("failure") is not None or case.find("error") is not None
            failed[check_id] = failed.get(check_id, False) or bad
    out = []
    for c in doc["checks"]:
        expected = is_must_failure(c) or c["outcome"] == "error"
        if failed.get(c["id"]) != expected:
            out.append(f"{c['id']}: results.json says {c['level']} {c['outcome']}, JUnit "
                       f"{'a failure' if failed.get(c['id']) else 'no failure' if c['id'] in failed else 'nothing'}")
    return out


def run_matrix(out: Path, *, faults: Sequence[str] | None = None, workers: int = 2,
               progress: Callable[[FaultRun], None] | None = None) -> dict[str, Any]:
    """Every fault's row (and the clean server's), `workers` at a time; `progress` is called with each
    row as it finishes (in finishing order); the matrix lists the rows in the order given."""
    names = [CLEAN, *(faults or sorted(FAULTS))]
    done: dict[str, FaultRun] = {}
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(run_one, name, out): name for name in names}
        try:
            for future in as_completed(futures):
                run = future.result()
                done[run.fault] = run
                if progress:
                    progress(run)
        except BaseException:
            for future in futures:
                future.cancel()
            raise
    return matrix_json([done[name] for name in names])


def matrix_json(runs: Sequence[FaultRun]) -> dict[str, Any]:
    cells = []
    for run in runs:
        if run.fault == CLEAN:
            continue
        expected = {c.id for c in catalog.checks_for_fault(run.fault)}
        for check_id, outcome in sorted(run.outcomes.items()):
            cells.append({"fault": run.fault, "check": check_id, "api": catalog.get(check_id).api,
                          "outcome": outcome, "expected_fail": check_id in expected})
    return {"faults": [{"name": f.name, "description": f.bug, "source": f.source} for f in FAULTS.values()
                       if any(r.fault == f.name for r in runs)],
            "checks": [c.id for c in catalog.CHECKS],
            "cells": cells,
            "problems": [p for r in runs for p in r.problems()]}


def coverage_problems() -> list[str]:
    """Static half of the proof: every check has a fault, every fault has a check, names exist."""
    problems = []
    for check in catalog.CHECKS:
        if not check.faults:
            problems.append(f"{check.id} has no fault that makes it fail")
        problems += [f"{check.id} names unknown fault {f}" for f in check.faults if f not in FAULTS]
    caught = {f for c in catalog.CHECKS for f in c.faults}
    problems += [f"fault {f} is caught by no check" for f in FAULTS if f not in caught and not FAULTS[f].transport]
    problems += [f"fault {f} plants no rule (catalog.PLANTED)" for f in FAULTS
                 if not FAULTS[f].transport and not catalog.PLANTED.get(f)]
    from harnesscheck.conformance.forms import FORMS, PLANTED_FORMS, planted_forms

    problems += [f"fault {f} plants no form of violation (forms.PLANTED_FORMS)" for f in FAULTS
                 if not FAULTS[f].transport and not planted_forms(f)]
    problems += [f"forms.PLANTED_FORMS names unknown fault {f}" for f in PLANTED_FORMS if f not in FAULTS]
    problems += [f"fault {f} plants unknown form {form}" for f in PLANTED_FORMS for form in planted_forms(f)
                 if form not in FORMS]
    for fault, rules in catalog.PLANTED.items():  # a planted rule fails a check that catches the fault
        caught = {c.id for c in catalog.checks_for_fault(fault)}
        for r in rules:
            if r not in catalog.RULE_CHECK:
                problems.append(f"fault {fault} plants unknown rule {r}")
            elif catalog.RULE_CHECK[r] not in caught:
                problems.append(f"fault {fault} plants {r}, which fails {catalog.RULE_CHECK[r]}, a check that "
                                "does not catch the fault")
    return problems


def write(matrix: dict[str, Any], out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / "fault-matrix.json"
    path.write_text(json.dumps(matrix, indent=1), encoding="utf-8")
    return path
