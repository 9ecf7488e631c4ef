import copy
import json

import jsonschema
import pytest

from harnesscheck.reports.schema import (
    SCHEMA_VERSION,
    ResultsError,
    load_results,
    results_schema,
    validate_results,
)

from tests.reports import factory


def test_schema_file_is_a_valid_json_schema():
    schema = results_schema()
    jsonschema.validators.validator_for(schema).check_schema(schema)
    assert schema["properties"]["schema"]["const"] == "harnesscheck.results"
    assert SCHEMA_VERSION == "1.0"


def test_full_synthetic_results_validate():
    doc = factory.results()
    assert validate_results(doc) is doc
    failing = doc["checks"][0]
    assert failing["outcome"] == "fail" and failing["finding"]["excerpt"]
    assert doc["benchmarks"][0]["arms"][0]["samples"]
    assert doc["comparisons"] and doc["fault_matrix"]["cells"]


def test_minimal_results_validate():
    doc = {"schema": "harnesscheck.results", "schema_version": "1.0", "run": factory.run_meta(), "checks": []}
    validate_results(doc)
    validate_results(doc | {"fault_matrix": None, "schema_version": "1.7"})  # any 1.x reads


def _mutate(path, value=None, delete=False):
    def f(doc):
        target = doc
        for p in path[:-1]:
            target = target[p]
        if delete:
            del target[path[-1]]
        else:
            target[path[-1]] = value
        return doc
    return f


BAD = [
    ("not-object", lambda d: [d], "JSON object"),
    ("schema-name", _mutate(["schema"], "other"), "not a harnesscheck results document"),
    ("major-version", _mutate(["schema_version"], "2.0"), "unsupported schema_version"),
    ("no-run", _mutate(["run"], delete=True), "'run' is a required property"),
    ("no-model", _mutate(["run", "model"], delete=True), "$.run: 'model' is a required property"),
    ("server-kind", _mutate(["run", "server", "kind"], "cloud"), "$.run.server.kind"),
    ("outcome", _mutate(["checks", 0, "outcome"], "passed"), "$.checks[0].outcome"),
    ("api", _mutate(["checks", 1, "api"], "gemini"), "$.checks[1].api"),
    ("level", _mutate(["checks", 1, "level"], "MAY"), "$.checks[1].level"),
    ("finding-rule", _mutate(["checks", 0, "finding", "rule"], delete=True), "$.checks[0].finding"),
    ("frame-index", _mutate(["checks", 0, "finding", "frame_index"], "seven"), "$.checks[0].finding"),
    ("check-id", _mutate(["checks", 0, "id"], "stream one"), "$.checks[0].id"),
    ("samples", _mutate(["benchmarks", 0, "arms", 0, "samples"], ["fast"]), "$.benchmarks[0].arms[0].samples[0]"),
    ("ci", _mutate(["benchmarks", 0, "ratios", 0, "ci95"], [1.0]), "$.benchmarks[0].ratios[0].ci95"),
    ("p-value", _mutate(["comparisons", 0, "p_permutation"], 1.5), "$.comparisons[0].p_permutation"),
    ("cell", _mutate(["fault_matrix", "cells", 0, "expected_fail"], "yes"), "$.fault_matrix"),
    ("ratio-arm", _mutate(["benchmarks", 0, "ratios", 0, "numerator"], "nope"), "arm 'nope'"),
]


@pytest.mark.parametrize("name,mutate,needle", BAD, ids=[b[0] for b in BAD])
def test_bad_results_raise_a_clear_error(name, mutate, needle):
    doc = mutate(copy.deepcopy(factory.results()))
    with pytest.raises(ResultsError) as info:
        validate_results(doc)
    assert needle in str(info.value)


def test_duplicate_check_key_is_rejected():
    doc = factory.results()
    doc["checks"].append(copy.deepcopy(doc["checks"][0]))
    with pytest.raises(ResultsError, match=r"duplicate check AN-STREAM-001 for api anthropic"):
        validate_results(doc)


def test_load_results(tmp_path):
    good = tmp_path / "results.json"
    good.write_text(json.dumps(factory.results()))
    assert load_results(good)["run"]["model"] == "scripted/qwen3-coder"

    bad_json = tmp_path / "bad.json"
    bad_json.write_text("{nope")
    with pytest.raises(ResultsError, match="bad.json: not valid JSON"):
        load_results(bad_json)
    with pytest.raises(ResultsError, match="missing.json: cannot read"):
        load_results(tmp_path / "missing.json")
    invalid = tmp_path / "invalid.json"
    doc = factory.results()
    doc["checks"][0]["outcome"] = "maybe"
    invalid.write_text(json.dumps(doc))
    with pytest.raises(ResultsError, match=r"invalid.json: \$.checks\[0\].outcome"):
        load_results(invalid)


def test_the_one_builder_makes_valid_documents_and_their_run_header():
    from harnesscheck.reports.schema import results_document, run_header

    run = run_header(endpoint="http://x", model="m", apis=["chat"], server={"kind": "external"},
                     settings={"tries": 1})
    assert list(run) == ["id", "started_at", "kit_version", "endpoint", "model", "apis", "machine", "settings",
                         "server"]
    assert set(run["machine"]) == {"hostname", "platform", "python", "cpus"} and len(run["id"]) == 12
    bench = run_header(endpoint="e", model="m", apis=[], server={"kind": "embedded"}, settings={},
                       started_at="2026-01-01T00:00:00+00:00", finished_at="2026-01-01T00:01:00+00:00")
    assert list(bench)[:3] == ["id", "started_at", "finished_at"] and bench["started_at"].startswith("2026-01-01")
    assert run_header(endpoint="e", model="m", apis=[], server={}, settings={})["id"] != run["id"]
    doc = results_document(run, [], benchmarks=[], comparisons=[], fault_matrix=None)
    assert list(doc) == ["schema", "schema_version", "run", "checks", "benchmarks", "comparisons", "fault_matrix"]
    assert doc["schema"] == "harnesscheck.results" and doc["schema_version"] == "1.0"
    assert validate_results(doc) is doc
    assert list(results_document(bench, [], benchmarks=[])) == ["schema", "schema_version", "run", "checks",
                                                                "benchmarks"]
    with pytest.raises(TypeError, match="unknown section"):
        results_document(run, [], benchmark=[])


def test_the_package_face_loads_its_modules_on_first_use():
    """Writing a results document (the pytest plugin, in every pytest session) pulls in neither the
    gate's numpy nor the report's templates and plots; every public name still resolves."""
    import subprocess
    import sys

    code = ("import sys; import harnesscheck.conformance.plugin; "
            "print(sorted(m for m in ('harnesscheck.reports.gate', 'harnesscheck.reports.html', 'matplotlib', "
            "'jsonschema') if m in sys.modules))")
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "[]"
    import importlib

    import harnesscheck.reports as reports

    assert sorted(reports.__all__) == sorted(reports._EXPORTS)
    for name in reports.__all__:
        module = importlib.import_module(reports._EXPORTS[name])
        assert getattr(reports, name) is getattr(module, name), name


def test_the_schema_api_list_is_the_registry() -> None:
    """results.schema.json lists the APIs the kit ships; a document is validated against the registry's list
    (an API registered later validates: tests/conformance/test_fourth_api.py)."""
    from harnesscheck.protocol import apis
    from harnesscheck.reports import schema

    assert schema.file_apis() == [*apis.names(), "any"]
    assert schema.results_schema()["$defs"]["check"]["properties"]["api"]["enum"] == [*apis.names(), "any"]
    assert schema.APIS == (*apis.names(), "any")
