"""SWE-bench task loading and selection, and the two-profile driver on the toy task set."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from harnesscheck.agents.counts import compare_sources
from harnesscheck.agents.driver import (
    TOY_AGENT_COMMAND,
    Profile,
    build_command,
    codex_config_toml,
    interleaved_order,
    run_task,
)
from harnesscheck.agents.rollouts import load_run_dir
from harnesscheck.agents.swebench import (
    COLUMNS,
    TOY_TASKS,
    VERIFIED_FIXTURE,
    SweTask,
    build_toy_repo,
    load_tasks,
    select_tasks,
    write_tasks_jsonl,
)
from harnesscheck.stats.compare import write_outputs

from tests.agents.toy_run import ALIAS, SERVER_ARGS, SMALL, run_toy

HAVE_DATASETS = importlib.util.find_spec("datasets") is not None


def test_fixture_has_the_dataset_columns() -> None:
    for line in VERIFIED_FIXTURE.read_text().splitlines() + TOY_TASKS.read_text().splitlines():
        row = json.loads(line)
        assert tuple(row) == COLUMNS
        assert isinstance(row["FAIL_TO_PASS"], str) and isinstance(json.loads(row["FAIL_TO_PASS"]), list)


def test_load_direct() -> None:
    ts = load_tasks(VERIFIED_FIXTURE, use_datasets=False)
    assert len(ts) == 8 and ts.loader.startswith("direct")
    t = ts.by_id()["django__django-99901"]
    assert t.repo == "django/django" and t.fail_to_pass and isinstance(t.fail_to_pass, tuple)
    assert SweTask.from_row(t.to_row()) == t


@pytest.mark.skipif(not HAVE_DATASETS, reason="the datasets library is not installed")
def test_load_with_datasets_matches_direct(tmp_path: Path) -> None:
    via = load_tasks(VERIFIED_FIXTURE, use_datasets=True, cache_dir=tmp_path / "hf")
    assert via.loader.startswith("datasets")
    assert via.tasks == load_tasks(VERIFIED_FIXTURE, use_datasets=False).tasks
    # parquet too
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist([t.to_row() for t in via]), tmp_path / "v.parquet")
    assert load_tasks(tmp_path / "v.parquet", cache_dir=tmp_path / "hf").tasks == via.tasks


@pytest.mark.skipif(not HAVE_DATASETS, reason="the datasets library is not installed")
def test_dataset_name_never_downloads(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="local Hugging Face cache"):
        load_tasks("harnesscheck-no-such/dataset-xyz", cache_dir=tmp_path / "hf")


def test_datasets_missing_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "datasets", None)  # import datasets -> ImportError
    ts = load_tasks(VERIFIED_FIXTURE)
    assert ts.loader == "direct (datasets not installed)"
    assert "not installed" in ts.notes[0]
    with pytest.raises(RuntimeError):
        load_tasks("princeton-nlp/SWE-bench_Verified")


def test_select_by_ids_and_stratified_sample(tmp_path: Path) -> None:
    tasks = load_tasks(VERIFIED_FIXTURE, use_datasets=False).tasks
    picked = select_tasks(tasks, instance_ids=["sympy__sympy-99915", "django__django-99901"])
    assert [t.instance_id for t in picked] == ["sympy__sympy-99915", "django__django-99901"]
    with pytest.raises(KeyError, match="nope"):
        select_tasks(tasks, instance_ids=["nope"])
    s1 = select_tasks(tasks, sample=4, seed=1)
    assert s1 == select_tasks(tasks, sample=4, seed=1)
    # 8 tasks: django 4, sympy 2, astropy 1, pytest 1 -> 2, 1, and one of the singletons
    repos = [t.repo for t in s1]
    assert repos.count("django/django") == 2 and repos.count("sympy/sympy") == 1
    assert {t.instance_id for s in range(6) for t in select_tasks(tasks, sample=4, seed=s)} != {
        t.instance_id for t in s1
    }
    assert len(select_tasks(tasks, sample=8)) == 8
    with pytest.raises(ValueError):
        select_tasks(tasks, sample=9)
    out = write_tasks_jsonl(s1, tmp_path / "subset.jsonl")
    assert load_tasks(out, use_datasets=False).tasks == tuple(s1)


def test_text_utf8_cannot_hold_is_written_as_its_escape(tmp_path: Path) -> None:
    # a task file's "\\ud800" (JSON allows it, UTF-8 does not) made `swebench select` end in an internal error
    task, other = load_tasks(VERIFIED_FIXTURE, use_datasets=False).tasks[:2]
    odd = SweTask(**{**{f: getattr(other, f) for f in other.__slots__}, "hints_text": "a \ud800 b"})
    out = write_tasks_jsonl([odd, task], tmp_path / "subset.jsonl")
    assert out.read_bytes().count(b"\\ud800") == 1
    assert load_tasks(out, use_datasets=False).tasks == (odd, task)


def test_toy_repo_commit_matches_tasks(tmp_path: Path) -> None:
    _, commit = build_toy_repo(tmp_path / "toycalc")
    assert {t.base_commit for t in load_tasks(TOY_TASKS, use_datasets=False)} == {commit}


def test_build_command() -> None:
    argv = build_command(
        "codex exec -m {model} {problem_statement}", {"model": "gpt-5.5", "problem_statement": "fix it {now}"}
    )
    assert argv == ["codex", "exec", "-m", "gpt-5.5", "fix it {now}"]
    assert build_command(["t", "{fail_to_pass}", "x"], {}, {"fail_to_pass": ["a", "b"]}) == [
        "t",
        "a",
        "b",
        "x",
    ]
    with pytest.raises(ValueError):
        build_command("run {unknown}", {})


def test_codex_config_for_endpoint() -> None:
    toml = codex_config_toml(Profile("alias", "openai/openai/gpt-5.5", endpoint="http://127.0.0.1:8000/v1"))
    assert 'model = "openai/openai/gpt-5.5"' in toml
    assert 'base_url = "http://127.0.0.1:8000/v1"' in toml
    assert "supports_websockets = false" in toml and 'wire_api = "responses"' in toml
    assert codex_config_toml(Profile("x", "m")) == ""


def test_interleaving() -> None:
    a, b = Profile("a", "m"), Profile("b", "m")
    assert [[p.name for p in interleaved_order([a, b], i)] for i in range(4)] == [
        ["a", "b"],
        ["b", "a"],
        ["a", "b"],
        ["b", "a"],
    ]


def test_environment_and_timeout(tmp_path: Path) -> None:
    repo, _ = build_toy_repo(tmp_path / "toycalc")
    task = load_tasks(TOY_TASKS, use_datasets=False).tasks[0]
    names = [
        "CODEX_HOME",
        "HARNESSCHECK_TASK_ID",
        "OPENAI_BASE_URL",
        "ANTHROPIC_BASE_URL",
        "HARNESSCHECK_MODEL",
        "X",
    ]
    show = f"import json, os; print(json.dumps({{k: os.environ.get(k) for k in {names!r}}}))"
    prof = Profile("p", "gpt-5.5", endpoint="http://127.0.0.1:9/v1", env={"X": "1"})
    res = run_task(
        task, prof, run_dir=tmp_path / "run", repo=repo, command=[sys.executable, "-S", "-c", show]
    )
    assert res.returncode == 0 and not res.timed_out and res.error is None
    env = json.loads((Path(res.folder) / "agent-stdout.jsonl").read_text())
    assert env["HARNESSCHECK_TASK_ID"] == task.instance_id and env["X"] == "1"
    assert (
        env["OPENAI_BASE_URL"] == "http://127.0.0.1:9/v1"
        and env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:9"
    )
    assert env["CODEX_HOME"].endswith("codex_home")
    slow = run_task(
        task,
        prof,
        run_dir=tmp_path / "run",
        repo=repo,
        timeout_s=0.5,
        command=[sys.executable, "-S", "-c", "import time; time.sleep(30)"],
    )
    assert slow.timed_out and slow.duration_s < 10
    missing = run_task(task, prof, run_dir=tmp_path / "run", repo=repo, command=["/nonexistent/agent"])
    assert missing.returncode is None and "could not start" in (missing.error or "")
    assert json.loads((Path(missing.folder) / "task.json").read_text())["error"]


def test_toy_run_two_profiles_end_to_end(tmp_path: Path, server_factory: Callable[..., str]) -> None:
    """The toy SWE-style run: a real agent loop (agents.toy_agent) against a reference server process,
    two profiles (two served model ids) interleaved, rollouts for both, and the comparison table."""
    endpoint = server_factory(*SERVER_ARGS) + "/v1"
    runs = run_toy(tmp_path, endpoint, TOY_AGENT_COMMAND, timeout_s=60)
    assert [(r.task_id[-1], r.profile) for r in runs] == [
        ("1", "small"),
        ("1", "alias"),
        ("2", "alias"),
        ("2", "small"),
        ("3", "small"),
        ("3", "alias"),
    ]
    stderr = [(Path(r.folder) / "agent-stderr.txt").read_text()[-500:] for r in runs]
    assert all(r.returncode == 0 and r.error is None and not r.timed_out for r in runs), (runs, stderr)
    assert all(r.resolved and len(r.rollout_files) == 1 for r in runs), runs  # the fix made the tests pass
    assert len((tmp_path / "run" / "runs.jsonl").read_text().splitlines()) == 6
    patch = (tmp_path / "run" / "small" / "harnesscheck__toycalc-1" / "model.patch").read_text()
    assert "-    return a - b" in patch and "+    return a + b" in patch

    for name, model in (("small", SMALL), ("alias", ALIAS)):
        usage = {u.task_id: u for u in load_run_dir(tmp_path / "run" / name)}
        assert sorted(usage) == sorted({r.task_id for r in runs})
        for task_id, u in usage.items():
            assert u.format == "codex-rollout" and u.model == model  # rollout preferred over stdout
            # the scripted model's calls, made by the agent: look (grep), patch (apply_patch), run the tests
            assert u.tool_calls == 3 and u.by_tool == {"exec_command": 3}, (task_id, u)
            assert u.input_tokens and u.output_tokens and u.cached_input_tokens  # usage from the server
        task_dir = tmp_path / "run" / name / "harnesscheck__toycalc-2"
        (rollout,) = (task_dir / "sessions").rglob("rollout-*.jsonl")
        lines = [json.loads(x) for x in rollout.read_text().splitlines()]
        calls = [x["payload"] for x in lines if x["type"] == "response_item"]
        outputs = [c["output"] for c in calls if c["type"] == "function_call_output"]
        assert "Success. Updated the following files:\nM calc.py" in outputs[1]
        assert outputs[2].startswith("Wall time") and outputs[2].endswith("\nOK\n")  # the tests ran, and pass
        assert lines[-1]["payload"]["last_agent_message"].startswith("Fixed `mul`")
        events = [json.loads(x) for x in (task_dir / "agent-stdout.jsonl").read_text().splitlines()]
        assert [e["type"] for e in events][:2] == ["thread.started", "turn.started"]
        assert events[-1]["type"] == "turn.completed" and events[-1]["usage"]["input_tokens"] > 0

    comp = compare_sources(tmp_path / "run" / "small", tmp_path / "run" / "alias")
    assert comp.n_tasks == 3
    assert (comp.total_a, comp.total_b) == (9, 9)  # one scripted model behind both ids: an A/A run
    assert (comp.wlt.wins, comp.wlt.losses, comp.wlt.ties) == (0, 0, 3)
    assert comp.permutation.p_value == pytest.approx(1.0)
    paths = write_outputs(comp, tmp_path / "out")
    table = paths["markdown"].read_text()
    assert "| small | 9 | 3.0 |" in table and "| alias | 9 | 3.0 |" in table, table


def test_cli_select_and_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "subset.jsonl"
    select = ["select", "--tasks", str(VERIFIED_FIXTURE), "--no-datasets"]
    assert _cli([*select, "--sample", "3", "--seed", "2", "--out", str(out)]) == 0
    assert len(load_tasks(out, use_datasets=False)) == 3
    assert _cli([*select, "--ids", "nope", "--out", str(out)]) == 2
    run = ["run", "--tasks", str(VERIFIED_FIXTURE), "--no-datasets", "--run-dir", str(tmp_path / "r")]
    assert _cli([*run, "--repos", str(tmp_path), "--profile", "bad"]) == 2
    assert _cli([*run, "--profile", "a=m"]) == 2
    assert "error" in capsys.readouterr().err


def _cli(argv: list[str]) -> int:
    import argparse

    from harnesscheck.cli.commands import swebench as cmd

    parser = argparse.ArgumentParser()
    cmd.add_arguments(parser)
    return cmd.run(parser.parse_args(argv))


def _answers(endpoint: str) -> bool:
    import httpx

    try:
        return httpx.get(endpoint.removesuffix("/v1") + "/health", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def test_cli_toy_run_against_the_embedded_server(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`swebench run --toy` without endpoints: the embedded reference server serves the default
    profiles' model ids, agents.toy_agent fixes the task under both, the comparison is printed and
    written, and the server is gone afterwards."""
    run_dir = tmp_path / "run"
    assert _cli(["run", "--toy", "--ids", "harnesscheck__toycalc-1", "--run-dir", str(run_dir)]) == 0
    captured = capsys.readouterr()
    runs = [json.loads(x) for x in (run_dir / "runs.jsonl").read_text().splitlines()]
    assert [(r["profile"], r["model"]) for r in runs] == [("small", SMALL), ("alias", ALIAS)], captured.err
    assert all(r["returncode"] == 0 and r["resolved"] and len(r["rollout_files"]) == 1 for r in runs), runs
    metas = [json.loads((Path(r["folder"]) / "task.json").read_text()) for r in runs]
    endpoint = metas[0]["endpoint"]
    assert endpoint.startswith("http://127.0.0.1:") and endpoint.endswith("/v1")
    assert metas[1]["endpoint"] == endpoint
    assert f"reference server at {endpoint}" in captured.err
    usage = {p: load_run_dir(run_dir / p) for p in ("small", "alias")}
    assert all(u.by_tool == {"exec_command": 3} for us in usage.values() for u in us), usage
    assert "Paired tasks: 1" in captured.out
    assert "| small | 3 | 3.0 |" in (run_dir / "comparison" / "comparison.md").read_text()
    assert not _answers(endpoint)  # stopped


def test_cli_toy_server_only_for_profiles_without_endpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    server_factory: Callable[..., str],
) -> None:
    """A profile with its own endpoint is used as given; the embedded server serves the others and
    is stopped on Ctrl-C; with every endpoint given no server starts. The own endpoint is a real
    server serving both ids (swebench run preflights every endpoint it is given)."""
    from harnesscheck.agents import driver
    from harnesscheck.reference_server import launch

    seen: list[list[Profile]] = []

    def interrupted(tasks, profiles, **kw):
        seen.append(list(profiles))
        assert _answers(profiles[1].endpoint)  # the embedded server runs meanwhile
        raise KeyboardInterrupt

    monkeypatch.setattr(driver, "run_profiles", interrupted)
    own = server_factory("--model-id", "m", "--model-id", "m2") + "/v1"
    argv = ["run", "--toy", "--run-dir", str(tmp_path / "run"), "--profile", f"b=m@{own}"]
    assert _cli([*argv, "--profile", "a=harnesscheck/other"]) == 130
    (b, a), = seen
    assert (b.endpoint, a.model) == (own, "harnesscheck/other") and a.endpoint != own
    assert "serving harnesscheck/other\n" in capsys.readouterr().err
    assert not _answers(a.endpoint)  # stopped on the way out

    def no_server(*a, **kw):
        raise AssertionError("no embedded server when every profile has an endpoint")

    monkeypatch.setattr(launch, "ServerProcess", no_server)
    monkeypatch.setattr(driver, "run_profiles", lambda tasks, profiles, **kw: seen.append(list(profiles)))
    assert _cli([*argv, "--profile", f"c=m2@{own}"]) == 1  # nothing ran: no comparison
    assert [p.endpoint for p in seen[-1]] == [own, own]


def test_runs_that_never_started_are_left_out_of_the_comparison(tmp_path: Path) -> None:
    """Issue 43: a task whose working copy could not be made (its base_commit is not in the repository)
    never starts its agent; it was paired as 0 vs 0 tool calls and the command exited 0. Now it is
    said, left out (unpaired), and the other task alone is compared; with no task left to pair, no
    comparison and exit 1 (a real `harnesscheck swebench run --toy` process)."""
    from tests.cli.helpers import harnesscheck

    rows = [json.loads(line) for line in TOY_TASKS.read_text().splitlines() if line.strip()]
    missing = "0123456789abcdef0123456789abcdef01234567"
    rows[1]["base_commit"] = missing
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(r) + "\n" for r in rows[:2]))
    ran = harnesscheck("swebench", "run", "--toy", "--tasks", str(tasks), "--run-dir", str(tmp_path / "run"),
                       cwd=tmp_path, timeout=600)
    assert ran.rc == 0, ran
    assert f"2 run(s) never started, left out of the comparison: {rows[1]['instance_id']}" in ran.err, ran.err
    assert "Paired tasks: 1" in ran.out, ran.out
    comparison = json.loads((tmp_path / "run" / "comparison" / "comparison.json").read_text())
    assert comparison["n_tasks"] == 1 and comparison["unpaired"] == {"a_only": [], "b_only": []}, comparison

    tasks.write_text(json.dumps(rows[1]) + "\n")  # only the task that cannot start
    ran = harnesscheck("swebench", "run", "--toy", "--tasks", str(tasks), "--run-dir", str(tmp_path / "run2"),
                       cwd=tmp_path, timeout=600)
    assert ran.rc == 1, ran
    assert "Paired tasks" not in ran.out
    assert "every run failed before its agent could run" in ran.err
