"""The kit's suite against the reference server, both directions: the clean server passes every
check, and each fault fails exactly the checks the catalog maps to it (and no other MUST check).

Each case runs the suite (forked from a warm process) against its own server, so the fault cases
spread over pytest-xdist workers. A fault's row runs the checks of the APIs it bends (Fault.apis, and
the checks of any API); that it leaves the other APIs alone is proven once per API, with every fault
that says so on at once (test_faults_leave_the_apis_they_do_not_name_alone), so a wrongly declared
`apis` still fails a test."""

from __future__ import annotations

from pathlib import Path

import pytest

from harnesscheck.conformance import catalog
from harnesscheck.conformance.fault_matrix import CLEAN, bystander_problems, bystanders, coverage_problems, own_apis, run_one
from harnesscheck.reference_server.faults import FAULTS
from harnesscheck.reports.schema import validate_results


def test_every_check_has_a_fault_and_every_fault_a_check() -> None:
    assert coverage_problems() == []


def test_catalog_ids_are_stable_and_well_formed() -> None:
    for check in catalog.CHECKS:
        api, contract, number = check.id.split("-")
        assert api in ("AN", "CH", "RS") and contract.isupper() and number.isdigit() and len(number) == 3
        assert check.source and check.remedy and check.title


@pytest.mark.parametrize("fault", [CLEAN, *sorted(FAULTS)])
def test_fault_matrix_row(fault: str, tmp_path: Path) -> None:
    run = run_one(fault, tmp_path, apis=own_apis(fault))
    assert run.outcomes, "the suite recorded no checks"
    assert run.problems() == [], "\n".join(run.problems())
    if fault == CLEAN:
        doc = validate_results(__import__("json").loads((tmp_path / "clean" / "results.json").read_text()))
        assert {c["id"] for c in doc["checks"]} == {c.id for c in catalog.CHECKS}


@pytest.mark.parametrize("api", ["anthropic", "chat", "responses"])
def test_faults_leave_the_apis_they_do_not_name_alone(api: str, tmp_path: Path) -> None:
    """The half of each row's claim its own run leaves out: a fault whose Fault.apis leaves out `api`
    fails none of `api`'s checks (all of them pass with every such fault on)."""
    assert len(bystanders(api)) >= 20, bystanders(api)
    problems = bystander_problems(api, tmp_path)
    assert problems == [], "\n".join(problems)


def test_catalog_rules_exist_in_the_grammar() -> None:
    from harnesscheck.conformance.grammar import ALL_RULES

    unknown = [(c.id, r) for c in catalog.CHECKS for r in c.rules if r not in ALL_RULES]
    assert unknown == []
