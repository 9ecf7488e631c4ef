import copy

import pytest

from harnesscheck.reports.merge import merge_results
from harnesscheck.reports.schema import ResultsError, validate_results
from tests.reports import factory


def _second_run():
    doc = factory.clean(factory.results())
    doc["run"] = factory.run_meta(id="run-2", started_at="2024-06-01T03:00:00+00:00",
                                  finished_at="2024-06-01T03:05:00+00:00", apis=["anthropic", "chat"])
    doc["checks"] = [c for c in doc["checks"] if c["api"] == "anthropic"]
    doc["checks"].append(factory.check("AN-NEW-001", "anthropic"))
    doc["benchmarks"] = [factory.benchmark(scale=2.0), factory.benchmark(name="history")]
    doc["comparisons"] = []
    doc["fault_matrix"] = None
    return doc


def test_merge_overrides_checks_by_id_and_api():
    first, second = factory.results(), _second_run()
    merged = merge_results([first, second])
    validate_results(merged)
    by_key = {(c["id"], c["api"]): c for c in merged["checks"]}
    assert by_key[("AN-STREAM-001", "anthropic")]["outcome"] == "pass"  # overridden by the later run
    assert by_key[("CH-TOOL-002", "chat")]["outcome"] == "fail"  # only in the first run: kept
    assert ("AN-NEW-001", "anthropic") in by_key
    assert len(merged["checks"]) == len(first["checks"]) + 1
    assert [c["id"] for c in merged["checks"]][:2] == ["AN-STREAM-001", "AN-STREAM-002"]  # first position kept


def test_merge_benchmarks_comparisons_fault_matrix_and_run():
    first, second = factory.results(), _second_run()
    merged = merge_results([first, second])
    names = [b["name"] for b in merged["benchmarks"]]
    assert names == ["preamble", "history"]
    assert merged["benchmarks"][0]["arms"][0]["median"] > 200  # the later "preamble" (scale 2) wins
    assert [c["name"] for c in merged["comparisons"]] == ["reasoning-kept-vs-dropped"]
    assert merged["fault_matrix"] == first["fault_matrix"]  # taken from whichever has it
    run = merged["run"]
    assert [r["id"] for r in run["merged_from"]] == ["run-2024-06-01T02-00-00", "run-2"]
    assert run["started_at"] == "2024-06-01T02:00:00+00:00"
    assert run["finished_at"] == "2024-06-01T03:05:00+00:00"
    assert run["apis"] == ["anthropic", "chat", "responses"]
    assert "merged_from" not in run["merged_from"][0]


def test_nested_merges_flatten_sources_and_inputs_are_untouched():
    a, b = factory.results(), _second_run()
    c = copy.deepcopy(b)
    c["run"]["id"] = "run-3"
    before = copy.deepcopy(a)
    merged = merge_results([merge_results([a, b]), c])
    assert [r["id"] for r in merged["run"]["merged_from"]] == ["run-2024-06-01T02-00-00", "run-2", "run-3"]
    assert a == before


def test_merge_single_and_empty_and_invalid():
    doc = factory.results()
    one = merge_results([doc])
    assert one == doc and one is not doc
    with pytest.raises(ResultsError, match="nothing to merge"):
        merge_results([])
    bad = factory.results()
    bad["checks"][0]["api"] = "nope"
    with pytest.raises(ResultsError, match=r"results #2: \$.checks\[0\].api"):
        merge_results([doc, bad])
