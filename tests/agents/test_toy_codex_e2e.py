"""Real Codex on the toy task set (opt in: HARNESSCHECK_E2E=1, as tests/clients/): the driver's
``DEFAULT_COMMAND`` (``codex exec --json ...``) against a reference server process, two profiles.

Codex comes from the client cache (``~/.cache/harnesscheck/clients/codex``, installed there once by
``harnesscheck.agents.clients.install`` within HARNESSCHECK_E2E_INSTALL_BUDGET seconds, else the test skips).
The scripted toy scenarios call Codex's own ``exec_command`` tool, patching with ``apply_patch <<'EOF'``,
which Codex applies itself.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harnesscheck.agents.counts import compare_sources
from harnesscheck.agents.driver import DEFAULT_COMMAND
from harnesscheck.agents.rollouts import load_run_dir
from tests.agents.toy_run import ALIAS, SERVER_ARGS, SMALL, run_toy

OPTED_IN = os.environ.get("HARNESSCHECK_E2E") == "1"
pytestmark = [pytest.mark.e2e, pytest.mark.skipif(not OPTED_IN, reason="opt-in e2e: set HARNESSCHECK_E2E=1")]


def test_codex_exec_resolves_the_toy_tasks(tmp_path: Path, server_factory: Callable[..., str],
                                          e2e_install: Callable[[str], Any]) -> None:
    inst = e2e_install("codex")
    command = [str(inst.modules / ".bin" / "codex"), *shlex.split(DEFAULT_COMMAND)[1:]]
    runs = run_toy(tmp_path, server_factory(*SERVER_ARGS) + "/v1", command, timeout_s=180)
    stderr = [(Path(r.folder) / "agent-stderr.txt").read_text()[-800:] for r in runs]
    assert all(r.returncode == 0 and not r.timed_out and r.error is None for r in runs), (runs, stderr)
    assert all(r.resolved and len(r.rollout_files) == 1 for r in runs), (runs, stderr)
    for name, model in (("small", SMALL), ("alias", ALIAS)):
        for u in load_run_dir(tmp_path / "run" / name):
            assert u.format == "codex-rollout" and u.model == model
            assert u.by_tool == {"exec_command": 3} and u.input_tokens, u
    comp = compare_sources(tmp_path / "run" / "small", tmp_path / "run" / "alias")
    assert comp.n_tasks == 3 and (comp.total_a, comp.total_b) == (9, 9) and comp.wlt.ties == 3
