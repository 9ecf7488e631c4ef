"""Agent processes end with their run, and folders handed to them are absolute (no Ray needed).

- an agent that leaves a child running, or hangs past its time limit with one, leaves no process;
- a process that dies by SIGKILL (as a Ray worker cancelled with force does) has its registered
  process groups killed and its scratch folders removed by its guard (``agents.procgroup``);
- a run with a relative run folder, repositories folder and work root clones and runs as with
  absolute ones (the clone and ``CODEX_HOME`` get absolute paths);
- ``swebench run`` whose every run failed before its agent could run exits 1 and says so, never a
  comparison of zeros.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from harnesscheck.agents.driver import Profile, run_profiles, run_task
from harnesscheck.agents.swebench import TOY_TASKS, build_toy_repo, load_tasks
from harnesscheck.cli.main import main
from tests.cli.helpers import processes_with_cmdline


def _gone(marker: str, timeout: float = 15.0) -> list[int]:
    """The processes with ``marker`` still there once they have had ``timeout`` s to go."""
    deadline = time.monotonic() + timeout
    while (left := processes_with_cmdline(marker)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def _spawner(marker: str, then: str) -> list[str]:
    """An agent that starts a sleeping child (in its own process group) and then runs ``then``."""
    child = f"import time; time.sleep(60)  # {marker}-child"
    return [sys.executable, "-S", "-c",
            f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-S', '-c', {child!r}]); "
            f"{then}  # {marker}"]


@pytest.fixture(scope="module")
def toy(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    repo, _ = build_toy_repo(tmp_path_factory.mktemp("repos") / "harnesscheck__toycalc")
    return repo, load_tasks(TOY_TASKS, use_datasets=False).tasks[0]


@pytest.mark.parametrize("then", ["pass", "time.sleep(60)"],
                         ids=["exits leaving a child", "hangs past its limit"])
def test_an_agents_whole_group_ends_with_its_run(tmp_path: Path, toy, then: str) -> None:
    repo, task = toy
    marker = f"hc-agent-{uuid.uuid4().hex}"
    run = run_task(task, Profile("p", "m"), run_dir=tmp_path / "run", repo=repo, timeout_s=1.5,
                   command=_spawner(marker, then), work_root=tmp_path / "work")
    assert run.error is None and run.timed_out is (then != "pass")
    assert _gone(marker, 0.0) == []  # ended before run_task returned
    assert list((tmp_path / "work").iterdir()) == []


def test_the_guard_ends_groups_and_removes_folders_of_a_killed_process(tmp_path: Path) -> None:
    marker = f"hc-guarded-{uuid.uuid4().hex}"
    scratch = tmp_path / "scratch"
    owner = f"""
import subprocess, sys, time
from pathlib import Path
from harnesscheck.agents.procgroup import guard
Path({str(scratch)!r}).mkdir()
g = guard()
g.remove_on_exit({str(scratch)!r})
p = subprocess.Popen({_spawner(marker, "time.sleep(60)")!r}, start_new_session=True)
g.watch_group(p.pid)
print("ready", flush=True)
time.sleep(60)
"""
    proc = subprocess.Popen([sys.executable, "-c", owner], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 15
        while len(processes_with_cmdline(marker)) < 2 and time.monotonic() < deadline:  # the agent and its child
            time.sleep(0.05)
        assert len(processes_with_cmdline(marker)) == 2 and scratch.is_dir()
        os.kill(proc.pid, signal.SIGKILL)  # no finally, no atexit: only the guard can clean up
        proc.wait()
        assert _gone(marker) == []
        deadline = time.monotonic() + 15
        while scratch.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not scratch.exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_relative_folders_are_made_absolute_once(tmp_path: Path, toy,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    repo, task = toy
    (tmp_path / "repos").symlink_to(repo.parent, target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    show = "import json, os; print(json.dumps({'home': os.environ['CODEX_HOME'], 'cwd': os.getcwd()}))"
    (run,) = run_profiles([task], [Profile("p", "m")], run_dir="run", repos=Path("repos"), work_root="work",
                          command=[sys.executable, "-S", "-c", show])
    assert run.error is None and run.returncode == 0, run
    seen = json.loads((Path(run.folder) / "agent-stdout.jsonl").read_text())
    assert os.path.isabs(seen["home"]) and os.path.isabs(seen["cwd"]) and os.path.isabs(run.folder)
    assert seen["cwd"].startswith(str(tmp_path / "work"))


def test_swebench_run_whose_every_run_failed_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                     server_factory: Callable[..., str]) -> None:
    url = server_factory("--model-id", "m") + "/v1"  # a usable endpoint: the runs fail on the kit's side
    broken = tmp_path / "repos" / "harnesscheck__toycalc"
    (broken / ".git").mkdir(parents=True)  # a git folder that is no repository: every clone fails
    rc = main(["swebench", "run", "--toy", "--ids", "harnesscheck__toycalc-1",
               "--run-dir", str(tmp_path / "run"), "--repos", str(tmp_path / "repos"),
               "--profile", f"a=m@{url}", "--profile", f"b=m@{url}"])
    captured = capsys.readouterr()
    assert rc == 1, captured
    last = [line for line in captured.err.splitlines() if line.strip()][-1]
    assert "every run failed before its agent could run (2 runs)" in last and "git clone" in last
    assert "tool calls" not in captured.out  # no comparison table
