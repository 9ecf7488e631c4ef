"""SWE-bench task sets: load from a local file or the local cache, select by ids or a stratified sample.

Tasks keep the column layout of SWE-bench Verified (``COLUMNS``): ``FAIL_TO_PASS`` and
``PASS_TO_PASS`` are JSON-encoded lists of test ids there and are decoded into tuples here.

Loading never downloads. With the ``datasets`` library installed, a local JSONL/JSON/parquet file is
read with ``datasets.load_dataset("json" | "parquet", data_files=...)`` and a dataset name such as
``princeton-nlp/SWE-bench_Verified`` is read from the local Hugging Face cache only (offline mode is
forced while loading). Without ``datasets``, local JSONL is read directly (parquet through pyarrow
if present) and the returned ``TaskSet.loader`` says so.

The toy task set (``TOY_TASKS``, ``build_toy_repo``) is a three-bug calculator repository shipped in
``scenarios/swebench/toy/`` for end-to-end runs without the real benchmark. The reference server's
scripted model knows how to fix each bug: the first line of each problem statement starts a scenario
(``scenarios/data/toycalc_fix*.yaml``), so ``harnesscheck.agents.toy_agent`` (or Codex) against that server
inspects, patches and tests like an agent would; ``harnesscheck swebench run --toy`` does that
against an embedded server.

Task files come from outside, and the driver names folders after ``instance_id``: before anything
runs, ``validate_tasks`` checks every id against ``INSTANCE_ID`` (SWE-bench's ``owner__repo-NUMBER``,
e.g. ``django__django-11099``), every ``repo`` against ``REPO`` (``owner/name``) and that no id
repeats, and raises ``TaskFileError`` listing each problem.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from harnesscheck.protocol.wire.files import NotReadable, read_text

__all__ = [
    "COLUMNS",
    "INSTANCE_ID",
    "REPO",
    "SCENARIO_DIR",
    "VERIFIED_FIXTURE",
    "TOY_DIR",
    "TOY_TASKS",
    "SweTask",
    "TaskFileError",
    "TaskSet",
    "load_tasks",
    "select_tasks",
    "validate_tasks",
    "write_tasks_jsonl",
    "build_toy_repo",
]

COLUMNS = (
    "instance_id",
    "repo",
    "base_commit",
    "problem_statement",
    "patch",
    "test_patch",
    "FAIL_TO_PASS",
    "PASS_TO_PASS",
    "version",
    "environment_setup_commit",
    "hints_text",
    "created_at",
)

SCENARIO_DIR = Path(__file__).resolve().parent.parent / "scenarios" / "swebench"
#: six rows in SWE-bench Verified's column layout (three repositories), for selection tests
VERIFIED_FIXTURE = SCENARIO_DIR / "verified_fixture.jsonl"
TOY_DIR = SCENARIO_DIR / "toy"
TOY_TASKS = TOY_DIR / "tasks.jsonl"

_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9_-]|\.(?!\.)){0,99}"
#: an instance id as SWE-bench writes them, ``owner__repo-NUMBER``: owner and repository names of
#: letters, digits, ``_``, ``-`` and single dots, starting with a letter or digit; so an id is always
#: one plain folder name (no ``/``, no ``\``, never ``.`` or ``..``, no leading dot)
INSTANCE_ID = re.compile(rf"{_NAME}__{_NAME}-[0-9]{{1,12}}")
#: a task's ``repo``, ``owner/name`` with the same name rule
REPO = re.compile(rf"{_NAME}/{_NAME}")


class TaskFileError(ValueError):
    """A task file the driver must not run: bad or duplicate ids, bad repository names."""


def validate_tasks(tasks: Iterable[SweTask]) -> None:
    """Raise TaskFileError (every problem, one message) unless each ``instance_id`` matches
    ``INSTANCE_ID``, each ``repo`` matches ``REPO`` and no id repeats."""
    problems: list[str] = []
    seen: set[str] = set()
    for t in tasks:
        if not INSTANCE_ID.fullmatch(t.instance_id):
            problems.append(f"instance id {t.instance_id!r} is not owner__repo-NUMBER")
        elif t.instance_id in seen:
            problems.append(f"instance id {t.instance_id!r} appears twice")
        seen.add(t.instance_id)
        if not REPO.fullmatch(t.repo):
            problems.append(f"repo {t.repo!r} of {t.instance_id!r} is not owner/name")
    if problems:
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        raise TaskFileError(f"task file rejected, nothing was run: {'; '.join(problems[:5])}{more}")


def _as_list(value: Any, column: str = "test list") -> tuple[str, ...]:
    """A test-id list: a list of strings, or the dataset's JSON text of one (a lone id as itself)."""
    if value is None or value == "":
        return ()
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            return (value,)
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, (str, int, float)) for v in value):
        raise TaskFileError(f"{column} must be a list of test ids, got {str(value)[:80]!r}")
    return tuple(str(v) for v in value)


def _as_str(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None:
            return value.strftime("%Y-%m-%dT%H:%M:%SZ")
        return value.isoformat()
    return str(value)


@dataclass(frozen=True, slots=True)
class SweTask:
    """One SWE-bench instance. ``fail_to_pass``/``pass_to_pass`` are decoded test-id lists."""

    instance_id: str
    repo: str
    base_commit: str
    problem_statement: str
    patch: str = ""
    test_patch: str = ""
    fail_to_pass: tuple[str, ...] = ()
    pass_to_pass: tuple[str, ...] = ()
    version: str = ""
    environment_setup_commit: str = ""
    hints_text: str = ""
    created_at: str = ""

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> SweTask:
        if not isinstance(row, dict):
            raise TaskFileError(f"a task must be a JSON object, got {str(row)[:80]!r}")
        missing = [c for c in ("instance_id", "repo", "base_commit", "problem_statement") if not row.get(c)]
        if missing:
            raise ValueError(f"task row lacks {missing}: {str(row)[:120]}")
        wrong = [c for c in ("instance_id", "repo", "base_commit", "problem_statement")
                 if not isinstance(row[c], str)]
        if wrong:
            raise TaskFileError(f"task row's {', '.join(wrong)} must be text: {str(row)[:120]}")
        return cls(
            instance_id=_as_str(row["instance_id"]),
            repo=_as_str(row["repo"]),
            base_commit=_as_str(row["base_commit"]),
            problem_statement=_as_str(row["problem_statement"]),
            patch=_as_str(row.get("patch")),
            test_patch=_as_str(row.get("test_patch")),
            fail_to_pass=_as_list(row.get("FAIL_TO_PASS"), "FAIL_TO_PASS"),
            pass_to_pass=_as_list(row.get("PASS_TO_PASS"), "PASS_TO_PASS"),
            version=_as_str(row.get("version")),
            environment_setup_commit=_as_str(row.get("environment_setup_commit")),
            hints_text=_as_str(row.get("hints_text")),
            created_at=_as_str(row.get("created_at")),
        )

    def to_row(self) -> dict[str, str]:
        """The dataset's own layout (lists JSON-encoded as strings)."""
        return {
            "instance_id": self.instance_id,
            "repo": self.repo,
            "base_commit": self.base_commit,
            "problem_statement": self.problem_statement,
            "patch": self.patch,
            "test_patch": self.test_patch,
            "FAIL_TO_PASS": json.dumps(list(self.fail_to_pass)),
            "PASS_TO_PASS": json.dumps(list(self.pass_to_pass)),
            "version": self.version,
            "environment_setup_commit": self.environment_setup_commit,
            "hints_text": self.hints_text,
            "created_at": self.created_at,
        }


@dataclass(frozen=True, slots=True)
class TaskSet:
    """Loaded tasks plus how they were loaded (``loader``: "datasets" or "direct ...")."""

    tasks: tuple[SweTask, ...]
    source: str
    loader: str
    notes: tuple[str, ...] = field(default=())

    def __iter__(self) -> Iterator[SweTask]:
        return iter(self.tasks)

    def __len__(self) -> int:
        return len(self.tasks)

    def by_id(self) -> dict[str, SweTask]:
        return {t.instance_id: t for t in self.tasks}


def _datasets_available() -> bool:
    """Whether `datasets` can be imported (without importing it: that takes a second or two)."""
    if "datasets" in sys.modules:
        return sys.modules["datasets"] is not None
    return importlib.util.find_spec("datasets") is not None


@contextlib.contextmanager
def _offline() -> Iterator[None]:
    """Force Hugging Face offline mode while loading (env and, once imported, datasets.config)."""
    keys = ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE")
    saved = {k: os.environ.get(k) for k in keys}
    for k in keys:
        os.environ[k] = "1"
    patched: list[tuple[Any, str, Any]] = []
    try:
        import datasets.config as dcfg

        for attr in keys:
            if hasattr(dcfg, attr):
                patched.append((dcfg, attr, getattr(dcfg, attr)))
                setattr(dcfg, attr, True)
    except ImportError:
        pass
    try:
        yield
    finally:
        for obj, attr, old in patched:
            setattr(obj, attr, old)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextlib.contextmanager
def _quiet(datasets_module: Any) -> Iterator[None]:
    """No progress bars while loading a few rows (restored afterwards)."""
    enabled = getattr(datasets_module, "is_progress_bar_enabled", lambda: False)()
    if enabled:
        datasets_module.disable_progress_bars()
    try:
        yield
    finally:
        if enabled:
            datasets_module.enable_progress_bars()


def _read_direct(path: Path) -> list[dict[str, Any]]:
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise RuntimeError(f"{path}: reading parquet needs `datasets` or `pyarrow`") from exc
        return pq.read_table(path).to_pylist()
    try:
        text = read_text(path)  # a regular file, bounded (a symlink to /dev/zero is refused, not read)
    except NotReadable as exc:
        raise TaskFileError(f"{path}: cannot read the task file: {exc.strerror}") from None
    if suffix == ".json" and text.lstrip().startswith("["):
        try:
            return list(json.loads(text))
        except (ValueError, RecursionError) as exc:
            raise TaskFileError(f"{path}: not a JSON list of tasks ({exc})") from None
    rows = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except (ValueError, RecursionError) as exc:
                raise TaskFileError(f"{path}: line {n} is not JSON ({exc})") from None
    return rows


def load_tasks(
    source: str | Path = VERIFIED_FIXTURE,
    *,
    split: str = "test",
    use_datasets: bool | None = None,
    cache_dir: str | Path | None = None,
) -> TaskSet:
    """Load SWE-bench tasks from a local ``.jsonl``/``.json``/``.parquet`` file or, by dataset name
    (e.g. ``princeton-nlp/SWE-bench_Verified``), from the local Hugging Face cache. Never downloads.

    use_datasets: None uses ``datasets`` when installed; False reads the file directly; True requires
    it. cache_dir: where ``datasets`` keeps its arrow cache (default: its own).
    """
    path = Path(source)
    have = _datasets_available()
    if use_datasets and not have:
        raise RuntimeError("use_datasets=True but the `datasets` library is not installed")
    want = have if use_datasets is None else use_datasets
    notes: list[str] = []
    if path.exists():
        if want:
            import datasets

            builder = "parquet" if path.suffix.lower() == ".parquet" else "json"
            with _offline(), _quiet(datasets):
                ds = datasets.load_dataset(
                    builder,
                    data_files=str(path),
                    split="train",
                    cache_dir=str(cache_dir) if cache_dir else None,
                )
            rows = [dict(r) for r in ds]
            loader = f"datasets {datasets.__version__} ({builder}, local file)"
        else:
            rows = _read_direct(path)
            loader = "direct"
            if not have:
                notes.append("the `datasets` library is not installed: read the file directly")
                loader = "direct (datasets not installed)"
    else:
        if str(source).endswith((".jsonl", ".json", ".parquet")):
            raise FileNotFoundError(f"no such task file: {source}")
        if not have:
            raise RuntimeError(
                f"{source!r} is not a local file and loading a dataset by name from the local cache "
                "needs the `datasets` library"
            )
        import datasets

        try:
            with _offline(), _quiet(datasets):
                ds = datasets.load_dataset(
                    str(source), split=split, cache_dir=str(cache_dir) if cache_dir else None
                )
        except Exception as exc:  # datasets raises several kinds when the cache lacks it
            raise RuntimeError(
                f"{source!r} (split {split!r}) is not in the local Hugging Face cache and downloads are "
                f"off; pass a local JSONL/parquet file instead ({type(exc).__name__}: {exc})"
            ) from exc
        rows = [dict(r) for r in ds]
        loader = f"datasets {datasets.__version__} (local cache)"
    tasks = tuple(SweTask.from_row(r) for r in rows)
    ids = [t.instance_id for t in tasks]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{source}: duplicate instance ids")
    return TaskSet(tasks=tasks, source=str(source), loader=loader, notes=tuple(notes))


def _allocate(sizes: dict[str, int], total: int) -> dict[str, int]:
    """Proportional allocation with largest remainders (ties: larger stratum, then name)."""
    n = sum(sizes.values())
    quotas = {k: total * v / n for k, v in sizes.items()}
    alloc = {k: min(sizes[k], int(q)) for k, q in quotas.items()}
    left = total - sum(alloc.values())
    order = sorted(sizes, key=lambda k: (-(quotas[k] - int(quotas[k])), -sizes[k], k))
    while left > 0:
        progressed = False
        for k in order:
            if left == 0:
                break
            if alloc[k] < sizes[k]:
                alloc[k] += 1
                left -= 1
                progressed = True
        if not progressed:
            break
    return alloc


def select_tasks(
    tasks: Iterable[SweTask],
    *,
    instance_ids: Sequence[str] | None = None,
    sample: int | None = None,
    seed: int = 0,
    stratify_by: str = "repo",
) -> list[SweTask]:
    """Choose tasks by ``instance_ids`` (in that order; KeyError lists the unknown ones) or a seeded
    ``sample`` stratified by ``stratify_by`` (proportional allocation with largest remainders, tasks
    drawn within each stratum by ``numpy.random.default_rng(seed)``; result sorted by instance id).
    With neither, all tasks sorted by instance id."""
    pool = sorted(tasks, key=lambda t: t.instance_id)
    if instance_ids is not None and sample is not None:
        raise ValueError("give instance_ids or sample, not both")
    if instance_ids is not None:
        index = {t.instance_id: t for t in pool}
        unknown = [i for i in instance_ids if i not in index]
        if unknown:
            raise KeyError(f"unknown instance ids: {', '.join(unknown)}")
        return [index[i] for i in dict.fromkeys(instance_ids)]
    if sample is None:
        return pool
    if not 0 < sample <= len(pool):
        raise ValueError(f"sample must be between 1 and {len(pool)}, got {sample}")
    strata: dict[str, list[SweTask]] = defaultdict(list)
    for t in pool:
        strata[str(getattr(t, stratify_by))].append(t)
    alloc = _allocate({k: len(v) for k, v in strata.items()}, sample)
    rng = np.random.default_rng(seed)
    chosen: list[SweTask] = []
    for key in sorted(strata):
        members = strata[key]
        k = alloc[key]
        if k:
            idx = rng.choice(len(members), size=k, replace=False)
            chosen += [members[i] for i in sorted(idx)]
    return sorted(chosen, key=lambda t: t.instance_id)


def write_tasks_jsonl(tasks: Iterable[SweTask], path: str | Path) -> Path:
    """Write tasks in the dataset's layout, one JSON object a line."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "wb") as fh:
        for t in tasks:
            fh.write(_json_line(t.to_row()))
    return out


def _json_line(row: dict[str, str]) -> bytes:
    """``row`` as one UTF-8 JSON line; text UTF-8 cannot hold (a lone surrogate) as its ``\\u`` escape."""
    try:
        return (json.dumps(row, ensure_ascii=False) + "\n").encode("utf-8")
    except UnicodeEncodeError:
        return (json.dumps(row) + "\n").encode("ascii")


#: fixed identity and dates so that the toy repository's commit id is the same everywhere
_TOY_GIT_ENV = {
    "GIT_AUTHOR_NAME": "harnesscheck",
    "GIT_AUTHOR_EMAIL": "toy@harnesscheck.invalid",
    "GIT_COMMITTER_NAME": "harnesscheck",
    "GIT_COMMITTER_EMAIL": "toy@harnesscheck.invalid",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00+0000",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00+0000",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
}


def _git(args: Sequence[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    full_env = {**os.environ, **(env or {})}
    res = subprocess.run(["git", *args], cwd=cwd, env=full_env, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed in {cwd}: {res.stderr.strip()}")
    return res.stdout.strip()


def build_toy_repo(dest: str | Path) -> tuple[Path, str]:
    """Create the toy git repository (files of ``scenarios/swebench/toy/repo``) at ``dest`` with one
    commit of fixed identity and date. Returns (path, commit id); the id equals the ``base_commit``
    of ``TOY_TASKS``."""
    root = Path(dest)
    if root.exists() and any(root.iterdir()):
        raise FileExistsError(f"{root} exists and is not empty")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(TOY_DIR / "repo", root, dirs_exist_ok=True, ignore=ignore)
    _git(["init", "-q", "-b", "main"], root, _TOY_GIT_ENV)
    _git(["add", "."], root, _TOY_GIT_ENV)
    _git(["commit", "-q", "-m", "toycalc: three known bugs"], root, _TOY_GIT_ENV)
    return root, _git(["rev-parse", "HEAD"], root, _TOY_GIT_ENV)
