"""Client verdicts do not depend on the working folder (issue 35, "paths resolved once"; opt in:
HARNESSCHECK_E2E=1). With a relative output folder (`--out vc`, the default kind) Codex was given
`CODEX_HOME points to "vc/clients/codex/text/home/.codex"` and failed, and the kit printed a
measured break against an endpoint where every client works. The clean case with a relative folder
is `tests/reliability/test_secrets.py::test_run_verify_clients_with_a_key_leaves_it_in_no_file` (all
clients work); here a fault that breaks Codex is measured as a break with a relative folder too.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harnesscheck.agents.clients import verify
from harnesscheck.reference_server.launch import ServerProcess

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]
FAST = ("--decode-ms", "0", "--ttft-base-ms", "0", "--prefill-us-per-token", "0")
MODEL = "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4"


def test_a_breaking_fault_is_measured_as_a_break_with_a_relative_folder(tmp_path, e2e_install,
                                                                         monkeypatch):
    inst = e2e_install("codex")
    # A cache holding only Codex: OpenClaw over Responses takes ~90 s a turn under this fault (278 s in all).
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "codex").symlink_to(inst.prefix)
    monkeypatch.setenv("HARNESSCHECK_CLIENTS_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    with ServerProcess([*FAST, "--fault", "rs-missing-completed"]) as server:
        got = verify.verify_clients(server.url, MODEL, None, ["responses"], Path("vc") / "clients")
    codex = got["clients"]["codex"]
    assert codex["measured"] == "breaks", codex
    failed = [f for turn in codex["turns"].values() for f in turn["failed"]]
    assert failed and not any("CODEX_HOME" in f for f in failed), failed  # the fault, not the folder
    assert all(Path(t["capture"]).is_absolute() for t in codex["turns"].values())
