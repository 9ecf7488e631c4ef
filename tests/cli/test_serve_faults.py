"""`serve --fault NAME` says so (issue 45): a banner on start naming each fault, /health and every
/v1/models entry (metadata.faults) name them, and a run against that server, or against the embedded
server with faults in any spelling of --server-arg, records them in results.json (`run.server.faults`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.conftest import FAST
from tests.processes import GroupServer

FAULTS = ("rs-function-tools-only", "an-missing-block-stop")


@pytest.fixture(scope="module")
def faulty() -> GroupServer:
    with GroupServer([*FAST, *(f"--fault={name}" for name in FAULTS)]) as server:
        yield server


def test_serve_names_its_faults_on_start_in_health_and_models(faulty: GroupServer) -> None:
    said = "".join(faulty.output)
    assert "FAULTS ON (2)" in said, said
    for name in FAULTS:
        assert f"--fault {name}: " in said, said
    health = httpx.get(f"{faulty.url}/health", timeout=10).json()
    assert health["faults"] == sorted(FAULTS)
    for headers in ({}, {"anthropic-version": "2023-06-01"}):  # OpenAI's list shape and Anthropic's
        models = httpx.get(f"{faulty.url}/v1/models", headers=headers, timeout=10).json()["data"]
        assert models and all(m["metadata"]["faults"] == sorted(FAULTS) for m in models), models


def test_a_server_without_faults_says_none(reference_server: str) -> None:
    assert httpx.get(f"{reference_server}/health", timeout=10).json()["faults"] == []
    models = httpx.get(f"{reference_server}/v1/models", timeout=10).json()["data"]
    assert all(m["metadata"]["faults"] == [] for m in models)


def _check(tmp_path: Path, *args: str) -> dict:
    out = tmp_path / "out"
    ran = subprocess.run([sys.executable, "-m", "harnesscheck", "check", "--apis", "responses",
                          "-k", "RS-TOOLKIND-001", "--out", str(out), *args],
                         capture_output=True, text=True, timeout=300)
    assert ran.returncode in (0, 1), ran.stdout + ran.stderr
    return json.loads((out / "results.json").read_text(encoding="utf-8"))["run"]["server"]


def test_a_run_against_serve_with_faults_records_them(faulty: GroupServer, tmp_path: Path) -> None:
    server = _check(tmp_path, "--endpoint", faulty.url)
    assert server["kind"] == "external" and sorted(server["faults"]) == sorted(FAULTS), server


def test_the_embedded_server_records_faults_given_as_two_server_args(tmp_path: Path) -> None:
    """`--server-arg=--fault --server-arg=NAME` (one word each, as tests and scripts write it)."""
    server = _check(tmp_path, "--server-arg=--fault", f"--server-arg={FAULTS[0]}")
    assert server["kind"] == "embedded" and server["faults"] == [FAULTS[0]], server
