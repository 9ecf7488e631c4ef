"""The scale-out on a local Ray (``num_cpus=2``, one instance for the module): the toy SWE-style
two-profile run through Ray gives the single-machine counts and verdict, resumes, survives a killed
worker and records a run that always dies as failed; a replay sharded over two actors gives the
single-process TTFT percentiles at the same total concurrency and reports in-flight counts per worker.

Skipped with the reason when ray does not import (``pip install -e '.[ray]'``). Timings are asserted
with generous bounds only: the CI machine has two loaded cores.
"""

from __future__ import annotations

import json
import signal
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

ray = pytest.importorskip("ray", reason="ray is not installed: pip install -e '.[ray]'")
# a local Ray cluster per module (~40 s here): the slow tier, which CI runs after the README's command
pytestmark = pytest.mark.slow

from harnesscheck.agents.counts import compare_sources  # noqa: E402
from harnesscheck.agents.distributed import RayOptions, is_failed, run_profiles_on_ray  # noqa: E402
from harnesscheck.agents.driver import TOY_AGENT_COMMAND, Profile  # noqa: E402
from harnesscheck.agents.rollouts import load_run_dir  # noqa: E402
from harnesscheck.agents.swebench import TOY_TASKS, build_toy_repo, load_tasks, select_tasks  # noqa: E402
from harnesscheck.replay.cluster import ray_session  # noqa: E402
from tests.agents.toy_run import ALIAS, SERVER_ARGS, SMALL, run_toy  # noqa: E402
from tests.cli.helpers import processes_with_cmdline  # noqa: E402

TOY_TESTS = [sys.executable, "-S", "-m", "unittest", "-q", "{fail_to_pass}", "{pass_to_pass}"]
SMALL_TASK = RayOptions(memory_mb=256)  # the toy agent needs little; leaves room on a 2-core CI machine


@pytest.fixture(scope="module")
def local_ray() -> Iterator[Any]:
    """One local Ray for the module, started as the CLI starts one (``ray_session``), which must
    put back the SIGTERM handler ``ray.init`` replaces and shut down what it started."""

    def ours(signum: int, frame: object) -> None:
        raise AssertionError("not called")

    previous = signal.signal(signal.SIGTERM, ours)
    try:
        with ray_session(num_cpus=2) as session:
            assert signal.getsignal(signal.SIGTERM) is ours
            assert session.cluster_resources()["CPU"] == 2
            signal.signal(signal.SIGTERM, previous)
            yield session
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert not ray.is_initialized()


def _on_ray(
    run_dir: Path, repos: Path, endpoint: str, command: Any, seen: list | None = None, **kw: Any
) -> list:
    if not repos.exists():
        build_toy_repo(repos / "harnesscheck__toycalc")
    tasks = select_tasks(load_tasks(TOY_TASKS, use_datasets=False), **kw)
    profiles = [Profile("small", SMALL, endpoint=endpoint), Profile("alias", ALIAS, endpoint=endpoint)]
    return run_profiles_on_ray(
        tasks, profiles, run_dir=run_dir, repos=repos, command=command, test_command=TOY_TESTS,
        timeout_s=60, ray_options=SMALL_TASK, on_result=None if seen is None else seen.append,
    )


def _tool_calls(run_dir: Path) -> dict[tuple[str, str], tuple[int, dict[str, int]]]:
    return {
        (p, u.task_id): (u.tool_calls, u.by_tool)
        for p in ("small", "alias")
        for u in load_run_dir(run_dir / p)
    }


def _verdict(run_dir: Path) -> tuple:
    c = compare_sources(run_dir / "small", run_dir / "alias")
    return (c.n_tasks, c.total_a, c.total_b, c.wlt.wins, c.wlt.losses, c.wlt.ties, c.permutation.p_value,
            c.only_a, c.only_b)


def _runs(run_dir: Path) -> list[tuple[str, str, int]]:
    rows = [json.loads(line) for line in (run_dir / "runs.jsonl").read_text().splitlines()]
    return sorted((r["task_id"], r["profile"], r["order"]) for r in rows)


def test_toy_run_on_ray_matches_one_machine_and_resumes(
    tmp_path: Path, server_factory: Callable[..., str], local_ray: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """`swebench run --toy --ray` (the module's Ray; the toy agent and tests, both profiles on one
    reference server) against the single-machine driver on the same tasks; then resumed."""
    from harnesscheck.cli.main import main

    endpoint = server_factory(*SERVER_ARGS) + "/v1"
    one = run_toy(tmp_path / "one", endpoint, TOY_AGENT_COMMAND, timeout_s=60)
    run_dir = tmp_path / "ray"
    profiles = ["--profile", f"small={SMALL}@{endpoint}", "--profile", f"alias={ALIAS}@{endpoint}"]
    argv = ["swebench", "run", "--toy", "--run-dir", str(run_dir), "--timeout", "60", "--task-memory", "0.25",
            *profiles, "--ray"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert "| small | 9 | 3.0 |" in (run_dir / "comparison" / "comparison.md").read_text()  # compare ran
    assert "done 3  running 0  failed 0" in captured.err, captured.err  # progress per profile
    # the interleaved order of the single-machine driver, every run done and resolved
    assert _runs(run_dir) == sorted((r.task_id, r.profile, r.order) for r in one)
    for task_id, profile, _ in _runs(run_dir):  # gathered to the driver: task.json and the files
        folder = run_dir / profile / task_id
        meta = json.loads((folder / "task.json").read_text())
        assert meta["folder"] == str(folder.resolve()) and meta["attempts"] == 1 and meta["resolved"], meta
        assert meta["returncode"] == 0 and (folder / meta["rollout_files"][0]).is_file()
    assert _tool_calls(run_dir) == _tool_calls(tmp_path / "one" / "run")
    assert list(_tool_calls(run_dir).values()) == [(3, {"exec_command": 3})] * 6
    assert _verdict(run_dir) == _verdict(tmp_path / "one" / "run") == (3, 9, 9, 0, 0, 3, 1.0, (), ())

    # resumable (the Python API): nothing complete runs again; a run without task.json does
    seen: list = []
    runs = _on_ray(run_dir, run_dir / "repos", endpoint, TOY_AGENT_COMMAND, seen)
    assert seen == [] and [(r.task_id, r.profile, r.order) for r in runs] == [
        (r.task_id, r.profile, r.order) for r in one
    ]
    (run_dir / "alias" / "harnesscheck__toycalc-2" / "task.json").unlink()
    rerun = _on_ray(run_dir, run_dir / "repos", endpoint, TOY_AGENT_COMMAND, seen)
    assert [(r.task_id, r.profile) for r in seen] == [("harnesscheck__toycalc-2", "alias")]
    assert rerun[2].resolved and [r.order for r in rerun] == list(range(6))
    assert len((run_dir / "runs.jsonl").read_text().splitlines()) == 6
    assert _verdict(run_dir) == _verdict(tmp_path / "one" / "run")


KILLER = """\
import os, signal, sys
from pathlib import Path
key = os.environ["HARNESSCHECK_TASK_ID"] + "." + os.environ["HARNESSCHECK_PROFILE"]
marks = Path({marks!r})
mark = marks / key
if key in {always!r} or (key in {once!r} and not mark.exists()):
    mark.write_text(mark.read_text() + "x" if mark.exists() else "x")
    os.kill(os.getppid(), signal.SIGKILL)  # the Ray worker that runs this agent dies mid-run
    os._exit(1)
os.execv(sys.executable, [sys.executable, "-m", "harnesscheck.agents.toy_agent", *sys.argv[1:]])
"""


def test_a_killed_worker_is_retried_and_one_that_always_dies_is_recorded_failed(
    tmp_path: Path, server_factory: Callable[..., str], local_ray: Any
) -> None:
    endpoint = server_factory(*SERVER_ARGS) + "/v1"
    marks = tmp_path / "marks"
    marks.mkdir()
    once, always = "harnesscheck__toycalc-1.small", "harnesscheck__toycalc-2.alias"
    script = tmp_path / "agent.py"
    script.write_text(KILLER.format(marks=str(marks), once=[once], always=[always]))
    command = [sys.executable, str(script), *TOY_AGENT_COMMAND[3:]]
    ids = ["harnesscheck__toycalc-1", "harnesscheck__toycalc-2"]
    runs = _on_ray(tmp_path / "run", tmp_path / "repos", endpoint, command, instance_ids=ids)
    assert (marks / once).read_text() == "x" and (marks / always).read_text() == "xx"  # killed 1 and 2 times
    by_key = {f"{r.task_id}.{r.profile}": r for r in runs}
    assert len(by_key) == 4
    run_dir = tmp_path / "run"
    meta = {k: json.loads((Path(r.folder) / "task.json").read_text()) for k, r in by_key.items()}
    assert meta[once]["attempts"] == 2 and by_key[once].resolved and not is_failed(by_key[once])
    assert is_failed(by_key[always]) and meta[always]["failed"] is True and meta[always]["attempts"] == 2
    assert len(meta[always]["errors"]) == 2
    assert all("Worker" in e or "died" in e for e in meta[always]["errors"]), meta[always]["errors"]
    others = set(by_key) - {once, always}
    assert all(meta[k]["attempts"] == 1 and by_key[k].resolved for k in others), meta
    # the failed run is no measurement: compare pairs the other task and lists this one as unpaired
    c = compare_sources(run_dir / "small", run_dir / "alias")
    assert c.n_tasks == 1 and c.only_a == ("harnesscheck__toycalc-2",) and c.only_b == ()
    runs_log = [json.loads(x) for x in (run_dir / "runs.jsonl").read_text().splitlines()]
    assert len(runs_log) == 4 and sum(1 for r in runs_log if r["error"]) == 1


def _replay_cli(trace: Path, argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    from harnesscheck.cli.main import main

    assert main(["replay", str(trace), "--time-scale", "0", "--no-progress", "--json", *argv]) == 0
    out = capsys.readouterr().out
    return json.loads(out[out.index("{"):])


def test_replay_on_two_actors_matches_one_process(
    tmp_path: Path, server_factory: Callable[..., str], local_ray: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """`replay --ray --workers 2` on the built-in agent-coding workload (prompts of ~1,000 tokens, so
    building and parsing requests costs little CPU), total concurrency 4, against one process at
    concurrency 4. The server models a TTFT of 100 ms without prefill cost (the prefix cache's order
    does not matter); on two loaded cores the overheads vary by 100 ms and more, so the bound is
    generous. The merged percentiles are checked exactly against numpy on the raw samples."""
    import numpy as np

    from harnesscheck.replay.trace import save
    from harnesscheck.replay.workloads import build

    trace = save(build("agent-coding", prompt_tokens=1000), tmp_path / "agent-coding.jsonl")
    timing = ("--ttft-base-ms", "100", "--prefill-us-per-token", "0", "--decode-ms", "1")
    url = server_factory(*timing, fast=False)
    one = _replay_cli(trace, ["--endpoint", url, "--concurrency", "4"], capsys)
    out = tmp_path / "ray-out"
    two = _replay_cli(trace, ["--endpoint", url, "--concurrency", "4", "--ray", "--workers", "2",
                              "--out", str(out)], capsys)
    assert one["turns"] == two["turns"] == 20 and one["turns_failed"] == two["turns_failed"] == 0
    turns = json.loads((out / "results.json").read_text())["turns"]
    samples = [t["ttft_ms"] for t in turns]
    assert len(samples) == two["ttft_ms"]["n"] == 20 and sorted({t["worker"] for t in turns}) == [0, 1]
    for q in (50, 90, 99):  # percentiles of the merged raw samples, not of per-worker figures
        assert two["ttft_ms"][f"p{q}"] == pytest.approx(float(np.percentile(samples, q)), abs=1e-3)
    for q in ("p50", "p90"):
        a, b = one["ttft_ms"][q], two["ttft_ms"][q]
        assert 100 <= a < 2000 and 100 <= b < 2000, (one["ttft_ms"], two["ttft_ms"])
        assert abs(a - b) <= max(150.0, 0.6 * max(a, b)), (q, one["ttft_ms"], two["ttft_ms"])
    workers = two["workers"]
    assert [w["worker"] for w in workers] == [0, 1] and two["offered_concurrency"] == 4
    assert [(w["sessions"], w["offered_concurrency"], w["turns"]) for w in workers] == [(2, 2, 10)] * 2
    assert all(1 <= w["max_in_flight"] <= 2 and 0 < w["mean_in_flight"] <= 2 for w in workers), workers
    assert two["max_in_flight"] == sum(w["max_in_flight"] for w in workers) <= 4
    assert 1 <= one["max_in_flight"] <= 4


def test_a_run_past_its_ray_time_limit_is_cancelled_retried_then_failed(
    tmp_path: Path, local_ray: Any
) -> None:
    """An agent that hangs (its own limit, 60 s, far away) and has started a child of its own: the Ray
    task is cancelled at task_timeout_s (its worker killed), tried once more, then recorded as failed
    with the reason; nothing is dropped. The agent runs in its own session, out of the worker's reach:
    the worker's guard process ends its whole group, so no agent process (nor its child) is left, and
    the scratch folders under work_root are gone."""
    repos = tmp_path / "repos"
    build_toy_repo(repos / "harnesscheck__toycalc")
    toy = load_tasks(TOY_TASKS, use_datasets=False)
    (task,) = select_tasks(toy, instance_ids=["harnesscheck__toycalc-1"])
    marker = f"hc-ray-hang-{uuid.uuid4().hex}"
    child = f"import time; time.sleep(30)  # {marker}-child"
    hang = [sys.executable, "-S", "-c",
            f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-S', '-c', {child!r}]); "
            f"time.sleep(30)  # {marker}"]
    scratch = tmp_path / "scratch"
    started = time.monotonic()
    (run,) = run_profiles_on_ray(
        [task], [Profile("a", SMALL)], run_dir=tmp_path / "run", repos=repos, command=hang, timeout_s=60,
        ray_options=RayOptions(memory_mb=256, task_timeout_s=2), work_root=scratch,
    )
    assert time.monotonic() - started < 40  # two attempts of about 2 s each, not 2 x 60 s
    meta = json.loads((tmp_path / "run" / "a" / task.instance_id / "task.json").read_text())
    assert is_failed(run) and meta["failed"] is True and meta["errors"] == ["timed out after 2 s"] * 2
    deadline = time.monotonic() + 20  # the guard acts when it sees its worker's pipe close
    while (processes_with_cmdline(marker) or any(scratch.iterdir())) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = processes_with_cmdline(marker)
    print(f"\nray time-out: agent processes left after two cancelled attempts: {len(left)}; "
          f"scratch folders left: {len(list(scratch.iterdir()))}")
    assert left == [], left
    assert list(scratch.iterdir()) == []
