"""docs/ci.md's workflow for a serving repository, read out of the page and run here end to end (issue 45):
two nights against the embedded reference server, started by the workflow's own `SERVE_CMD` step. The
first night has no baseline (the gate keeps its results as one and passes); the second downloads that
baseline the way the workflow does (`gh run download` of the last run's artifact) and compares against
it: with the server slowed, the gate fails the job on the benchmark, the report and the Markdown summary
are still published, and the baseline kept for the next night is the last good one. (A night at the same
speed passing is tests/reports/test_workflow.py's, in the slow tier.)

`_Runner` plays a GitHub Actions runner for the job: `run:` steps in bash -eo pipefail with the job's
env, `${{ }}` expressions, step conditions and outputs, `GITHUB_STEP_SUMMARY`; `actions/checkout` and
`setup-python` are this environment, the install step is this environment's install, and
`actions/upload-artifact` and the `gh` CLI work on a local folder that stands for the repository's
artifacts. Everything else (the server, harnesscheck's commands, curl) is real. An expression, a
condition or an action the runner does not know fails the test, so the page cannot drift from it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from harnesscheck.reference_server.config import DEFAULT_MODEL_IDS

DOC = Path(__file__).resolve().parents[2] / "docs" / "ci.md"
_EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
# The job's knobs as a user sets them for this machine: a short narrowed check, a short benchmark, a
# threshold wide enough for a loaded 2-core machine (the slowed night is 10x slower).
USUAL = "--ttft-base-ms 20 --prefill-us-per-token 0 --decode-ms 1"
SLOWED = "--ttft-base-ms 200 --prefill-us-per-token 0 --decode-ms 1"
KNOBS = {"CHECK_ARGS": "--apis anthropic -k AN-STREAM-001", "THRESHOLD": "0.5",
         "BENCH_ARGS": "--concurrency 2 --duration 2 --max-tokens 16 --warmup 0", "SERVER_START_S": "60"}
REPO, WORKFLOW, BRANCH = "acme/server", "harnesscheck nightly", "main"

FAKE_GH = textwrap.dedent('''\
    #!/usr/bin/env python3
    """The two gh commands the workflow uses, over $FAKE_ARTIFACTS/<run id>/<artifact name>/."""
    import argparse, os, shutil, sys
    from pathlib import Path
    store = Path(os.environ["FAKE_ARTIFACTS"])
    assert os.environ.get("GH_TOKEN") and os.environ.get("GH_REPO") == "%(repo)s", "gh needs GH_TOKEN and GH_REPO"
    p = argparse.ArgumentParser()
    p.add_argument("group"); p.add_argument("command"); p.add_argument("run_id", nargs="?")
    p.add_argument("--workflow"); p.add_argument("--branch"); p.add_argument("--limit", type=int)
    p.add_argument("--json"); p.add_argument("--jq"); p.add_argument("--name"); p.add_argument("--dir")
    a = p.parse_args()
    if (a.group, a.command) == ("run", "list"):
        assert (a.workflow, a.branch, a.json, a.jq) == ("%(workflow)s", "%(branch)s", "databaseId", ".[].databaseId")
        runs = sorted((int(d.name) for d in store.iterdir()), reverse=True)[: a.limit]
        print("\\n".join(str(r) for r in runs))
    elif (a.group, a.command) == ("run", "download"):
        src = store / a.run_id / a.name
        if not src.is_dir():
            sys.exit(f"no valid artifacts found to download")
        shutil.copytree(src, a.dir, dirs_exist_ok=True)
    else:
        sys.exit(f"fake gh: unknown command {sys.argv[1:]}")
    ''') % {"repo": REPO, "workflow": WORKFLOW, "branch": BRANCH}


def workflow() -> dict[str, Any]:
    """The workflow: the page's first ```yaml block."""
    found = re.search(r"```yaml\n(.*?)\n```", DOC.read_text(encoding="utf-8"), re.S)
    assert found, "docs/ci.md holds no ```yaml block"
    doc: dict[str, Any] = yaml.safe_load(found.group(1))
    return doc


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class _Runner:
    """One run of the job in `workspace` (a fresh checkout), with the job env's knobs overridden by `env`."""

    workspace: Path
    artifacts: Path
    run_id: int
    env: dict[str, str]
    rc: dict[str, int | None] = field(default_factory=dict)
    log: dict[str, str] = field(default_factory=dict)
    outputs: dict[str, str] = field(default_factory=dict)

    def value(self, expression: str) -> str:
        known = {"github.token": "fake-token", "github.repository": REPO, "github.workflow": WORKFLOW,
                 "github.ref_name": BRANCH, "github.run_id": str(self.run_id),
                 "github.server_url": "https://github.example", "secrets.HARNESSCHECK_API_KEY": ""}
        if expression in known:
            return known[expression]
        if expression.startswith("steps.") and expression in self.outputs:
            return self.outputs[expression]
        raise AssertionError(f"docs/ci.md uses ${{{{ {expression} }}}}, unknown to this runner")

    def expand(self, text: str) -> str:
        return _EXPRESSION.sub(lambda m: self.value(m.group(1)), text)

    def should_run(self, condition: str | None, failed: bool) -> bool:
        status = not failed
        for term in (t.strip() for t in (condition or "").split("&&") if t.strip()):
            if term == "always()":
                status = True
            elif term == "success()":
                status = not failed
            elif m := re.fullmatch(r"hashFiles\('([^']+)'\) != ''", term):
                if not any(p.is_file() for p in self.workspace.glob(m.group(1))):
                    return False
            else:
                raise AssertionError(f"docs/ci.md step condition {term!r} is unknown to this runner")
        return status

    def upload(self, step: dict[str, Any]) -> int:
        name, paths = step["with"]["name"], str(step["with"]["path"]).split()
        target = self.artifacts / str(self.run_id) / name
        copied = 0
        for raw in paths:
            for src in self.workspace.glob(raw.rstrip("/")):
                if src.is_dir():
                    shutil.copytree(src, target if raw.endswith("/") and len(paths) == 1 else target / src.name,
                                    dirs_exist_ok=True)
                else:
                    target.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(src, target / src.name)
                copied += 1
        return 0 if copied or step["with"].get("if-no-files-found") == "warn" else 1

    def run(self, job: dict[str, Any]) -> _Runner:
        self.workspace.mkdir(parents=True)
        bin_dir = self.workspace.parent / "bin"
        bin_dir.mkdir(exist_ok=True)
        (bin_dir / "gh").write_text(FAKE_GH)
        (bin_dir / "gh").chmod((bin_dir / "gh").stat().st_mode | stat.S_IXUSR)
        summary = self.workspace.parent / f"summary-{self.run_id}.md"
        env = {**os.environ, "PATH": os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent),
                                                       os.environ["PATH"]]),
               "GITHUB_STEP_SUMMARY": str(summary), "FAKE_ARTIFACTS": str(self.artifacts), "PYTHONUNBUFFERED": "1"}
        env |= {k: self.expand(str(v)) for k, v in job["env"].items()} | self.env
        failed = False
        try:
            for i, step in enumerate(job["steps"]):
                name = step.get("name") or step.get("uses", "")
                uses = step.get("uses", "")
                if uses.startswith(("actions/checkout@", "actions/setup-python@")):
                    continue  # this machine's checkout and Python
                if name.startswith("Install"):
                    assert "pip install harnesscheck" in step["run"]  # this environment is the install
                    continue
                if not self.should_run(step.get("if"), failed):
                    self.rc[name] = None
                    continue
                if uses:
                    assert uses.startswith("actions/upload-artifact@"), f"an action unknown to this runner: {uses}"
                    self.rc[name] = self.upload(step)
                    failed = failed or self.rc[name] != 0
                    continue
                output = self.workspace.parent / f"output-{self.run_id}-{i}"
                output.write_text("")
                script = self.workspace.parent / f"step-{self.run_id}-{i}.sh"
                script.write_text(self.expand(step["run"]))
                proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
                                      cwd=self.workspace, env=env | {"GITHUB_OUTPUT": str(output)},
                                      stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=240)
                self.rc[name], self.log[name] = proc.returncode, proc.stdout + proc.stderr
                failed = failed or proc.returncode != 0
                for line in output.read_text().splitlines():
                    key, _, value = line.partition("=")
                    if step.get("id"):
                        self.outputs[f"steps.{step['id']}.outputs.{key}"] = value
        finally:
            _stop(self.workspace / "server.pid")
        self.summary = summary.read_text() if summary.exists() else ""
        self.failed = failed
        return self


def _stop(pid_file: Path) -> None:
    """The server the job started, whatever the job's own last step did (a test leaves no process)."""
    if not pid_file.exists():
        return
    pid = int(pid_file.read_text().split()[0])
    for sig in (15, 9):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        for _ in range(50):
            try:
                if os.waitpid(pid, os.WNOHANG)[0]:
                    return
            except ChildProcessError:
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    return
            time.sleep(0.1)


def _night(tmp: Path, run_id: int, server_timing: str) -> _Runner:
    port = _free_port()
    env = {**KNOBS, "SERVE_CMD": f"harnesscheck serve --port {port} {server_timing}",
           "ENDPOINT": f"http://127.0.0.1:{port}", "MODEL": DEFAULT_MODEL_IDS[0]}
    runner = _Runner(tmp / f"run-{run_id}", tmp / "artifacts", run_id, env)
    (tmp / "artifacts").mkdir(exist_ok=True)
    return runner.run(workflow()["jobs"]["harnesscheck"])


def test_the_workflow_on_the_page_has_the_steps_a_serving_repo_needs() -> None:
    wf = workflow()
    triggers = wf.get("on", wf.get(True))  # YAML 1.1 reads a bare `on` key as True
    assert triggers["schedule"][0]["cron"] and "workflow_dispatch" in triggers
    assert wf["permissions"] == {"contents": "read", "actions": "read"}
    (job,) = wf["jobs"].values()
    names = [s.get("name") or s["uses"] for s in job["steps"]]
    order = ["Start the server", "Wait for the server", "Last night's results", "Conformance checks",
             "Load benchmark", "Gate against last night", "Report and job summary", "Keep the baseline for tomorrow",
             "Upload the report and results", "Stop the server"]
    assert [n for n in names if n in order] == order
    for step in job["steps"][names.index("Report and job summary"):]:
        assert step["if"].startswith("always()"), step  # published whatever the gate said


@pytest.mark.timeout(300)
def test_two_nights_of_the_workflow_against_the_reference_server(tmp_path: Path) -> None:
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed (the workflow waits for the server with it, as ubuntu-latest has it)")
    first = _night(tmp_path, 101, USUAL)
    assert not first.failed, {k: v[-1500:] for k, v in first.log.items()}
    assert "no baseline yet" in first.log["Last night's results"]
    assert "wrote the current results as the baseline" in first.log["Gate against last night"]
    assert first.outputs["steps.check.outputs.rc"] == "0"
    kept = tmp_path / "artifacts" / "101" / "harnesscheck-baseline"
    assert sorted(p.name for p in kept.glob("*.json")) == ["bench-load.json", "results.json"]
    published = tmp_path / "artifacts" / "101" / "harnesscheck-results"
    assert (published / "results" / "report.html").is_file() and (published / "server.log").is_file()
    assert first.summary.startswith("## harnesscheck:") and "| **total** |" in first.summary
    assert "https://github.example/acme/server/actions/runs/101" in first.summary

    # the second night, the server 10x slower to the first token: last night's artifact is the baseline, the
    # gate compares and fails the job on the benchmark alone, the report and the summary are still published,
    # and the baseline kept for the next night is the first night's, not this one's
    second = _night(tmp_path, 102, SLOWED)
    assert second.failed and second.rc["Gate against last night"] == 1, second.log["Gate against last night"]
    assert "baseline: the results kept by run 101" in second.log["Last night's results"]
    verdict = json.loads((second.workspace / "results" / "gate.json").read_text())
    assert not verdict["passed"] and verdict["newly_failing_ids"] == [] and verdict["regressions"], verdict
    assert {b["benchmark"] for b in verdict["regressions"]} >= {"load-concurrency-ttft"}
    assert second.rc["Report and job summary"] == 0 and second.rc["Keep the baseline for tomorrow"] == 0
    assert "### Gate against last night" in second.summary and "REGRESSION" in second.summary
    assert second.rc["Stop the server"] == 0
    kept = [json.loads((tmp_path / "artifacts" / str(n) / "harnesscheck-baseline" / "results.json").read_text())
            for n in (101, 102)]
    assert kept[1]["run"]["id"] == kept[0]["run"]["id"]
