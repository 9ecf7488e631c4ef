"""The fault matrix: for every reference-server fault, run the suite against a server with that
fault on, and require that the checks the catalog maps to it fail and that no other MUST check
fails; the clean server must pass everything. Runs are independent processes, two at a time."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conformance import catalog
from conformance.runner import SuiteOptions, run_suite
from reference_server.faults import FAULTS

CLEAN = "(clean)"


@dataclass(slots=True)
class FaultRun:
    fault: str
    outcomes: dict[str, str]  # check id -> outcome

    def problems(self) -> list[str]:
        expected = {c.id for c in catalog.checks_for_fault(self.fault)} if self.fault != CLEAN else set()
        out = []
        for check_id in sorted(expected):
            if self.outcomes.get(check_id) != "fail":
                out.append(f"{self.fault}: {check_id} should fail, got {self.outcomes.get(check_id, 'not run')}")
        for check_id, outcome in sorted(self.outcomes.items()):
            check = catalog.get(check_id)
            if check_id in expected:
                continue
            if outcome == "error" or (outcome == "fail" and check.level == catalog.MUST):
                out.append(f"{self.fault}: {check_id} ({check.level}) unexpectedly {outcome}")
            if self.fault == CLEAN and outcome != "pass":
                out.append(f"clean server: {check_id} is {outcome}")
        return out


def run_one(fault: str, out: Path) -> FaultRun:
    server_args = () if fault == CLEAN else (f"--fault={fault}",)
    doc = run_suite(SuiteOptions(server_args=server_args, timeout=15.0), out / fault.strip("()"),
                    subprocess_run=True, quiet=True)
    return FaultRun(fault=fault, outcomes={c["id"]: c["outcome"] for c in doc["checks"]})


def run_matrix(out: Path, *, faults: Sequence[str] | None = None, workers: int = 2,
               progress: Callable[[FaultRun], None] | None = None) -> dict[str, Any]:
    names = [CLEAN, *(faults or sorted(FAULTS))]
    runs: list[FaultRun] = []
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for run in pool.map(lambda f: run_one(f, out), names):
            runs.append(run)
            if progress:
                progress(run)
    return matrix_json(runs)


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
    problems += [f"fault {f} is caught by no check" for f in FAULTS if f not in caught]
    return problems


def write(matrix: dict[str, Any], out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / "fault-matrix.json"
    path.write_text(json.dumps(matrix, indent=1), encoding="utf-8")
    return path
