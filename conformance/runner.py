"""Run the conformance suites programmatically (what `harnesscheck check` / `run` / `faults
--matrix` do): pytest over this package with the plugin, results JSON in an output folder."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PACKAGE = Path(__file__).resolve().parent


@dataclass(slots=True)
class SuiteOptions:
    endpoint: str | None = None
    model: str | None = None
    api_key: str | None = None
    apis: str = "anthropic,chat,responses"
    tries: int = 3
    timeout: float = 30.0
    expect: tuple[str, ...] = ()
    server_args: tuple[str, ...] = ()
    witness: str = "auto"
    junit: str | None = None
    select: str | None = None  # pytest -k expression
    verbose: bool = False

    def pytest_args(self, out: Path) -> list[str]:
        args = [str(PACKAGE), "-c", str(PACKAGE / "pytest.ini"), "--rootdir", str(PACKAGE),
                "--results", str(out / "results.json"), "--transcripts", str(out / "transcripts"),
                "--apis", self.apis, "--tries", str(self.tries), "--hc-timeout", str(self.timeout),
                "--witness", self.witness, "-p", "no:randomly", "-rfE", "--tb=line"]
        args += ["-v"] if self.verbose else ["-q"]
        if self.endpoint:
            args += ["--endpoint", self.endpoint]
        if self.model:
            args += ["--model", self.model]
        for feature in self.expect:
            args += ["--expect", feature]
        for server_arg in self.server_args:
            args.append(f"--server-arg={server_arg}")
        if self.junit:
            args += ["--junitxml", self.junit]
        if self.select:
            args += ["-k", self.select]
        return args


def run_suite(options: SuiteOptions, out: Path, *, subprocess_run: bool = False, quiet: bool = False,
              usage: dict[str, float] | None = None) -> dict[str, Any]:
    """Run the suite; return the results document. The API key travels by environment only.
    With subprocess_run, `usage` (if given) gets the run's own peak memory: {"max_rss_mb": ...}."""
    out.mkdir(parents=True, exist_ok=True)
    args = options.pytest_args(out)
    env_key = {"HARNESSCHECK_API_KEY": options.api_key} if options.api_key else {}
    if subprocess_run:
        import os

        stdout = subprocess.DEVNULL if quiet else None
        proc = subprocess.Popen([sys.executable, "-m", "pytest", *args], env={**os.environ, **env_key},
                                stdout=stdout, stderr=stdout)
        peak_kb = 0
        while proc.poll() is None:
            # VmHWM: the peak of the child's own address space (ru_maxrss would include the
            # parent's resident set inherited at fork, before exec).
            peak_kb = max(peak_kb, _vm_hwm_kb(proc.pid))
            time.sleep(0.1)
        if usage is not None:
            usage["max_rss_mb"] = peak_kb / 1024
    else:
        import os

        import pytest

        os.environ.update(env_key)
        pytest.main(args)
    results = out / "results.json"
    if not results.exists():
        raise RuntimeError(f"the conformance run wrote no {results}; see the output above")
    return json.loads(results.read_text(encoding="utf-8"))


def _vm_hwm_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def harness_lines(doc: dict[str, Any]) -> list[str]:
    """Per real client, the failing checks that would break it: 'Claude Code 2.1.197: would break (AN-REQ-001)'."""
    breaks: dict[str, list[str]] = {}
    for check in doc["checks"]:
        for client, verdict in (check.get("clients") or {}).items():
            breaks.setdefault(client, [])
            if verdict == "would break":
                breaks[client].append(check["id"])
    return [f"{client}: would break ({', '.join(ids)})" if ids else f"{client}: unaffected by the failures"
            for client, ids in sorted(breaks.items())]


def must_failed(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in doc["checks"] if c["level"] == "MUST" and c["outcome"] == "fail"]
