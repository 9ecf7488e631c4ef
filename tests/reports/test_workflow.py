"""The nightly GitHub Actions workflow is well formed and runs the steps the docs promise."""

from pathlib import Path

import yaml

WORKFLOW = Path(__file__).resolve().parents[2] / ".github" / "workflows" / "nightly.yml"


def test_nightly_workflow_shape():
    wf = yaml.safe_load(WORKFLOW.read_text())
    triggers = wf.get("on", wf.get(True))  # YAML 1.1 reads a bare `on` key as True
    assert "schedule" in triggers and triggers["schedule"][0]["cron"]
    assert "workflow_dispatch" in triggers
    job = wf["jobs"]["nightly"]
    steps = job["steps"]
    uses = [s.get("uses", "") for s in steps]
    assert any(u.startswith("actions/checkout@") for u in uses)
    setup = next(s for s in steps if s.get("uses", "").startswith("actions/setup-python@"))
    assert setup["with"]["python-version"] == "3.11"
    runs = "\n".join(s.get("run", "") for s in steps)
    assert "pip install -e '.[test]'" in runs
    assert "harnesscheck check --endpoint \"$HARNESSCHECK_ENDPOINT\" --model \"$HARNESSCHECK_MODEL\"" in runs
    assert "--junit results/junit.xml" in runs
    assert "harnesscheck bench preamble" in runs
    assert "harnesscheck gate" in runs and "baseline/results.json" in runs and "results/results.json" in runs
    assert "harnesscheck report results/results.json --out results/report.html" in runs
    assert job["env"]["HARNESSCHECK_API_KEY"] == "${{ secrets.HARNESSCHECK_API_KEY }}"
    upload = next(s for s in steps if s.get("uses", "").startswith("actions/upload-artifact@") and s["with"]["path"] == "results/")
    assert upload["if"] == "always()"
    report = next(s for s in steps if "harnesscheck report" in s.get("run", ""))
    assert report["if"].startswith("always()")
