"""Run the SWE-bench driver's (task, profile) runs as Ray tasks, on one machine or a cluster.

``run_profiles_on_ray`` is ``harnesscheck.agents.driver.run_profiles`` spread over a Ray cluster (Ray is an
optional extra: ``pip install 'harnesscheck[ray]'``):

- one Ray task per (task, profile), asking for ``RayOptions.num_cpus`` CPUs and ``memory_mb`` of
  memory; each calls ``run_task`` (agent time limit ``timeout_s``) into a scratch folder on its
  worker and returns the TaskRun and the files it wrote (rollouts, agent output, ``model.patch``);
  the driver writes them to ``RUN/PROFILE/TASK/`` with ``task.json``, so workers need no shared disk
  (with one, nothing changes);
- the single-machine order is kept: runs are handed out in the interleaved order (A,B / B,A ...),
  no more at once than the cluster has room for, so each task's profiles run close in time;
- resumable: a (task, profile) whose ``task.json`` is there without an ``error`` (from an earlier run,
  by either driver) is not run again;
- a Ray task that outlives ``task_timeout_s`` is cancelled with force (its worker killed); the
  worker's guard process (``agents.procgroup``) then ends the agent's process group, which runs in
  its own session, and removes the scratch folders, so no agent process outlives its run;
- a run whose Ray task fails (raises, its worker or node dies, or it outlives ``task_timeout_s``
  and is cancelled) is tried again up to ``retries`` times, then recorded as failed: its
  ``task.json`` says ``"failed": true`` with the errors of every attempt (``harnesscheck.agents.rollouts`` leaves
  such a folder out, so ``compare`` lists the task as unpaired instead of counting zero calls). An
  agent that exits non-zero or times out is a result, as on one machine, and is not retried;
- progress (rich, when a console is given): done / running / failed per profile.

The task file is checked (``harnesscheck.agents.driver.validate_run``) before Ray is even asked for anything.
Every machine needs the kit, the agent client, git and the local repositories at the path given as
``repos`` (see docs/scale-out.md).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import tempfile
import time
from collections import Counter, deque
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any

from harnesscheck.agents.driver import (
    Batch,
    Profile,
    TaskRun,
    find_repo,
    run_profiles,
    run_task,
    task_folder,
    write_task_json,
)
from harnesscheck.agents.procgroup import guard
from harnesscheck.agents.swebench import SweTask, TaskFileError
from harnesscheck.replay.cluster import ray_session

__all__ = [
    "RayOptions",
    "is_complete",
    "is_failed",
    "run_profiles_on_ray",
]

#: how the error of a run recorded as failed starts (``is_failed``)
FAILED_PREFIX = "failed after"


@dataclass(frozen=True, slots=True, kw_only=True)
class RayOptions:
    """How runs are placed on the cluster.

    num_cpus / memory_mb: what each (task, profile) run asks Ray for (an agent session with its
    tests: one core, a few hundred MB to 2 GB). task_timeout_s: wall limit of a Ray task, after
    which it is cancelled (its worker killed) and counts as failed; None: the agent's time limit
    (twice that with a test command) plus 300 s for cloning and collecting. retries: further
    attempts after a failed one. max_in_flight: runs handed out at once (None: as many as the
    cluster's CPUs and memory hold, asked again as runs finish, so an autoscaled cluster fills).
    """

    address: str | None = None
    num_cpus: float = 1.0
    memory_mb: int = 2048
    task_timeout_s: float | None = None
    retries: int = 1
    max_in_flight: int | None = None


@dataclass(slots=True)
class _Job:
    """One (task, profile) run and its attempts so far."""

    order: int
    task: SweTask
    profile: Profile
    errors: list[str] = field(default_factory=list)
    started: float = 0.0
    cancelled: bool = False


def _attempt(
    task: SweTask, profile: Profile, repos: Any, order: int, settings: dict[str, Any]
) -> dict[str, Any]:
    """On a worker: ``run_task`` into a scratch run folder; the TaskRun and the files it wrote. The
    worker's guard (``agents.procgroup``) removes the scratch folder and ends the agent's process
    group should the worker be killed (``ray.cancel(force=True)`` on a time-out)."""
    root = settings.get("work_root")
    if root:
        Path(root).mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="hc-ray-run-", dir=root or None))
    watcher = guard()
    watcher.remove_on_exit(scratch)
    try:
        run = run_task(task, profile, run_dir=scratch, repo=find_repo(repos, task), order=order, **settings)
        folder = Path(run.folder)
        files = {
            p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*"))
            if p.is_file() and not p.is_symlink() and p.name != "task.json"
        }
        return {"run": run, "files": files, "node": socket.gethostname(), "pid": os.getpid()}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        watcher.forget_folder(scratch)


def is_complete(folder: Path) -> TaskRun | None:
    """The TaskRun of a finished run folder (``task.json`` without ``error`` or ``failed``), else None."""
    try:
        meta = json.loads((folder / "task.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict) or meta.get("error") or meta.get("failed"):
        return None
    try:
        values = {f.name: meta[f.name] for f in fields(TaskRun) if f.name in meta}
        values["rollout_files"] = tuple(values.get("rollout_files") or ())
        return TaskRun(**values)
    except TypeError:
        return None


def is_failed(run: TaskRun) -> bool:
    """Whether ``run`` is a run recorded as failed after every attempt (no result)."""
    return run.error is not None and run.error.startswith(FAILED_PREFIX)


def _store(out: Mapping[str, Any], job: _Job, run_dir: Path) -> TaskRun:
    """Write what a worker returned to ``RUN/PROFILE/TASK/`` (every path proven inside it)."""
    dest = task_folder(run_dir, job.profile.name, job.task.instance_id)
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for rel, data in out["files"].items():
        path = (dest / rel).resolve()
        if not path.is_relative_to(dest) or path == dest:
            raise TaskFileError(f"a worker returned {rel!r}, outside {dest}")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    run = replace(out["run"], folder=str(dest), order=job.order)
    attempts = len(job.errors) + 1
    write_task_json(run, job.task, job.profile, {"attempts": attempts, "node": out["node"]})
    return run


def _store_failed(job: _Job, run_dir: Path) -> TaskRun:
    """Record a run whose every attempt failed: ``task.json`` with ``failed`` and the errors."""
    dest = task_folder(run_dir, job.profile.name, job.task.instance_id)
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    run = TaskRun(
        task_id=job.task.instance_id,
        profile=job.profile.name,
        model=job.profile.model,
        order=job.order,
        returncode=None,
        timed_out=False,
        duration_s=0.0,
        folder=str(dest),
        error=f"{FAILED_PREFIX} {len(job.errors)} attempts: {job.errors[-1]}",
    )
    extra = {"failed": True, "attempts": len(job.errors), "errors": job.errors}
    write_task_json(run, job.task, job.profile, extra)
    return run


class _Progress:
    """Done / running / failed per profile, as rich progress bars on ``console`` (None: silent)."""

    def __init__(self, console: Any, profiles: Sequence[Profile], totals: Mapping[str, int]) -> None:
        self.counts = {p.name: {"done": 0, "running": 0, "failed": 0, "retried": 0} for p in profiles}
        self.bar = None
        if console is not None:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self.bar = Progress(
                TextColumn("[bold]{task.fields[profile]}[/bold] {task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=console,
            )
            self.rows = {n: self.bar.add_task("", total=totals[n], profile=n) for n in self.counts}
            self.bar.start()

    def add(self, profile: str, **delta: int) -> None:
        c = self.counts[profile]
        for key, value in delta.items():
            c[key] += value
        if self.bar is not None:
            text = f"done {c['done']}  running {c['running']}  failed {c['failed']}"
            if c["retried"]:
                text += f"  retried {c['retried']}"
            self.bar.update(self.rows[profile], completed=c["done"] + c["failed"], description=text)

    def stop(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def _capacity(ray: ModuleType, options: RayOptions) -> int:
    if options.max_in_flight is not None:
        return max(1, options.max_in_flight)
    res = ray.cluster_resources()
    room = res.get("CPU", 1.0) / max(options.num_cpus, 1e-3)
    if options.memory_mb:
        room = min(room, res.get("memory", float("inf")) / (options.memory_mb * 2**20))
    return max(1, int(room))


def run_profiles_on_ray(
    tasks: Sequence[SweTask],
    profiles: Sequence[Profile],
    *,
    ray_options: RayOptions | None = None,
    console: Any = None,
    **run_args: Any,
) -> list[TaskRun]:
    """``run_profiles(tasks, profiles, **run_args)`` as Ray tasks (see the module docstring): the same
    checks, runs and order. ``repos`` (and ``work_root``) are read on the workers. Returns every run
    in the interleaved order, resumed ones included; ``run_dir/runs.jsonl`` lists them, resumed first,
    then in the order they finished."""
    runner = partial(_run_on_ray, options=ray_options or RayOptions(), console=console)
    return run_profiles(tasks, profiles, runner=runner, **run_args)


def _run_on_ray(batch: Batch, *, options: RayOptions, console: Any) -> list[TaskRun]:
    """The BatchRunner of ``run_profiles_on_ray``."""
    run_root = batch.run_root.resolve()
    jobs = [_Job(order, task, profile) for order, task, profile in batch.jobs]
    done: dict[int, TaskRun] = {}
    for job in jobs:
        previous = is_complete(task_folder(run_root, job.profile.name, job.task.instance_id))
        if previous is not None:
            done[job.order] = replace(previous, order=job.order)
    totals = Counter(job.profile.name for job in jobs)  # 0 for a profile with no task
    settings = batch.settings
    agent_limit = settings["timeout_s"] * (2 if settings["test_command"] is not None else 1)
    limit = options.task_timeout_s or agent_limit + 300.0
    run_root.mkdir(parents=True, exist_ok=True)
    with ray_session(options.address) as ray, open(run_root / "runs.jsonl", "w", encoding="utf-8") as log:
        remote = ray.remote(_attempt).options(
            num_cpus=options.num_cpus, memory=options.memory_mb * 2**20 or None, max_retries=0
        )
        progress = _Progress(console, batch.profiles, totals)
        for run in done.values():
            log.write(json.dumps(asdict(run)) + "\n")
            progress.add(run.profile, done=1)
        queue = deque(job for job in jobs if job.order not in done)
        running: dict[Any, _Job] = {}

        def finish(job: _Job, run: TaskRun, failed: bool) -> None:
            done[job.order] = run
            log.write(json.dumps(asdict(run)) + "\n")
            log.flush()
            progress.add(job.profile.name, running=-1, **{"failed" if failed else "done": 1})
            if batch.on_result is not None:
                batch.on_result(run)

        try:
            while queue or running:
                room = _capacity(ray, options)
                while queue and len(running) < room:
                    job = queue.popleft()
                    ref = remote.remote(job.task, job.profile, batch.repos, job.order, dict(settings))
                    job.started, job.cancelled = time.monotonic(), False
                    running[ref] = job
                    progress.add(job.profile.name, running=1)
                ready, _ = ray.wait(list(running), num_returns=1, timeout=1.0)
                for ref in ready:
                    job = running.pop(ref)
                    try:
                        out = ray.get(ref)
                    except ray.exceptions.RayError as exc:
                        why = f"timed out after {limit:.0f} s" if job.cancelled else _short(exc)
                        job.errors.append(why)
                        if len(job.errors) <= options.retries:
                            queue.appendleft(job)
                            progress.add(job.profile.name, running=-1, retried=1)
                        else:
                            finish(job, _store_failed(job, run_root), failed=True)
                        continue
                    finish(job, _store(out, job, run_root), failed=False)
                now = time.monotonic()
                for ref, job in running.items():
                    if not job.cancelled and now - job.started > limit:
                        ray.cancel(ref, force=True)
                        job.cancelled = True
        except BaseException:
            for ref in running:
                ray.cancel(ref, force=True)
            raise
        finally:
            progress.stop()
    return [done[job.order] for job in jobs]


def _short(exc: BaseException) -> str:
    """The first line of a Ray error (its type and what happened, not the remote traceback)."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]
