"""Task files come from outside: bad, duplicate and escaping ids are refused before anything runs.

The driver names a folder ``RUN/PROFILE/TASK`` after each task's id and removes it when it exists; the
traversal tests plant ``/``-absolute and ``..`` ids aimed at sentinel folders outside the run folder
and prove every sentinel survives and nothing was made, through the Python API and the CLI.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from harnesscheck.agents.driver import Profile, run_profiles, run_task, task_folder, validate_run
from harnesscheck.agents.swebench import INSTANCE_ID, TOY_TASKS, SweTask, TaskFileError, load_tasks, validate_tasks

TOY = load_tasks(TOY_TASKS, use_datasets=False).tasks
PROFILES = [Profile("a", "m"), Profile("b", "m")]


def _task(instance_id: str, repo: str = "harnesscheck/toycalc") -> SweTask:
    return SweTask(instance_id=instance_id, repo=repo, base_commit=TOY[0].base_commit, problem_statement="x")


def _sentinels(tmp_path: Path) -> dict[Path, str]:
    """Folders with a file each, outside the run folder, that a bad id aims at."""
    made = {}
    for name in ("victim", "outside__x-1", "a"):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "keep.txt").write_text(f"sentinel {name}")
        made[folder / "keep.txt"] = f"sentinel {name}"
    return made


def _planted(tmp_path: Path) -> list[str]:
    return [
        str(tmp_path / "victim"),  # absolute
        "/" + str(tmp_path / "victim").lstrip("/"),
        "../../victim",
        "../outside__x-1",
        "..",
        "x__y-1/../../../victim",
        "harnesscheck__toycalc-1/..",
        ".hidden__x-1",
        "a\\..\\..\\victim__x-1",
    ]


@pytest.mark.parametrize(
    "good", ["django__django-11099", "sphinx-doc__sphinx-10325", "scikit-learn__scikit-learn-10297",
             "pydata__xarray.v2-7", "harnesscheck__toycalc-1"]
)
def test_swebench_style_ids_pass(good: str) -> None:
    assert INSTANCE_ID.fullmatch(good)
    validate_tasks([_task(good)])


@pytest.mark.parametrize(
    "bad", ["", "django-11099", "django__django", "django__django-", "a__b-1\n", "a b__c-1", "a__b-1/",
            "/abs__olute-1", "a..b__c-1", "-a__b-1", "a__b-x1", "\x00__a-1"]
)
def test_ids_that_are_not_owner_repo_number_are_refused(bad: str) -> None:
    with pytest.raises(TaskFileError, match="not owner__repo-NUMBER"):
        validate_tasks([_task(bad)])


def test_duplicates_and_bad_repos_are_refused_in_one_message() -> None:
    with pytest.raises(TaskFileError) as info:
        validate_tasks([_task("a__b-1"), _task("a__b-1"), _task("c__d-2", repo="../../etc"), _task("../x")])
    text = str(info.value)
    assert "nothing was run" in text and "'a__b-1' appears twice" in text
    assert "repo '../../etc'" in text and "'../x' is not owner__repo-NUMBER" in text


def test_profile_names_and_symbolic_links_cannot_lead_outside(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    for name in ("..", "../x", "/abs", "", "comparison", "repos", ".a"):
        with pytest.raises(TaskFileError):
            task_folder(run, name, "a__b-1")
    (tmp_path / "elsewhere").mkdir()
    (run / "linked").symlink_to(tmp_path / "elsewhere")  # RUN/PROFILE is a link out of the run folder
    with pytest.raises(TaskFileError, match="symbolic link"):
        task_folder(run, "linked", "a__b-1")
    assert task_folder(run, "a", "a__b-1") == run.resolve() / "a" / "a__b-1"


def test_planted_ids_touch_nothing_outside_the_run_folder(tmp_path: Path) -> None:
    """Each planted id through run_profiles and run_task: refused, sentinels intact, nothing made
    (the agent command would record that it ran)."""
    sentinels = _sentinels(tmp_path)
    ran = tmp_path / "agent-ran"
    command = [sys.executable, "-S", "-c", f"open({str(ran)!r}, 'w').close()"]
    run_dir = tmp_path / "work" / "run"
    for bad in _planted(tmp_path):
        tasks = [TOY[0], _task(bad)]
        with pytest.raises(TaskFileError):
            run_profiles(tasks, PROFILES, run_dir=run_dir, repos=tmp_path, command=command)
        with pytest.raises(TaskFileError):
            run_task(_task(bad), PROFILES[0], run_dir=run_dir, repo=tmp_path, command=command)
        with pytest.raises(TaskFileError):
            validate_run(tasks, PROFILES, run_dir)
    with pytest.raises(TaskFileError, match="appears twice"):
        run_profiles([TOY[0], TOY[0]], PROFILES, run_dir=run_dir, repos=tmp_path, command=command)
    assert {p: p.read_text() for p in sentinels} == sentinels
    assert not ran.exists() and not run_dir.exists() and not (tmp_path / "work").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "outside__x-1", "victim"]


def test_cli_refuses_a_planted_task_file_with_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Through `harnesscheck swebench run`: exit 2, one line naming the bad ids, before the toy
    repository is built, a server started or an agent run."""
    from harnesscheck.cli.main import main

    sentinels = _sentinels(tmp_path)
    rows = [json.loads(line) for line in TOY_TASKS.read_text().splitlines()]
    rows[1]["instance_id"] = str(tmp_path / "victim")
    rows[2]["instance_id"] = "../../victim"
    bad = tmp_path / "tasks.jsonl"
    bad.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run_dir = tmp_path / "run"
    argv = ["swebench", "run", "--toy", "--tasks", str(bad), "--no-datasets", "--run-dir", str(run_dir)]
    assert main(argv) == 2
    err = [x for x in capsys.readouterr().err.splitlines() if not x.startswith("note:")]  # no datasets
    assert len(err) == 1 and err[0].startswith("harnesscheck swebench: task file rejected"), err
    assert "../../victim" in err[0] and str(tmp_path / "victim") in err[0]
    assert {p: p.read_text() for p in sentinels} == sentinels
    assert not run_dir.exists()  # not even the toy repository
    rows[1]["instance_id"] = rows[2]["instance_id"] = rows[0]["instance_id"]
    bad.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(argv) == 2 and "duplicate instance ids" in capsys.readouterr().err
    assert not run_dir.exists()
