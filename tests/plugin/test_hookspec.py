"""The kit's own hook (conformance/hookspec.py, registered through pytest_addhooks): a plugin of
one's own gets `pytest_harnesscheck_result(result, item)` once per check, with the result that
results.json then holds: a pass on the reference server, a MUST failure under a fault that breaks it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

QUIET = ("-p", "no:cacheprovider", "-p", "no:randomly")

LISTENER = '''
import json

SEEN = []


def pytest_harnesscheck_result(result, item):
    SEEN.append({"id": result.check.id, "outcome": str(result.outcome), "level": str(result.weight),
                 "rules": list(result.rules), "node": item.nodeid})


def pytest_unconfigure(config):
    with open("seen.json", "w") as f:
        json.dump(SEEN, f)
'''


def test_hookspec_is_registered() -> None:
    from harnesscheck.conformance import hookspec, plugin

    assert hasattr(hookspec, "pytest_harnesscheck_result")
    added: list[object] = []

    class Manager:
        def add_hookspecs(self, module: object) -> None:
            added.append(module)

    plugin.pytest_addhooks(Manager())  # type: ignore[arg-type]
    assert added == [hookspec]


@pytest.mark.parametrize(("fault", "outcome", "level", "rules"), [
    ("", "pass", "SHOULD", []),
    ("model-slash-404", "fail", "SHOULD", ["AN-ROUTE-002"]),
])
def test_a_plugin_gets_each_checks_result(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                                          fault: str, outcome: str, level: str, rules: list[str]) -> None:
    pytester.makepyfile(hc_listener=LISTENER)
    monkeypatch.setenv("PYTHONPATH", str(pytester.path))
    faults = ["--hc-server-arg=--fault=" + fault] if fault else []
    ran = pytester.runpytest_subprocess("--pyargs", "harnesscheck.conformance", *QUIET, "-p", "hc_listener",
                                        "--hc-apis", "anthropic", "-k", "AN-ROUTE-002", *faults,
                                        "--hc-results", "results.json", timeout=300)
    seen = json.loads((pytester.path / "seen.json").read_text(encoding="utf-8"))
    assert [(s["id"], s["outcome"], s["level"], s["rules"]) for s in seen] == [("AN-ROUTE-002", outcome, level, rules)], \
        ran.stdout.str()
    assert "AN-ROUTE-002" in seen[0]["node"]
    doc = json.loads(Path(pytester.path / "results.json").read_text(encoding="utf-8"))
    assert [(c["id"], c["outcome"]) for c in doc["checks"]] == [("AN-ROUTE-002", outcome)]
