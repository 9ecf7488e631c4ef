"""The toy SWE-style run shared by the toy-agent and real-Codex tests: the toy repository, the three
toy tasks, two profiles (two model ids of one reference server), interleaved by the driver."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from harnesscheck.agents.driver import Profile, TaskRun, run_profiles
from harnesscheck.agents.swebench import TOY_TASKS, build_toy_repo, load_tasks, select_tasks

SMALL, ALIAS = "harnesscheck/small", "harnesscheck/small-alias"
SERVER_ARGS = ("--model-id", SMALL, "--model-id", ALIAS)


def run_toy(tmp_path: Path, endpoint: str, command: Any, *, timeout_s: float) -> list[TaskRun]:
    build_toy_repo(tmp_path / "repos" / "harnesscheck__toycalc")
    tasks = select_tasks(load_tasks(TOY_TASKS, use_datasets=False))
    profiles = [Profile("small", SMALL, endpoint=endpoint), Profile("alias", ALIAS, endpoint=endpoint)]
    return run_profiles(
        tasks,
        profiles,
        run_dir=tmp_path / "run",
        repos=tmp_path / "repos",
        command=command,
        # -S: no site-packages, the toy tests need only the standard library (faster)
        test_command=[sys.executable, "-S", "-m", "unittest", "-q", "{fail_to_pass}", "{pass_to_pass}"],
        timeout_s=timeout_s,
    )
