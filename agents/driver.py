"""Run an agent on SWE-bench-style tasks under two (or more) profiles, interleaved, and keep its logs.

For each task, and for each profile in alternating order (A,B for the first task, B,A for the
second, ...; with k profiles the order rotates), the driver:

1. makes a working copy: ``git clone`` of the task's local repository, checked out detached at
   ``base_commit`` (a folder that is not a git repository is copied as it is);
2. makes a fresh ``CODEX_HOME`` for the run; with an endpoint it writes a ``config.toml`` there that
   points a custom model provider at it (``codex_config_toml``: the clients runner's writer,
   Responses API, no WebSocket, key from ``HARNESSCHECK_API_KEY``, no approvals or sandbox: the
   working copy is a throwaway clone);
3. runs the agent command (a template, default ``DEFAULT_COMMAND``: ``codex exec --json ... -m
   {model} {problem_statement}``; ``TOY_AGENT_COMMAND`` runs the kit's own small agent loop,
   ``harnesscheck.agents.toy_agent``, the same way) in the working copy with a time limit, stdin closed, stdout to
   ``agent-stdout.jsonl`` and stderr to ``agent-stderr.txt``, in its own process group, ended as a
   whole when the agent exits (what it left running), on time-out or KeyboardInterrupt, and by the
   guard process (``agents.procgroup``) if this process dies first (a Ray worker cancelled with
   force): no agent process outlives its run, and the scratch folder goes with it;
4. copies the rollout files the agent wrote (``CODEX_HOME/sessions/**/rollout-*.jsonl``) to
   ``RUN/PROFILE/TASK/sessions/...``; writes the working copy's diff against ``base_commit`` to
   ``model.patch``; optionally applies ``test_patch`` and runs a test command template, and
   records ``resolved``;
5. writes ``RUN/PROFILE/TASK/task.json`` (task id, profile, model, exit code, time-out, duration,
   order, rollout files, resolved).

Template fields: {model} {problem_statement} {instance_id} {task_id} {profile} {endpoint} {repo}
{base_commit} {workdir} {codex_home} {task_dir}; a token that is exactly {fail_to_pass} or
{pass_to_pass} expands into one argument per test id. A string template is split with shlex first,
then the placeholders of each token are replaced, so a problem statement stays one argument. Other
braces pass through (``{{``/``}}`` give a literal brace where it would read as a placeholder).

Safety: task files come from outside. ``run_profiles`` first calls ``validate_run``: the task ids
(``harnesscheck.agents.swebench.validate_tasks``: ``owner__repo-NUMBER``, no repeats), the profile names
(``PROFILE_NAME``, not ``comparison`` or ``repos``, which the CLI writes beside them) and, for every
(task, profile), that ``RUN/PROFILE/TASK`` with symbolic links resolved is exactly that folder
inside the run folder; anything else raises ``TaskFileError`` before a folder is made. ``run_task``
checks its own folder the same way before it removes or writes anything.

Paths: the run folder, the repositories and ``work_root`` are made absolute once
(``run_profiles``, ``absolute_repos``), so every folder handed to git, the agent (``CODEX_HOME``,
the working copy) or a Ray worker means the same whatever the working directory.

Environment given to the agent: CODEX_HOME, HARNESSCHECK_TASK_ID, HARNESSCHECK_PROFILE,
HARNESSCHECK_MODEL, and with an endpoint HARNESSCHECK_ENDPOINT, OPENAI_BASE_URL,
ANTHROPIC_BASE_URL (the endpoint without a trailing ``/v1``), ANTHROPIC_MODEL, plus the profile's
own ``env``.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from itertools import groupby
from pathlib import Path
from typing import Any

from harnesscheck.agents.clients.codex import config_toml
from harnesscheck.agents.procgroup import guard, kill_group
from harnesscheck.agents.swebench import INSTANCE_ID, SweTask, TaskFileError, validate_tasks

__all__ = [
    "DEFAULT_COMMAND",
    "PROFILE_NAME",
    "TOY_AGENT_COMMAND",
    "Profile",
    "TaskRun",
    "absolute_repos",
    "build_command",
    "codex_config_toml",
    "find_repo",
    "prepare_workdir",
    "run_task",
    "run_profiles",
    "run_in_order",
    "Batch",
    "BatchRunner",
    "interleaved_order",
    "task_folder",
    "validate_run",
    "write_task_json",
]

DEFAULT_COMMAND = (
    "codex exec --json --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox "
    "-m {model} {problem_statement}"
)
#: the kit's own small agent loop (``harnesscheck.agents.toy_agent``), called as Codex is: it sends the profile's
#: model id to the profile's endpoint (Responses API, streamed) and writes a Codex rollout
TOY_AGENT_COMMAND = (
    sys.executable,
    "-m",
    "harnesscheck.agents.toy_agent",
    "exec",
    "--json",
    "-m",
    "{model}",
    "{problem_statement}",
)

#: a profile name: one plain folder name (letters, digits, ``_``, ``-``, single dots; no leading dot)
PROFILE_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9_-]|\.(?!\.)){0,99}")
#: folders the CLI writes in the run folder beside the profiles' own
RESERVED_NAMES = ("comparison", "repos")


@dataclass(frozen=True, slots=True)
class Profile:
    """A side of the comparison: a folder name, the model id the agent sends, where it sends it.

    endpoint: base URL of the serving endpoint (e.g. ``http://127.0.0.1:8000/v1``) or None to leave
        the agent's own configuration alone. env: extra environment. config_toml: text appended to
        the generated Codex ``config.toml``. command: a command template for this profile only.
    """

    name: str
    model: str
    endpoint: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    config_toml: str = ""
    command: str | Sequence[str] | None = None


@dataclass(frozen=True, slots=True)
class TaskRun:
    """What ``task.json`` holds for one (task, profile) run."""

    task_id: str
    profile: str
    model: str
    order: int
    returncode: int | None
    timed_out: bool
    duration_s: float
    folder: str
    rollout_files: tuple[str, ...] = ()
    resolved: bool | None = None
    error: str | None = None


def _fields(
    task: SweTask, profile: Profile, workdir: Path, codex_home: Path, task_dir: Path
) -> dict[str, str]:
    return {
        "model": profile.model,
        "problem_statement": task.problem_statement,
        "instance_id": task.instance_id,
        "task_id": task.instance_id,
        "profile": profile.name,
        "endpoint": profile.endpoint or "",
        "repo": task.repo,
        "base_commit": task.base_commit,
        "workdir": str(workdir),
        "codex_home": str(codex_home),
        "task_dir": str(task_dir),
    }


_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{(\w+)\}")


def build_command(
    template: str | Sequence[str], fields: Mapping[str, str], lists: Mapping[str, Sequence[str]] | None = None
) -> list[str]:
    """Argument list from a template (see the module docstring). Only ``{name}`` placeholders are
    replaced; other braces (JSON, Python) pass through; an unknown ``{name}`` raises ValueError."""
    tokens = shlex.split(template) if isinstance(template, str) else list(template)
    lists = lists or {}
    out: list[str] = []

    def repl(m: re.Match[str]) -> str:
        text = m.group(0)
        if text in ("{{", "}}"):
            return text[0]
        name = m.group(1)
        if name not in fields:
            raise ValueError(f"unknown placeholder {text} in the command template")
        return fields[name]

    for tok in tokens:
        m = _PLACEHOLDER.fullmatch(tok)
        if m and m.group(1) in lists:
            out.extend(lists[m.group(1)])
            continue
        out.append(_PLACEHOLDER.sub(repl, tok))
    return out


def codex_config_toml(profile: Profile) -> str:
    """A Codex ``config.toml`` that sends ``profile.model`` to ``profile.endpoint`` (the kit's one writer,
    ``agents.clients.codex.config_toml``, key from ``HARNESSCHECK_API_KEY``, no WebSocket), then the
    profile's own ``config_toml`` text; "" when the profile has neither."""
    parts = []
    if profile.endpoint:
        parts.append(
            config_toml(profile.endpoint, profile.model, key_env="HARNESSCHECK_API_KEY", websockets=False)
        )
    if profile.config_toml:
        parts.append(profile.config_toml.strip() + "\n")
    return "\n".join(parts)


def find_repo(repos: Path | Mapping[str, str | Path] | Callable[[SweTask], Path], task: SweTask) -> Path:
    """The local repository of a task: a callable, a mapping repo -> path, or a folder holding
    ``owner__name``, ``name`` or ``owner/name``."""
    if callable(repos):
        return Path(repos(task))
    if isinstance(repos, Mapping):
        if task.repo not in repos:
            raise KeyError(f"no local repository given for {task.repo}")
        return Path(repos[task.repo])
    root = Path(repos)
    for cand in (root / task.repo.replace("/", "__"), root / task.repo.split("/")[-1], root / task.repo):
        if cand.is_dir():
            return cand
    raise FileNotFoundError(f"no local repository for {task.repo} under {root}")


def absolute_repos(
    repos: Path | Mapping[str, str | Path] | Callable[[SweTask], Path],
) -> Path | Mapping[str, str | Path] | Callable[[SweTask], Path]:
    """``repos`` with every path made absolute here, once (a clone runs in another folder, a Ray
    worker in another working directory); a callable is left as it is."""
    if callable(repos):
        return repos
    if isinstance(repos, Mapping):
        return {name: Path(path).resolve() for name, path in repos.items()}
    return Path(repos).resolve()


def task_folder(run_dir: str | Path, profile: str, instance_id: str) -> Path:
    """``RUN/PROFILE/TASK``, proven to lie inside the run folder: both names plain folder names and
    the path, with symbolic links resolved, exactly that folder. TaskFileError otherwise."""
    if not PROFILE_NAME.fullmatch(profile) or profile in RESERVED_NAMES:
        raise TaskFileError(f"profile name {profile!r} is not a plain folder name (or is reserved)")
    if not INSTANCE_ID.fullmatch(instance_id):
        raise TaskFileError(f"instance id {instance_id!r} is not owner__repo-NUMBER")
    root = Path(run_dir).resolve()
    folder = root / profile / instance_id
    if folder.resolve() != folder:
        raise TaskFileError(f"{folder} leads outside the run folder {root} (a symbolic link)")
    return folder


def validate_run(tasks: Sequence[SweTask], profiles: Sequence[Profile], run_dir: str | Path) -> None:
    """Everything ``run_profiles`` checks before it runs anything (see the module docstring)."""
    validate_tasks(tasks)
    names = [p.name for p in profiles]
    if len(set(names)) != len(names):
        raise TaskFileError(f"profile names must differ: {names}")
    for profile in profiles:
        for task in tasks:
            task_folder(run_dir, profile.name, task.instance_id)


def _run_git(args: Sequence[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=False)


def prepare_workdir(task: SweTask, source: Path, dest: Path) -> Path:
    """Clone ``source`` to ``dest`` and check out ``base_commit`` (detached); copy a non-git folder."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    if (source / ".git").exists():
        res = _run_git(["clone", "-q", "--no-hardlinks", str(source), str(dest)], dest.parent)
        if res.returncode != 0:
            raise RuntimeError(f"git clone {source} failed: {res.stderr.strip()}")
        res = _run_git(["checkout", "-q", "--detach", task.base_commit], dest)
        if res.returncode != 0:
            raise RuntimeError(f"checkout {task.base_commit} in {task.repo} failed: {res.stderr.strip()}")
    else:
        shutil.copytree(source, dest, symlinks=True)
    return dest


def _run_process(
    argv: list[str], cwd: Path, env: Mapping[str, str], timeout_s: float, stdout: Path, stderr: Path
) -> tuple[int | None, bool, float, str | None]:
    """Run ``argv`` in its own process group, watched by this process's guard (``agents.procgroup``):
    the group is ended as a whole when the leader exits (what it left running), on time-out, on
    Ctrl-C, and by the guard when this process dies (a Ray worker cancelled with force)."""
    start = time.monotonic()
    with open(stdout, "wb") as out, open(stderr, "wb") as err:
        try:
            proc = subprocess.Popen(
                argv,
                cwd=cwd,
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )
        except OSError as exc:
            return None, False, time.monotonic() - start, f"could not start {argv[0]!r}: {exc}"
        watcher = guard()
        watcher.watch_group(proc.pid)
        try:
            rc: int | None = proc.wait(timeout=timeout_s)
            timed_out = False
        except subprocess.TimeoutExpired:
            kill_group(proc)
            rc, timed_out = proc.returncode, True
        except BaseException:  # Ctrl-C: its own session does not get the SIGINT, so end it here
            kill_group(proc)
            watcher.forget_group(proc.pid)
            raise
        kill_group(proc)  # whatever the agent left running in its group
        watcher.forget_group(proc.pid)
    return rc, timed_out, time.monotonic() - start, None


def _collect_rollouts(codex_home: Path, task_dir: Path) -> tuple[str, ...]:
    found = []
    sessions = codex_home / "sessions"
    if sessions.is_dir():
        for src in sorted(sessions.rglob("rollout-*.jsonl")):
            dest = task_dir / "sessions" / src.relative_to(sessions)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest)
            found.append(str(dest.relative_to(task_dir)))
    return tuple(found)


def _write_patch(workdir: Path, task: SweTask, dest: Path) -> None:
    if not (workdir / ".git").exists():
        return
    _run_git(["add", "-A"], workdir)
    res = _run_git(["diff", "--cached", "--binary", task.base_commit], workdir)
    if res.returncode == 0:
        dest.write_text(res.stdout)


def run_task(
    task: SweTask,
    profile: Profile,
    *,
    run_dir: str | Path,
    repo: str | Path,
    command: str | Sequence[str] = DEFAULT_COMMAND,
    timeout_s: float = 1800.0,
    test_command: str | Sequence[str] | None = None,
    apply_test_patch: bool = True,
    work_root: str | Path | None = None,
    keep_workdir: bool = False,
    order: int = 0,
) -> TaskRun:
    """Run one task under one profile; logs go to ``run_dir/PROFILE/TASK/`` (see the module doc)."""
    task_dir = task_folder(run_dir, profile.name, task.instance_id)
    if task_dir.exists():
        shutil.rmtree(task_dir)
    task_dir.mkdir(parents=True)
    repo = Path(repo).resolve()  # the agent, git and the test command run elsewhere: no relative path
    root = Path(work_root).resolve() if work_root else None
    if root is not None:
        root.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="hc-swe-", dir=root))
    watcher = guard()
    watcher.remove_on_exit(scratch)  # should this process die before the finally below
    workdir = scratch / "repo"
    codex_home = scratch / "codex_home"
    codex_home.mkdir()
    rc: int | None = None
    timed_out = False
    duration = 0.0
    resolved: bool | None = None
    error: str | None = None
    rollouts: tuple[str, ...] = ()
    try:
        prepare_workdir(task, Path(repo), workdir)
        toml = codex_config_toml(profile)
        if toml:
            (codex_home / "config.toml").write_text(toml)
        fields = _fields(task, profile, workdir, codex_home, task_dir)
        lists = {"fail_to_pass": task.fail_to_pass, "pass_to_pass": task.pass_to_pass}
        argv = build_command(profile.command or command, fields, lists)
        env = {
            **os.environ,
            "CODEX_HOME": str(codex_home),
            "HARNESSCHECK_TASK_ID": task.instance_id,
            "HARNESSCHECK_PROFILE": profile.name,
            "HARNESSCHECK_MODEL": profile.model,
        }
        if profile.endpoint:
            env.update(
                HARNESSCHECK_ENDPOINT=profile.endpoint,
                OPENAI_BASE_URL=profile.endpoint,
                ANTHROPIC_BASE_URL=profile.endpoint.rstrip("/").removesuffix("/v1"),
                ANTHROPIC_MODEL=profile.model,
            )
            env.setdefault("HARNESSCHECK_API_KEY", "harnesscheck")
        env.update(profile.env)
        rc, timed_out, duration, error = _run_process(
            argv, workdir, env, timeout_s, task_dir / "agent-stdout.jsonl", task_dir / "agent-stderr.txt"
        )
        rollouts = _collect_rollouts(codex_home, task_dir)
        _write_patch(workdir, task, task_dir / "model.patch")
        if test_command is not None:
            if apply_test_patch and task.test_patch.strip():
                patch_file = scratch / "test.patch"
                patch_file.write_text(task.test_patch)
                _run_git(["apply", str(patch_file)], workdir)
            targv = build_command(test_command, fields, lists)
            trc, ttimed, _, terr = _run_process(
                targv,
                workdir,
                {**os.environ, **profile.env},
                timeout_s,
                task_dir / "tests-stdout.txt",
                task_dir / "tests-stderr.txt",
            )
            resolved = trc == 0 and not ttimed and terr is None
    except (OSError, RuntimeError, ValueError, KeyError) as exc:
        error = f"{type(exc).__name__}: {exc}"
    finally:
        if not keep_workdir:
            shutil.rmtree(scratch, ignore_errors=True)
        watcher.forget_folder(scratch)
    result = TaskRun(
        task_id=task.instance_id,
        profile=profile.name,
        model=profile.model,
        order=order,
        returncode=rc,
        timed_out=timed_out,
        duration_s=round(duration, 3),
        folder=str(task_dir),
        rollout_files=rollouts,
        resolved=resolved,
        error=error,
    )
    write_task_json(result, task, profile)
    return result


def write_task_json(
    result: TaskRun, task: SweTask, profile: Profile, extra: Mapping[str, Any] | None = None
) -> Path:
    """``result.folder/task.json``: the TaskRun plus the endpoint, repo, base commit and ``extra``."""
    meta: dict[str, Any] = {
        **asdict(result),
        "endpoint": profile.endpoint,
        "repo": task.repo,
        "base_commit": task.base_commit,
        **(extra or {}),
    }
    path = Path(result.folder) / "task.json"
    path.write_text(json.dumps(meta, indent=2) + "\n")
    return path


def interleaved_order(profiles: Sequence[Profile], index: int) -> list[Profile]:
    """Profiles in the order used for the task at ``index``: rotated by one each task (A,B / B,A)."""
    k = len(profiles)
    shift = index % k if k else 0
    return list(profiles[shift:]) + list(profiles[:shift])


@dataclass(frozen=True, slots=True)
class Batch:
    """The runs of one ``run_profiles`` call, checked (``validate_run``) and in run order, for a
    ``BatchRunner``: ``jobs`` as (order, task, profile); ``settings`` are ``run_task``'s keyword
    arguments for every run; ``on_result`` is called with each finished run."""

    run_root: Path
    profiles: tuple[Profile, ...]
    jobs: tuple[tuple[int, SweTask, Profile], ...]
    repos: Path | Mapping[str, str | Path] | Callable[[SweTask], Path]
    settings: Mapping[str, Any]
    on_result: Callable[[TaskRun], None] | None = None


#: what runs a Batch and returns its runs in run order (``run_in_order`` here, Ray in ``agents.distributed``)
BatchRunner = Callable[[Batch], list[TaskRun]]


def run_in_order(batch: Batch) -> list[TaskRun]:
    """Every run of ``batch`` here, one after another; ``run_root/runs.jsonl`` gets one TaskRun a line."""
    batch.run_root.mkdir(parents=True, exist_ok=True)
    results: list[TaskRun] = []
    with open(batch.run_root / "runs.jsonl", "w", encoding="utf-8") as log:
        for _, group in groupby(batch.jobs, key=lambda job: job[1].instance_id):
            runs = list(group)
            repo = find_repo(batch.repos, runs[0][1])  # once per task, before its first run
            for order, task, profile in runs:
                res = run_task(
                    task, profile, run_dir=batch.run_root, repo=repo, order=order, **batch.settings
                )
                results.append(res)
                log.write(json.dumps(asdict(res)) + "\n")
                log.flush()
                if batch.on_result is not None:
                    batch.on_result(res)
    return results


def run_profiles(
    tasks: Sequence[SweTask],
    profiles: Sequence[Profile],
    *,
    run_dir: str | Path,
    repos: Path | Mapping[str, str | Path] | Callable[[SweTask], Path],
    command: str | Sequence[str] = DEFAULT_COMMAND,
    timeout_s: float = 1800.0,
    test_command: str | Sequence[str] | None = None,
    interleave: bool = True,
    work_root: str | Path | None = None,
    keep_workdirs: bool = False,
    on_result: Callable[[TaskRun], None] | None = None,
    runner: BatchRunner = run_in_order,
) -> list[TaskRun]:
    """Every task under every profile, interleaved per task (see ``interleaved_order``), run by
    ``runner`` (default: here, one after another, writing ``run_dir/runs.jsonl``: one TaskRun a line,
    in run order); returns the runs in run order. ``validate_run`` first: a bad task file raises
    TaskFileError before anything is made or run."""
    validate_run(tasks, profiles, run_dir)
    jobs = [
        (task, profile)
        for i, task in enumerate(tasks)
        for profile in (interleaved_order(profiles, i) if interleave else profiles)
    ]
    settings = {
        "command": command,
        "timeout_s": timeout_s,
        "test_command": test_command,
        "work_root": str(Path(work_root).resolve()) if work_root else None,
        "keep_workdir": keep_workdirs,
    }
    batch = Batch(
        run_root=Path(run_dir).resolve(),
        profiles=tuple(profiles),
        jobs=tuple((order, task, profile) for order, (task, profile) in enumerate(jobs)),
        repos=absolute_repos(repos),
        settings=settings,
        on_result=on_result,
    )
    return runner(batch)
